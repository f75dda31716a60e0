"""The GPU kernel model: the time each layer's kernels take on a device, as measured kernels take it.

A roofline at peak (roofline.py) runs every GEMM at 312 TFLOP/s on an A100; measured cuBLAS runs a
large one at 81-87 % of that and a small one at under 40 %. This model charges each phase of a
layer what its kernels would measure, from a device's `kernels` calibration in devices.json (each
number cites the published kernel measurement it comes from):

  GEMM       cuBLAS-style tiles of 256x128, 128x256 or 128x128 (NVIDIA, Matrix Multiplication
             Background User's Guide, sec. 2.3: the most efficient cuBLAS tiles), one tile per SM at
             a time, so a GEMM runs in waves of `sms` tiles (sec. 3.2, wave quantization; a ragged
             edge tile computes whole: sec. 3.1, tile quantization). A wave costs its tile's
             multiply-adds at the device's maximum achievable matmul rate (the best-shape
             measurement, `matmul_efficiency` x peak) plus `wave_overhead_s`, the main loop's fill and
             the tile's write-back; the best of the three tiles is taken, as cuBLAS's heuristics
             would. `count` GEMMs of a batched product are one kernel of count x the tiles.
  attention  the scores and context products of an attention core with its softmax are one fused
             FlashAttention kernel (Megatron-LM and Transformer Engine run flash / fused attention):
             the softmax costs nothing of its own, and the two products together the measured
             kernel's time at the published TFLOP/s for their head dimension, sequence and mask
             (interpolated in log2 of the sequence; FLOPs counted as FlashAttention's benchmark
             counts them, 4 b s^2 h d forward, halved under a causal mask, x 2.5 for the backward:
             flash-attention benchmarks/benchmark_flash_attention.py, flops)
  memory     a layer without a GEMM moves its bytes (gemm.py's traffic) at the measured streaming
             bandwidth (`memory_efficiency` x peak: BabelStream Triad, two loads and a store as a
             residual add or a norm does)
  norms      under a framework that runs RMSNorm op by op (torchtitan without torch.compile), its
             seven kernels as measured, a fixed time a call and an element the longer of its SM
             cycles at the device's SMs x boost clock (`sm_clock_hz`) and its bytes at the
             streaming bandwidth: the op-by-op kernels are bound by the SMs (norms.py); under
             --compile, a block's as Inductor's fused kernels measured (norms.py); else one fused
             pass. Op by op, rotary embeddings and SwiGLU too, the bytes each op moves (eager.py);
             compiled, SwiGLU one fused pass (the bytes a fused kernel must move: gemm.py's
             traffic), torchtitan's complex rotary op by op still (Inductor leaves it: eager.py)
  loss       the head's logits also pay the loss, memory-bound kernels in fp32 at the streaming
             bandwidth: after its GEMM in the forward, before its input gradient (loss.py); under a
             framework whose loss is one fused kernel (flash-attn's), that kernel's passes
  floor      no kernel takes less than `kernel_floor_s`, the measured cost of launching one
             back to back (gpu-benches gpu-small-kernels)

`--attention flash2` takes FlashAttention-2's measurement where the device's newest kernel is a
later one (the H100's FlashAttention-3): the kernel PyTorch's SDPA and flash-attn 2.x run, so
torchtitan's and llm-foundry's attention on Hopper. `--attention cudnn` takes cuDNN's fused
attention where the device has its measurement (the H100's, measured beside FlashAttention-3): the
kernel Transformer Engine prefers on Hopper, so Megatron-Core's; elsewhere the newest fused kernel.
`--attention flash1` (flash-attn 1.x) and `--attention triton` (FlashAttention in Triton,
flash_attn_triton.py: llm-foundry's 2023 default) take those kernels' measurements, the FlashAttention-2
paper's A100 figure and its H100 figure (FlashAttention-1; the Triton kernel on the H100 derived
from the A100's: devices.json's sources); elsewhere the newest fused kernel.
`--attention efficient` takes the memory-efficient kernel (xformers' cutlass kernel, PyTorch SDPA's
EFFICIENT_ATTENTION backend: the same figure's xformers bars on the A100; elsewhere the newest
fused kernel), and runs an attention handed a mask or a bias (`masked`: a sliding window, T5's
position bias) dense, with the bias's bytes (`mask_bytes`). `--attention sdpa` is PyTorch SDPA's
choice per attention as transformers calls it: FlashAttention-2 where it gets no mask, the
memory-efficient kernel where it gets one (pipeline.own_attention settles it for a model with
such an attention under FSDP or DeepSpeed: M808); where the device has no measurement of the
memory-efficient kernel, the rate charged FlashAttention-2 stands in for it, not a newer kernel's
(a masked attention is not charged faster than an unmasked one).

`--attention eager` charges an attention core as an implementation without a fused kernel runs it
(Megatron-LM before FlashAttention, 2021-22; PyTorch's math path): its two products as batched
GEMMs over the whole s x s, and the softmax reading and writing the s x s scores at the streaming
bandwidth, and, where the model trains with attention dropout (Heads.dropout: GPT-2's and BERT's
configurations default to 0.1), the dropout of the s x s probabilities as one more streaming kernel
each way (`dropout_seconds`). A FlashAttention kernel applies its dropout inside; FlashAttention's
published rates are without it, and it is not charged there.

The update is an SGD step's traffic at the streaming bandwidth, as in the roofline. `--efficiency`
scales the calibration for users who calibrate on their own runs (`scaled`, below).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from modtrans import dtypes
from modtrans.cost import fp8 as te
from modtrans.cost.attention import BACKWARD_FLOPS, Attention, attention_of, mask_bytes, masked
from modtrans.cost.base import Clock, CostError, Model, PhaseTimes, Settings, register, result_elements
from modtrans.cost.eager import eager_bytes, eager_under_compile
from modtrans.cost.gemm import PhaseGemms, Shape, phase_gemms, traffic, update_bytes
from modtrans.cost.loss import loss_bytes
from modtrans.cost.norms import NormCost, norm_cost, rmsnorm_seconds
from modtrans.cost.roofline import Device, device
from modtrans.ir.document import Gemm, Heads, Kind, Layer, Part

# the newest fused kernel, FlashAttention-2, cuDNN's, FlashAttention-1, FlashAttention in Triton,
# the memory-efficient kernel, PyTorch SDPA's choice per attention (flash2 or efficient: masked), none
ATTENTION = ("flash", "flash2", "cudnn", "flash1", "triton", "efficient", "sdpa", "eager")
ALTERNATIVES = (
    "flash2",
    "cudnn",
    "flash1",
    "triton",
    "efficient",
)  # the fused kernels a device may have measured beside its newest
TILES = ((256, 128), (128, 256), (128, 128))
SMALL_TILES = ((128, 64), (64, 128), (64, 64))
SMALLEST = min(min(t) for t in TILES)
SPLIT_K_DEPTH = 1024  # the least reduction a split-K slice keeps (4 main-loop stages of 256)


@dataclass(frozen=True)
class Kernels:
    """A device's kernel calibration (devices.json `kernels`)."""

    sms: int
    matmul_efficiency: Mapping[str, float]  # by dtype; `default` for the others
    wave_overhead_s: float
    memory_efficiency: float
    kernel_floor_s: float
    attention: Attention | None
    memory_bytes: int
    sources: Mapping[str, str] = field(default_factory=dict)
    eager_rmsnorm: NormCost | None = None  # op by op (norms.py)
    compiled_rmsnorm: NormCost | None = None  # under torch.compile (norms.py)
    sm_clock_hz: float = 0.0  # the boost clock: the op-by-op RMSNorm's SM cycles run at sms x it (norms.py)
    # the other fused kernels measured on the device, by --attention's name (devices.json's
    # `attention_<name>`): flash2, FlashAttention-2 where `attention` is a later kernel; cudnn,
    # cuDNN's (Transformer Engine's on Hopper)
    attentions: Mapping[str, Attention] = field(default_factory=dict)

    def matmul(self, dtype: str) -> float:
        return self.matmul_efficiency.get(dtype) or self.matmul_efficiency["default"]


