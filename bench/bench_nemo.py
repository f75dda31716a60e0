"""Estimated iteration times against NeMo 24.07's published FP8 pre-training runs on DGX-H100
(--precision fp8: Transformer Engine's FP8 linears under Megatron-Core, modtrans/cost/fp8.py and
strategy/llm/fp8.py). A CHECK, never a calibration target: nothing here feeds back into the models
(the FP8 GEMM rates come from cuBLASLt's FP8 sweep, the casts' bytes from TE's source).

Run by hand: `python bench/bench_nemo.py [--only llama3-8b,...] [--bf16]`. Each row is one
`modtrans translate` to Chakra traces and one `modtrans estimate` (bench_today.py's estimate), each
a fresh process; `--bf16` runs the same rows at --precision bf16 beside them (what FP8 changes).

The published table: NVIDIA/NeMo docs/source/performance/performance_summary.md (read at 070a0bb,
the file the brief names at 9c5c5e9), "pre-training performance for various tasks at FP8
precision", "Container: NeMo24.07", "System: DGX-H100": Model | #-GPUs | GBS | MBS | Sequence
Length | TP | PP | CP | VP | Tokens / sec / GPU. The rows ModTrans expresses:

    gpt3-5b        "GPT3-5B       | 64  | 2048 | 4 | 2048 | 1 | 1 | 1 | 1  | 22521"
    gpt3-20b       "GPT3-20B      | 64  | 256  | 2 | 2048 | 2 | 1 | 1 | 1  | 5851"
    gpt3-175b      "GPT3-175B     | 128 | 256  | 1 | 2048 | 4 | 8 | 1 | 6  | 726"
    gpt3-175b-512  "GPT3-175B     | 512 | 2048 | 2 | 2048 | 4 | 8 | 1 | 6  | 782"
    llama2-7b      "LLAMA2-7B     | 8   | 128  | 1 | 4096 | 1 | 1 | 1 | 1  | 16847"
    llama2-13b     "LLAMA2-13B    | 16  | 128  | 1 | 4096 | 1 | 4 | 1 | 10 | 8646"
    llama2-70b     "LLAMA2-70B    | 64  | 128  | 1 | 4096 | 4 | 4 | 1 | 20 | 1707"
    llama3-8b      "LLAMA3-8B     | 8   | 128  | 1 | 8192 | 1 | 1 | 2 | 1  | 12036"
    llama3-70b     "LLAMA3-70B    | 64  | 128  | 1 | 8192 | 4 | 4 | 2 | 5  | 1533"

Not expressible: Nemotron-8B, -22B and -340B (Nemotron-4's squared-ReLU MLP and LayerNorm1p:
no family of llm/families.py builds it, and the hf extra's transformers model is not Megatron's
layout). The table's own settings beside the row are the NeMo-Framework-Launcher's training
configurations of the same release (NVIDIA/NeMo-Framework-Launcher 24.07, 8325688,
launcher_scripts/conf/training/{gpt3,llama}/*.yaml): the models' dimensions (gpt3: learned
positions, LayerNorm, GeLU 4h, biases, tied embeddings, hidden and attention dropout 0.1, GPT-2's
50,257 tokens; llama: RMSNorm, SwiGLU, no bias or dropout), sequence_parallel (true at TP > 1),
ub_tp_comm_overlap (--tp-comm-overlap: gpt3 20b, llama2 70b, llama3 70b; gpt3 175b false), the
optimizer distributed_fused_adam with overlap_grad_sync and overlap_param_sync (--zero 1
--overlap-grad-reduce --overlap-param-gather: Megatron's distributed optimizer in its place), no
activation checkpointing. The attention TE's cuDNN kernel on Hopper (bench_today.py, MCORE_H100).
The rows give the fp8 precision only ("at FP8 precision"): TE's default recipe, DelayedScaling of
Format.HYBRID (the launcher's fp8_hybrid).

Latest (2026-12-07, branch fp8 at 2cb2bb2, `--bf16`, the exact tier; compute and exposed
communication the busiest stage's; memory the busiest rank's reserved GiB, none published; each
-bf16 line the row at --precision bf16, no published figure):

    row             prec  published      ours   error  compute    comm tok/s/GPU    ours    GiB
    gpt3-5b         fp8      2.910s    2.262s  -22.3%   2.256s  0.006s    22521   28969   62.3
    gpt3-5b-bf16    bf16     2.910s    3.195s   +9.8%   3.189s  0.006s    22521   20511   57.1
    gpt3-20b        fp8      1.400s    1.105s  -21.1%   1.101s  0.004s     5851    7414   94.3
    gpt3-20b-bf16   bf16     1.400s    1.590s  +13.6%   1.586s  0.004s     5851    5152   78.4
    gpt3-175b       fp8      5.642s    5.355s   -5.1%   4.253s  0.802s      726     765   76.0
    gpt3-175b-bf16  bf16     5.642s    7.802s  +38.3%   6.473s  0.986s      726     525   69.1
    gpt3-175b-512   fp8     10.476s   10.101s   -3.6%   8.087s  1.444s      782     811   83.0
    gpt3-175b-512-bf16 bf16    10.476s   15.007s  +43.3%  12.535s  1.815s      782     546   79.3
    llama2-7b       fp8      3.890s    3.292s  -15.4%   3.290s  0.002s    16847   19909   74.2
    llama2-7b-bf16  bf16     3.890s    4.557s  +17.1%   4.555s  0.002s    16847   14381   64.0
    llama2-13b      fp8      3.790s    3.280s  -13.4%   2.908s  0.006s     8646    9989   57.9
    llama2-13b-bf16 bf16     3.790s    4.589s  +21.1%   4.204s  0.006s     8646    7141   55.1
    llama2-70b      fp8      4.799s    4.124s  -14.1%   3.941s  0.049s     1707    1986   63.2
    llama2-70b-bf16 bf16     4.799s    5.911s  +23.2%   5.720s  0.046s     1707    1386   58.2
    llama3-8b       fp8     10.890s    8.793s  -19.3%   8.658s  0.135s    12036   14907   86.9
    llama3-8b-bf16  bf16    10.890s   11.499s   +5.6%  11.367s  0.132s    12036   11399   76.1
    llama3-70b      fp8     10.688s    9.795s   -8.4%   8.837s  0.154s     1533    1673   66.9
    llama3-70b-bf16 bf16    10.688s   13.360s  +25.0%  12.400s  0.126s     1533    1226   62.2
    FP8 rows: MAE 13.6 %, worst 22.3 %

Every FP8 row comes out fast, 8-23 % but GPT3-175B's, the smaller models the most: the gap
bench_today.py finds in Megatron-Core's own BF16 H100 rows at TP 1-4 (-18 to -26 %, a time a
block and micro-batch pays whatever its FLOPs, unexplained), which FP8's faster GEMMs leave a
larger share of the iteration. Nothing was tuned to these rows. GPT3-175B (TP 4, PP 8, 6
virtual stages) lands within 4-5 % (within 2 % before the sequence-parallel all-gathers moved
FP8: its exposed communication 0.99 -> 0.80 s and 1.82 -> 1.44 s). FP8 takes 24-33 % off our
bf16 iteration (GPT3-175B 31-33 %, Llama 3 8B 24 %): a linear's BF16 GEMM takes about 1.7x its
FP8 one (8192 x 4096 x 4096: 389 and 234 us), less TE's casts, and attention, norms and the loss
stay. Memory: the FP8 weight copies add 2 B a linear weight element (13.0 GiB on Llama 3 8B's
rank), the FP8 saved inputs take off 2.2 GiB there (at CP 2); GPT3-20B's 94.3 GiB is over the
80 GiB the run had: NeMo's distributed_fused_adam (Apex's DistributedFusedAdam) is modelled as
Megatron's distributed optimizer, whose whole fp32 gradient buffer it may not keep (not checked).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from bench_today import Run, estimate  # bench/bench_today.py: the script's folder is on sys.path
from configs import megatron_gpt

# NeMo's GPT tokenizer, GPT-2's BPE (the launcher's gpt3 yamls: tokenizer gpt2, vocab 50,257)
GPT_VOCAB = 50257
# NeMo's conventions (--framework nemo: distributed_fused_adam, grad_sync_dtype bf16, TE's
# FlashAttention-2 under NVTE_FUSED_ATTN=0), its optimizer's overlap_grad_sync and
# overlap_param_sync (every yaml: true) as the overlaps of the family's buckets (the module's docstring)
NEMO: dict[str, object] = {
    "framework": "nemo", "zero": 1, "overlap_grad_reduce": True, "overlap_param_gather": True,
    "precision": "fp8",
}  # fmt: skip


def _llama(
    layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, positions: int
) -> dict[str, object]:
    """A Llama configuration as the launcher's yaml sizes it (RMSNorm, SwiGLU, rotary)."""
    return {
        "model_type": "llama", "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": vocab,
        "max_position_embeddings": positions, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }  # fmt: skip


