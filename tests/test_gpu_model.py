"""The GPU kernel model (modtrans/cost/gpu.py) against published kernel measurements, each cited.

The calibration's one fitted constant, 4 us per wave of GEMM tiles, was fitted on the cuBLASLt
sweeps below; everything else comes from other measurements (the best-shape matmul rate, the
streaming bandwidth, the launch floor, the FlashAttention tables), so the sweeps test the tile and
wave model, and the other points test the rest on numbers the calibration did not see."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import Result

from modtrans import cost
from modtrans.cost.gemm import Shape
from modtrans.cost.gpu import TILES, Gpu
from modtrans.ir.document import Activation, Block, Heads, Kind, Layer, Part
from tests.cores import core_layers, core_seconds

Run = Callable[..., Result]

# Azure/AI-benchmarking-guide 8fd0c6e, Azure_Results/ND_A100_v4_results.md (A100-SXM4-80GB, FP16,
# cuBLASLt, 10,000 warm-up iterations), ND_H100_v5_results.md and ND_H200_v5_results.md (FP8):
# (M, N, K) -> TFLOP/s
A100_FP16 = {
    (1024, 1024, 1024): 119.4,
    (2048, 2048, 2048): 221.8,
    (4096, 4096, 4096): 228.0,
    (8192, 8192, 8192): 253.7,
    (16384, 16384, 16384): 256.5,
    (1024, 2145, 1024): 132.8,
    (6144, 12288, 12288): 250.8,
    (802816, 192, 768): 157.8,
}
H100_FP8 = {
    (1024, 1024, 1024): 274.1,
    (2048, 2048, 2048): 1011.3,
    (4096, 4096, 4096): 1216.9,
    (8192, 8192, 8192): 1290.1,
    (16384, 16384, 16384): 1377.3,
    (32768, 32768, 32768): 1382.2,
    (1024, 2145, 1024): 410.7,
    (6144, 12288, 12288): 1351.4,
    (802816, 192, 768): 663.8,
}
H200_FP8 = {
    (1024, 1024, 1024): 290.8,
    (2048, 2048, 2048): 1013.4,
    (4096, 4096, 4096): 1249.1,
    (8192, 8192, 8192): 1300.6,
    (16384, 16384, 16384): 1366.3,
    (32768, 32768, 32768): 1349.5,
    (1024, 2145, 1024): 407.9,
    (6144, 12288, 12288): 1318.0,
    (802816, 192, 768): 717.5,
}


def _gpu(device: str) -> Gpu:
    model = cost.get("gpu", cost.Settings(device=device))
    assert isinstance(model, Gpu)
    return model


@pytest.mark.parametrize(
    ("device", "dtype", "measured", "mean_error"),
    [
        ("a100", "float16", A100_FP16, 0.08),
        ("h100", "float8e4m3fn", H100_FP8, 0.06),
        ("h200", "float8e4m3fn", H200_FP8, 0.06),
    ],
)
def test_gemm_throughput_is_cublas_measured_one(
    device: str, dtype: str, measured: dict[tuple[int, int, int], float], mean_error: float
) -> None:
    """Tile and wave quantization at the device's best-shape matmul rate: within 25 % of every
    measured shape (the worst: 2048^3 on the A100, -16 %; the skinny 802816 x 192 x 768 on the
    H200, -20 %) and within 6-8 % on average, where a roofline at peak is 23-160 % off."""
    model = _gpu(device)
    width = 1 if dtype.startswith("float8") else 2
    errors = []
    for (m, n, k), tflops in measured.items():
        seconds = model.gemm_seconds((Shape(m, k, n),), dtype, width)
        errors.append(2 * m * n * k / seconds / 1e12 / tflops - 1)
    assert max(abs(e) for e in errors) < 0.25, errors
    assert sum(abs(e) for e in errors) / len(errors) < mean_error, errors
    peak = model.device.peak(dtype) / 1e12
    roofline = [peak / tflops - 1 for tflops in measured.values()]
    assert min(roofline) > 0.2  # the peak overstates every one of them


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (16384, 16384, 16384), (6144, 12288, 12288)])
def test_an_a100s_large_gemms_run_at_cublaslts_sustained_rate(shape: tuple[int, int, int]) -> None:
    """The A100's large fp16 GEMMs (the sizes of GPT 22B to 1T's at TP 8) within 2 % of Azure's
    cuBLASLt sweep after 10,000 warm-up iterations (A100_FP16: 250.8-256.5 TFLOP/s), the rate a
    training run sustains; torch.mm's best shape over 100 iterations, 271.2, put them 4.5-4.7 %
    above it."""
    m, n, k = shape
    seconds = _gpu("a100").gemm_seconds((Shape(m, k, n),), "float16", 2)
    assert 2 * m * n * k / seconds / 1e12 == pytest.approx(A100_FP16[shape], rel=0.02)


# A burst and the sustained rate on the same part, TFLOP/s: the best shape of MAMF's search
# (stas00/ml-engineering 744d01e, compute/accelerator/README.md, MAMF table: torch.mm, the mean of
# 100 iterations after 50 warm-ups) and the best large shape of Azure's cuBLASLt sweep after 10,000
# warm-up iterations (A100_FP16, H100_FP8, H200_FP8 above). The sustained rate sits 1.5-6.0 % under.
BURST_AND_SUSTAINED = {
    ("a100", "float16"): (271.2, 256.5),  # MAMF's BF16 row; 16384^3 FP16
    ("h100", "float8e4m3fn"): (1402.6, 1382.2),  # 32768^3
    ("h200", "float8e4m3fn"): (1453.4, 1366.3),  # 16384^3
}


@pytest.mark.parametrize(
    "shape", [(8192, 8192, 8192), (16384, 16384, 16384), (32768, 32768, 32768), (6144, 12288, 12288)]
)
def test_an_h100s_large_gemms_run_no_faster_than_its_sustained_sweep(shape: tuple[int, int, int]) -> None:
    """The H100 SXM at 700 W sustains what its burst gives, within 1.5 %: Azure's FP8 sweep after
    10,000 warm-up iterations (ND H100 v5) reaches 1382.2 TFLOP/s, MAMF's FP8 best 1402.6
    (BURST_AND_SUSTAINED). Its GEMMs at the sweep's large shapes, charged at the burst rate with the
    tile and wave model, come out 0.8-4.4 % under the sustained measurement, never over it: unlike
    the A100's burst, which ran them 4.5-4.7 % over its sweep until the profile took the sustained
    rate, the H100's needs no clock taken off it."""
    m, n, k = shape
    seconds = _gpu("h100").gemm_seconds((Shape(m, k, n),), "float8e4m3fn", 1)
    error = 2 * m * n * k / seconds / 1e12 / H100_FP8[shape] - 1
    assert -0.05 < error < 0.005, error


