"""The draft a technique edits, and its assembly into a Plan (strategy, step 2 of 3).

groups.py makes one draft layer per workload layer; each technique (techniques/*.py) sets the
mesh, and per layer the shard each rank computes and the collectives each step
issues; recompute.py adds the recomputed segments; `assemble` costs the shards and orders the
operations of one iteration:

    forward, layer by layer:  compute; its collectives (each waits for the compute); the next
                              layer's forward waits for this one's collectives
    backward, last layer first: the recomputed forward of a checkpointed segment (when the
                              backward reaches it); weight-gradient compute; its collectives
                              (left to overlap); input-gradient compute (not layer 0: its inputs
                              are model inputs); its collectives, which the next layer waits for

Tensors (for memory tracking): a layer's forward reads its inputs from outside the folded group
and its parameters and writes the outputs used outside it; its input gradient reads the
gradients its consumers wrote and writes one per floating-point input; its weight gradient
writes one per parameter. Names are unique per write, as ASTRA-sim's memory tracker requires.
A shard holds 1/ways of the parameters and of the split activation (outputs for a column
split, inputs for a reduction split).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from modtrans.cost import CostModel, PhaseTimes
from modtrans.dtypes import NO_GRADIENT as _INTEGER  # integer and quantized: no gradient
from modtrans.ir.document import Activation, Flops, Gemm, Kind, ModelIR
from modtrans.ir.document import Layer as IRLayer
from modtrans.plan.model import (
    Checkpoints,
    Collective,
    Compute,
    LayerInfo,
    Mesh,
    Op,
    Plan,
    Preset,
    Purpose,
    Step,
    Tensor,
)
from modtrans.strategy.groups import Group, group_times, needs_input_grad
from modtrans.strategy.llm.options import Layout
from modtrans.workload.model import CommType, Policy

SHARDABLE = frozenset({Kind.CONV, Kind.CONV_TRANSPOSE, Kind.LINEAR, Kind.EMBEDDING, Kind.RNN})


class StrategyError(ValueError):
    """Options that do not fit together (one line, for the user)."""


class Folded(enum.StrEnum):
    """What a rank computes of the parameter-free layers folded into a column-parallel unit
    (rank_share's convention).

    MEGATRON   1/T of them, as Megatron-LM runs tensor parallelism: the attention core on the
               rank's heads / T (megatron/core/transformer/dot_product_attention.py,
               DotProductAttention.__init__: num_attention_heads_per_partition =
               divide(num_attention_heads, world_size)), the MLP activation on the rank's
               ffn_hidden_size / T features (megatron/core/transformer/mlp.py, MLP.forward: the
               activation_func of linear_fc1's ColumnParallelLinear output, gather_output=False).
    GEMM_ONLY  whole: only the GEMM is divided, as ASTRA-sim 1.0's workload generator sizes a
               layer (scripts/workload_generator/gen_astrasim_workload_input.py: a layer is one
               M x N x K GEMM costed by SCALE-Sim; nothing else in it is split). modtrans's
               HYBRID_TRANSFORMER keyword computed this before issue 23.
    """

    MEGATRON = "megatron"
    GEMM_ONLY = "gemm-only"


@dataclass(frozen=True)
class Parallelism:
    policy: Policy = Policy.DATA
    npus: int = 1
    group: int | None = None  # model_parallel_NPU_group
    checkpoints: tuple[int, ...] | None = None
    checkpoint_initiates: tuple[int, ...] | None = None
    checkpoint_every: int | None = None
    per_layer: dict[str, Policy] | None = None  # HYBRID_CUSTOMIZED: name pattern -> keyword
    layout: Layout | None = None  # tensor x pipeline x data x expert parallelism
    folded: Folded = Folded.MEGATRON  # what a rank computes of a column-parallel unit's folded layers


@dataclass(frozen=True)
class Comm:
    comm: CommType
    bytes: int
    over: frozenset[Purpose]


@dataclass
class LayerDraft:
    group: Group
    ways: int = 1  # the rank computes 1/ways of the layer
    split: str = "n"  # "n": output features split; "k": the reduction (row-parallel)
    # column / row / embedding (Megatron), split (ASTRA-sim's layer-wise MODEL), router / expert
    # (MoE), replicated: what rank_share divides
    role: str = "replicated"
    comms: dict[Step, list[Comm]] = field(default_factory=dict)
    policy: Policy | None = None  # HYBRID_CUSTOMIZED

    @property
    def owner(self) -> IRLayer:
        return self.group.owner

    @property
    def shardable(self) -> bool:
        return self.owner.kind in SHARDABLE

    def add(self, step: Step, comm: CommType, size: int, over: frozenset[Purpose]) -> None:
        """A collective in `step` (nothing when it would move no bytes)."""
        if size > 0 and comm.moves_data:
            self.comms.setdefault(step, []).append(Comm(comm, size, over))


@dataclass
class Draft:
    ir: ModelIR
    cost: CostModel
    parallelism: Parallelism
    layers: list[LayerDraft]
    group_size: int  # model_parallel_NPU_group (1 when the keyword has none)
    mesh: Mesh | None = None
    checkpoints: Checkpoints | None = None  # FWD_IN_BCKWD's segments
    recompute: dict[int, tuple[int, ...]] = field(default_factory=dict)  # layer -> forwards rerun first

    @property
    def npus(self) -> int:
        return self.parallelism.npus

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(self.ir.provenance.input_shapes)

    def every(self) -> frozenset[Purpose]:
        assert self.mesh is not None
        return frozenset(a.purpose for a in self.mesh.axes)

    def a_in(self, layer: IRLayer) -> int:
        return a_in(layer, self.inputs)

    @staticmethod
    def a_out(layer: IRLayer) -> int:
        return a_out(layer)


def a_in(layer: IRLayer, model_inputs: frozenset[str]) -> int:
    """Bytes of the floating-point inputs whose gradient back-propagation computes."""
    if not needs_input_grad(layer, model_inputs):
        return 0
    return sum(a.bytes or 0 for a in layer.inputs if a.dtype not in _INTEGER)


def a_out(layer: IRLayer) -> int:
    """Bytes of the layer's (first) output activation."""
    return layer.outputs[0].bytes or 0 if layer.outputs else 0


# ------------------------------------------------------------------------------ sharded compute


def shard(layer: IRLayer, ways: int, *, split: str = "n") -> IRLayer:
    """The part of a GEMM layer one NPU computes when split `ways` ways (output features, or the
    reduction for row-parallel layers)."""
    import dataclasses

    if ways == 1 or layer.kind not in SHARDABLE:
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


def resize(layer: IRLayer, factor: Fraction) -> IRLayer:
    """The layer on `factor` times its tokens: FLOPs, activations and the GEMM's M scaled (a
    sequence shard under SP, an expert's tokens from every expert-parallel rank); parameters kept."""
    import dataclasses

    if factor == 1:
        return layer

    def scaled(n: int) -> int:
        return math.ceil(n * factor)

    f = layer.flops
    gemm = layer.gemm
    if gemm is not None:
        gemm = Gemm(scaled(gemm.m), gemm.k, gemm.n, gemm.groups)
    acts = [
        tuple(dataclasses.replace(a, bytes=None if a.bytes is None else scaled(a.bytes)) for a in side)
        for side in (layer.inputs, layer.outputs)
    ]
    flops = Flops(scaled(f.forward), scaled(f.input_grad), scaled(f.weight_grad))
    return dataclasses.replace(layer, flops=flops, gemm=gemm, inputs=acts[0], outputs=acts[1])


def rank_share(
    x: LayerDraft, folded: Folded = Folded.MEGATRON, *, tokens: Fraction = Fraction(1), sequence: int = 1
) -> Group:
    """What one rank computes of a unit (a workload layer: the IR layer holding its parameters and
    the parameter-free layers folded into it), for the keywords and the LLM layout alike.

    the GEMM          1/ways of N (column-parallel, split, embedding) or of K (row-parallel): shard()
    folded layers     of a column-parallel unit: 1/ways under Folded.MEGATRON (the attention core,
                      the MLP activation), whole under Folded.GEMM_ONLY; of any other unit whole
                      (a row-parallel unit's residual add and dropout see the all-reduced output)
    tokens            the share of the micro-batch's tokens the unit sees (sequence parallelism: a
                      replicated unit or a router 1/T; an expert E_p/T); a router's or expert's
                      folded layers that are not the experts' own keep every token
    sequence          sequence parallelism's T: the layers folded into a row-parallel or embedding
                      unit (norm, residual add, dropout; not a linear) run on 1/T of the sequence
                      (Korthikanti et al. 2022, section 4.2.2)
    """
    g = x.group
    sharded = x.ways > 1 and x.shardable
    owner = shard(g.owner, x.ways, split=x.split) if sharded else g.owner
    members = []
    for m in g.folded:
        factor = tokens if x.role not in ("expert", "router") or m.moe is not None else Fraction(1)
        if sharded and x.role == "column" and folded is Folded.MEGATRON:
            factor /= x.ways
        elif x.role in ("row", "embedding") and m.kind is not Kind.LINEAR:
            factor /= sequence
        members.append(resize(shard(m, x.ways) if sharded else m, factor))
    return Group(resize(owner, tokens), tuple(members), g.comm_bytes)


# ------------------------------------------------------------------------------------ assembly


@dataclass(frozen=True)
class _Io:
    inputs: tuple[Tensor, ...]  # read from outside the group
    params: tuple[Tensor, ...]
    trainable: tuple[Tensor, ...]  # the parameters that get a gradient
    outputs: tuple[Tensor, ...]  # used outside the group (or model outputs)
    grads_in: tuple[Tensor, ...]  # the gradients of the outputs, as the consumers wrote them
    grads_out: tuple[Tensor, ...]  # the input gradients this layer writes


def _ios(layers: Sequence[LayerDraft], model_inputs: frozenset[str]) -> list[_Io]:
    home: dict[str, int] = {}  # IR layer name -> draft index
    for i, x in enumerate(layers):
        for member in x.group.members:
            home[member.name] = i
    produced: dict[str, int] = {}
    for i, x in enumerate(layers):
        for member in x.group.members:
            for a in member.outputs:
                produced[a.name] = i
    consumers: dict[str, list[int]] = {}
    for i, x in enumerate(layers):
        for member in x.group.members:
            for a in member.inputs:
                if produced.get(a.name, -1) != i and i not in consumers.setdefault(a.name, []):
                    consumers[a.name].append(i)
    out = []
    for i, x in enumerate(layers):
        owner = x.owner
        scale_in = x.ways if x.ways > 1 and x.shardable and x.split == "k" else 1
        scale_out = x.ways if x.ways > 1 and x.shardable and x.split == "n" else 1
        seen: set[str] = set()
        external: list[Activation] = []
        for member in x.group.members:
            for a in member.inputs:
                if produced.get(a.name, -1) != i and a.name not in seen:
                    seen.add(a.name)
                    external.append(a)
        inputs = tuple(Tensor(a.name, _size(a, scale_in)) for a in external)
        params = tuple(
            Tensor(p.name, math.ceil(p.bytes / x.ways) if x.shardable else p.bytes)
            for m in x.group.members
            for p in m.params
        )
        trainable = tuple(
            Tensor(p.name, math.ceil(p.bytes / x.ways) if x.shardable else p.bytes)
            for m in x.group.members
            for p in m.params
            if p.trainable
        )
        outs = [
            a
            for m in x.group.members
            for a in m.outputs
            if any(c != i for c in consumers.get(a.name, [])) or a.name not in consumers
        ]
        outputs = tuple(Tensor(a.name, _size(a, scale_out)) for a in outs)
        grads_in = tuple(
            Tensor(
                f"grad:{a.name}@{layers[c].owner.name}" if c >= 0 else f"grad:{a.name}", _size(a, scale_out)
            )
            for a in outs
            for c in (consumers.get(a.name) or [-1])
            if c != i
        )
        grads_out = tuple(
            Tensor(f"grad:{a.name}@{owner.name}", _size(a, scale_in))
            for a in external
            if a.dtype not in _INTEGER and a.name not in model_inputs
        )
        out.append(_Io(inputs, params, trainable, outputs, grads_in, grads_out))
    return out


def _size(a: Activation, ways: int) -> int:
    return math.ceil((a.bytes or 0) / ways)


def _times(draft: Draft, x: LayerDraft) -> PhaseTimes:
    return group_times(rank_share(x, draft.parallelism.folded), draft.cost, draft.inputs)


def _flops(draft: Draft, x: LayerDraft) -> Flops:
    members = rank_share(x, draft.parallelism.folded).members
    return Flops(
        sum(m.flops.forward for m in members),
        sum(m.flops.input_grad for m in members),
        sum(m.flops.weight_grad for m in members),
    )


def assemble(draft: Draft) -> Plan:
    """The plan the draft describes: one program, the same for every rank."""
    assert draft.mesh is not None, "a technique sets the mesh"
    layers = draft.layers
    times = [_times(draft, x) for x in layers]
    flops = [_flops(draft, x) for x in layers]
    ios = _ios(layers, draft.inputs)
    ops: list[Op] = []

    def emit(op: Op) -> int:
        ops.append(op)
        return len(ops) - 1

    def collectives(i: int, step: Step, after: int, reads: tuple[Tensor, ...]) -> list[int]:
        made = []
        for n, c in enumerate(layers[i].comms.get(Step.FWD if step is Step.RECOMPUTE else step, [])):
            label = f"{layers[i].owner.name}.{step}.{c.comm}.{n}"
            sent = reads if sum(t.bytes for t in reads) == c.bytes else (Tensor(f"{label}.payload", c.bytes),)
            written = (Tensor(label, c.bytes),)
            made.append(emit(Collective(i, step, c.comm, c.bytes, c.over, sent, written, (after,))))
        return made

    def forward(i: int, step: Step, tail: list[int]) -> list[int]:
        io = ios[i]
        outputs = (
            io.outputs
            if step is Step.FWD
            else tuple(Tensor(f"{t.name}@recompute", t.bytes) for t in io.outputs)
        )
        c = emit(
            Compute(i, step, times[i].forward, flops[i].forward, io.inputs + io.params, outputs, tuple(tail))
        )
        return collectives(i, step, c, outputs) or [c]

    tail: list[int] = []
    for i in range(len(layers)):
        tail = forward(i, Step.FWD, tail)
    for i in reversed(range(len(layers))):
        for j in draft.recompute.get(i, ()):
            tail = forward(j, Step.RECOMPUTE, tail)
        io = ios[i]
        wg_out = tuple(Tensor(f"grad:{p.name}@{layers[i].owner.name}", p.bytes) for p in io.trainable)
        wg = emit(
            Compute(
                i,
                Step.WEIGHT_GRAD,
                times[i].weight_grad,
                flops[i].weight_grad,
                io.grads_in + io.inputs,
                wg_out,
                tuple(tail),
            )
        )
        collectives(i, Step.WEIGHT_GRAD, wg, wg_out)
        tail = [wg]
        if i > 0:
            ig = emit(
                Compute(
                    i,
                    Step.INPUT_GRAD,
                    times[i].input_grad,
                    flops[i].input_grad,
                    io.grads_in + io.params,
                    io.grads_out,
                    (wg,),
                )
            )
            tail = collectives(i, Step.INPUT_GRAD, ig, io.grads_out) or [ig]
    infos = tuple(
        LayerInfo(
            x.owner.name,
            t.update,
            x.policy,
            unexecuted_input_grad=t.input_grad if i == 0 else 0,
        )
        for i, (x, t) in enumerate(zip(layers, times, strict=True))
    )
    preset = Preset(draft.parallelism.policy, draft.checkpoints)
    return Plan(draft.mesh, infos, (tuple(ops),), (0,) * draft.mesh.size, preset=preset)