def _layout(tp: int, pp: int, cp: int, vp: int, overlap: bool) -> dict[str, object]:
    """The row's parallelism and the launcher's: SP at TP > 1, userbuffers where it turns them on."""
    layout: dict[str, object] = {**NEMO, "tp": tp, "pp": pp}
    if cp > 1:
        layout["cp"] = cp
    if vp > 1:
        layout["vpp"] = vp
    if tp > 1:
        layout["sp"] = True
    if overlap:
        layout["tp_comm_overlap"] = True
    return layout


def _run(name: str, model: str | dict[str, object], row: tuple[int, ...], overlap: bool = False) -> Run:
    """(GPUs, GBS, MBS, sequence, TP, PP, CP, VP, tokens/s/GPU) as the table's row."""
    gpus, gbs, mbs, seq, tp, pp, cp, vp, tokens = row
    return Run(name, model, "h100", "hgx-h100", gpus, seq, mbs, gbs, _layout(tp, pp, cp, vp, overlap), tokens)


def _gpt(layers: int, hidden: int, heads: int) -> dict[str, object]:
    return megatron_gpt(layers, hidden, heads, dropout=0.1, vocab=GPT_VOCAB, positions=2048, dtype="bfloat16")


RUNS = (
    _run("gpt3-5b", _gpt(24, 4096, 32), (64, 2048, 4, 2048, 1, 1, 1, 1, 22521)),
    _run("gpt3-20b", _gpt(44, 6144, 48), (64, 256, 2, 2048, 2, 1, 1, 1, 5851), overlap=True),
    _run("gpt3-175b", _gpt(96, 12288, 96), (128, 256, 1, 2048, 4, 8, 1, 6, 726)),
    _run("gpt3-175b-512", _gpt(96, 12288, 96), (512, 2048, 2, 2048, 4, 8, 1, 6, 782)),
    _run("llama2-7b", _llama(32, 4096, 32, 32, 11008, 32000, 4096), (8, 128, 1, 4096, 1, 1, 1, 1, 16847)),
    _run("llama2-13b", _llama(40, 5120, 40, 40, 13824, 32000, 4096), (16, 128, 1, 4096, 1, 4, 1, 10, 8646)),
    _run(
        "llama2-70b", _llama(80, 8192, 64, 8, 28672, 32000, 4096), (64, 128, 1, 4096, 4, 4, 1, 20, 1707),
        overlap=True,
    ),
    _run("llama3-8b", "llama-3-8b", (8, 128, 1, 8192, 1, 1, 2, 1, 12036)),
    _run("llama3-70b", "llama-3-70b", (64, 128, 1, 8192, 4, 4, 2, 5, 1533), overlap=True),
)  # fmt: skip


