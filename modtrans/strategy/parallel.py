"""IR + cost model + parallelism -> the execution plan (strategy, step 3 of 3), and the workload
a text file would hold.

Notation the techniques' formulas use, per workload layer: P = its parameter bytes (the --params
convention), A_in = bytes of its floating-point input activation, A_out = bytes of its output
activation, N = --npus, G = --model-parallel-group. Sizes are the collective's whole buffer in
bytes (an all-gather's output); the writers convert to what each consumer reads (plan/sizes.py:
ASTRA-sim reads an all-gather's size as one rank's part, A_out / ways). Layers that hold a GEMM (conv, linear,
embedding, recurrent) are *sharded* by model-parallel techniques: each NPU holds 1/S of the
weights and computes 1/S of the GEMM; other layers (normalisation) are replicated. The formulas
live with each technique (strategy/techniques/*.py).

The first layer sends no input gradient (its inputs are model inputs: ASTRA-sim skips layer 0's
ig too). Fields a keyword's training loop ignores (ASTRA-sim 1.0: DATA ignores fwd/ig, MODEL the wg
comm) are written as NONE 0. Compute times are those of the shard (cost models see the sharded
GEMM: N or K divided by S, FLOPs and parameter bytes divided by S).
"""

from __future__ import annotations

from fractions import Fraction

from modtrans import limits
from modtrans.comm import TRANSLATED, Policy
from modtrans.cost import CostModel
from modtrans.ir.document import ModelIR
from modtrans.plan.model import LayerInfo, Plan, Preset, Purpose
from modtrans.plan.text import project
from modtrans.strategy.draft import Draft, LayerDraft, Parallelism, StrategyError
from modtrans.strategy.groups import Params, folds, group
from modtrans.strategy.program import Rerun, StageProgram, costed, model_share
from modtrans.strategy.share import rank_share, replicated, row_bias
from modtrans.strategy.techniques import load
from modtrans.strategy.tensors import ios
from modtrans.workload.model import Workload

SUPPORTED = TRANSLATED  # comm.py: the keywords translate writes
DEFAULT = Parallelism()  # DATA on one NPU
PER_LAYER = (Policy.DATA, Policy.MODEL, Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA)


def plan(
    ir: ModelIR,
    cost: CostModel,
    parallelism: Parallelism = DEFAULT,
    *,
    params: Params = Params.TRAINABLE,
    dtype_bytes: int | None = None,
) -> Plan:
    """The execution plan of `ir` under a strategy. Raises StrategyError for inconsistent options."""
    p = parallelism
    if dtype_bytes is not None and (dtype_bytes < 1 or dtype_bytes > limits.DTYPE_BYTES):
        raise StrategyError(
            limits.at_most("--dtype-bytes", dtype_bytes, limits.DTYPE_BYTES, "bytes per element")
            or f"--dtype-bytes {dtype_bytes} must be at least 1"
        )
    if p.layout is not None:
        from modtrans.strategy.llm.build import plan as llm_plan  # only LLM layouts need it
        from modtrans.strategy.llm.options import LayoutError

        try:
            return llm_plan(ir, cost, p.layout, params=params, dtype_bytes=dtype_bytes, folded=p.folded)
        except LayoutError as error:
            raise StrategyError(str(error)) from None
    techniques = load()
    if p.policy not in techniques:
        raise StrategyError(f"--parallel {p.policy} is not a training strategy modtrans writes")
    groups = group(ir, params, dtype_bytes)
    draft = Draft(ir, cost, p, [LayerDraft(g) for g in groups], _group_size(p))
    techniques[p.policy](draft)
    return _assemble(draft, folds(groups))


def _replicas(draft: Draft) -> int:
    """How many ranks of a keyword preset compute a replicated part whole on the same tokens: its
    tensor axis (MODEL's every rank, the hybrids' model-parallel group), which MFU counts once
    (program.model_share). HYBRID_CUSTOMIZED's DATA layers see a batch of their own on every rank,
    its split ones the same tokens: no one count; 1 (each rank's counted)."""
    assert draft.mesh is not None, "a technique sets the mesh"
    if draft.parallelism.policy is Policy.HYBRID_CUSTOMIZED:
        return 1
    return draft.mesh.span(frozenset({Purpose.TENSOR}))


def _assemble(draft: Draft, folded: tuple[tuple[str, tuple[str, ...]], ...]) -> Plan:
    """A keyword preset's plan: one program for every rank (one stage, one micro-batch)."""
    assert draft.mesh is not None, "a technique sets the mesh"
    inputs = draft.inputs
    tensors = ios(draft.layers, inputs)
    replicas = _replicas(draft)
    units = []
    for i, x in enumerate(draft.layers):
        share = rank_share(x, draft.parallelism.folded)
        run = costed(i, share, x.comms, tensors, draft.cost, inputs)
        whole = replicated(x, draft.parallelism.folded, sp=False)
        units.append(model_share(run, share, whole, replicas, inputs, row_bias(x, Fraction(1), sp=False)))
    program = StageProgram(0, [units], draft.mesh, rerun=Rerun(draft.recompute)).build()
    infos = tuple(
        LayerInfo(
            u.name, u.times.update, x.policy, unexecuted_input_grad=u.times.input_grad if u.first else 0
        )
        for u, x in zip(units, draft.layers, strict=True)
    )
    from modtrans.strategy.llm.memory import of_preset  # the layout's memory model, at the preset's shards

    memory = of_preset(draft.ir, draft.layers, draft.recompute)
    preset = Preset(draft.parallelism.policy, draft.checkpoints, memory)
    return Plan(draft.mesh, infos, (program,), (0,) * draft.mesh.size, preset=preset, folds=folded)


def build(
    ir: ModelIR,
    cost: CostModel,
    parallelism: Parallelism = DEFAULT,
    *,
    params: Params = Params.TRAINABLE,
    dtype_bytes: int | None = None,
) -> Workload:
    """The workload file of `ir` under a strategy (the plan, projected onto the text's columns)."""
    return project(plan(ir, cost, parallelism, params=params, dtype_bytes=dtype_bytes))


def _group_size(p: Parallelism) -> int:
    if p.npus < 1:
        raise StrategyError("--npus must be at least 1")
    too_many = limits.at_most("--npus", p.npus, limits.NPUS, "NPUs")
    if too_many:
        raise StrategyError(too_many)
    needs_group = p.policy in (Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA) or p.policy.is_transformer
    g = p.group if p.group is not None else (1 if not needs_group else None)
    if g is None:
        raise StrategyError(f"--parallel {p.policy} needs --model-parallel-group G (NPUs per group)")
    if g < 1 or p.npus % g:
        raise StrategyError(f"--model-parallel-group {g} must be at least 1 and divide --npus {p.npus}")
    return g