@pytest.mark.parametrize(
    "shape", [(8192, 8192, 8192), (16384, 16384, 16384), (32768, 32768, 32768), (6144, 12288, 12288)]
)
def test_an_h200s_large_fp8_gemms_run_at_its_sustained_sweep(shape: tuple[int, int, int]) -> None:
    """The H200 is the H100's SMs and clocks: sustained, its FP8 GEMMs run no faster than the
    H100's (Azure's sweeps after 10,000 warm-ups: 1366.3 against 1377.3 TFLOP/s at 16384^3), and its
    own MAMF best (1453.4) is a burst 6.0 % over its sweep (BURST_AND_SUSTAINED). At the H100's
    FP8 rate the tile and wave model runs the H200's large shapes within 4 % under and 2 % over its
    sustained sweep; at its own burst it ran 32768^3 5.2 % over."""
    m, n, k = shape
    seconds = _gpu("h200").gemm_seconds((Shape(m, k, n),), "float8e4m3fn", 1)
    error = 2 * m * n * k / seconds / 1e12 / H200_FP8[shape] - 1
    assert -0.04 < error < 0.02, error
    assert _gpu("h200").kernels.matmul("float8e4m3fn") == _gpu("h100").kernels.matmul("float8e4m3fn")


# BF16 GEMMs on an H100 80GB SXM5 (HBM3) by shape, each a short run at
# the clock a burst reaches (no BF16 sweep of this part run sustained, as Azure's FP8 one ran after
# 10,000 warm-up iterations, was found):
#   xla   openxla/xla (tensorflow/tensorflow 372d578, third_party/xla/xla/service/gpu/model/
#         matmul_interpolator_data.h, kDefaultMatmulPTable, "sm_90", "bf16xbf16->bf16"): XLA's
#         measured table for its matmul cost model, b batched GEMMs of m x n by k
#   fast  pranjalssh/fast.cu a1bb7b2, README.md 'Benchmarks' ("Run on H100 SXM"): KERNEL 0, the
#         cuBLAS call, N = 8192 and 6144
#   zzc   zzc0721/torch-performance-test-data issue 79 ("NVIDIA H100 80GB HBM3", torch 2.7.0+cu128,
#         test.py: torch.mm, 6 warm-up and 30 timed iterations): BF16 4096, 8192, 10240 square
#   mamf  stas00/ml-engineering 744d01e, compute/accelerator/README.md, MAMF table: the best shape
#         of its search, 2048 x 2048 x 13312 (M x N x K), torch 2.7.0+cu126
# The shapes of training's GEMMs, each of XLA's with them: an output of at least 2048 x 2048 elements
# and a reduction of at least 2048.
# (M, N, K, batch, TFLOP/s, source)
H100_BF16 = [
    (4096, 4096, 4096, 1, 783.3, "xla"),
    (4096, 4096, 4096, 2, 807.7, "xla"),
    (4096, 4096, 4096, 4, 793.1, "xla"),
    (4096, 4096, 2048, 1, 738.7, "xla"),
    (4096, 4096, 2048, 2, 763.0, "xla"),
    (4096, 4096, 2048, 4, 764.6, "xla"),
    (4096, 2048, 4096, 1, 758.4, "xla"),
    (4096, 2048, 4096, 2, 783.2, "xla"),
    (4096, 2048, 4096, 4, 808.7, "xla"),
    (4096, 2048, 2048, 1, 716.1, "xla"),
    (2048, 4096, 4096, 1, 753.6, "xla"),
    (2048, 4096, 4096, 4, 801.9, "xla"),
    (2048, 4096, 2048, 1, 715.4, "xla"),
    (4096, 1024, 4096, 1, 738.5, "xla"),
    (4096, 1024, 2048, 1, 632.0, "xla"),
    (2048, 2048, 4096, 1, 738.0, "xla"),
    (2048, 2048, 2048, 1, 632.0, "xla"),
    (1024, 4096, 4096, 1, 738.5, "xla"),
    (8192, 8192, 8192, 1, 797.8, "fast"),
    (6144, 6144, 6144, 1, 741.1, "fast"),
    (4096, 4096, 4096, 1, 788.7, "zzc"),
    (8192, 8192, 8192, 1, 797.5, "zzc"),
    (10240, 10240, 10240, 1, 719.7, "zzc"),
    (2048, 2048, 13312, 1, 794.5, "mamf"),
]


