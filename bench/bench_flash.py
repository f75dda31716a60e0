"""flash-attention's published training speed against our estimates (issue 37): GPT3 125M to 2.7B
and GPT2 125M to 1.6B on one node of 8 A100 80GB, FlashAttention, as its training scripts ran them
(`--framework flash-attn`). A CHECK, never a calibration target: nothing here feeds the models.

Run by hand: `python bench/bench_flash.py [--attention flash2] [--table gpt3|gpt2|fa2|both|all]
[--no-zero]`:
one `modtrans translate` to Chakra traces and one `modtrans estimate` per row (bench_today.py's),
each a fresh process; --no-zero runs the ZeroRedundancyOptimizer rows at --zero 0, as before it
was modelled.

GPT3 (ROWS): Dao-AILab/flash-attention training/README.md, "Training speed", the table added by
4a6eaa9f (2022-11-29, "Update configs, add results"): model, batch size in tokens, throughput in
tokens/sec on "one node with 8 x A100 80GB SXM4 80GB (400W) with NVLink". The runs, that commit's
training/configs/experiment/pile/: base.yaml (sequence 2,048, global batch 256 sequences,
trainer.precision bf16, Lightning's DDP, apex's fused cross-entropy with inplace_backward),
gpt3s-flash.yaml (GPT-2's layout: learned positions, LayerNorm, GeLU 4h, biases, tied, GPT2Config's
dropout 0.1; FlashAttention, fused dense, fused dropout + add + LayerNorm, fused MLP;
pad_vocab_size_multiple 8: 50,264), gpt3m/l/xl-flash.yaml and gpt3-2.7B-flash-hdim128.yaml (the
sizes; global batch 512 from xl on), each micro-batch its yaml's for gpu_mem >= 80 (an A100 80GB's
memory.total, 81,920 MiB, reads 82): 32, 32, 16, 8, 4. gpt3l, gpt3xl and 2.7B run
torch.distributed.optim.ZeroRedundancyOptimizer (adamw-zero.yaml, DDPStrategyZero1): --zero 1
(strategy/llm/buckets.py: DDP's all-reduce, each rank's step over its partition, the fp32
parameters broadcast after it).

GPT2 (GPT2_ROWS): the same commit's assets/gpt2_training_efficiency.jpg (README "GPT2 (sequence
length 1024)"), its FlashAttention bars in TFLOP/s per A100: 147 (the label under the legend, read
from the cropped and enlarged image and from the bar's height: 147.1 on the axis's scale), 159,
170, 164 for GPT2-125M/355M/760M/1.6B; turned into time by the README's FLOP count (readme_flops).
The runs, training/configs/experiment/owt/: base.yaml (OpenWebText, sequence 1,024, global batch
512, trainer.precision 16: fp16 autocast over fp32 parameters, Lightning's DDP, apex's fused
cross-entropy), gpt2s-flash.yaml (the fused kernels and padding of gpt3s-flash), gpt2m/l/xl-flash
(configs/model/gpt2model/: 12 x 768 / 12 heads, 24 x 1024 / 16, 36 x 1280 / 20, 48 x 1600 / 25),
micro-batches for gpu_mem >= 80: 64 (gpt2s's 64 from 40 GB), 64, 32, 16; gpt2l and gpt2xl run
adamw-zero.yaml (--zero 1), gpt2s and gpt2m apex's FusedAdam. Beside the figure the yamls' own
notes (TD, 2022-08): owt/base.yaml "time per global step (i.e. batch size 512) on 8 A100s goes from
376ms to 368ms" (GPT2-small, FusedAdam; the bar: 0.355 s) and "For GPT2-medium ... from 997ms to
972ms" (the bar: 0.967 s); gpt2l-flash.yaml "around 2056ms" (the bar: 1.967 s); which A100 is not said.

FlashAttention-2's Table 1 (FA2_ROWS, `--table fa2`): Dao 2023, "FlashAttention-2: Faster
Attention with Better Parallelism and Work Partitioning", arXiv:2307.08691, section 4.2, "Training
speed (TFLOPs/s/GPU) of GPT-style models on 8xA100 GPUs": GPT3-1.3B and 2.7B at 2k and 8k context,
its "FlashAttention" column (189, 170, 189, 175) and "FlashAttention-2" column (196, 220, 205, 225),
FLOPs by its formula (paper_flops); the "Without FlashAttention" column's baseline is not described
and is left out. The runs: gpt3xl-flash.yaml and gpt3-2.7B-flash-hdim128.yaml at 2k (the README's
rows: the FlashAttention column's 189 is its figure's bar for both), gpt3xl-flash-8k.yaml (sequence
8,192, micro-batch 4 at 80 GB, global batch 128) and its 2.7B at 8k, printed under the README's
head dimension 128 and under gpt3-2.7B-flash-8k.yaml's 32 heads of 80 (the paper names neither).

The formula checked on the GPT3 figure (assets/gpt3_training_efficiency.jpg, FlashAttention bars
149, 167, 163, 189, 189): readme_flops x the README table's tokens/s / 8 gives 149.0, 166.5, 163.2,
188.4 and 188.0 TFLOP/s (the last two's tokens/s rounded to 169k and 85k), V 50,257 or 50,264 alike.

Left out: the figures' Megatron-LM bars (GPT2 81, 99, 109, 114; GPT3 70, 82, 115, 142, 149,
Megatron-LM of late 2022 on the same node). Neither the repository (training/ names Megatron-LM
only for its FLOP formula and a detokenizer) nor the FlashAttention paper (arXiv 2205.14135: its
GPT-2 runs are an earlier measurement, reported in days) gives what those runs set: micro-batch,
activation recomputation, fused kernels, DP 8 or tensor parallelism, fp16 or bf16.

Latest (2026-12-07, branch flashzero d820dc5, the exact tier; error: ours against the published
iteration time, negative: we are faster; in brackets the ZeroRedundancyOptimizer rows at --zero 0,
as before it was modelled; more in docs/performance.md, "bench_flash.py"):

    row         mb  ga zero  published      ours   error
    gpt3-125m   32   1    0     0.400s    0.398s   -0.6%
    gpt3-355m   32   1    0     1.042s    1.035s   -0.7%
    gpt3-760m   16   2    1     2.140s    2.123s   -0.8%   (-0.4%)
    gpt3-1.3b    8   8    1     6.205s    6.081s   -2.0%   (-1.8%)
    gpt3-2.7b    4  16    1    12.336s   11.484s   -6.9%   (-6.7%)
    MAE 2.2 %, worst 6.9 % (2.0 %, 6.7 %)
    gpt2-125m   64   1    0     0.355s    0.347s   -2.3%
    gpt2-355m   64   1    0     0.967s    0.900s   -6.9%
    gpt2-760m   32   2    1     1.967s    1.802s   -8.4%   (-8.0%)
    gpt2-1.6b   16   4    1     4.057s    3.598s  -11.3%  (-10.9%)
    MAE 7.2 %, worst 11.3 % (7.0 %, 10.9 %)

FlashAttention-2's Table 1 (2026-12-07, main 70f4b3a; docs/performance.md reads it):

    row                       mb  ga zero  published      ours   error
    gpt3-1.3b-2k-flash1        8   8    1     6.292s    6.081s   -3.4%
    gpt3-1.3b-2k-flash2        8   8    1     6.068s    5.339s  -12.0%
    gpt3-1.3b-8k-flash1        4   4    1     9.790s    9.314s   -4.9%
    gpt3-1.3b-8k-flash2        4   4    1     7.565s    6.726s  -11.1%
    gpt3-2.7b-2k-flash1        4  16    1    12.403s   11.484s   -7.4%
    gpt3-2.7b-2k-flash2        4  16    1    11.435s   10.246s  -10.4%
    gpt3-2.7b-8k-flash1        4   4    1    17.919s   16.867s   -5.9%
    gpt3-2.7b-8k-flash2        4   4    1    13.937s   12.554s   -9.9%
    gpt3-2.7b-8k-hd80-flash1   4   4    1    17.919s   21.485s  +19.9%
    gpt3-2.7b-8k-hd80-flash2   4   4    1    13.937s   12.902s   -7.4%
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_today import Run, estimate  # bench/bench_today.py: the script's folder is on sys.path
from configs import megatron_gpt

GPUS, SEQUENCE, VOCAB = 8, 2048, 50257
# (name, layers, hidden, heads, micro-batch, global batch in sequences, tokens/s on the 8 GPUs,
# ZeRO stage: 1 where the yaml runs adamw-zero.yaml's ZeroRedundancyOptimizer)
ROWS = (
    ("gpt3-125m", 12, 768, 12, 32, 256, 1310e3, 0),
    ("gpt3-355m", 24, 1024, 16, 32, 256, 503e3, 0),
    ("gpt3-760m", 24, 1536, 16, 16, 256, 245e3, 1),
    ("gpt3-1.3b", 24, 2048, 16, 8, 512, 169e3, 1),
    ("gpt3-2.7b", 32, 2560, 20, 4, 512, 85e3, 1),
)
# FlashAttention-2's Table 1 (Dao 2023, arXiv:2307.08691, section 4.2): (name, layers, hidden, heads,
# micro-batch, global batch in sequences, sequence, {kernel: TFLOP/s per A100}); each row the
# training/configs/experiment/pile/ yaml named in the module's docstring
FA2_ROWS = (
    ("gpt3-1.3b-2k", 24, 2048, 16, 8, 512, 2048, {"flash1": 189, "flash2": 196}),
    ("gpt3-1.3b-8k", 24, 2048, 16, 4, 128, 8192, {"flash1": 170, "flash2": 220}),
    ("gpt3-2.7b-2k", 32, 2560, 20, 4, 512, 2048, {"flash1": 189, "flash2": 205}),
    ("gpt3-2.7b-8k", 32, 2560, 20, 4, 128, 8192, {"flash1": 175, "flash2": 225}),
    ("gpt3-2.7b-8k-hd80", 32, 2560, 32, 4, 128, 8192, {"flash1": 175, "flash2": 225}),
)
GPT2_SEQUENCE, GPT2_BATCH = 1024, 512  # owt/base.yaml: datamodule.max_length, train.global_batch_size
# (name, layers, hidden, heads, micro-batch, TFLOP/s per A100 (FlashAttention's bar), ZeRO stage)
GPT2_ROWS = (
    ("gpt2-125m", 12, 768, 12, 64, 147, 0),
    ("gpt2-355m", 24, 1024, 16, 64, 159, 0),
    ("gpt2-760m", 36, 1280, 20, 32, 170, 1),
    ("gpt2-1.6b", 48, 1600, 25, 16, 164, 1),
)


def readme_flops(layers: int, hidden: int, sequence: int, vocab: int = VOCAB) -> float:
    """FLOPs a token, as training/README.md counts them: the Megatron-LM paper's (Narayanan et
    al. 2021, Section 5.1: 96 B s l h^2 (1 + s / 6h + V / 16lh) an iteration, with recomputation's
    second forward) x 3/4, "the model FLOPs"."""
    return 72 * layers * hidden**2 * (1 + sequence / (6 * hidden) + vocab / (16 * layers * hidden))


def paper_flops(layers: int, hidden: int, sequence: int, vocab: int = VOCAB) -> float:
    """FLOPs a token, as FlashAttention-2's section 4.2 counts them: "6 x seqlen x number of
    params + 12 x number of layers x hidden dim x seqlen^2" a sequence, the parameters counted as
    the formula's source does (Narayanan et al. 2021, section 5.1: 12 l h^2 + V h)."""
    return 6 * (12 * layers * hidden**2 + vocab * hidden) + 12 * layers * hidden * sequence