def _line(run: Run, folder: Path) -> tuple[float, str]:
    """The row's error and its printed line."""
    report = estimate(run, folder)
    ours, published = float(report["iteration_s"]), run.published_s()  # type: ignore[arg-type]
    tokens = run.batch * run.seq / ours / run.gpus
    memory = float(report["reserved_bytes"]) / 2**30  # type: ignore[arg-type]
    compute, comm = float(report["compute_s"]), float(report["exposed_comm_s"])  # type: ignore[arg-type]
    line = (
        f"{run.name:<15} {run.layout['precision']:<5} {published:>8.3f}s {ours:>8.3f}s "
        f"{100 * (ours / published - 1):>+6.1f}% {compute:>7.3f}s {comm:>6.3f}s "
        f"{run.tokens_per_gpu:>8.0f} {tokens:>7.0f} {memory:>6.1f}"
    )
    return ours / published - 1, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="a subset of the rows' names, comma-separated")
    parser.add_argument("--bf16", action="store_true", help="each row at --precision bf16 beside it too")
    args = parser.parse_args()
    wanted = {n.strip() for n in args.only.split(",") if n.strip()}
    unknown = wanted - {r.name for r in RUNS}
    if unknown:
        names = ", ".join(r.name for r in RUNS)
        raise SystemExit(f"--only: {', '.join(sorted(unknown))} unknown; one of {names}")
    print(
        f"{'row':<15} {'prec':<5} {'published':>9} {'ours':>9} {'error':>7} {'compute':>8} {'comm':>7} "
        f"{'tok/s/GPU':>8} {'ours':>7} {'GiB':>6}"
    )
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in (r for r in RUNS if not wanted or r.name in wanted):
            error, line = _line(run, Path(tmp))
            errors.append(error)
            print(line, flush=True)
            if args.bf16:
                layout = {**run.layout, "precision": "bf16"}
                bf16 = dataclasses.replace(run, name=f"{run.name}-bf16", layout=layout)
                print(_line(bf16, Path(tmp))[1], flush=True)
    mae = sum(abs(e) for e in errors) / len(errors)
    print(f"FP8 rows: MAE {100 * mae:.1f} %, worst {100 * max(abs(e) for e in errors):.1f} %")


if __name__ == "__main__":
    main()