def test_an_h100s_bf16_gemms_run_below_their_burst_measurements_by_a_sustained_margin() -> None:
    """The H100's BF16 GEMMs at training's shapes against every published kernel measurement found
    (H100_BF16: XLA's table, cuBLAS in fast.cu, torch.mm twice): the tile and wave model at the
    best-shape rate (80.3 %) is 15 % under to 3 % over each, 7 % under on average. Each is a
    burst; a run sustains less: the A100's cuBLASLt sweep after 10,000 warm-up iterations sits
    4.5-4.7 % under torch.mm's best over 100, and the spread of the bursts themselves is up to 8 %
    (zzc's FP16 and BF16 at 8192^3 on one GPU, 736 and 798). The model is not the optimistic side
    of these measurements: at these shapes the H100's GEMMs are not where a run's time goes
    missing."""
    model = _gpu("h100")
    errors = []
    for m, n, k, count, tflops, _ in H100_BF16:
        seconds = model.gemm_seconds((Shape(m, k, n, count),), "bfloat16", 2)
        errors.append(2 * m * n * k * count / seconds / 1e12 / tflops - 1)
    assert min(errors) > -0.16, errors
    assert max(errors) < 0.05, errors
    assert -0.10 < sum(errors) / len(errors) < -0.03, errors


def test_an_h100s_bf16_gemms_sit_under_their_bursts_by_more_than_any_published_sustained_drop() -> None:
    """No BF16 GEMM of an H100 SXM run sustained is published, nor its SM clock under sustained
    tensor load (searched: vendors' benchmark guides, power-capping studies, issue threads; Azure's
    H100 sweep is FP8 only). What is published is how far a sustained rate sits under a burst on
    three parts (BURST_AND_SUSTAINED: the A100 5.4 %, the H100 at FP8 1.5 %, the H200 at FP8 6.0 %).
    The model's BF16 GEMMs sit under the H100's bursts (H100_BF16) by more than the largest of
    those on average: were the H100's BF16 to fall as far as any measured part's, the model would
    still not be the optimistic side of it."""
    model = _gpu("h100")
    errors = []
    for m, n, k, count, tflops, _ in H100_BF16:
        seconds = model.gemm_seconds((Shape(m, k, n, count),), "bfloat16", 2)
        errors.append(2 * m * n * k * count / seconds / 1e12 / tflops - 1)
    drops = [1 - sustained / burst for burst, sustained in BURST_AND_SUSTAINED.values()]
    assert sum(errors) / len(errors) < -max(drops), (errors, drops)


def _attention(model: Gpu, batch: int, heads: int, sequence: int, head_dim: int, causal: bool) -> float:
    """FlashAttention's forward and backward on one attention core, as the LLM builder writes it:
    scores (s x d x s), softmax, context (s x s x d) over batch x heads groups."""
    kind = Heads(heads, heads, causal)
    softmax = core_layers(batch, heads, sequence, head_dim, kind)[2]
    assert model.times(softmax).step == 0  # inside the fused kernel
    return core_seconds(model, batch, heads, sequence, head_dim, kind)


# Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png: FlashAttention-2 forward +
# backward on an A100 80GB SXM4, hidden 2048 (head dim 64: 32 heads; 128: 16), batch 16k / seqlen
FA2_A100 = {(128, False, 2048): 187, (128, True, 8192): 182, (64, False, 4096): 171, (64, True, 1024): 119}


@pytest.mark.parametrize(("key", "tflops"), FA2_A100.items())
def test_attention_runs_at_flash_attention_2s_measured_rate_on_an_a100(
    key: tuple[int, bool, int], tflops: float
) -> None:
    """The forward and backward of the attention core take what FlashAttention-2's benchmark
    measured, FLOPs counted as it counts them (benchmark_flash_attention.py: 3.5 x 4 b s^2 h d,
    halved when causal): the table is the calibration, so this checks that splitting it into a
    forward and a backward and placing those on the scores and context layers loses nothing."""
    head_dim, causal, sequence = key
    batch, heads = 16384 // sequence, 2048 // head_dim
    seconds = _attention(_gpu("a100"), batch, heads, sequence, head_dim, causal)
    flops = 3.5 * 4 * batch * sequence**2 * heads * head_dim / (2 if causal else 1)
    assert flops / seconds / 1e12 == pytest.approx(tflops, rel=0.01)


