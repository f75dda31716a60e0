"""Parallelism strategies: what each phase of each workload layer sends, and the shard it computes.

Notation, per workload layer: P = its parameter bytes (the --params convention), A_in = bytes of
its floating-point input activation, A_out = bytes of its output activation, N = --npus,
G = --model-parallel-group. Sizes are the collective's whole payload in bytes (ASTRA-sim divides by
the group itself). Layers that hold a GEMM (conv, linear, embedding, recurrent) are *sharded*:
each NPU holds 1/S of the weights and computes 1/S of the GEMM (output features split; the
row-parallel layers of a transformer split the reduction instead). Other layers (normalisation)
are replicated: full compute, and their gradient all-reduced where replicas exist.

  DATA              fwd NONE; ig NONE; wg ALLREDUCE P.                                   S = 1
  MODEL             fwd ALLGATHER A_out; ig ALLREDUCE A_in; wg NONE                       S = N
                    (the generator's rule; a replicated layer sends nothing)
  HYBRID_DATA_MODEL model parallel inside the G NPUs of dimension 0, data parallel across:
                    fwd ALLGATHER A_out; ig ALLREDUCE A_in; wg ALLREDUCE ceil(P / G)      S = G
  HYBRID_MODEL_DATA data parallel inside dimension 0, model parallel across the N/G groups:
                    fwd ALLGATHER A_out; ig ALLREDUCE A_in; wg ALLREDUCE ceil(P / (N/G))  S = N/G
  HYBRID_TRANSFORMER, _FWD_IN_BCKWD  Megatron-style tensor parallelism over G NPUs, data across:
      column-parallel linear (Q/K/V, fused QKV, first MLP layer, LM head):
                    fwd NONE; ig ALLREDUCE A_in (once per shared input); wg ALLREDUCE ceil(P/G)
      row-parallel linear (attention output, second MLP layer: fed by a column-parallel one):
                    fwd ALLREDUCE A_out; ig NONE; wg ALLREDUCE ceil(P/G)
      vocabulary-parallel embedding: fwd ALLREDUCE A_out; ig NONE; wg ALLREDUCE ceil(P/G)
      replicated (normalisation): fwd NONE; ig NONE; wg ALLREDUCE P                       S = G
  HYBRID_CUSTOMIZED each layer takes DATA, MODEL, HYBRID_DATA_MODEL or HYBRID_MODEL_DATA (its 13th
                    field), from a user file (pattern -> keyword) or the automatic rule: per NPU, a
                    ring all-reduce moves 2(N-1)/N of its payload and an all-gather (N-1)/N, so DATA
                    costs 2P and MODEL A_out + 2 A_in (times (N-1)/N): the cheaper one is chosen.

The first layer sends no input gradient (its inputs are model inputs: ASTRA-sim skips layer 0's
ig too). Fields a keyword's training loop ignores (ASTRA-sim 1.0: DATA ignores fwd/ig, MODEL the wg
comm) are written as NONE 0. Compute times are those of the shard (cost models see the sharded
GEMM: N or K divided by S, FLOPs and parameter bytes divided by S).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modtrans.cost import CostModel, PhaseTimes
from modtrans.ir.document import Flops, Gemm, Kind, ModelIR
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.groups import Group, Params, group, group_times, needs_input_grad
from modtrans.workload.model import CommType, Header, Layer, Phase, Policy, Workload

SUPPORTED = (
    Policy.DATA,
    Policy.MODEL,
    Policy.HYBRID_DATA_MODEL,
    Policy.HYBRID_MODEL_DATA,
    Policy.HYBRID_CUSTOMIZED,
    Policy.HYBRID_TRANSFORMER,
    Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD,
)
PER_LAYER = (Policy.DATA, Policy.MODEL, Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA)
_SHARDABLE = frozenset({Kind.CONV, Kind.CONV_TRANSPOSE, Kind.LINEAR, Kind.EMBEDDING, Kind.RNN})


class StrategyError(ValueError):
    """Options that do not fit together (one line, for the user)."""


@dataclass(frozen=True)
class Parallelism:
    policy: Policy = Policy.DATA
    npus: int = 1
    group: int | None = None  # model_parallel_NPU_group
    checkpoints: tuple[int, ...] | None = None
    checkpoint_initiates: tuple[int, ...] | None = None
    checkpoint_every: int | None = None
    per_layer: Mapping[str, Policy] | None = None  # HYBRID_CUSTOMIZED: name pattern -> keyword


@dataclass(frozen=True)
class _Ctx:
    ir: ModelIR
    cost: CostModel
    inputs: frozenset[str]
    npus: int
    group: int


def build(
    ir: ModelIR,
    cost: CostModel,
    parallelism: Parallelism = Parallelism(),
    *,
    params: Params = Params.TRAINABLE,
    dtype_bytes: int | None = None,
) -> Workload:
    """The workload of `ir` under a strategy. Raises StrategyError for inconsistent options."""
    p = parallelism
    if p.policy not in SUPPORTED:
        raise StrategyError(f"--parallel {p.policy} is not a training strategy modtrans writes")
    g = _group_size(p)
    ctx = _Ctx(ir, cost, frozenset(ir.provenance.input_shapes), p.npus, g)
    groups = group(ir, params, dtype_bytes)
    if p.policy.is_transformer:
        layers = _transformer(ctx, groups)
    elif p.policy is Policy.HYBRID_CUSTOMIZED:
        layers = [
            dataclasses.replace(_simple(ctx, x, choice), policy=choice)
            for x, choice in zip(groups, _choices(ctx, groups, p.per_layer), strict=True)
        ]
    else:
        layers = [_simple(ctx, x, p.policy) for x in groups]
    return Workload(_header(p, g, len(layers)), tuple(layers))


def _group_size(p: Parallelism) -> int:
    if p.npus < 1:
        raise StrategyError("--npus must be at least 1")
    needs_group = p.policy in (Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA) or p.policy.is_transformer
    g = p.group if p.group is not None else (1 if not needs_group else None)
    if g is None:
        raise StrategyError(f"--parallel {p.policy} needs --model-parallel-group G (NPUs per group)")
    if g < 1 or p.npus % g:
        raise StrategyError(f"--model-parallel-group {g} must be at least 1 and divide --npus {p.npus}")
    return g


# ------------------------------------------------------------------------------ sharded compute


def shard(layer: IRLayer, ways: int, *, split: str = "n") -> IRLayer:
    """The part of a GEMM layer one NPU computes when split `ways` ways (output features, or the
    reduction for row-parallel layers)."""
    if ways == 1 or layer.kind not in _SHARDABLE:
        return layer
    gemm = layer.gemm
    if gemm is not None:
        gemm = (
            Gemm(gemm.m, math.ceil(gemm.k / ways), gemm.n, gemm.groups)
            if split == "k"
            else Gemm(gemm.m, gemm.k, math.ceil(gemm.n / ways), gemm.groups)
        )
    f = layer.flops
    flops = Flops(
        math.ceil(f.forward / ways), math.ceil(f.input_grad / ways), math.ceil(f.weight_grad / ways)
    )
    params = tuple(
        dataclasses.replace(p, elements=math.ceil(p.elements / ways), bytes=math.ceil(p.bytes / ways))
        for p in layer.params
    )
    return dataclasses.replace(layer, gemm=gemm, flops=flops, params=params)


def _times(ctx: _Ctx, g: Group, ways: int, split: str = "n") -> PhaseTimes:
    if ways == 1 or g.owner.kind not in _SHARDABLE:
        return group_times(g, ctx.cost, ctx.inputs)
    sharded = Group(shard(g.owner, ways, split=split), tuple(shard(x, ways) for x in g.folded), g.comm_bytes)
    return group_times(sharded, ctx.cost, ctx.inputs)


def _a_in(ctx: _Ctx, layer: IRLayer) -> int:
    if not needs_input_grad(layer, ctx.inputs):
        return 0
    return sum(a.bytes or 0 for a in layer.inputs if a.dtype not in ("int64", "int32", "bool"))


def _a_out(layer: IRLayer) -> int:
    return layer.outputs[0].bytes or 0 if layer.outputs else 0


def _phase(time: int, comm: CommType, size: int) -> Phase:
    return Phase(time, comm, size) if size > 0 and comm is not CommType.NONE else Phase(time)


# ------------------------------------------------------------------ DATA, MODEL and the hybrids


def _simple(ctx: _Ctx, g: Group, policy: Policy) -> Layer:
    owner, p = g.owner, g.comm_bytes
    shardable = owner.kind in _SHARDABLE
    if policy is Policy.DATA:
        ways, wg = 1, p
    elif policy is Policy.MODEL:
        ways, wg = ctx.npus, 0
    elif policy is Policy.HYBRID_DATA_MODEL:
        ways, wg = ctx.group, math.ceil(p / ctx.group) if shardable else p
    else:  # HYBRID_MODEL_DATA
        ways = ctx.npus // ctx.group
        wg = math.ceil(p / ways) if shardable else p
    t = _times(ctx, g, ways)
    model_part = policy is not Policy.DATA and shardable and ways > 1
    fwd = _phase(t.forward, CommType.ALLGATHER, _a_out(owner) if model_part else 0)
    ig = _phase(t.input_grad, CommType.ALLREDUCE, _a_in(ctx, owner) if model_part else 0)
    wg_phase = _phase(t.weight_grad, CommType.ALLREDUCE, wg if policy is not Policy.MODEL else 0)
    return Layer(owner.name, fwd, ig, wg_phase, t.update)


def _choices(ctx: _Ctx, groups: Sequence[Group], rules: Mapping[str, Policy] | None) -> list[Policy]:
    out = []
    for g in groups:
        if rules is not None:
            chosen = next(
                (pol for pattern, pol in rules.items() if fnmatch.fnmatchcase(g.owner.name, pattern)),
                Policy.DATA,
            )
        else:
            model_cost = _a_out(g.owner) + 2 * _a_in(ctx, g.owner)
            chosen = (
                Policy.MODEL if g.owner.kind in _SHARDABLE and model_cost < 2 * g.comm_bytes else Policy.DATA
            )
        out.append(chosen)
    return out


# -------------------------------------------------------------------------------- transformers


def _transformer(ctx: _Ctx, groups: Sequence[Group]) -> list[Layer]:
    roles = _megatron_roles(ctx.ir, [g.owner for g in groups])
    seen_inputs: set[str] = set()
    out = []
    for g in groups:
        owner, role = g.owner, roles.get(g.owner.name, "replicated")
        wg_size = math.ceil(g.comm_bytes / ctx.group) if role != "replicated" else g.comm_bytes
        if role == "replicated":
            t = group_times(g, ctx.cost, ctx.inputs)
            out.append(
                Layer(
                    owner.name,
                    Phase(t.forward),
                    Phase(t.input_grad),
                    _phase(t.weight_grad, CommType.ALLREDUCE, wg_size),
                    t.update,
                )
            )
            continue
        t = _times(ctx, g, ctx.group, split="k" if role == "row" else "n")
        fwd, ig = Phase(t.forward), Phase(t.input_grad)
        if ctx.group > 1 and role in ("row", "embedding"):
            fwd = _phase(t.forward, CommType.ALLREDUCE, _a_out(owner))
        if ctx.group > 1 and role == "column":
            shared = frozenset(a.name for a in owner.inputs)
            if not shared & seen_inputs:
                ig = _phase(t.input_grad, CommType.ALLREDUCE, _a_in(ctx, owner))
            seen_inputs |= shared
        out.append(Layer(owner.name, fwd, ig, _phase(t.weight_grad, CommType.ALLREDUCE, wg_size), t.update))
    return out


def _megatron_roles(ir: ModelIR, owners: Sequence[IRLayer]) -> dict[str, str]:
    """column / row / embedding for each GEMM owner: a linear layer fed (through layers without
    parameters) by a column-parallel one is row-parallel; every other linear layer is column-parallel."""
    by_name = {layer.name: layer for layer in ir.layers}
    roles: dict[str, str] = {}
    for owner in owners:
        if owner.kind is Kind.EMBEDDING:
            roles[owner.name] = "embedding"
        elif owner.kind in _SHARDABLE:
            fed_by = _parameterised_ancestors(owner, by_name)
            roles[owner.name] = "row" if any(roles.get(x) == "column" for x in fed_by) else "column"
    return roles


def _parameterised_ancestors(layer: IRLayer, by_name: Mapping[str, IRLayer]) -> set[str]:
    """The nearest layers with parameters upstream of `layer` (through parameter-free layers)."""
    found: set[str] = set()
    stack = list(layer.producers)
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        source = by_name[name]
        if source.params and source.kind is not Kind.ELEMENTWISE:
            found.add(name)
        else:
            stack.extend(source.producers)
    return found


# ------------------------------------------------------------------------------------- header


def _header(p: Parallelism, g: int, count: int) -> Header:
    if not p.policy.is_transformer:
        return Header(p.policy)
    if p.policy is Policy.HYBRID_TRANSFORMER:
        return Header(p.policy, model_parallel_group=g)
    checkpoints, initiates = _checkpoints(p, count)
    return Header(p.policy, model_parallel_group=g, checkpoints=checkpoints, checkpoint_initiates=initiates)


def _checkpoints(p: Parallelism, count: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Activation checkpoints: each segment starts at a checkpoint; its forward is recomputed when
    the backward pass reaches the segment's last layer (the layer before the next checkpoint)."""
    if p.checkpoints is not None:
        if any(not 0 <= i < count for i in (*p.checkpoints, *(p.checkpoint_initiates or ()))):
            raise StrategyError(f"checkpoint indices must be layers 0..{count - 1}")
        starts = tuple(sorted(set(p.checkpoints)))
        if p.checkpoint_initiates is not None:
            return starts, tuple(p.checkpoint_initiates)
    else:
        every = p.checkpoint_every or count
        if every < 1:
            raise StrategyError("--checkpoint-every must be at least 1")
        starts = tuple(range(0, count, every))
    ends = [s - 1 for s in starts[1:]] + [count - 1]
    return starts, tuple(reversed(ends))
