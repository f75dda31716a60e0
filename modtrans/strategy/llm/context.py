"""Context parallelism (Megatron-LM's --context-parallel-size C; Megatron-Core with Transformer
Engine's attention): the sequence of every micro-batch split over C ranks, for every layer.

    compute      each rank runs every layer on its s / C tokens: 1/C of a linear layer's work.
                 Its attention needs every earlier token's keys and values; with causal load
                 balancing (the sequence cut into 2C chunks, rank r holding chunks r and 2C-1-r:
                 megatron/core/utils.py, get_batch_on_this_cp_rank) each rank does 1/C of the
                 masked attention's work too. So every unit's compute is 1/C of the whole
                 sequence's (rank_share's token scale).
    attention    keys and values gathered over the context group before the attention core, the
                 gathered ones' gradients reduce-scattered back after its backward, which
                 gathers them again: Transformer Engine's all-gather variant of context-parallel
                 attention (transformer_engine/pytorch/attention: AttnFuncWithCPAndKVAllGather,
                 Megatron-Core's --cp-comm-type all_gather). Per attention core and micro-batch:
                 forward ALLGATHER of this rank's K and V, backward ALLGATHER again and
                 REDUCESCATTER of dK and dV, each of b x (s / C) x (key/value heads / T) x
                 (query-key + value head width) elements in the activations' dtype (the buffer
                 ASTRA-sim sizes an all-gather by its whole output: C times that).
    activations  every collective sized by an activation (TP, SP, the pipeline's sends) carries
                 s / C tokens; the activation memory of a micro-batch is 1/C.
    gradients    reduced over D x C ranks (degrees.dense_data: parallel_state's data-parallel group
                 with context parallelism), whose bytes do not change.
The sequence must split into 2C chunks (Megatron-LM's arguments.py: seq_length % (2 x C) == 0 for
the load-balanced split). Experts over context ranks (Megatron's expert mesh folding C) are
refused (rules). The degree registers itself: its axis "context" (only where C > 1), a replica
of the dense weights, a split of the sequence (degrees.py).
"""

from __future__ import annotations

import math

from modtrans import dtypes
from modtrans.comm import CommType
from modtrans.ir.document import Kind, ModelIR, Part
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.frameworks import named
from modtrans.strategy.llm.degrees import Degree, register
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.llm.unit import Unit

AXIS = Purpose("context")
CONTEXT = frozenset({AXIS})


def sequence(ir: ModelIR) -> int | None:
    """Tokens per sequence of a transformer's IR (its input_ids' second dimension), None unknown."""
    shape = ir.provenance.input_shapes.get("input_ids")
    return int(shape[1]) if shape is not None and len(shape) > 1 and isinstance(shape[1], int) else None


def rules(layout: Layout) -> None:
    """What context parallelism is modelled with."""
    if layout.cp == 1:
        return
    if not layout.framework.context_parallel:
        raise LayoutError(
            f"--cp {layout.cp}: --framework {layout.framework} has no context parallelism (--framework "
            f"{named(lambda f: f.context_parallel)})"
        )
    if layout.ep > 1:
        raise LayoutError(
            f"--cp {layout.cp} with --ep {layout.ep}: experts folded over context ranks are not modelled"
        )


def check(ir: ModelIR, layout: Layout) -> None:
    """The models whose sequence this split does not cover (LayoutError)."""
    if layout.cp > 1 and "pixel_values" in ir.provenance.input_shapes:
        raise LayoutError(
            f"--cp {layout.cp}: context parallelism with a vision tower is not modelled (Megatron-LM's "
            "LLaVA splits the language model's sequence, image tokens included, after the encoder)"
        )
    s = sequence(ir)
    if layout.cp > 1 and "decoder_input_ids" in ir.provenance.input_shapes:
        raise LayoutError(
            f"--cp {layout.cp}: context parallelism of an encoder-decoder (T5) is not modelled (its "
            "cross-attention reads the encoder's sequence, which this split of one sequence does not cover)"
        )
    if layout.cp > 1 and (s is None or s % (2 * layout.cp)):
        raise LayoutError(
            f"--cp {layout.cp}: the sequence of {s} tokens must split into 2 x {layout.cp} equal chunks "
            "(Megatron-LM's load-balanced context parallelism: seq_length % (2 x C) == 0)"
        )


def apply(units: list[Unit], layout: Layout) -> None:
    """The key/value traffic of each attention core (the unit it is folded into)."""
    cp = layout.cp
    if cp == 1:
        return
    for u in units:
        size = _kv_bytes(u, layout.tp) // cp
        if not size:
            continue
        u.attach(Place.BEFORE_FWD, Comm(CommType.ALLGATHER, size * cp, CONTEXT))
        u.attach(Place.BEFORE_BWD, Comm(CommType.ALLGATHER, size * cp, CONTEXT))
        u.attach(Place.AFTER_IG, Comm(CommType.REDUCESCATTER, size * cp, CONTEXT))


def _kv_bytes(u: Unit, tp: int) -> int:
    """The whole sequence's keys and values an attention core in the unit reads, on one tensor
    rank (its key/value heads / T), from its score and context products' shapes (0: no core)."""
    members = (u.x.owner, *u.x.group.folded)
    scores = next((m for m in members if m.kind is Kind.MATMUL and m.gemm is not None), None)
    if scores is None or scores.block is None or scores.block.part is not Part.ATTENTION:
        return 0
    heads = scores.block.heads
    context = next((m for m in members if m.kind is Kind.MATMUL and m is not scores and m.gemm), None)
    if heads is None or scores.gemm is None or context is None or context.gemm is None:
        return 0
    s, qk, vd = scores.gemm.m, scores.gemm.k, context.gemm.n
    batch = scores.gemm.groups // max(heads.query, 1)
    out = scores.outputs[0] if scores.outputs else None
    width = dtypes.width(out.dtype) if out is not None else 2
    return math.ceil(batch * s * heads.key_value * (qk + vd) * max(width, 1) / tp)


register(
    Degree(
        "cp",
        AXIS,
        listed=4,
        optional=True,  # no context axis without C: meshes and group ids as before the degree
        replica=True,  # the dense gradients are reduced over D x C
        sequence=True,  # each rank runs s / C tokens
        shards=True,
        rules=rules,
        refuses=check,
        attach=apply,
        runs=lambda framework: framework.context_parallel,
    )
)