def test_the_sequence_interpolation_predicts_a_measured_point_left_out() -> None:
    """Interpolating in log2 of the sequence between measured points: with FlashAttention-2's
    A100 point at 4k left out (head dim 128, noncausal: 196 TFLOP/s measured), its neighbours at 2k
    (187) and 8k (201) predict it within 2 %."""
    model = _gpu("a100")
    attention = model.kernels.attention
    assert attention is not None
    curves = {
        direction: {
            mask: {
                d: tuple(p for p in curve if not (mask == "noncausal" and d == 128 and p[0] == 4096))
                for d, curve in dims.items()
            }
            for mask, dims in masks.items()
        }
        for direction, masks in attention.curves.items()
    }
    held_out = dataclasses.replace(
        model,
        kernels=dataclasses.replace(model.kernels, attention=dataclasses.replace(attention, curves=curves)),
    )
    seconds = _attention(held_out, 4, 16, 4096, 128, False)
    flops = 3.5 * 4 * 4 * 4096**2 * 16 * 128
    assert flops / seconds / 1e12 == pytest.approx(196, rel=0.02)


def _without(
    curve: tuple[tuple[float, float], ...], mask: str, head_dim: int
) -> tuple[tuple[float, float], ...]:
    return tuple(p for p in curve if not (mask == "noncausal" and head_dim == 128 and p[0] == 4096))


def test_memory_bound_kernels_stream_at_the_measured_bandwidth() -> None:
    """A norm over (8192 x 8192) bf16 values on an H100 moves its bytes at the BabelStream Triad
    rate of the calibration (2.97 TB/s); QuACK measured its fused RMSNorm and softmax kernels on an
    H100 at about 3 TB/s above a reduction dimension of 4k (Dao-AILab/quack c8ec317,
    media/2025-07-10-membound-sol.md: "about 3 TB/s (~90% peak)"), a source the calibration did
    not use."""
    model = _gpu("h100")
    x = Activation("x", (8192, 8192), "bfloat16", 8192 * 8192 * 2)
    norm = Layer("norm", "", "RMSNormalization", Kind.NORM, inputs=(x,), outputs=(x,))
    seconds = model.times(norm).forward * 1e-9
    assert 2 * 8192 * 8192 * 2 / seconds / 1e12 == pytest.approx(3.0, rel=0.05)


def test_no_kernel_takes_less_than_a_launch() -> None:
    """gpu-benches' fit of 10,000 back-to-back small kernels on an A100 80GB: 2,555 ns each; a
    GEMM's one wave costs its fill and write-back, 4 us, whatever its size."""
    model = _gpu("a100")
    tiny = Activation("x", (8,), "bfloat16", 16)
    add = Layer("add", "", "Add", Kind.ELEMENTWISE, inputs=(tiny, tiny), outputs=(tiny,))
    assert model.times(add).forward == math.ceil(2555)
    assert model.gemm_seconds((Shape(8, 8, 8),), "bfloat16", 2) == pytest.approx(4e-6, rel=0.03)


@settings(max_examples=300, deadline=None)
@given(
    device=st.sampled_from(["a100", "h100", "mi300x"]),
    dtype=st.sampled_from([("bfloat16", 2), ("float", 4)]),
    m=st.integers(16, 2048),
    k=st.integers(16, 8192),
    n=st.integers(16, 2048),
)
def test_twice_the_rows_never_take_more_than_twice_the_time(
    device: str, dtype: tuple[str, int], m: int, k: int, n: int
) -> None:
    """cuBLAS can always run a GEMM of 2M rows as two kernels of M, one after the other, so its
    choice is never slower than that, and a GEMM of fewer rows or columns, or a shorter reduction,
    never slower than the larger one (its kernel takes the smaller problem, the tiles or slices it
    does not need left out). Under a wave the same holds of 2N columns. The tile rule alone broke
    it by 2x (512 x 1024 at a quarter of 256 x 1024's rate); from a wave up, 2,048 x 4,096 x 1,024
    to 4,096 rows took 2.18x, 100 rows of 192 x 192 longer than 200, and split-K's whole slices
    made a reduction of 3,072 faster than one of 1,536."""
    model = _gpu(device)
    name, width = dtype
    single = model.gemm_seconds((Shape(m, k, n),), name, width)
    rows, columns = Shape(2 * m, k, n), Shape(m, k, 2 * n)
    assert single <= model.gemm_seconds((rows,), name, width) <= 2 * single * (1 + 1e-9)
    assert single <= model.gemm_seconds((columns,), name, width)
    if min(math.ceil(columns.m / tm) * math.ceil(columns.n / tn) for tm, tn in TILES) < model.kernels.sms:
        assert model.gemm_seconds((columns,), name, width) <= 2 * single * (1 + 1e-9)
    assert single <= model.gemm_seconds((Shape(m, 2 * k, n),), name, width) * (1 + 1e-9)