def kernels(data: Mapping[str, Any]) -> Kernels:
    """The `kernels` section of a device profile (already checked by its schema)."""
    return Kernels(
        int(data["sms"]),
        dict(data["matmul_efficiency"]),
        float(data["wave_overhead_s"]),
        float(data["memory_efficiency"]),
        float(data["kernel_floor_s"]),
        attention_of(data.get("attention")),
        int(data["memory_bytes"]),
        dict(data.get("sources", {})),
        norm_cost(data.get("eager_rmsnorm")),
        norm_cost(data.get("compiled_rmsnorm")),
        _sm_clock(data),
        {name: a for name in ALTERNATIVES if (a := attention_of(data.get(f"attention_{name}"))) is not None},
    )


def _sm_clock(data: Mapping[str, Any]) -> float:
    """The profile's `sm_clock_hz`, which an `eager_rmsnorm` charged in SM cycles needs."""
    clock = float(data.get("sm_clock_hz", 0.0))
    eager = data.get("eager_rmsnorm") or {}
    if not clock and (eager.get("forward_cycles") or eager.get("backward_cycles")):
        raise CostError("kernels.eager_rmsnorm gives SM cycles an element: kernels.sm_clock_hz is needed too")
    return clock


TILE = 128
"""FlashAttention's query and key tile (csrc/flash_attn/src/flash_fwd_launch_template.h: kBlockM x
kBlockN 128 x 128 for most head dimensions on sm80 and sm90, 128 x 64 for some)."""


