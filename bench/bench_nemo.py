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
layout).

Each row as NeMo ran it: `--framework nemo` (strategy/frameworks.py: NeMo 24.07's conventions as
the launcher's commands set them) with the row's own settings. The commands NeMo published for
these runs are NVIDIA/NeMo-Framework-Launcher 24.07 (8325688), examples/training/{gpt,llama}/h100/
*_fp8*.sh, each over a training yaml of launcher_scripts/conf/training/ it names; every one sets
`training.model.fp8=true` and `+training.model.optim.grad_sync_dtype=bf16` (the llama ones
fp8_hybrid=True too), none sets fp8_params (only the MLPerf yamls do) or an env_var of its own; the
launcher's config.yaml env_vars give NVTE_FUSED_ATTN=0 (TE's FlashAttention-2: the framework's
attention). Row by row (GPUs = num_nodes x 8; what the command does not override, its yaml's):

    gpt3-5b        gpt/h100/5b_fp8_8node.sh, gpt3/5b.yaml: 8 nodes, GBS 2048, MBS 4, TP 1, PP 1;
                   SP false, ub_tp_comm_overlap false, bucket_cap_mb 400. Matches the row
    gpt3-20b       gpt/h100/20b_fp8_8node.sh, gpt3/20b.yaml: 8 nodes, MBS 2, TP 2, PP 1, but GBS
                   2048 where the row says 256 (20b_fp8_1node.sh has GBS 256 on 8 GPUs at MBS 4,
                   TP 4); SP true, ub_tp_comm_overlap true (tp_overlap ub_cfg_h100_h6144_tp2_mbs2_
                   seqlen2048), bucket_cap_mb 220. Run at the row's 256
    gpt3-175b      gpt/h100/175b_fp8_16node.sh, gpt3/175b.yaml: 16 nodes, GBS 256, MBS 1, TP 4,
                   PP 8, but virtual_pipeline_model_parallel_size 12 where the row says 6; SP true,
                   ub_tp_comm_overlap false, overlap_p2p_comm true, batch_p2p_comm false. Run at
                   the row's 6
    gpt3-175b-512  no command at 64 nodes; gpt3/175b.yaml (GBS 2048, MBS 1, VP 12) where the row
                   says MBS 2, VP 6. Run as the row says
    llama2-7b      llama/h100/llama2_7b_fp8.sh, llama/llama2_7b.yaml: 1 node, GBS 128, MBS 1, TP 1,
                   PP 1; SP false, no ub, activations_checkpoint_num_layers 0 (none). Matches
    llama2-13b     llama/h100/llama2_13b_fp8.sh, llama/llama2_13b.yaml: TP 1, PP 4, VP 10, GBS 128,
                   MBS 1, but num_nodes 1 (8 GPUs, DP 2) where the row says 16 GPUs. Run at 16
    llama2-70b     llama/h100/llama2_70b_fp8.sh, llama/llama2_70b.yaml: 8 nodes, GBS 128, MBS 1,
                   TP 4, PP 4, VP 20; SP true, ub_tp_comm_overlap true. Matches
    llama3-8b      llama/h100/llama3_8b_fp8.sh, llama/llama3_8b.yaml: 1 node, GBS 128, MBS 1, TP 1,
                   PP 1, CP 2; SP false, no ub. Matches
    llama3-70b     llama/h100/llama3_70b_fp8.sh, llama/llama3_70b.yaml: 8 nodes, GBS 128, MBS 1,
                   TP 4, PP 4, CP 2, but VP 10 where the row says 5; SP true, ub_tp_comm_overlap
                   true (ub_cfg_h100_fp8_h8192_tp4_mbs1_seqlen8192). Run at the row's 5

The models' dimensions from the yamls (gpt3: learned positions, LayerNorm, GeLU 4h, biases, tied
embeddings, hidden and attention dropout 0.1, GPT-2's 50,257 tokens; llama: RMSNorm, SwiGLU, no
bias or dropout); optim distributed_fused_adam with overlap_grad_sync and overlap_param_sync true
(--zero 1 --overlap-grad-reduce --overlap-param-gather under --framework nemo), contiguous grad and
param buffers; no activation checkpointing. The rows give the fp8 precision only ("at FP8
precision"): TE's default recipe, DelayedScaling of Format.HYBRID (the launcher's fp8_hybrid).

Latest (2026-12-07, branch nemo at 5a64011, `--bf16`, the exact tier; compute and exposed
communication the busiest stage's; memory the busiest rank's reserved GiB, none published; each
-bf16 line the row at --precision bf16, no published figure):

    row             prec  published      ours   error  compute    comm tok/s/GPU    ours    GiB
    gpt3-5b         fp8      2.910s    2.378s  -18.3%   2.370s  0.009s    22521   27554   53.3
    gpt3-5b-bf16    bf16     2.910s    3.311s  +13.8%   3.302s  0.009s    22521   19791   48.1
    gpt3-20b        fp8      1.400s    1.151s  -17.8%   1.144s  0.007s     5851    7116   75.8
    gpt3-20b-bf16   bf16     1.400s    1.636s  +16.9%   1.629s  0.007s     5851    5006   59.8
    gpt3-175b       fp8      5.642s    5.452s   -3.4%   4.359s  0.781s      726     751   65.9
    gpt3-175b-bf16  bf16     5.642s    7.891s  +39.9%   6.579s  0.966s      726     519   59.0
    gpt3-175b-512   fp8     10.476s   10.292s   -1.8%   8.300s  1.419s      782     796   72.9
    gpt3-175b-512-bf16 bf16    10.476s   15.193s  +45.0%  12.747s  1.783s      782     539   69.2
    llama2-7b       fp8      3.890s    3.581s   -7.9%   3.577s  0.004s    16847   18299   61.9
    llama2-7b-bf16  bf16     3.890s    4.847s  +24.6%   4.843s  0.004s    16847   13521   51.7
    llama2-13b      fp8      3.790s    3.469s   -8.5%   3.133s  0.008s     8646    9447   52.1
    llama2-13b-bf16 bf16     3.790s    4.777s  +26.0%   4.429s  0.008s     8646    6860   49.3
    llama2-70b      fp8      4.799s    4.339s   -9.6%   4.153s  0.050s     1707    1888   55.3
    llama2-70b-bf16 bf16     4.799s    6.126s  +27.6%   5.932s  0.048s     1707    1337   50.3
    llama3-8b       fp8     10.890s    9.950s   -8.6%   9.807s  0.143s    12036   13173   73.0
    llama3-8b-bf16  bf16    10.890s   12.658s  +16.2%  12.516s  0.141s    12036   10355   62.3
    llama3-70b      fp8     10.688s   10.644s   -0.4%   9.685s  0.143s     1533    1539   59.1
    llama3-70b-bf16 bf16    10.688s   14.214s  +33.0%  13.248s  0.120s     1533    1153   54.4
    FP8 rows: MAE 8.5 %, worst 18.3 %

Before (main at 78f448a, the same rows as Megatron-LM's conventions: --framework megatron, the
distributed optimizer with fp32 gradients, TE's cuDNN attention): MAE 13.6 %, worst 22.3 %; memory
62.3, 94.3, 76.0, 83.0, 74.2, 57.9, 63.2, 86.9, 66.9 GiB in the order above. Every row now fits
the 80 GiB its H100 had (GPT3-20B 94.3 -> 75.8 GiB, Llama 3 8B 86.9 -> 73.0): Apex's grad buffer
in bf16 where Megatron's is fp32 (2 B a parameter less: about 18.6 GiB of GPT3-20B's TP-2 rank's
10.0e9 non-embedding parameters), the 16-bit remainders in place of the fp32 master (10 B / D of
optimizer state instead of 12) plus the reduced bf16 shard it keeps (2 B / D), the embeddings'
fp32 gradients (4 + 4 / D). The time moved mostly by the attention kernel: FlashAttention-2 under
NVTE_FUSED_ATTN=0 runs slower than cuDNN's on the H100 (Llama 3 8B compute 8.66 -> 9.81 s; the
rows under --framework nemo at --attention cudnn: MAE 13.7 %, worst 22.2 %, the errors of
before); bf16 gradients halve the reduce-scatters, which the backward hides but for the last
bucket's (the first layer's, with the embeddings and the output layer: GPT3-5B's exposed
communication 0.006 -> 0.009 s). The GPT3-5B and -20B rows stay 18 % fast: bench_today.py's gap
of Megatron-Core's own BF16 H100 rows at TP 1-4 (-18 to -26 %, a time a block and a micro-batch
pays whatever its FLOPs, unexplained), which FP8's shorter GEMMs leave a larger share. Nothing
was tuned to these rows.
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