@pytest.mark.parametrize("device", ["a100", "h100", "h100-hbm2e", "h200", "b200", "mi300x"])
def test_every_calibration_number_names_its_source(device: str) -> None:
    described = _gpu(device).describe()
    for key in (
        "sms",
        "matmul_efficiency",
        "wave_overhead_s",
        "memory_efficiency",
        "kernel_floor_s",
        "attention",
        "memory_bytes",
        "peak_flops",
        "memory_bandwidth",
    ):
        assert described["sources"].get(key), key


def test_efficiency_scales_each_class_of_kernel(run_cli: Run, tmp_path: Path) -> None:
    """--efficiency for users who measured their own runs: gemm=0.5 halves the matmul rate (a
    16384^3 GEMM, all compute, takes twice as long), memory and attention as they were; a bare
    factor scales all three; an unknown class or a factor out of (0, 2] is refused, exit 2."""
    base, half = _gpu("a100"), cost.get("gpu", cost.Settings(device="a100", efficiency=(("gemm", 0.5),)))
    assert isinstance(half, Gpu)
    big = (Shape(16384, 16384, 16384),)
    assert half.gemm_seconds(big, "bfloat16", 2) / base.gemm_seconds(big, "bfloat16", 2) == pytest.approx(
        2, rel=0.01
    )
    assert half.bandwidth == base.bandwidth
    every = cost.get("gpu", cost.Settings(device="a100", efficiency=(("all", 0.5),)))
    assert isinstance(every, Gpu)
    assert every.bandwidth == pytest.approx(base.bandwidth / 2)
    for bad in ("foo=1", "gemm=0", "gemm=3", "x"):
        done = run_cli("translate", "gpt2", "--efficiency", bad, "-o", tmp_path / "g.txt")
        assert done.exit_code == 2, (bad, done.output)


def test_eager_attention_materialises_the_scores() -> None:
    """--attention eager (no fused kernel, as Megatron-LM ran before FlashAttention): the softmax
    reads and writes the b x heads x s x s scores at the streaming bandwidth, and the products
    are batched GEMMs over the whole square, mask or not; fused, the softmax costs nothing."""
    flash = _gpu("a100")
    eager = cost.get("gpu", cost.Settings(device="a100", attention="eager"))
    assert isinstance(eager, Gpu)
    size = 4 * 16 * 2048 * 2048 * 2
    scores = Activation("s", (4, 16, 2048, 2048), "bfloat16", size)
    block = Block(0, Part.ATTENTION, Heads(16, 16, True))
    softmax = Layer("softmax", "", "Softmax", Kind.REDUCE, inputs=(scores,), outputs=(scores,), block=block)
    assert flash.times(softmax).forward == 0
    assert eager.times(softmax).forward * 1e-9 == pytest.approx(2 * size / eager.bandwidth, rel=1e-6)


def test_eager_attention_dropout_is_one_more_streaming_kernel_each_way() -> None:
    """With attention dropout (GPT-2's and BERT's configurations: 0.1) an eager softmax is followed
    by PyTorch's dropout (aten/src/ATen/native/cuda/Dropout.cu): forward reads the probabilities
    and writes them dropped with a one-byte mask; backward reads the gradient and the mask and
    writes the gradient. Fused (FlashAttention) it is inside the kernel; at p = 0 it is not run."""
    eager = cost.get("gpu", cost.Settings(device="a100", attention="eager"))
    assert isinstance(eager, Gpu)
    elements = 4 * 16 * 2048 * 2048
    scores = Activation("s", (4, 16, 2048, 2048), "bfloat16", 2 * elements)

    def softmax(p: float) -> Layer:
        block = Block(0, Part.ATTENTION, Heads(16, 16, True, p))
        return Layer("softmax", "", "Softmax", Kind.REDUCE, inputs=(scores,), outputs=(scores,), block=block)

    plain, dropped = eager.times(softmax(0.0)), eager.times(softmax(0.1))
    dropout = (2 * 2 * elements + elements) / eager.bandwidth
    assert (dropped.forward - plain.forward) * 1e-9 == pytest.approx(dropout, rel=1e-6)
    assert (dropped.input_grad - plain.input_grad) * 1e-9 == pytest.approx(dropout, rel=1e-6)
    assert _gpu("a100").times(softmax(0.1)).step == 0


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            {
                "model_type": "gpt2",
                "n_embd": 64,
                "n_layer": 1,
                "n_head": 4,
                "n_positions": 32,
                "vocab_size": 99,
            },
            0.1,
        ),
        (
            {
                "model_type": "gpt2",
                "n_embd": 64,
                "n_layer": 1,
                "n_head": 4,
                "n_positions": 32,
                "vocab_size": 99,
                "attn_pdrop": 0.0,
            },
            0.0,
        ),
    ],
)
def test_attention_dropout_is_read_from_the_configuration(config: dict[str, object], expected: float) -> None:
    """transformers' GPT2Config defaults attn_pdrop to 0.1; a configuration that sets it decides."""
    from modtrans.llm.config import from_hf

    assert from_hf(config).attention_dropout == expected
    with pytest.raises(ValueError, match="probability"):
        from_hf({**config, "attn_pdrop": 1.5})