def windowed(sequence: int, window: int | None, causal: bool) -> tuple[float, int] | None:
    """A sliding window's share of the s x s scores a fused kernel computes, and the keys a query
    tile's row of tiles spans: FlashAttention's local attention visits, for query tile m, the key
    tiles from (m * 128 - window_left) / 128 to the diagonal (flash_fwd_kernel.h, compute_attn_1rowblock:
    n_block_min, n_block_max; window_left = window - 1 for transformers' sliding_window), each a
    dense tile but the edges. None where the window reaches every key (the causal rule applies).
    A derivation: no measurement of the kernel's local mode is published; its rate is taken as the
    dense (noncausal) kernel's at a sequence of that span."""
    if window is None:
        return None
    rows = -(-sequence // TILE)  # query tiles
    span = 1 + -(-(window - 1) // TILE)  # key tiles a query tile's window touches
    if span >= rows:
        return None
    tiles = span * (span + 1) // 2 + (rows - span) * span if causal else rows * span
    return tiles / rows**2, span * TILE


@dataclass(frozen=True)
class Gpu:
    SHAPE_ONLY: ClassVar[bool] = True  # base.by_shape: times read no name

    device: Device
    kernels: Kernels
    clock: Clock
    name: str = Model.GPU.value
    first_input_grad: bool = False
    eager: bool = False  # --attention eager: the core as its GEMMs and a materialised softmax
    norms: NormCost | None = None  # RMSNorms as measured (op by op: norms.py); None: fused
    eager_ops: bool = False  # rotary embeddings and SwiGLU op by op (the same: eager.py)
    loss: str = "torch"  # the loss's kernels (loss.LOSSES): fp32, the logits' own dtype, one fused kernel
    # the blocks under torch.compile: their RMSNorms as Inductor's kernels measured (norms.py), their
    # SwiGLU one fused pass, torchtitan's complex rotary op by op still (eager.py); the layers
    # outside the blocks as `norms` says
    compiled: NormCost | None = None
    fp8: bool = False  # --precision fp8: the blocks' dense linears' GEMMs in FP8, TE's casts (fp8.py)
    # the kernel of an attention handed a mask or a bias (masked): --attention efficient and sdpa's
    # memory-efficient kernel; None: every attention runs `kernels.attention`
    masked: Attention | None = None
    # each GEMM's compute time once per model, the halves _compute walks included: a model's blocks
    # repeat their shapes (a copy made by dataclasses.replace starts its own)
    _computed: dict[tuple[Shape, float], float] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # `spared`'s copies by SMs held, each with its own GEMM memo: a layout's userbuffers GEMMs ask
    # for the same few, one node after another
    _spares: dict[int, Gpu] = field(default_factory=dict, init=False, repr=False, compare=False)

    def gemm_seconds(self, shapes: Sequence[Shape], dtype: str, width: int) -> float:
        """The kernels of one phase's GEMMs, one after the other."""
        return sum(self._gemm(s, dtype, width) for s in shapes)

    def _gemm(self, s: Shape, dtype: str, width: int) -> float:
        k = self.kernels
        rate = self.device.peak(dtype) * k.matmul(dtype) / k.sms  # FLOP/s of one SM
        moved = (s.m * s.k + s.k * s.n + s.m * s.n) * s.count * width
        return max(self._compute(s, rate), moved / self.bandwidth, k.kernel_floor_s)

    def _compute(self, s: Shape, rate: float) -> float:
        """The best tiling's time, never more than two kernels of half the rows one after the
        other (cuBLAS can always run those), and under one wave of the large tiles never more than
        two of half the columns either. Without the bound 512 x 1024 rows (32 large tiles, too many
        for the small ones' rule) took four times 256 x 1024's (16 tiles, small ones: 64 of them),
        and above a wave 4,096 x 1,024 outputs 2.18x 2,048 x 1,024's; the A100's measured 1024^3
        (64 large tiles) equals its halves'. Columns above a wave keep the waves' rounding of their
        tiles: the A100's measured 802816 x 192 x 768 runs the padded 256 columns' waves (halving
        the 192 would make it 26 % faster than measured)."""
        memo, key = self._computed, (s, rate)
        if key not in memo:
            best = max(self._tiling(s, rate), self.kernels.kernel_floor_s)
            under = min(_tiles(s, tm, tn) for tm, tn in TILES) < self.kernels.sms
            for half in _halves(s)[: None if under else 1]:
                best = min(best, 2 * self._compute(half, rate))
            memo[key] = best
        return memo[key]

    def _tiling(self, s: Shape, rate: float) -> float:
        k = self.kernels
        # an edge shorter than every tile (under 128) gets a kernel whose tile covers it, down to
        # the MMA instruction's 16 x 8 (mma.sync m16n8k16): a batch-1 classifier is not charged
        # 128 rows
        m = -(-s.m // 16) * 16 if s.m < SMALLEST else None
        n = -(-s.n // 8) * 8 if s.n < SMALLEST else None
        tiles = {(m or tm, n or tn) for tm, tn in TILES}
        if all(4 * _tiles(s, tm, tn) < k.sms for tm, tn in tiles):
            # an output so small that every large tile leaves three SMs in four idle: the smaller
            # tiles cuBLAS keeps for it (the guide's list goes down to 64 x 64) spread it wider. Not
            # before: on the measured sweeps (1024^3 fills 64 of 108 SMs) cuBLAS does not gain. A
            # short edge shrinks a small tile only where it is shorter than the tile: 100 rows run
            # as two 64-row tiles, as 200 rows do, not as one of 112 (which made 200 rows faster)
            tiles |= {(min(m or tm, tm), min(n or tn, tn)) for tm, tn in SMALL_TILES}
        return min(self._tiled(s, tm, tn, rate) for tm, tn in tiles)

    def _tiled(self, s: Shape, tm: int, tn: int, rate: float) -> float:
        """Waves of (tm x tn) output tiles; when they fill less than one wave, the reduction split
        into slices of SPLIT_K_DEPTH, the last one what is left, one tile each, as many as the SMs
        take; deeper slices where they would not fit (split-K: CUTLASS's GemmSplitKParallel, whose
        partitions run K / split each; cuBLAS's heuristics do the same for a small output and a
        long reduction, the weight gradient of an early convolution). So a longer reduction never
        runs faster: a slice is as deep as a shorter one's at least (whole slices alone made 3,072
        deep, three of them, faster than 1,536 unsplit)."""
        sms = self.kernels.sms
        tiles = _tiles(s, tm, tn)
        depth = max(-(-s.k // (sms // tiles)), min(s.k, SPLIT_K_DEPTH)) if tiles < sms else s.k
        waves = math.ceil(tiles * -(-s.k // depth) / sms)
        return waves * (2 * tm * tn * depth / rate + self.kernels.wave_overhead_s)

    def spared(self, sms: int) -> Gpu:
        """The model with `sms` SMs held by another kernel (Transformer Engine's userbuffers:
        strategy/llm/userbuffers.py): each SM's rate kept, the GEMMs' waves on the rest."""
        if sms not in self._spares:
            k = self.kernels
            left = max(1, k.sms - sms)
            rates = {d: e * left / k.sms for d, e in k.matmul_efficiency.items()}
            kernels = dataclasses.replace(k, sms=left, matmul_efficiency=rates)
            self._spares[sms] = dataclasses.replace(self, kernels=kernels)
        return self._spares[sms]

    @property
    def bandwidth(self) -> float:
        return self.device.bandwidth * self.kernels.memory_efficiency

    def memory_seconds(self, nbytes: int) -> float:
        return max(nbytes / self.bandwidth, self.kernels.kernel_floor_s) if nbytes else 0.0

    def attention_seconds(self, layer: Layer) -> tuple[float, float] | None:
        """The forward and backward of the layer's part of a FlashAttention kernel (None: the
        layer is not part of one, or the device has no attention measurement)."""
        heads = layer.block.heads if layer.block is not None else None
        if heads is None or layer.block is None or layer.block.part is not Part.ATTENTION:
            return None
        if self.kernels.attention is None or self.eager:
            return None
        if layer.kind is Kind.REDUCE or layer.block.core:
            # the softmax, scale, mask or sinks between the products: inside the kernel (ir/core.py)
            return 0.0, 0.0
        g = layer.gemm
        if layer.kind is not Kind.MATMUL or g is None or g.groups < 1:
            return None
        head_dim = min(g.k, g.n)  # scores: (s, d, s); context: (s, s, d)
        if self.masked is not None and masked(heads):
            return self._masked(layer, g, heads, head_dim)
        causal = bool(heads.causal)
        local = windowed(g.m, heads.window, causal)
        if local is not None:  # the key tiles its window touches, each dense
            share, keys = local
            forward, backward = self.kernels.attention.rates(head_dim, keys, False)
            work = layer.flops.forward * share
        else:
            forward, backward = self.kernels.attention.rates(head_dim, g.m, causal)
            work = layer.flops.forward / (2 if causal else 1)
        return work / forward, BACKWARD_FLOPS * work / backward

    def _masked(self, layer: Layer, g: Gemm, heads: Heads, head_dim: int) -> tuple[float, float]:
        """An attention product run by the memory-efficient kernel with a mask or bias: dense, every
        s x s tile at the noncausal rate (its attn_bias is read tile by tile, none skipped: a
        window's or a causal mask's zeros are computed), and the bias's bytes (mask_bytes), half on
        each of the attention's two products. Roofline, max(compute, bytes), not their sum: the
        kernel loads its bias tile beside the key and value tiles it already streams
        (PyTorch's mem_eff_attention kernel_forward.h, attn_bias loaded per key block), so the
        load overlaps the tile's products; it costs time only where it outruns them."""
        assert self.masked is not None
        forward, backward = self.masked.rates(head_dim, g.m, False)
        work = layer.flops.forward
        width = max(1, dtypes.width(layer.outputs[0].dtype)) if layer.outputs else 2
        read, written = mask_bytes(heads, g.groups * g.m * max(g.k, g.n), width)
        return (
            max(work / forward, read / 2 / self.bandwidth),
            max(BACKWARD_FLOPS * work / backward, (read + written) / 2 / self.bandwidth),
        )

    def dropout_seconds(self, layer: Layer, width: int) -> tuple[float, float]:
        """Eager attention's dropout of the probabilities after its softmax, one kernel each way:
        Megatron-LM applies it there (megatron/core/transformer/dot_product_attention.py,
        DotProductAttention.forward: self.attention_dropout(attention_probs)) with PyTorch's
        native_dropout (aten/src/ATen/native/cuda/Dropout.cu: a bool mask of one byte an element).
        Forward reads the probabilities, writes them dropped and the mask; backward reads the
        gradient and the mask and writes the gradient."""
        b = layer.block
        heads = b.heads if b is not None else None
        if heads is None or not heads.dropout or b is None or b.part is not Part.ATTENTION:
            return 0.0, 0.0
        if layer.kind is not Kind.REDUCE or self.attention_seconds(layer) is not None:
            return 0.0, 0.0
        moved = result_elements(layer) * (2 * width + 1)  # the probabilities twice, the mask once
        return self.memory_seconds(moved), self.memory_seconds(moved)

    def times(self, layer: Layer) -> PhaseTimes:
        dtype = layer.outputs[0].dtype if layer.outputs else "float"
        width = max(1, dtypes.width(dtype))
        update = self.memory_seconds(update_bytes(layer))
        fused = self.attention_seconds(layer)
        if fused is not None:
            return self._ticks(fused[0], fused[1], 0.0, update)
        gemms = phase_gemms(layer)
        if gemms is not None and self.fp8 and te.te_linear(layer):
            return self._fp8_linear(layer, gemms, update)
        if gemms is not None:
            runs = layer.repeats
            loss_fwd, loss_bwd = (self.memory_seconds(b) for b in loss_bytes(layer, self.loss))
            return self._ticks(
                runs * self.gemm_seconds(gemms.forward, dtype, width) + loss_fwd,
                runs * self.gemm_seconds(gemms.input_grad, dtype, width) + loss_bwd,
                runs * self.gemm_seconds(gemms.weight_grad, dtype, width),
                update,
            )
        inside = self.compiled is not None and layer.block is not None and layer.block.index is not None
        measured = self.compiled if inside else self.norms
        sm_cycles = self.kernels.sms * self.kernels.sm_clock_hz
        norm = rmsnorm_seconds(layer, measured, self.bandwidth, sm_cycles) if measured is not None else None
        if norm is not None:  # the backward covers both gradients
            return self._ticks(norm[0], norm[1], 0.0, update)
        eager = eager_bytes(layer) if self.eager_ops and (not inside or eager_under_compile(layer)) else None
        if eager is not None:
            return self._ticks(self.memory_seconds(eager[0]), self.memory_seconds(eager[1]), 0.0, update)
        fwd_b, ig_b, wg_b = traffic(layer)
        drop_fwd, drop_ig = self.dropout_seconds(layer, width)
        return self._ticks(
            self.memory_seconds(fwd_b) + drop_fwd,
            self.memory_seconds(ig_b) + drop_ig,
            self.memory_seconds(wg_b),
            update,
        )

    def _fp8_linear(self, layer: Layer, gemms: PhaseGemms, update: float) -> PhaseTimes:
        """A Transformer Engine linear under --precision fp8 (fp8.py): fprop on E4M3 operands,
        dgrad and wgrad on an E5M2 gradient, each at the device's FP8 rate (devices.json's
        matmul_efficiency by FP8 dtype, from cuBLASLt FP8 sweeps), and the output gradient's cast
        and transpose before them; the input's casts are the strategy's (strategy/llm/fp8.py)."""
        runs = layer.repeats
        cast = self.memory_seconds(te.grad_cast_bytes(layer))
        return self._ticks(
            runs * self.gemm_seconds(gemms.forward, te.FORWARD, te.WIDTH),
            runs * self.gemm_seconds(gemms.input_grad, te.BACKWARD, te.WIDTH) + cast,
            runs * self.gemm_seconds(gemms.weight_grad, te.BACKWARD, te.WIDTH),
            update,
        )

    def _ticks(self, fwd: float, ig: float, wg: float, update: float) -> PhaseTimes:
        c = self.clock
        return PhaseTimes(c.from_seconds(fwd), c.from_seconds(ig), c.from_seconds(wg), c.from_seconds(update))

    def describe(self) -> dict[str, Any]:
        k = self.kernels
        return {
            "model": self.name,
            **self.device.describe(),
            "sms": k.sms,
            "matmul_efficiency": dict(k.matmul_efficiency),
            "wave_overhead_s": k.wave_overhead_s,
            "memory_efficiency": k.memory_efficiency,
            "kernel_floor_s": k.kernel_floor_s,
            "flash_attention": k.attention is not None and not self.eager,
            "memory_bytes": k.memory_bytes,
            "sources": {**self.device.sources, **k.sources},
            "first_layer_input_grad": "0 (not needed in training)",
            **(
                {"fp8": "Transformer Engine's FP8 linears (HYBRID: E4M3 forward, E5M2 gradients)"}
                if self.fp8
                else {}
            ),
            **self.clock.describe(),
        }


def _halves(s: Shape) -> tuple[Shape, ...]:
    """`s` with half its rows, and with half its columns (an edge of the MMA's 16 x 8 stays)."""
    rows = (Shape(-(-s.m // 2), s.k, s.n, s.count),) if s.m >= 32 else ()
    return rows + ((Shape(s.m, s.k, -(-s.n // 2), s.count),) if s.n >= 16 else ())


def _tiles(s: Shape, tm: int, tn: int) -> int:
    """The (tm x tn) output tiles of `s.count` GEMMs of M x N."""
    return math.ceil(s.m / tm) * math.ceil(s.n / tn) * s.count


CLASSES = ("gemm", "attention", "memory")


def scaled(k: Kernels, factors: Sequence[tuple[str, float]]) -> Kernels:
    """The calibration with each class's rate multiplied by its factor (`--efficiency 0.9`: all
    three; `--efficiency gemm=0.8,memory=0.95`), for a user who measured their own runs: the GEMM
    rate (matmul efficiency), FlashAttention's rates, the streaming bandwidth (and the rate the
    SMs run the op-by-op RMSNorm's cycles at, the same class of kernel)."""
    by_class = dict(factors)
    unknown = sorted(set(by_class) - {*CLASSES, "all"})
    if unknown:
        raise CostError(f"--efficiency {unknown[0]}=...: the classes are {', '.join(CLASSES)}")
    for name, factor in by_class.items():
        if not 0 < factor <= 2 or not math.isfinite(factor):
            raise CostError(f"--efficiency {name}={factor:g}: a factor above 0 and at most 2")
    every = by_class.get("all", 1.0)
    gemm, attention, memory = (by_class.get(c, every) for c in CLASSES)
    return dataclasses.replace(
        k,
        matmul_efficiency={d: e * gemm for d, e in k.matmul_efficiency.items()},
        memory_efficiency=k.memory_efficiency * memory,
        sm_clock_hz=k.sm_clock_hz * memory,  # the op-by-op RMSNorm's cycles: memory-class kernels too
        attention=None
        if k.attention is None
        else dataclasses.replace(k.attention, scale=k.attention.scale * attention),
    )


@register(
    Model.GPU,
    "GPU kernels as measured: tile and wave quantization, FlashAttention, streaming bandwidth "
    "(a100, h100, h100-hbm2e, h200, b200, mi300x, FILE.json)",
)
def make(settings: Settings) -> Gpu:
    found = device(settings.device or "a100")
    if found.kernels is None:
        raise CostError(
            f"device {found.key!r} has no kernel calibration (`kernels` in its profile): "
            "--compute gpu needs one; --compute roofline runs at peak"
        )
    if settings.attention not in ATTENTION:
        raise CostError(f"--attention {settings.attention}: one of {', '.join(ATTENTION)}")
    k = kernels(found.kernels)
    chosen = k.attentions.get("flash2" if settings.attention == "sdpa" else settings.attention)
    if chosen is not None:  # else the newest fused kernel (for flash2: the newest is FlashAttention-2)
        k = dataclasses.replace(k, attention=chosen)
    mask = None
    if settings.attention in ("efficient", "sdpa") and k.attention is not None:
        mask = scaled(
            dataclasses.replace(k, attention=k.attentions.get("efficient", k.attention)), settings.efficiency
        )
    k = scaled(k, settings.efficiency)
    norms = k.eager_rmsnorm if settings.norms == "eager" else None
    compiled = k.compiled_rmsnorm if settings.compiled else None
    eager = settings.attention == "eager"
    eager_ops = settings.norms == "eager"
    return Gpu(
        found, k, settings.clock, eager=eager, norms=norms, eager_ops=eager_ops, compiled=compiled,
        loss=settings.loss, fp8=settings.fp8, masked=mask.attention if mask is not None else None,
    )  # fmt: skip
