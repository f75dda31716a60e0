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

Latest (2026-12-07, branch fp8, the exact tier; compute and exposed communication the busiest
stage's; memory the busiest rank's reserved GiB, none published):

    (filled in by the run below)
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
# TE's attention on Hopper, its cuDNN kernel (bench_today.py, MCORE_H100); NeMo's distributed
# fused Adam with both overlaps as Megatron's distributed optimizer (the module's docstring)
NEMO: dict[str, object] = {
    "attention": "cudnn", "zero": 1, "overlap_grad_reduce": True, "overlap_param_gather": True,
    "precision": "fp8",
}  # fmt: skip


def _llama(layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, positions: int) -> dict[str, object]:
    """A Llama configuration as the launcher's yaml sizes it (model_type llama: RMSNorm, SwiGLU, rotary)."""
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
        raise SystemExit(f"--only: {', '.join(sorted(unknown))} unknown; one of {', '.join(r.name for r in RUNS)}")
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
                bf16 = dataclasses.replace(run, name=f"{run.name}-bf16", layout={**run.layout, "precision": "bf16"})
                print(_line(bf16, Path(tmp))[1], flush=True)
    mae = sum(abs(e) for e in errors) / len(errors)
    print(f"FP8 rows: MAE {100 * mae:.1f} %, worst {100 * max(abs(e) for e in errors):.1f} %")


if __name__ == "__main__":
    main()