def test_a_device_without_kernel_calibration_falls_back_to_the_roofline(run_cli: Run, tmp_path: Path) -> None:
    """The gpu model is the default where the device has its calibration; a V100 has none (no
    measurement was gathered for it): the roofline, said in a note, as before issue 25. Asked
    for by name, the gpu model refuses it (exit 2)."""
    out = tmp_path / "r.txt"
    done = run_cli("translate", "resnet50", "--device", "v100", "-o", out)
    assert done.exit_code == 0, done.output
    assert "no kernel calibration" in done.stderr
    assert json.loads(Path(f"{out}.meta.json").read_text())["compute"]["model"] == "roofline"
    refused = run_cli("translate", "resnet50", "--device", "v100", "--compute", "gpu", "-o", out)
    assert refused.exit_code == 2


# FlashAttention-2's forward on an H100 80GB SXM5, TFLOP/s at sequence 2k, 4k, 8k: the
# FlashAttention-3 paper's forward figure (Shah et al. 2024, arXiv 2407.08608; Dao-AILab/
# flash-attention assets/flash3_fp16_fwd.png), its FlashAttention-2 bars; (head dim, causal)
FA2_H100_FORWARD = {
    (128, True): (298, 319, 333),
    (128, False): (362, 366, 370),
    (64, True): (262, 284, 295),
    (64, False): (318, 321, 322),
}


@pytest.mark.parametrize(("head_dim", "causal"), sorted(FA2_H100_FORWARD))
def test_flash2_on_an_h100_is_flashattention_2s_forward_as_the_fa3_paper_measured_it(
    head_dim: int, causal: bool
) -> None:
    """`--attention flash2` on the H100 takes flash-attention's FlashAttention-2 forward + backward
    benchmark (devices.json attention_flash2, split by the backward's rate over the forward's);
    its forward is held to the FlashAttention-3 paper's FlashAttention-2 bars, a separate
    measurement a year later, within 5 % from 2k to 8k tokens (at 512 and 1k the later build is
    6-16 % faster, at 16k causal 8 % slower)."""
    model = cost.get("gpu", cost.Settings(device="h100", attention="flash2"))
    assert isinstance(model, Gpu)
    assert model.kernels.attention is not None
    newest = cost.get("gpu", cost.Settings(device="h100"))
    assert isinstance(newest, Gpu)
    assert newest.kernels.attention is not None
    for sequence, measured in zip((2048, 4096, 8192), FA2_H100_FORWARD[(head_dim, causal)], strict=True):
        forward, _ = model.kernels.attention.rates(head_dim, sequence, causal)
        assert forward / 1e12 == pytest.approx(measured, rel=0.05)
        assert newest.kernels.attention.rates(head_dim, sequence, causal)[0] > 1.3 * forward  # FA3's


def test_flash2_on_an_a100_is_its_flashattention_2() -> None:
    """The A100's own measurement is FlashAttention-2's: flash2 and flash time it alike."""
    a, b = (cost.get("gpu", cost.Settings(device="a100", attention=x)) for x in ("flash", "flash2"))
    assert isinstance(a, Gpu)
    assert isinstance(b, Gpu)
    assert a.kernels.attention == b.kernels.attention


# The same figure (flash2_a100_fwd_bwd_benchmark.png), its other bars: FlashAttention-1 (orange) and
# FlashAttention in Triton (red), forward + backward TFLOP/s on the A100, (head dim, causal, sequence)
FA1_A100 = {(128, True, 16384): 83, (128, False, 2048): 76, (64, True, 512): 58, (64, False, 8192): 110}
TRITON_A100 = {(128, True, 16384): 80, (128, True, 2048): 68, (64, False, 1024): 102, (64, True, 4096): 76}
# flash2_h100_fwd_bwd_benchmark.png, FlashAttention-1's bars on the H100 SXM5
FA1_H100 = {(128, True, 16384): 137, (128, False, 4096): 131, (64, True, 1024): 123}


@pytest.mark.parametrize(
    ("device", "kernel", "key", "tflops"),
    [("a100", "flash1", k, v) for k, v in FA1_A100.items()]
    + [("a100", "triton", k, v) for k, v in TRITON_A100.items()]
    + [("h100", "flash1", k, v) for k, v in FA1_H100.items()],
)
def test_flash1_and_triton_run_at_their_measured_rates(
    device: str, kernel: str, key: tuple[int, bool, int], tflops: float
) -> None:
    """`--attention flash1` and `--attention triton` charge the attention core what the
    FlashAttention-2 paper's figures measured of those kernels, forward and backward together."""
    head_dim, causal, sequence = key
    batch, heads = 16384 // sequence, 2048 // head_dim
    model = cost.get("gpu", cost.Settings(device=device, attention=kernel))
    assert isinstance(model, Gpu)
    seconds = _attention(model, batch, heads, sequence, head_dim, causal)
    flops = 3.5 * 4 * batch * sequence**2 * heads * head_dim / (2 if causal else 1)
    assert flops / seconds / 1e12 == pytest.approx(tflops, rel=0.01)


