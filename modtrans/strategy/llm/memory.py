"""Memory per rank of each pipeline stage: weights, gradients, optimizer state and the activations
of the micro-batches in flight. Megatron-LM's own estimate is
megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM d98e8a6); this follows it where
it applies and says where it differs.

    weights      this rank's share of the stage's parameters (tensor-parallel shards, a tied
                 copy on the last stage), in their dtype
    gradients    the same elements in the framework's gradient dtype (fp32 for bf16 under
                 Megatron: frameworks.py); ZeRO-2 and 3 keep 1/D of them
    optimizer    Adam: an fp32 master copy unless the weights are fp32 (4 B), and two fp32 moments
                 (8 B) per parameter; 1/D of it with the distributed optimizer or ZeRO-1/2/3
                 (num_bytes_per_parameter: 18 B, or 6 + 12 / D, for bf16)
    activations  per transformer layer and micro-batch, Korthikanti et al. 2022 (arXiv 2205.05198)
                 table 2, the MLP generalised to any width f as Megatron does (18 + 4 f / h in place
                 of 34): sbh (10 + (8 + 4 f / h) / t) without SP, sbh (18 + 4 f / h) / t with it, plus
                 5 a s^2 b / t for the attention scores unless recomputed (selective) or fused
                 away; full recomputation keeps each layer's input, 2 sbh (/ t under SP). The
                 stage's layers x the micro-batches in flight: 1F1B min(P - p, GA) on stage p,
                 GPipe GA, interleaved P (1 + (P - 1) / (P V)) (Megatron's penalty) on stage 0,
                 scaled by (P - p) / P after it. Stage 0 adds the embedding's input and dropout
                 (8 sb + sbh per micro-batch in flight, / t under SP), the last stage the output layer's input
                 and the loss's logits, 4 sbh (1 + V / h) / t (for P = 1 Megatron counts them; on
                 the last of P stages they are there too)

FlashAttention keeps no s x s scores; as Megatron's estimate, this counts them unless the
recomputation is selective (the scores recomputed), which over-states a fused kernel's memory; it
is said beside the number. Not counted: framework buffers, the CUDA context, fragmentation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modtrans.ir.document import Kind, Layer, ModelIR, Part, Role
from modtrans.plan.model import Recompute, Schedule, StageMemory
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.context import sequence
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.schedule import holders

ADAM = 8  # two fp32 moments per parameter
MASTER = 4  # the fp32 copy of a lower-precision parameter


@dataclass(frozen=True)
class Dims:
    """What the activation formulas need: sequence, micro-batch, hidden, heads, MLP width, vocabulary."""

    s: int
    b: int
    h: int
    a: int
    f: int
    v: int


def dims(ir: ModelIR, micro_batch: int) -> Dims | None:
    """The transformer's dimensions from its IR (None for a model without them: an ONNX CNN)."""
    s = sequence(ir)
    heads = next((x.block.heads for x in ir.layers if _in_blocks(x) and x.block and x.block.heads), None)
    table = max(
        (p.shape for x in ir.layers if x.kind is Kind.EMBEDDING for p in x.params if p.role is Role.WEIGHT),
        key=lambda shape: shape[0] if shape else 0,
        default=None,
    )
    mlp = next((x.gemm for x in ir.layers if _mlp_linear(x) and x.gemm), None)
    mlp = mlp or next((x.gemm for x in ir.layers if _expert_linear(x) and x.gemm), None)
    if s is None or heads is None or not table or len(table) != 2 or mlp is None:
        return None
    return Dims(s, micro_batch, table[1], heads.query, mlp.n, table[0])


def _in_blocks(x: Layer) -> bool:
    """A layer of the transformer's blocks (a vision-language model's image encoder, outside
    them, has heads and MLP widths of its own: llm/vision.py)."""
    return x.block is not None and x.block.index is not None


def _mlp_linear(x: Layer) -> bool:
    return _in_blocks(x) and x.block is not None and x.block.part is Part.MLP and x.kind is Kind.LINEAR


def _expert_linear(x: Layer) -> bool:
    """An expert's first linear: a mixture of experts' MLP width (Megatron's ffn_hidden_size)."""
    return _in_blocks(x) and x.block is not None and x.block.part is Part.EXPERT and x.kind is Kind.LINEAR