def _layout(zero: int, attention: str | None, no_zero: bool) -> dict[str, object]:
    layout: dict[str, object] = {"framework": "flash-attn", "make_vocab_size_divisible_by": 8}
    if zero and not no_zero:
        layout["zero"] = zero
    if attention:
        layout["attention"] = attention
    return layout


def runs(attention: str | None = None, no_zero: bool = False) -> list[Run]:
    """The speed table's rows as bench_today's runs; `attention`: the kernel, where not the
    framework's; `no_zero`: the ZeroRedundancyOptimizer rows at --zero 0 (as before it was modelled)."""
    out = []
    for name, layers, hidden, heads, micro, batch, tokens, zero in ROWS:
        config = megatron_gpt(
            layers, hidden, heads, dropout=0.1, vocab=VOCAB, positions=SEQUENCE, dtype="bfloat16"
        )
        layout = _layout(zero, attention, no_zero)
        out.append(Run(name, config, "a100", "dgx-a100", GPUS, SEQUENCE, micro, batch, layout, tokens / GPUS))
    return out


def gpt2_runs(attention: str | None = None, no_zero: bool = False) -> list[Run]:
    """The GPT-2 figure's FlashAttention bars as runs: fp16 (owt/base.yaml, trainer.precision 16),
    sequence 1,024, global batch 512; each bar's TFLOP/s as tokens/s by readme_flops."""
    out = []
    for name, layers, hidden, heads, micro, tflops, zero in GPT2_ROWS:
        config = megatron_gpt(
            layers, hidden, heads, dropout=0.1, vocab=VOCAB, positions=GPT2_SEQUENCE, dtype="float16"
        )
        tokens = tflops * 1e12 / readme_flops(layers, hidden, GPT2_SEQUENCE)
        layout = _layout(zero, attention, no_zero)
        out.append(
            Run(name, config, "a100", "dgx-a100", GPUS, GPT2_SEQUENCE, micro, GPT2_BATCH, layout, tokens)
        )
    return out


