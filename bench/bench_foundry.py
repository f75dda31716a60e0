"""llm-foundry's published throughput tables against our estimates (issue 37): MPT models from
125M to 70B, sequences of 512 to 65,536 tokens, on 8 to 64 A100s and H100s, FSDP as llm-foundry runs it
(`--framework llm-foundry`). A CHECK, never a calibration target: nothing here feeds the models.

Run by hand: `python bench/bench_foundry.py [--table a100|h100] [--only 7b,1b] [--gpus 8]
[--attention flash2]`: one
`modtrans translate` to Chakra traces and one `modtrans estimate` per row (bench_today.py's), each
a fresh process; about 5 minutes a table on two cores.

The rows: mosaicml/llm-foundry scripts/train/benchmarking/README.md (b2a43a1, 2023-10-19, unchanged
since in these two tables), "A100 80GB with 1600 Gbps node-node interconnect (RoCE)" and "H100 80GB
BF16", their amp_bf16 rows on up to 64 GPUs: model, sequence, GPUs, micro-batch, accumulation,
global batch, tokens/s per GPU, activation checkpointing (each block recomputed: --recompute full),
sharding (FULL_SHARD: --zero 3; SHARD_GRAD_OP: --zero 2). Rows whose micro-batches do not divide
the global batch (Composer's ragged last micro-batch) are left out. The runs: sweep.sh at b2a43a1,
image mosaicml/pytorch:2.1.0_cu121, MP mode DEFAULT, submit_benchmarks.py's default --attn_impl
'triton' (FlashAttention in Triton: --framework llm-foundry's attention), 30 batches, the last 10
timed (Composer's SpeedMonitor, window_size 10). The models: scripts/train/yamls/pretrain/mpt-*.yaml
(d_model, n_heads, n_layers; expansion_ratio 4, vocabulary 50,368, learned positions of the
sequence's length, LayerNorm, biases, no dropout), as bench_today.py's MPT_7B.

Latest (2026-12-06, main at the commit adding this script, the exact tier; error: ours against
the published iteration time, negative: we are faster): see docs/performance.md, "llm-foundry's
tables".
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench_today import Run, estimate  # bench/bench_today.py: the script's folder is on sys.path
from configs import megatron_gpt

# scripts/train/yamls/pretrain/mpt-<size>.yaml: d_model, n_heads, n_layers
DIMS = {
    "125m": (768, 12, 12), "350m": (1024, 16, 24), "760m": (1536, 12, 24), "1b": (2048, 16, 24),
    "3b": (2560, 20, 32), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 56, 48),
    "70b": (8192, 64, 80),
}  # fmt: skip

# (model, sequence, GPUs, micro-batch, accumulation, global batch, tokens/s per GPU, checkpointing,
# sharding), the tables' rows in their order
A100 = (
    ("30b", 8192, 8, 1, 21, 168, 574, True, "FULL_SHARD"),
    ("30b", 4096, 8, 1, 21, 168, 814, True, "FULL_SHARD"),
    ("30b", 2048, 8, 3, 21, 504, 916, True, "FULL_SHARD"),
    ("30b", 1024, 8, 6, 21, 1008, 946, True, "FULL_SHARD"),
    ("30b", 512, 8, 12, 21, 2016, 967, True, "FULL_SHARD"),
    ("13b", 32768, 8, 1, 3, 24, 1016, True, "FULL_SHARD"),
    ("13b", 16384, 8, 3, 3, 72, 1431, True, "FULL_SHARD"),
    ("13b", 8192, 8, 5, 3, 120, 1795, True, "FULL_SHARD"),
    ("13b", 4096, 8, 10, 3, 240, 2060, True, "FULL_SHARD"),
    ("13b", 2048, 8, 2, 3, 48, 2262, False, "FULL_SHARD"),
    ("13b", 1024, 8, 40, 3, 960, 2330, True, "FULL_SHARD"),
    ("7b", 65536, 8, 1, 2, 16, 1013, True, "FULL_SHARD"),
    ("7b", 32768, 8, 2, 2, 32, 1672, True, "FULL_SHARD"),
    ("7b", 16384, 8, 4, 2, 64, 2453, True, "FULL_SHARD"),
    ("7b", 8192, 8, 8, 2, 128, 3206, True, "FULL_SHARD"),
    ("7b", 4096, 8, 16, 2, 256, 3684, True, "FULL_SHARD"),
    ("7b", 2048, 8, 6, 2, 96, 4641, False, "FULL_SHARD"),
    ("7b", 1024, 8, 64, 2, 1024, 4357, True, "FULL_SHARD"),
    ("3b", 65536, 8, 1, 2, 16, 1767, True, "FULL_SHARD"),
    ("3b", 32768, 8, 3, 6, 144, 3029, True, "FULL_SHARD"),
    ("3b", 16384, 8, 1, 6, 48, 5529, False, "FULL_SHARD"),
    ("3b", 8192, 8, 3, 6, 144, 7695, False, "FULL_SHARD"),
    ("3b", 4096, 8, 5, 6, 240, 9457, False, "FULL_SHARD"),
    ("3b", 2048, 8, 10, 2, 160, 10811, False, "FULL_SHARD"),
    ("3b", 1024, 8, 20, 6, 960, 11580, False, "FULL_SHARD"),
    ("3b", 512, 8, 40, 6, 1920, 12127, False, "FULL_SHARD"),
    ("1b", 65536, 8, 1, 2, 16, 3044, True, "FULL_SHARD"),
    ("1b", 32768, 8, 1, 4, 32, 6275, False, "FULL_SHARD"),
    ("1b", 16384, 8, 2, 4, 64, 9956, False, "FULL_SHARD"),
    ("1b", 8192, 8, 3, 4, 96, 13814, False, "FULL_SHARD"),
    ("1b", 4096, 8, 7, 4, 224, 17807, False, "FULL_SHARD"),
    ("1b", 2048, 8, 14, 4, 448, 20513, False, "FULL_SHARD"),
    ("1b", 1024, 8, 18, 4, 576, 22112, False, "FULL_SHARD"),
    ("1b", 512, 8, 56, 4, 1792, 23148, False, "FULL_SHARD"),
    ("760m", 65536, 8, 1, 2, 16, 4143, True, "FULL_SHARD"),
    ("760m", 32768, 8, 1, 2, 16, 8802, False, "FULL_SHARD"),
    ("760m", 16384, 8, 3, 2, 48, 14274, False, "FULL_SHARD"),
    ("760m", 8192, 8, 6, 2, 96, 20933, False, "FULL_SHARD"),
    ("760m", 4096, 8, 12, 2, 192, 27351, False, "FULL_SHARD"),
    ("760m", 2048, 8, 24, 2, 384, 32434, False, "FULL_SHARD"),
    ("760m", 1024, 8, 48, 2, 768, 29765, False, "FULL_SHARD"),
    ("760m", 512, 8, 96, 2, 1536, 29446, False, "FULL_SHARD"),
    ("350m", 65536, 8, 1, 2, 16, 7524, False, "FULL_SHARD"),
    ("350m", 32768, 8, 2, 2, 32, 13652, False, "FULL_SHARD"),
    ("350m", 16384, 8, 4, 2, 64, 23559, False, "FULL_SHARD"),
    ("350m", 8192, 8, 8, 2, 128, 36569, False, "FULL_SHARD"),
    ("350m", 4096, 8, 16, 2, 256, 49555, False, "FULL_SHARD"),
    ("350m", 2048, 8, 32, 2, 512, 58782, False, "FULL_SHARD"),
    ("350m", 1024, 8, 64, 2, 1024, 64813, False, "FULL_SHARD"),
    ("350m", 512, 8, 128, 2, 2048, 69330, False, "FULL_SHARD"),
    ("125m", 65536, 8, 1, 2, 16, 20368, False, "FULL_SHARD"),
    ("125m", 32768, 8, 2, 2, 32, 36407, False, "FULL_SHARD"),
    ("125m", 16384, 8, 4, 2, 64, 60040, False, "FULL_SHARD"),
    ("125m", 8192, 8, 8, 2, 128, 90392, False, "FULL_SHARD"),
    ("125m", 4096, 8, 16, 2, 256, 118396, False, "FULL_SHARD"),
    ("125m", 2048, 8, 40, 2, 640, 142830, False, "FULL_SHARD"),
    ("125m", 2048, 8, 32, 2, 512, 141737, False, "FULL_SHARD"),
    ("125m", 1024, 8, 64, 2, 1024, 156468, False, "FULL_SHARD"),
    ("125m", 512, 8, 128, 2, 2048, 165681, False, "FULL_SHARD"),
)
H100 = (
    ("70b", 2048, 64, 8, 4, 2048, 1039, True, "FULL_SHARD"),
    ("70b", 2048, 32, 2, 16, 1024, 882, True, "FULL_SHARD"),
    ("30b", 8192, 8, 1, 21, 168, 1384, True, "FULL_SHARD"),
    ("30b", 4096, 8, 1, 21, 168, 1802, True, "FULL_SHARD"),
    ("30b", 2048, 32, 14, 3, 1344, 2308, True, "FULL_SHARD"),
    ("30b", 2048, 16, 10, 3, 480, 2263, True, "FULL_SHARD"),
    ("30b", 2048, 8, 3, 21, 504, 2002, True, "FULL_SHARD"),
    ("30b", 1024, 8, 6, 21, 1008, 2084, True, "FULL_SHARD"),
    ("13b", 32768, 8, 1, 3, 24, 1976, True, "FULL_SHARD"),
    ("13b", 16384, 8, 3, 3, 72, 2985, True, "FULL_SHARD"),
    ("13b", 4096, 8, 10, 3, 240, 4717, True, "FULL_SHARD"),
    ("13b", 2048, 64, 2, 1, 128, 4800, False, "FULL_SHARD"),
    ("13b", 2048, 32, 2, 1, 64, 4811, False, "FULL_SHARD"),
    ("13b", 2048, 16, 2, 1, 32, 4767, False, "FULL_SHARD"),
    ("13b", 2048, 8, 2, 1, 16, 4792, False, "FULL_SHARD"),
    ("13b", 1024, 8, 40, 3, 960, 5502, True, "FULL_SHARD"),
    ("7b", 65536, 8, 1, 2, 16, 1956, True, "FULL_SHARD"),
    ("7b", 32768, 8, 2, 2, 32, 3318, True, "FULL_SHARD"),
    ("7b", 8192, 8, 8, 2, 128, 6935, True, "FULL_SHARD"),
    ("7b", 4096, 8, 16, 2, 256, 8611, True, "FULL_SHARD"),
    ("7b", 2048, 8, 6, 1, 48, 10643, False, "FULL_SHARD"),
    ("7b", 1024, 8, 64, 2, 1024, 10203, True, "FULL_SHARD"),
    ("3b", 65536, 8, 1, 2, 16, 3262, True, "FULL_SHARD"),
    ("3b", 32768, 8, 3, 6, 144, 5873, True, "FULL_SHARD"),
    ("3b", 16384, 8, 1, 6, 48, 11152, False, "FULL_SHARD"),
    ("3b", 8192, 8, 3, 6, 144, 16578, False, "FULL_SHARD"),
    ("3b", 4096, 8, 5, 6, 240, 20964, False, "FULL_SHARD"),
    ("3b", 2048, 64, 6, 3, 1152, 22525, False, "FULL_SHARD"),
    ("3b", 2048, 32, 6, 3, 576, 23021, False, "FULL_SHARD"),
    ("3b", 2048, 16, 10, 3, 480, 24142, False, "FULL_SHARD"),
    ("3b", 1024, 8, 20, 6, 960, 27046, False, "FULL_SHARD"),
    ("3b", 512, 8, 40, 6, 1920, 27965, False, "FULL_SHARD"),
    ("1b", 65536, 8, 1, 2, 16, 5506, True, "FULL_SHARD"),
    ("1b", 32768, 8, 1, 4, 32, 12025, False, "FULL_SHARD"),
    ("1b", 16384, 8, 2, 4, 64, 19649, False, "FULL_SHARD"),
    ("1b", 8192, 8, 3, 4, 96, 29157, False, "FULL_SHARD"),
    ("1b", 4096, 8, 7, 4, 224, 38535, False, "FULL_SHARD"),
    ("1b", 2048, 64, 20, 1, 1280, 44402, False, "FULL_SHARD"),
    ("1b", 2048, 32, 20, 1, 640, 45130, False, "FULL_SHARD"),
    ("1b", 2048, 16, 20, 1, 320, 46037, False, "FULL_SHARD"),
    ("1b", 2048, 8, 14, 1, 112, 45455, False, "FULL_SHARD"),
    ("1b", 1024, 8, 18, 4, 576, 48910, False, "FULL_SHARD"),
    ("1b", 512, 8, 56, 4, 1792, 52275, False, "FULL_SHARD"),
    ("760m", 32768, 8, 1, 2, 16, 16291, False, "FULL_SHARD"),
    ("760m", 16384, 8, 3, 2, 48, 27815, False, "FULL_SHARD"),
    ("760m", 8192, 8, 6, 2, 96, 41825, False, "FULL_SHARD"),
    ("760m", 4096, 8, 12, 2, 192, 55459, False, "FULL_SHARD"),
    ("760m", 2048, 32, 24, 1, 768, 67971, False, "FULL_SHARD"),
    ("760m", 2048, 16, 24, 1, 384, 68551, False, "FULL_SHARD"),
    ("760m", 2048, 8, 24, 2, 384, 63147, False, "FULL_SHARD"),
    ("760m", 1024, 8, 48, 2, 768, 78581, False, "FULL_SHARD"),
    ("760m", 512, 8, 96, 2, 1536, 83749, False, "FULL_SHARD"),
)
TABLES = {"a100": (A100, "a100", "dgx-a100"), "h100": (H100, "h100", "hgx-h100")}


def runs(table: str, only: set[str], gpus: int, attention: str | None = None) -> list[Run]:
    """The table's rows as bench_today's runs (a ragged accumulation left out); `attention`: the
    kernel, where not the framework's own."""
    rows, device, network = TABLES[table]
    out = []
    for model, seq, n, mb, ga, batch, tokens, checkpointed, sharding in rows:
        if (only and model not in only) or n > gpus or mb * ga * n != batch:
            continue
        h, heads, layers = DIMS[model]
        config = {
            **megatron_gpt(layers, h, heads, dropout=0.0, vocab=50368, positions=seq, dtype="bfloat16"),
            "resid_pdrop": 0.0, "embd_pdrop": 0.0,
        }  # fmt: skip
        layout: dict[str, object] = {"framework": "llm-foundry", "zero": 3 if sharding == "FULL_SHARD" else 2}
        if checkpointed:
            layout["recompute"] = "full"
        if attention:
            layout["attention"] = attention
        name = f"{model}-{seq}-{n}x{mb}"
        out.append(Run(name, config, device, network, n, seq, mb, batch, layout, tokens_per_gpu=tokens))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=sorted(TABLES), default="a100")
    parser.add_argument("--only", default="", help="model sizes, comma-separated (7b,1b)")
    parser.add_argument("--gpus", type=int, default=64, help="rows on at most this many GPUs")
    parser.add_argument("--attention", default=None, help="the kernel (default: llm-foundry's, triton)")
    args = parser.parse_args()
    only = {m.strip() for m in args.only.split(",") if m.strip()}
    errors: list[tuple[Run, float]] = []
    print(f"{'row':<18} {'ckpt':>4} {'ga':>3} {'published':>10} {'ours':>9} {'error':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs(args.table, only, args.gpus, args.attention):
            report = estimate(run, Path(tmp))
            ours, published = float(report["iteration_s"]), run.published_s()  # type: ignore[arg-type]
            error = ours / published - 1
            errors.append((run, error))
            ga = run.batch // (run.micro_batch * run.gpus)
            ckpt = "yes" if run.layout.get("recompute") else "no"
            line = f"{run.name:<18} {ckpt:>4} {ga:>3} {published:>9.3f}s {ours:>8.3f}s {100 * error:>+6.1f}%"
            print(line, flush=True)
    if not errors:
        return
    for label, low, high in (("512-8k", 0, 8192), ("16k-64k", 16384, 1 << 20), ("all", 0, 1 << 20)):
        chosen = [e for r, e in errors if low <= r.seq <= high]
        if chosen:
            mae = sum(abs(e) for e in chosen) / len(chosen)
            within = sum(abs(e) <= 0.10 for e in chosen)
            print(f"{label}: {len(chosen)} rows, MAE {100 * mae:.1f} %, within 10 %: {within}")


if __name__ == "__main__":
    main()
