"""`--attention efficient` and `--attention sdpa` (cost/gpu.py, cost/attention.py masked): the
memory-efficient kernel at the FlashAttention-2 paper's measured rates, an attention handed a mask
run dense, and SDPA's choice per attention. The figure's bars transcribed here are the source:
Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png (commit 4f285b3), the green
'xformers' bars, forward + backward TFLOP/s on an A100 80GB SXM4 (hidden 2048, batch 16k / seqlen),
FLOPs counted as benchmark_flash_attention.py counts them (3.5 x 4 b s^2 h d, halved when causal).
"""

from __future__ import annotations

import pytest

from modtrans import cost
from modtrans.cost.gpu import Gpu
from modtrans.ir.document import Heads
from tests.cores import core_seconds

SEQUENCES = (512, 1024, 2048, 4096, 8192, 16384)
XFORMERS_A100 = {
    (64, False): (68, 73, 76, 77, 75, 75),
    (128, False): (83, 91, 95, 96, 97, 98),
    (64, True): (51, 60, 66, 68, 69, 67),
    (128, True): (58, 72, 82, 87, 91, 92),
}
FA2_A100 = {(128, True, 8192): 182}  # the same figure's FlashAttention-2 bar


def _seconds(model: Gpu, sequence: int, head_dim: int, heads: Heads) -> float:
    """Forward and backward of one attention core (scores and context), batch 16k / s, 2048 wide."""
    return core_seconds(model, 16384 // sequence, 2048 // head_dim, sequence, head_dim, heads)


def _model(kernel: str, device: str = "a100") -> Gpu:
    model = cost.get("gpu", cost.Settings(device=device, attention=kernel))
    assert isinstance(model, Gpu)
    return model


@pytest.mark.parametrize(
    ("head_dim", "causal", "sequence", "tflops"),
    [(d, c, s, r) for (d, c), rates in XFORMERS_A100.items() for s, r in zip(SEQUENCES, rates, strict=True)],
)
def test_the_efficient_kernel_runs_at_xformers_measured_rate(
    head_dim: int, causal: bool, sequence: int, tflops: float
) -> None:
    """Every bar: an attention handed no mask (is_causal) at the kernel's measured rate."""
    seconds = _seconds(
        _model("efficient"), sequence, head_dim, Heads(2048 // head_dim, 2048 // head_dim, causal)
    )
    flops = 3.5 * 4 * 16384 * sequence * 2048 / (2 if causal else 1)
    assert flops / seconds / 1e12 == pytest.approx(tflops, rel=0.01)


@pytest.mark.parametrize("kernel", ["efficient", "sdpa"])
def test_a_window_handed_as_a_mask_runs_dense(kernel: str) -> None:
    """A causal sliding-window layer (a [b, 1, s, s] mask to SDPA) runs every tile at the
    noncausal bar (head dim 128, 4k: 96), its FLOPs not halved and no tile skipped; the mask's
    bytes hide behind the tiles' products there (2 B an element, under a tenth of the compute)."""
    heads = Heads(16, 16, True, window=512)
    seconds = _seconds(_model(kernel), 4096, 128, heads)
    assert 3.5 * 4 * 16384 * 4096 * 2048 / seconds / 1e12 == pytest.approx(96, rel=0.01)


def test_sdpa_runs_an_unmasked_attention_on_flashattention_2() -> None:
    (head_dim, causal, sequence), tflops = next(iter(FA2_A100.items()))
    seconds = _seconds(_model("sdpa"), sequence, head_dim, Heads(16, 16, causal))
    assert 3.5 * 4 * 16384 * sequence * 2048 / 2 / seconds / 1e12 == pytest.approx(tflops, rel=0.01)


def test_the_h100_has_no_measurement_of_the_efficient_kernel() -> None:
    """The H100 figure (flash2_h100_fwd_bwd_benchmark.png) has no xformers bars: a note says the
    newest fused kernel's rate stands in."""
    from modtrans.request import Request, prepare

    said: list[str] = []
    prepare(Request(model="gpt2", device="h100", attention="efficient", zero=3, dp=2), say=said.append)
    assert any("--attention efficient" in line and "stands in" in line for line in said)
    said.clear()
    prepare(Request(model="gpt2", device="a100", attention="efficient", zero=3, dp=2), say=said.append)
    assert not any("stands in" in line for line in said)


def test_sdpa_on_an_h100_charges_a_masked_attention_as_flashattention_2_dense() -> None:
    """The H100 has no measurement of the memory-efficient kernel: under sdpa a masked attention
    is charged FlashAttention-2's noncausal rate over every tile, never the newer FlashAttention-3's
    (flash2_h100_fwd_bwd_benchmark.png, FlashAttention-2, head dim 128, no causal mask: 326 TFLOP/s
    at 4k, forward + backward), and a note says the stand-in."""
    from modtrans.request import Request, prepare

    seconds = _seconds(_model("sdpa", "h100"), 4096, 128, Heads(16, 16, True, window=512))
    assert 3.5 * 4 * 16384 * 4096 * 2048 / seconds / 1e12 == pytest.approx(326, rel=0.05)
    said: list[str] = []
    prepare(Request(model="gpt2", device="h100", attention="sdpa", zero=3, dp=2), say=said.append)
    assert any("--attention sdpa" in line and "stands in" in line for line in said)
