"""Kernel by kernel, one micro-batch of a bench_today run, held against the published kernel-level
figures of each class (issue 37: why the smaller-per-GPU H100 rows run 18-26 % fast). A CHECK and an
accounting, never a calibration: nothing here feeds the models.

Run by hand: `python bench/bench_kernels.py [--only mcore-1.7b-h100,...]`. Each IR layer
of the fourth block and the layers outside the blocks, as the default compute model (cost/gpu.py)
times one micro-batch of one rank: forward, input gradient, weight gradient, and the rate it runs
at (TFLOP/s where the layer has a GEMM or an attention core, GB/s where it streams); then the run's
compute (the blocks x layers x micro-batches, the layers outside, the update) against the
published iteration, and what the time missing would have to be if it were in the blocks.

The classes and the published figures each is held to:

  GEMM       cuBLAS BF16 on an H100 SXM at training's shapes: tests/test_gpu_model.py holds the
             tile-and-wave model to 24 published measurements (XLA's sm_90 table, fast.cu's cuBLAS,
             torch.mm, the MAMF search), 15 % under to 3 % over each; at 4096 x 4096 x 2048 XLA
             measured 738.7 TFLOP/s, the 1.7B's QKV (4096 x 6144 x 2048) is charged 653
  attention  cuDNN's fused attention (Megatron-Core via Transformer Engine) and FlashAttention-2
             (PyTorch SDPA, flash-attn 2.x) at head dimension 128, causal, as the FlashAttention-3
             paper measured them on an H100 SXM (tests/test_gpu_model.py)
  loss       Megatron-Core's vocabulary-parallel cross-entropy, its passes counted from its source
             (megatron/core/tensor_parallel/cross_entropy.py at core_v0.8.0): forward the cast to
             fp32 (read 2, write 4 bytes a logit), max (read 4), the in-place subtraction (8), exp
             in place (8), the sum (4), the division in place (8): 38 bytes; backward the in-place
             product with the output gradient (8) and the gradient cast back to bf16 (6): 14 bytes;
             52 in all, where cost/loss.py charges PyTorch's measured cross_entropy (Liger-Kernel's
             H100 benchmark): 22 + 36.8 = 58.8 bytes a logit. Not where the time goes.
  host       Transformer Engine pull request 1191 (2024-09, timmoon10): Megatron-Core's
             TEColumnParallelLinear takes 140 us of CPU per forward at BF16 and TP 1 (115 after
             the pull request; Megatron's own ColumnParallelLinear 74 us). A block's four TE linears
             at that cost ask 560 us of launch time a micro-batch, under the GPU's forward of the
             1.7B's block (about 840 us): by the published figure the host does not hold the GPU up.
             Two of the four are TELayerNormColumnParallelLinear, whose CPU time, like TE's
             DotProductAttention's and the backward's, was not found published; none is invented.
             Megatron-Core syncs the host once a micro-batch, so the host's lead over a backward
             carries into the next forward: it would set the pace only at a micro-batch's whole
             published time, 4.7 ms a block for the 1.7B (docs/simulate.md, "Host time").

Latest (2026-12-06, on main a972908, the default compute model; one micro-batch of rank 0):

    mcore-1.7b-h100 (1 x 4,096 tokens, hidden 2,048, 24 blocks, 4 micro-batches, cuDNN attention)
      a block: forward 0.841 ms, input gradient 1.098, weight gradient 0.606: 2.54 ms
        ln_1, ln_2            11.3 us each phase (16.8 MB in, 16.8 out at 2.97 TB/s)
        c_attn (QKV)          157.8 / 141.8 / 145.8 us, 653 TFLOP/s forward
        attention core        132.6 us forward (518 TFLOP/s causal), 404.8 us backward
        c_proj                52.6 / 52.6 / 48.6 us
        c_fc, GeLU            210.4 / 186.4 / 194.4 us; 45.2 us each way
        c_proj (MLP)          186.4 / 210.4 / 194.4 us, 738 TFLOP/s forward
        two residual adds     16.9 us each way
      the LM head: 7.26 ms forward (its loss 3.97), 9.51 input gradient (loss 6.65), 3.06 weight
        gradient, 24 % of the compute; Megatron-Core's own passes would take 6.87 + 2.53 ms
      iteration 0.333 s (compute 0.325) of the published 0.452 s: 1.24 ms missing a block and
        micro-batch, +49 % of it: 220 passes over one 16.8 MB activation, or the block's GEMMs
        (1.78 ms) at 0.59 of the rate charged (385 for 653 TFLOP/s), 45-50 % under every
        published burst at these shapes; the host's 4 x 140 us = 0.56 ms under the GPU's 0.84
    foundry-7b-h100 (6 x 2,048 tokens, hidden 4,096, 32 blocks, 1 micro-batch, FlashAttention-2)
      a block: forward 8.07 ms, input gradient 9.34, weight gradient 6.75: 24.2 ms; GEMMs at
        707-754 TFLOP/s forward, attention 293 TFLOP/s forward
      iteration 0.885 s (compute 0.820) of the published 1.155 s: 8.43 ms missing a block, +35 %:
        249 passes over a 100.7 MB activation, or its GEMMs (20.1 ms) at 0.70 of their rate
    missing a block and micro-batch elsewhere (a rank's share of the block at TP > 1):
      mcore-7.1b-h100 (TP 2)  1.73 ms of 4.20 (+41 %)     foundry-7b-a100   8.40 ms of 67.1 (+13 %)
      mcore-16b-h100 (TP 4)   1.23 ms of 4.36 (+28 %)     mcore-70b-h100   -0.55 ms of 3.73 (-15 %)
    The missing time hardly moves with the block's work or the device: 1.2-1.7 ms at Megatron-Core's
    1.7B to 16B, 8.4 ms for llm-foundry's 7B on the H100 and on the A100 alike.

So no kernel class explains the gap at a published kernel figure: the memory-bound kernels would
need hundreds of passes more, the GEMMs a rate under every published burst by nearly half, the
loss is charged more than Megatron-Core's passes move, and the host's published cost stays under
the GPU's. Not kernel-level and not modelled, each without a published per-device figure: a
sustained clock under the H100's 700 W (every H100 BF16 point is a burst; the A100's sustained
sweep sits 4.5-4.7 % under its burst best), compute slowed beside the collectives it overlaps
(docs/simulate.md), the CPU time of Transformer Engine's attention module.

The row's attention, read from llm-foundry's history: the H100 row bench_today cites ("7b | 2048
| 8 | h100_80gb | 46.44 | ... | 10643") came in with b2a43a1 (2023-10-19), whose sweep.sh passes no
--attn_impl to submit_benchmarks.py (default 'triton': llm-foundry v0.3.0's Triton FlashAttention
on triton-pre-mlir's sm90 branch, setup.py), image mosaicml/pytorch:2.1.0_cu121. The 128-GPU row
of 5e85bd6 (2024-01-06, sweep.py: --attn_impl flash, the gpu-flash2 extra) runs the same 7B at the
same micro-batch at 10,475 tokens/s a GPU, 1.6 % under it: the attention kernel does not explain
the row's gap either.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import bench_today as today  # the runs, as bench_today defines them (bench/ is on sys.path)

from modtrans import cost, estimate
from modtrans.api import run as translate
from modtrans.cost.gemm import traffic
from modtrans.cost.loss import is_loss_head, loss_bytes
from modtrans.ir.document import Layer, ModelIR
from modtrans.request import Request, prepare

# Megatron-Core's loss, bytes a logit (the docstring's count from cross_entropy.py, core_v0.8.0)
MEGATRON_LOSS = (2 + 4 + 4 + 8 + 8 + 4 + 8, 8 + 4 + 2)
TE_LINEAR_FORWARD_CPU_S = 140e-6  # TransformerEngine pull request 1191: TEColumnParallelLinear, BF16, TP 1
TE_LINEARS_PER_BLOCK = 4  # QKV, projection, fc1, fc2 (Megatron-Core's TE layer spec)


DEFAULT = ("mcore-1.7b-h100", "mcore-7.1b-h100", "mcore-16b-h100", "foundry-7b-h100", "foundry-7b-a100")


def _rate(layer: Layer, seconds: float, moved: int) -> str:
    """TFLOP/s where the layer computes, GB/s where it streams."""
    if not seconds:
        return ""
    if layer.gemm is not None:
        causal = layer.block is not None and layer.block.heads is not None and layer.block.heads.causal
        work = layer.flops.forward / (2 if causal and layer.gemm.groups > 1 else 1)
        return f"{work / seconds / 1e12:7.1f} TFLOP/s"
    return f"{moved / seconds / 1e9:7.1f} GB/s"


def _hidden(ir: ModelIR) -> int:
    """The model's hidden size: the first norm's last dimension."""
    for layer in ir.layers:
        if layer.kind.value == "norm" and layer.outputs and layer.outputs[0].shape:
            return int(layer.outputs[0].shape[-1])
    return 0


def account(run: today.Run, folder: Path) -> None:
    """Print the run's kernels for one micro-batch of rank 0 and where its time would have to be."""
    request = Request(
        model=today._model(run, folder), npus=run.gpus, micro_batch=run.micro_batch,
        global_batch=run.batch, seq_len=run.seq, device=run.device, **run.layout,  # type: ignore[arg-type]
    )  # fmt: skip
    prepared = prepare(request)
    result = translate(prepared)
    if result.ir is None or result.plan is None:
        sys.exit(f"{run.name}: {result.diagnostics}")
    model = cost.get(prepared.options.compute, prepared.options.cost)
    found = estimate.plan(result.plan, network=estimate.network(run.network, run.gpus))
    blocks = {x.block.index for x in result.ir.layers if x.block is not None and x.block.index is not None}
    tp, pp = (int(str(run.layout.get(k, 1))) for k in ("tp", "pp"))
    micro = run.batch // (run.gpus // (tp * pp)) // run.micro_batch
    print(f"{run.name}: {len(blocks)} blocks, {micro} micro-batches of {run.micro_batch} x {run.seq}")
    print(f"  {'layer':<34} {'forward':>9} {'in-grad':>9} {'w-grad':>9}  rate (forward)")
    megatron = today.MCORE_H100.items() <= run.layout.items()
    block, gemms = [0.0, 0.0, 0.0], 0.0
    for layer in result.ir.layers:
        b = layer.block
        if b is not None and b.index not in (None, 3):
            continue
        t = model.times(layer)
        phases = [x * model.clock.tick_ns * 1e-9 for x in (t.forward, t.input_grad, t.weight_grad)]
        if b is not None and b.index == 3:
            block = [a + p for a, p in zip(block, phases, strict=True)]
            fused = getattr(model, "attention_seconds", lambda _: None)(layer)
            gemms += sum(phases) if layer.gemm is not None and fused is None else 0.0
        print(f"  {layer.name:<34} " + " ".join(f"{p * 1e6:7.1f}us" for p in phases)
              + f"  {_rate(layer, phases[0], traffic(layer)[0])}")  # fmt: skip
        if megatron and is_loss_head(layer):
            ours = loss_bytes(layer)
            logits = layer.gemm.m * layer.gemm.n * layer.gemm.groups if layer.gemm else 0
            bandwidth = model.bandwidth if hasattr(model, "bandwidth") else float("nan")
            theirs = [logits * n / bandwidth for n in MEGATRON_LOSS]
            print(f"    loss over {logits:,} logits: charged {ours[0] / bandwidth * 1e3:.2f} + "
                  f"{ours[1] / bandwidth * 1e3:.2f} ms; Megatron-Core's passes {theirs[0] * 1e3:.2f} + "
                  f"{theirs[1] * 1e3:.2f} ms")  # fmt: skip
    # the IR's layers are whole; a rank at TP T runs about 1/T of each (its GEMMs' share, SP's norms)
    block, gemms = [p / tp for p in block], gemms / tp
    per_block = sum(block)
    published = run.published_s()
    missing = (published - found.iteration_s) / (len(blocks) // pp * micro)
    share = f" (1/{tp} of the layers above: a rank's share at TP {tp})" if tp > 1 else ""
    print(f"  a block: {block[0] * 1e3:.3f} + {block[1] * 1e3:.3f} + {block[2] * 1e3:.3f} = "
          f"{per_block * 1e3:.2f} ms a micro-batch{share}")  # fmt: skip
    print(f"  iteration {found.iteration_s:.3f} s (compute {found.compute_s:.3f}) of the published "
          f"{published:.3f} s: {missing * 1e3:.2f} ms a block and micro-batch missing "
          f"({100 * missing / per_block:+.0f} % of the block)")  # fmt: skip
    hidden = int(run.megatron.get("hidden", 0) or _hidden(result.ir))
    activation = run.micro_batch * run.seq * hidden * 2 // tp
    bandwidth = getattr(model, "bandwidth", float("nan"))
    passes = missing / (activation / bandwidth)
    print(f"  missing a block and micro-batch: {missing * 1e3:.2f} ms = {passes:.0f} "
          f"passes over one {activation / 1e6:.1f} MB activation, or the block's GEMMs "
          f"({gemms * 1e3:.2f} ms) at {gemms / (gemms + missing):.2f} of their rate")  # fmt: skip
    if not megatron:
        return
    print(f"  host: {TE_LINEARS_PER_BLOCK} TE linears x {TE_LINEAR_FORWARD_CPU_S * 1e6:.0f} us = "
          f"{TE_LINEARS_PER_BLOCK * TE_LINEAR_FORWARD_CPU_S * 1e3:.2f} ms of CPU a forward, "
          f"the GPU's {block[0] * 1e3:.2f} ms (TP {tp})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT))
    args = parser.parse_args()
    by_name = {r.name: r for r in today.RUNS}
    wanted = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        sys.exit(f"--only: {', '.join(unknown)} unknown; one of {', '.join(by_name)}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in wanted:
            account(by_name[name], Path(tmp))


if __name__ == "__main__":
    main()