def fa2_runs(no_zero: bool = False) -> list[Run]:
    """FlashAttention-2's Table 1 as runs, its FlashAttention and FlashAttention-2 columns each a
    run (`--attention flash1` and `flash2`); every row's optimizer ZeroRedundancyOptimizer
    (gpt3xl-flash.yaml's adamw-zero, which the others inherit)."""
    out = []
    for name, layers, hidden, heads, micro, batch, sequence, columns in FA2_ROWS:
        config = megatron_gpt(
            layers, hidden, heads, dropout=0.1, vocab=VOCAB, positions=sequence, dtype="bfloat16"
        )
        for kernel, tflops in columns.items():
            tokens = tflops * 1e12 / paper_flops(layers, hidden, sequence)
            layout = _layout(1, kernel, no_zero)
            out.append(
                Run(
                    f"{name}-{kernel}",
                    config,
                    "a100",
                    "dgx-a100",
                    GPUS,
                    sequence,
                    micro,
                    batch,
                    layout,
                    tokens,
                )
            )
    return out


def _table(title: str, rows: list[Run], folder: Path) -> None:
    """One table: each row's published and estimated iteration time, and the summary line."""
    errors = []
    print(title)
    width = max(10, *(len(run.name) for run in rows))
    print(f"{'row':<{width}} {'mb':>3} {'ga':>3} {'zero':>4} {'published':>10} {'ours':>9} {'error':>7}")
    for run in rows:
        report = estimate(run, folder)
        ours, published = float(report["iteration_s"]), run.published_s()  # type: ignore[arg-type]
        errors.append(ours / published - 1)
        ga = run.batch // (run.micro_batch * run.gpus)
        zero = run.layout.get("zero", 0)
        row = f"{run.name:<{width}} {run.micro_batch:>3} {ga:>3} {zero:>4} {published:>9.3f}s {ours:>8.3f}s"
        print(f"{row} {100 * errors[-1]:>+6.1f}%", flush=True)
    mae = sum(abs(e) for e in errors) / len(errors)
    worst, within = max(map(abs, errors)), sum(abs(e) <= 0.1 for e in errors)
    print(f"MAE {100 * mae:.1f} %, worst {100 * worst:.1f} %, within 10 %: {within}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attention", default=None, help="the kernel (default: flash-attn's, flash1)")
    parser.add_argument("--table", choices=("gpt3", "gpt2", "fa2", "both", "all"), default="both")
    parser.add_argument(
        "--no-zero", action="store_true", help="the ZeroRedundancyOptimizer rows at --zero 0 (before)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.table in ("gpt3", "both", "all"):
            _table("GPT3, sequence 2,048 (the README's table)", runs(args.attention, args.no_zero), Path(tmp))
        if args.table in ("gpt2", "both", "all"):
            rows = gpt2_runs(args.attention, args.no_zero)
            _table("GPT2, sequence 1,024 (the figure's FlashAttention bars)", rows, Path(tmp))
        if args.table in ("fa2", "all"):
            _table("FlashAttention-2's Table 1 (its two kernels' columns)", fa2_runs(args.no_zero), Path(tmp))


if __name__ == "__main__":
    main()