def test_the_triton_kernel_on_an_h100_gains_what_flashattention_1_gains() -> None:
    """No H100 measurement of FlashAttention in Triton is published: both it and FlashAttention-1
    are Ampere code, so the H100's is the A100's times FlashAttention-1's H100 / A100 gain at the
    same mask, head dimension and sequence (devices.json's sources), below FlashAttention-2's."""
    rates = {
        (device, kernel): cost.get("gpu", cost.Settings(device=device, attention=kernel))
        for device in ("a100", "h100")
        for kernel in ("flash1", "triton", "flash2")
    }
    for causal in (True, False):
        for sequence in (512, 2048, 16384):
            at = {k: m.kernels.attention.rates(128, sequence, causal)[0] for k, m in rates.items()}  # type: ignore[attr-defined]
            gain = at[("h100", "flash1")] / at[("a100", "flash1")]
            assert at[("h100", "triton")] == pytest.approx(at[("a100", "triton")] * gain, rel=0.01)
            assert at[("h100", "triton")] < 0.6 * at[("h100", "flash2")]


def test_each_framework_runs_its_own_attention_unless_told() -> None:
    """llm-foundry's benchmark tables ran FlashAttention in Triton (submit_benchmarks.py at b2a43a1:
    --attn_impl default 'triton'), torchtitan PyTorch's SDPA (FlashAttention-2), flash-attention's
    training scripts their own FlashAttention-1 (the README's speed table, 4a6eaa9f); --attention
    overrides either; Megatron takes the device's newest fused kernel."""
    from modtrans.request import Request, prepare

    def kernel(**options: object) -> str:
        return prepare(Request(model="gpt2", device="h100", **options)).options.cost.attention  # type: ignore[arg-type]

    assert kernel(framework="llm-foundry", zero=3, dp=2) == "triton"
    assert kernel(framework="torchtitan", zero=3, dp=2) == "flash2"
    assert kernel(framework="flash-attn", dp=2) == "flash1"  # flash-attn 0.2 at 4a6eaa9f
    assert kernel(framework="llm-foundry", zero=3, dp=2, attention="flash2") == "flash2"
    assert kernel(dp=2) == "flash"


@pytest.mark.parametrize("kernel", ["flash2", "cudnn", "flash1", "triton"])
def test_an_h200_runs_each_attention_kernel_as_the_h100(kernel: str) -> None:
    """The H200 is the H100's SMs and clocks with more memory: each attention kernel at the H100's
    measured rates (as its newest fused kernel already is), not the newest kernel's in its place."""
    h100, h200 = (cost.get("gpu", cost.Settings(device=d, attention=kernel)) for d in ("h100", "h200"))
    newest = cost.get("gpu", cost.Settings(device="h200"))
    rates = [m.kernels.attention.rates(128, 4096, True) for m in (h100, h200, newest)]  # type: ignore[attr-defined]
    assert rates[0] == rates[1]
    assert rates[1] != rates[2]


def test_an_unmeasured_kernel_is_said_not_silently_replaced() -> None:
    """A framework's kernel on a profile that has not measured it (llm-foundry's Triton kernel,
    torchtitan's FlashAttention-2 on a B200): one note says the newest kernel's rate stands in; on
    the A100, which has both (its newest is FlashAttention-2), nothing is said."""
    from modtrans.request import Request, prepare

    def notes(device: str, framework: str) -> list[str]:
        said: list[str] = []
        prepare(Request(model="gpt2", device=device, framework=framework, zero=3, dp=2), say=said.append)
        return [line for line in said if "stands in" in line]

    for framework, kernel in (("llm-foundry", "triton"), ("torchtitan", "flash2")):
        assert [kernel in line for line in notes("b200", framework)] == [True]
        assert notes("a100", framework) == []


# cuDNN's fused attention on an H100 80GB SXM5 (cuDNN 9, FP16) as the FlashAttention-3 paper measured
# it beside FlashAttention-3 (Shah et al. 2024, arXiv 2407.08608), head dim 128, TFLOP/s at 2k, 4k,
# 8k tokens: the forward from its figure (Dao-AILab/flash-attention assets/flash3_fp16_fwd.png, the
# red bars), the backward from its backward figure (noncausal only; as transcribed)
CUDNN_H100 = {
    ("fwd", False): (617, 609, 600),
    ("fwd", True): (484, 518, 529),
    ("bwd", False): (465, 499, 518),
}


