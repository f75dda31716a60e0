"""What a transformer block's MLP stores per token for its backward, read from the IR's linears
(activations.py counts the bytes): each MLP module's up projections' outputs and its down
projection's input, a MoE's routed experts' for the k tokens each token becomes, and how many
times a block runs in one forward (a looped layer's passes, each storing its own).
"""

from __future__ import annotations

from dataclasses import dataclass

from modtrans.ir.document import Gemm, Kind, Layer, ModelIR, Part


@dataclass(frozen=True)
class Mlp:
    """Elements per token one block's MLP stores: `inputs` not split over tensor ranks (unless
    sequence-parallel), `inner` split over them, `experts` split over the expert tensor ranks; a
    MoE's `routed` hidden-wide copies (replicated as `inputs`) and its router's fp32 `scores`."""

    inputs: float
    inner: float
    experts: float = 0.0
    routed: float = 0.0  # hidden-wide elements per token its dispatch and combine keep (of)
    scores: float = 0.0  # fp32 values per token its router keeps: a probability for every expert
    act: float = 0.0  # of `experts`: the experts' activation outputs (their down projection's input)
    down: float = 0.0  # a dense MLP's down projections' input elements per token (of `inner`; down)


NO_MLP = Mlp(0.0, 0.0)  # a hybrid's block without one (Nemotron-H's attention and Mamba blocks)


def of(ir: ModelIR, h: int, capacity: float, mixed: frozenset[str] = frozenset()) -> dict[int, Mlp]:
    """Each block's MLP terms, from its MLPs' linears in the order they run (stored), the routed
    experts' from the first expert's; not a state-space mixer's (`mixed`: its in_proj reads the
    hidden state too).

    A MoE (Megatron-Core at core_r0.10.0, megatron/core/transformer/moe/) keeps, beside its
    experts' own terms for the k x capacity copies a token becomes, two hidden-wide sets of those
    copies: the experts' input (moe_utils.permute's index_select, saved by the first expert
    linear) and their output, which moe_utils.unpermute multiplies by the routing probabilities
    before putting it back in the tokens' order (`permuted_tokens * permuted_probs.unsqueeze(-1)`,
    saved for the probabilities' gradient; core_r0.9.0 multiplies after the scatter, the same
    bytes; core_r0.8.0's index_copy_ kept a third set, its source, for its backward). And the
    router's probability for every expert (`scores`: its last linear's width, E, with LongCat's
    zero experts E + Z), kept three ways (activations.routing): in fp32 for the load-balancing
    loss (router.py, aux_loss_load_balancing: `torch.softmax(logits, dim=-1, dtype=torch.float32)`,
    saved by the softmax), dense in the activations' dtype and as the bool routing map (unpermute's
    masked_select).
    Measured, the layer run op for op under PyTorch: tests/test_memory_moe_measured.py.
    """
    dense: dict[int, list[Layer]] = {}
    routed: dict[int, list[Layer]] = {}
    routers: dict[int, int] = {}
    for x in ir.layers:
        if x.block is None or x.block.index is None or x.name in mixed:
            continue
        if x.kind is not Kind.LINEAR or x.gemm is None:
            continue
        if x.block.part is Part.MLP:
            dense.setdefault(x.block.index, []).append(x)
        elif x.block.part is Part.EXPERT and x.moe is not None and x.moe.expert in (0, None):
            routed.setdefault(x.block.index, []).append(x)
        elif x.block.part is Part.ROUTER:
            routers[x.block.index] = x.gemm.n  # the last of a router's linears gives a score per expert
    out = {}
    for block in sorted(dense.keys() | routed.keys()):
        mine = dense.get(block, [])
        if block not in routed:
            out[block] = Mlp(1.0 if mine else 0.0, float(stored(mine, h)), down=float(down(mine)))
            continue
        first = routed[block]
        moe = next(x.moe for x in first if x.moe is not None)
        copies = moe.top_k * capacity
        scores = float(routers.get(block, moe.experts))
        act = copies * first[-1].gemm.k if first[-1].gemm is not None else 0.0  # the down projection's input
        out[block] = Mlp(1.0, float(stored(mine, h)), copies * stored(first, h), 2 * copies, scores, act)
    return out


def stored(linears: list[Layer], h: int) -> int:
    """Elements per token the MLPs of `linears` keep beyond their input, each MLP (the linears of
    one module, in the order they run) its up projections' outputs and its down projection's (the
    last one's) input: GeLU's up and down, f + f; gated, the gate's and up projection's outputs (or
    a fused gate_up's 2 f) and the product the down projection reads, 3 f. An MLP of one linear
    reading the hidden state keeps 2 f, GeLU's. One pass of a block run more than once a forward:
    its modules' first runs (runs; the block's passes multiply all its terms: passes)."""
    total = 0
    for (_, run), gemms in runs(linears).items():
        if run:
            continue
        if len(gemms) == 1:
            total += 2 * gemms[0].n if gemms[0].k == h else 0
        else:
            total += sum(g.n for g in gemms[:-1]) + gemms[-1].k
    return total


def down(linears: list[Layer]) -> int:
    """Elements per token the down projections of `linears` read (each MLP's last linear's input,
    part of stored()'s): what Transformer Engine saves in FP8 for its wgrad under --precision fp8
    (strategy/llm/fp8.py); 0 for an MLP of one linear."""
    return sum(gemms[-1].k for (_, run), gemms in runs(linears).items() if not run and len(gemms) > 1)


def runs(linears: list[Layer]) -> dict[tuple[str, int], list[Gemm]]:
    """The GEMMs of `linears` by module and run (_run)."""
    names = {x.name for x in linears}
    found: dict[tuple[str, int], list[Gemm]] = {}
    for x in linears:
        if x.gemm is not None:
            found.setdefault(_run(x, names), []).append(x.gemm)
    return found


def _run(x: Layer, names: set[str]) -> tuple[str, int]:
    """A linear's module and run: a read through transformers names a module's n-th rerun
    `<name>_<n>` and lists its weights on the first run only (hf/layers.py), so a layer that holds
    no parameter of its own, named another layer's name and `_<n>`, is that layer's run n (an ONNX
    MLP's MatMul_1 holds its own weight: another projection of the same run)."""
    base, _, n = x.name.rpartition("_")
    rerun = n.isdigit() and base in names and not any(p.counted for p in x.params)
    return (base if rerun else x.name).rpartition(".")[0], int(n) if rerun else 0


def passes(blocks: list[Layer]) -> dict[int, int]:
    """The blocks run more than once in one forward, by how many times: one more than their
    linears' last rerun (_run). Inkling2LoopTextModel.forward runs its layers
    loop_layer_index_start .. end - 1 loop_num_passes times (modeling_inkling2_loop.py); each pass
    keeps its own tensors for the backward, so the block stores its terms that many times (layer).
    Not read from a mixture's layers (an expert loop, DBRX's, reruns a projection an expert), nor
    across blocks (a module shared by several blocks, ALBERT's, runs once in each)."""
    by_block: dict[int, list[Layer]] = {}
    for x in blocks:
        index = x.block.index if x.block is not None else None
        if x.kind is Kind.LINEAR and x.gemm is not None and x.moe is None and index is not None:
            by_block.setdefault(index, []).append(x)
    found: dict[int, int] = {}
    for index, linears in by_block.items():
        names = {x.name for x in linears}
        last = max(_run(x, names)[1] for x in linears)
        if last:
            found[index] = last + 1
    return found
