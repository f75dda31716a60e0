"""flash-attention's published training speed against our estimates (issue 37): GPT3 125M to 2.7B
on one node of 8 A100 80GB, bf16, FlashAttention, as its training scripts ran them
(`--framework flash-attn`). A CHECK, never a calibration target: nothing here feeds the models.

Run by hand: `python bench/bench_flash.py [--attention flash2]`: one `modtrans translate` to Chakra
traces and one `modtrans estimate` per row (bench_today.py's), each a fresh process.

The rows: Dao-AILab/flash-attention training/README.md, "Training speed", the table added by
4a6eaa9f (2022-11-29, "Update configs, add results"): model, batch size in tokens, throughput in
tokens/sec on "one node with 8 x A100 80GB SXM4 80GB (400W) with NVLink". The runs, that commit's
training/configs/experiment/pile/: base.yaml (sequence 2,048, global batch 256 sequences,
trainer.precision bf16, Lightning's DDP, apex's fused cross-entropy with inplace_backward),
gpt3s-flash.yaml (GPT-2's layout: learned positions, LayerNorm, GeLU 4h, biases, tied, GPT2Config's
dropout 0.1; FlashAttention, fused dense, fused dropout + add + LayerNorm, fused MLP;
pad_vocab_size_multiple 8: 50,264), gpt3m/l/xl-flash.yaml and gpt3-2.7B-flash-hdim128.yaml (the
sizes; global batch 512 from xl on), each micro-batch its yaml's for gpu_mem >= 80 (an A100 80GB's
memory.total, 81,920 MiB, reads 82): 32, 32, 16, 8, 4. gpt3l, gpt3xl and 2.7B ran
torch.distributed.optim.ZeroRedundancyOptimizer (adamw-zero.yaml), whose all-reduce is DDP's and
whose broadcast of each rank's updated fp32 parameters after the step is not modelled
(`--framework flash-attn` runs --zero 0): 4 bytes a parameter over NVLink once an iteration, some
41 ms of the 2.7B's 12.3 s at 230 GB/s.

Latest (2026-12-06, branch flashfw, the exact tier; error: ours against the published iteration
time, negative: we are faster): see docs/performance.md, "bench_flash.py".
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_today import Run, estimate  # bench/bench_today.py: the script's folder is on sys.path
from configs import megatron_gpt

GPUS, SEQUENCE, VOCAB = 8, 2048, 50257
# (name, layers, hidden, heads, micro-batch, global batch in sequences, tokens/s on the 8 GPUs)
ROWS = (
    ("gpt3-125m", 12, 768, 12, 32, 256, 1310e3),
    ("gpt3-355m", 24, 1024, 16, 32, 256, 503e3),
    ("gpt3-760m", 24, 1536, 16, 16, 256, 245e3),
    ("gpt3-1.3b", 24, 2048, 16, 8, 512, 169e3),
    ("gpt3-2.7b", 32, 2560, 20, 4, 512, 85e3),
)


def runs(attention: str | None = None) -> list[Run]:
    """The table's rows as bench_today's runs; `attention`: the kernel, where not the framework's."""
    out = []
    for name, layers, hidden, heads, micro, batch, tokens in ROWS:
        config = megatron_gpt(
            layers, hidden, heads, dropout=0.1, vocab=VOCAB, positions=SEQUENCE, dtype="bfloat16"
        )
        layout: dict[str, object] = {"framework": "flash-attn", "make_vocab_size_divisible_by": 8}
        if attention:
            layout["attention"] = attention
        out.append(Run(name, config, "a100", "dgx-a100", GPUS, SEQUENCE, micro, batch, layout, tokens / GPUS))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attention", default=None, help="the kernel (default: flash-attn's, flash1)")
    args = parser.parse_args()
    errors = []
    print(f"{'row':<10} {'mb':>3} {'ga':>3} {'published':>10} {'ours':>9} {'error':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs(args.attention):
            report = estimate(run, Path(tmp))
            ours, published = float(report["iteration_s"]), run.published_s()  # type: ignore[arg-type]
            errors.append(ours / published - 1)
            ga = run.batch // (run.micro_batch * run.gpus)
            row = f"{run.name:<10} {run.micro_batch:>3} {ga:>3} {published:>9.3f}s {ours:>8.3f}s"
            print(f"{row} {100 * errors[-1]:>+6.1f}%", flush=True)
    mae = sum(abs(e) for e in errors) / len(errors)
    worst, within = max(map(abs, errors)), sum(abs(e) <= 0.1 for e in errors)
    print(f"MAE {100 * mae:.1f} %, worst {100 * worst:.1f} %, within 10 %: {within}")


if __name__ == "__main__":
    main()