@pytest.mark.parametrize("sequence", [2048, 4096, 8192])
def test_cudnn_on_an_h100_times_attention_as_the_fa3_paper_measured_cudnn(sequence: int) -> None:
    """`--attention cudnn` (Transformer Engine's kernel on Hopper: Megatron-Core's) times a whole
    noncausal attention core, head dim 128, batch 16k / seqlen and hidden 2048 as the paper's
    benchmark, within 2 % of cuDNN's measured forward and backward (the backward doing 2.5x the
    forward's FLOPs); its causal forward within 2 % of the measured one, FlashAttention-3's (the
    default `flash`) 7-14 % faster from 2k tokens."""
    i = (2048, 4096, 8192).index(sequence)
    batch, heads = 16384 // sequence, 16
    flops = 4 * batch * sequence * sequence * heads * 128
    fwd, bwd = CUDNN_H100[("fwd", False)][i] * 1e12, CUDNN_H100[("bwd", False)][i] * 1e12
    measured = flops / fwd + 2.5 * flops / bwd
    model = cost.get("gpu", cost.Settings(device="h100", attention="cudnn"))
    assert isinstance(model, Gpu)
    assert _attention(model, batch, heads, sequence, 128, False) == pytest.approx(measured, rel=0.02)
    causal_fwd = CUDNN_H100[("fwd", True)][i] * 1e12
    assert model.kernels.attention is not None
    assert model.kernels.attention.rates(128, sequence, True)[0] == pytest.approx(causal_fwd, rel=0.02)
    newest = _gpu("h100").kernels.attention
    assert newest is not None
    assert 1.07 < newest.rates(128, sequence, True)[0] / causal_fwd < 1.15


def test_cudnn_where_the_device_has_no_cudnn_measurement_is_its_newest_kernel() -> None:
    """The A100's profile has FlashAttention-2 only: `--attention cudnn` times it as `flash`."""
    a, b = (cost.get("gpu", cost.Settings(device="a100", attention=x)) for x in ("flash", "cudnn"))
    assert isinstance(a, Gpu)
    assert isinstance(b, Gpu)
    assert a.kernels.attention == b.kernels.attention


def test_torchtitans_h100s_are_the_hbm2e_part_its_benchmark_describes() -> None:
    """torchtitan's H100 benchmark (benchmarks/llama3_h100_202412_torchtitan.md, 'Hardware' and
    footnote 2) ran on 96 GB HBM2e H100s, 2.4 TB/s peak, at 500 W, whose peak is 'between SXM and
    NVL': h100-hbm2e streams at 2.4 TB/s (x the SXM's BabelStream fraction, 2.97 / 3.35) and runs
    its GEMMs and attention inside the NVIDIA datasheets' bracket (H100 NVL 1,671 and H100 SXM
    1,979 TF BF16 with sparsity, dense half), each slower than the H100 SXM's by the same factor."""
    sxm, titan = _gpu("h100"), _gpu("h100-hbm2e")
    assert titan.bandwidth == pytest.approx(2.4e12 * 2.97 / 3.35, rel=0.01)
    assert 1671e12 / 2 <= titan.device.peak("bfloat16") <= 1979e12 / 2
    assert titan.kernels.memory_bytes == 96 * 2**30
    big = (Shape(16384, 16384, 16384),)
    ratio = titan.device.peak("bfloat16") / sxm.device.peak("bfloat16")
    assert sxm.gemm_seconds(big, "bfloat16", 2) / titan.gemm_seconds(big, "bfloat16", 2) == pytest.approx(
        ratio, rel=0.01
    )
    ours, theirs = titan.kernels.attention, sxm.kernels.attention
    assert ours is not None
    assert theirs is not None
    for mine, its in zip(ours.rates(128, 8192, True), theirs.rates(128, 8192, True), strict=True):
        assert mine / its == pytest.approx(ratio, rel=0.01)


@pytest.mark.parametrize("device", ["a100", "h100"])
def test_flash_attention_1_runs_a_head_of_96_in_the_128_kernels_time(device: str) -> None:
    """flash-attn 1.x is compiled for head dimensions 32, 64 and 128 and runs any other on the next
    one up, padded (csrc/flash_attn/fmha_api.cpp at Dao-AILab/flash-attention 4a6eaa9f,
    run_fmha_fwd and run_fmha_bwd): 96 (GPT3-760M's 1,536 / 16) takes 128's time, its rate 96 / 128
    of 128's; FlashAttention-2 has a kernel of its own for 96 and is charged its nearest curve."""
    flash1 = cost.get("gpu", cost.Settings(device=device, attention="flash1"))
    flash2 = cost.get("gpu", cost.Settings(device=device, attention="flash2"))
    for sequence in (1024, 2048, 8192):
        at96, at128 = (flash1.kernels.attention.rates(d, sequence, True) for d in (96, 128))  # type: ignore[attr-defined]
        assert at96 == pytest.approx(tuple(r * 96 / 128 for r in at128), rel=1e-12)
        nearest = flash2.kernels.attention.rates(96, sequence, True)  # type: ignore[attr-defined]
        assert nearest == flash2.kernels.attention.rates(128, sequence, True)  # type: ignore[attr-defined]


def test_the_triton_kernel_pads_a_head_to_the_next_power_of_two() -> None:
    """FlashAttention in Triton pads a head to max(next_power_of_2(d), 16) (flash_attn_triton.py at
    Dao-AILab/flash-attention f1a73d07, BLOCK_HEADDIM): 80 and 96 take 128's time, 48 64's."""
    triton = cost.get("gpu", cost.Settings(device="a100", attention="triton"))
    rates = triton.kernels.attention.rates  # type: ignore[attr-defined]
    for d, runs in ((80, 128), (96, 128), (48, 64)):
        assert rates(d, 2048, True) == pytest.approx(tuple(r * d / runs for r in rates(runs, 2048, True)))