def per_stage(
    units: Sequence[Unit],
    chunks: Sequence[Sequence[int]],
    layout: Layout,
    d: Dims | None,
    tied: dict[int, int],
    expert_data: int,
) -> tuple[StageMemory, ...]:
    """Each stage's first rank's memory (of the chunks it holds: schedule.holders); `expert_data`:
    the ranks an expert's gradients and optimizer state are spread over (Megatron's expert data
    parallelism)."""
    stages = layout.pp
    held = [holders(layout.schedule, v, stages) for v in range(len(chunks))]
    out = []
    for p in range(stages):
        mine = [units[tied.get(i, i)] for v, chunk in enumerate(chunks) if p in held[v] for i in chunk]
        parts = [
            _state(u, layout, expert_data if u.role is LayerRole.EXPERT else layout.gradient_ranks)
            for u in mine
        ]
        elements, weights, grads, optimizer = (sum(x[k] for x in parts) for k in range(4))
        blocks = len(
            {units[i].block for v, chunk in enumerate(chunks) if p in held[v] for i in chunk} - {None}
        )
        ends = (p in held[0], p in held[-1])  # holds the embedding; the output layer (DualPipe: both)
        activations = _activations(layout, d, p, blocks, ends) if d is not None else 0
        out.append(StageMemory(int(elements), int(weights), int(grads), int(optimizer), int(activations)))
    return tuple(out)


def _state(u: Unit, layout: Layout, ranks: int) -> tuple[float, float, float, float]:
    """A unit's elements, and the bytes of its weights, gradients and optimizer state on a rank
    whose data-parallel group (for its gradients) has `ranks` ranks."""
    elements = _elements(u)
    weights, grads = float(u.param_bytes()), float(u.grad_bytes())
    width = weights / elements if elements else 2
    optimizer = float(elements * (ADAM + (MASTER if width < 4 else 0)))
    if layout.zero >= 1:
        optimizer /= ranks
    if layout.zero >= 2 and layout.framework is not Framework.MEGATRON:
        grads /= ranks  # Megatron's distributed optimizer keeps the whole gradient buffer
    if layout.zero == 3:
        weights, grads = weights / ranks, grads / ranks
    return elements, weights, grads, optimizer


def _elements(u: Unit) -> int:
    return sum(u.share(p.elements) for p in u.x.owner.params if p.trainable and p.counted)


def _activations(layout: Layout, d: Dims, stage: int, blocks: int, ends: tuple[bool, bool]) -> float:
    t, sp = layout.tp, layout.sp
    sbh = d.s * d.b * d.h
    wide = 4 * d.f / d.h
    if layout.recompute is Recompute.FULL:
        layer = 2 * sbh / (t if sp else 1)
    else:
        layer = sbh * (18 + wide) / t if sp else sbh * (10 + (8 + wide) / t)
        if layout.recompute is not Recompute.SELECTIVE:
            layer += 5 * d.a * d.s * d.s * d.b / t
    flight = _in_flight(layout, stage)
    total = layer * blocks * flight
    if ends[0]:  # the embedding's input ids and dropout output; sequence-sharded under SP
        total += (8 * d.s * d.b + sbh) * min(layout.pp, layout.micro_batches) / (t if sp else 1)
    if ends[1]:
        total += 4 * sbh * (1 + d.v / d.h) / t
    return total / layout.cp  # context parallelism: each rank holds its s / C of every tensor


def _in_flight(layout: Layout, stage: int) -> float:
    """Micro-batches whose activations a rank of `stage` holds at once (Narayanan et al. 2021)."""
    p, ga = layout.pp, layout.micro_batches
    if layout.schedule is Schedule.GPIPE:
        return ga
    if layout.schedule is Schedule.ZB_H1:  # 1F1B's P - s, and the s deferred weight gradients' inputs
        return min(p, ga)
    if layout.schedule is Schedule.INTERLEAVED:
        return p * (1 + (p - 1) / (p * layout.vpp)) * (p - stage) / p
    if layout.schedule in (Schedule.DUALPIPE, Schedule.DUALPIPE_V):
        # P + 1 micro-batches of one of its stages (deepseek-ai/DualPipe README's table, with P its
        # stages: DualPipe's P, DualPipeV's 2P); the rank's blocks are its two stages'
        return (layout.chunks + 1) / 2
    return min(p - stage, ga)


def fits(memory: Sequence[StageMemory], capacity: int) -> list[str]:
    """A line per stage whose rank needs more than the device holds."""
    return [
        f"pipeline stage {p}: {m.total / 2**30:,.1f} GiB per rank (weights {m.weights / 2**30:.1f}, "
        f"gradients {m.gradients / 2**30:.1f}, optimizer {m.optimizer / 2**30:.1f}, activations "
        f"{m.activations / 2**30:.1f}) is more than the device's {capacity / 2**30:,.0f} GiB"
        for p, m in enumerate(memory)
        if m.total > capacity
    ]
