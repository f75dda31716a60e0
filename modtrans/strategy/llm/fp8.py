"""--precision fp8 in the layout: what Transformer Engine's FP8 linears (cost/fp8.py) add to a
rank's time and memory that only the strategy's roles and the memory model know.

Time: the weight's cast once an iteration (cost/fp8.py, weight_cast_bytes), charged with the
optimizer step after the distributed optimizer divides the step (every rank casts the weights it
computes with, not a share), and the input's casts (input_cast_bytes), by the module a linear is
in Megatron-Core's TE layer spec: a column-parallel linear is a TELayerNormColumnParallelLinear (linear_qkv,
linear_fc1: its norm writes FP8, its backward transposes that output), a row-parallel one a
TERowParallelLinear (linear_proj, linear_fc2: it casts its input). Megatron-Core fuses q, k and v
into one module and gate and up into another; the IR holds them apart, so each pays the share of
the module's transpose its output columns are. The output gradient's cast is the cost model's.

Memory (NVIDIA/TransformerEngine v1.8, 3ec998e, transformer_engine/pytorch/module/):

    weights      each TE linear keeps its weight cast to FP8 and that copy's transpose from the
                 first micro-batch to the end of the iteration (linear.py, Linear.forward:
                 get_fp8_workspace(cache_name="weight", with_transpose=...) when Megatron-Core
                 passes is_first_microbatch: megatron/core/transformer/custom_layers/
                 transformer_engine.py at core_r0.8.0), 2 B a weight element beside the bf16
                 parameter, the fp32 main gradient and the optimizer's state (memory.py)
    activations  a linear saves its input for the wgrad GEMM in FP8, 1 B an element, where
                 activations.py counts it at the activations' w: _Linear.forward saves the FP8
                 transpose (saved_inputmat_t; under sequence parallelism the FP8 input, not
                 transposed), _LayerNormLinear.forward its norm's FP8 output (ln_out); so the
                 QKV's and fc1's input (the norms' outputs, nothing else saves them), fc2's input
                 (the activation function's output) each 1 B instead of w. The output projection's
                 input is the attention's output, which a fused attention kernel saves itself in
                 bf16 for its own backward (TE's FusedAttnFunc, flash-attn: `out` among the saved
                 tensors): there the FP8 copy is 1 B more, where activations.py counts the tensor
                 once (under selective recomputation the kernel reruns and saves nothing, and
                 eager attention's context product saves its inputs: 1 B instead of w). Full
                 recomputation keeps each block's input only: nothing changes. A MoE's experts and
                 router, and state-space mixers, are left as they are (not TE's FP8 linears here);
                 so is what Megatron-Core's --recompute-modules stops storing (modules.py): the FP8
                 terms are those of the block's --recompute mode.

Communication: the data-parallel gradient reduction (fp32) and the distributed optimizer's
parameter all-gather move the bf16 parameters' bytes (Megatron-Core gathers FP8 parameters only
under --fp8-param-gather, added in core_r0.9.0: distributed_data_parallel_config.py,
fp8_param_gather; not modelled), and the tensor-parallel all-reduces and reduce-scatters move the
bf16 outputs and gradients. Under sequence parallelism a block's linears' all-gathers move FP8
(strategy/llm/tensor.py, _gathered: TE casts before it gathers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from modtrans.cost import CostModel
from modtrans.cost.fp8 import WIDTH, input_cast_bytes, te_linear, weight_cast_bytes
from modtrans.ir.document import Layer as IRLayer
from modtrans.ir.document import Part
from modtrans.plan.model import Recompute
from modtrans.strategy.llm.activations import EAGER, Dims
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.program import Costed
from modtrans.strategy.roles import LayerRole

COPIES = 2  # bytes a weight element: its FP8 copy and that copy's transpose


def casting(
    units: Sequence[Unit], cost: CostModel, layout: Layout, share_of: Callable[[Unit], IRLayer]
) -> Callable[[Costed, Unit], Costed]:
    """A unit's run with its TE linear's input casts added (the module's Time), forward and to
    its weight gradient, and its weight's cast once an iteration with the optimizer step (after
    the distributed optimizer's share of the step: every rank casts the weights it computes with);
    `share_of`: the layer the rank computes of a unit, as it was costed."""
    modules: dict[tuple[int | None, Part | None], int] = {}  # a LayerNormLinear's output columns
    for u in units:
        x = u.x.owner
        if u.role is LayerRole.COLUMN and te_linear(x) and x.gemm is not None and x.block is not None:
            key = (x.block.index, x.block.part)
            modules[key] = modules.get(key, 0) + x.gemm.n
    seconds = cost.memory_seconds  # type: ignore[attr-defined]  # the gpu model's: request.py refuses others
    ticks = cost.clock.from_seconds

    def cast(run: Costed, u: Unit) -> Costed:
        x = u.x.owner
        if u.role not in (LayerRole.COLUMN, LayerRole.ROW) or not te_linear(x) or x.gemm is None:
            return run
        row = u.role is LayerRole.ROW
        share = 1.0 if row or x.block is None else x.gemm.n / modules[(x.block.index, x.block.part)]
        layer = share_of(u)
        forward, backward = input_cast_bytes(layer, row, layout.sp, share)
        t = run.times
        added = [ticks(seconds(round(b))) for b in (forward, backward, weight_cast_bytes(layer))]
        times = replace(
            t, forward=t.forward + added[0], weight_grad=t.weight_grad + added[1], update=t.update + added[2]
        )
        return replace(run, times=times)

    return cast


def weight_copies(linear_elements: float) -> float:
    """Bytes of the FP8 weight copies a rank keeps for `linear_elements` elements of its TE
    linears' parameters (the module's weights)."""
    return COPIES * linear_elements


def saved(d: Dims, block: int, t: int, sp: bool, recompute: Recompute, attention: str) -> float:
    """Bytes one pass of a block stores under --precision fp8 beyond activations.py's terms
    (negative: fewer), per micro-batch on one rank (the module's activations)."""
    if recompute is Recompute.FULL:
        return 0.0
    m, _, attends, _ = d.kind(block)
    sb, narrow = d.s * d.b, WIDTH - d.width  # an input saved at 1 B, where w was counted
    dense = m.inputs > 0 and not m.experts and m.down > 0
    replicated = narrow * sb * d.h * (int(attends) + int(dense))  # the norms' outputs
    kernel_keeps = attention != EAGER and recompute is not Recompute.SELECTIVE
    context = (WIDTH if kernel_keeps else narrow) * sb * d.context if attends else 0
    split = context + (narrow * sb * m.down if dense else 0)
    return d.passes.get(block, 1) * (replicated / (t if sp else 1) + split / t)
