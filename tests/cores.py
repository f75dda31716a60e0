"""One attention core as the LLM builder writes it, timed by a cost model: the tests of the
attention kernels' rates (test_gpu_model, test_attention_efficient) read their models through it."""

from __future__ import annotations

from modtrans.cost.gpu import Gpu
from modtrans.ir.document import Activation, Block, Flops, Gemm, Heads, Kind, Layer, Part


def core_layers(batch: int, count: int, sequence: int, head_dim: int, heads: Heads) -> tuple[Layer, ...]:
    """The scores (s x d x s) and context (s x s x d) products of `count` heads over `batch`
    sequences, and the softmax between them."""
    block = Block(0, Part.ATTENTION, heads)
    out = (Activation("x", (batch, count, sequence, sequence), "bfloat16", None),)
    macs = batch * count * sequence * sequence * head_dim
    products = tuple(
        Layer(
            "core",
            "",
            "MatMul",
            Kind.MATMUL,
            outputs=out,
            flops=Flops(2 * macs, 4 * macs, 0),
            gemm=gemm,
            block=block,
        )
        for gemm in (
            Gemm(sequence, head_dim, sequence, batch * count),
            Gemm(sequence, sequence, head_dim, batch * count),
        )
    )
    return (*products, Layer("softmax", "", "Softmax", Kind.REDUCE, outputs=out, block=block))


def core_seconds(model: Gpu, batch: int, count: int, sequence: int, head_dim: int, heads: Heads) -> float:
    """The forward and backward seconds of the core's two products."""
    total = 0.0
    for layer in core_layers(batch, count, sequence, head_dim, heads)[:2]:
        times = model.times(layer)
        total += (times.forward + times.input_grad) * 1e-9
    return total
