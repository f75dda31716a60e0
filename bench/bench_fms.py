"""IBM's fms-fsdp published training throughput against our estimates (issue 37): Llama 2 7B to
70B, sequence 4,096, 2 sequences per GPU, on 128 A100 80GB and on 96 H100, PyTorch FSDP1 with
HSDP or FULL_SHARD, with and without torch.compile. A CHECK, never a calibration target: nothing
here feeds the models.

Run by hand: `python bench/bench_fms.py [--table ed74fd5,cf6e42c,5805ace]`: each row's plan built
through the API (bench_today.plan_of) and its exact tier (modtrans.estimate.plan: what ASTRA-sim
2.x's analytical backend would report) on the networks below.

The tables: foundation-model-stack/fms-fsdp README.md at three commits, "tokens/sec/GPU" on
"A100 80G 128 GPUs" and "H100 96 GPUs", batch size 2 per GPU (train config's batch_size),
seq_length 4096 (fms_fsdp/config/training.py at each commit), one accumulation (the training
loop steps every batch: fms_fsdp/utils/train_utils.py):

    ed74fd5  2024-05-09 "update numbers with compile": compile Y (use_torch_compile True);
             7b HSDP No AC 4550 / 9600; 13b, 34b, 70b FSDP "Selective AC" 2150 / 4850,
             820 / 1830, 410 / 890 (A100 "with 400Gbps" / H100 "with 800 Gbps")
    cf6e42c  2024-02-27 "update perf numbers": use_torch_compile False (its training.py); 7b HSDP
             No AC 3650 / 7500; 13b FSDP Selective AC 1800 / 3800; 34b and 70b FSDP Full AC
             700 / 1550 and 370 / 800
    5805ace  2024-02-26 "Updating docs": no compile; 7b HSDP AC False batch 2 3760 / 7500; 13b HSDP
             AC False batch 1 1700 / 3700; 34b FSDP AC True batch 8 772 / 1700; 70b FSDP AC True
             batch 6 380 / 850 (AC True with selective_checkpointing's default 1: every block)

How each row runs here: `--framework fms-fsdp` (strategy/frameworks.py: FSDP1, bf16 reduction,
SDPA's FlashAttention-2, fms's RMSNorm op by op), --zero 3; HSDP as fms-fsdp's HYBRID_SHARD
makes it (main_training_llama.py passes FSDP no process group: torch's default groups, a node's
8 GPUs the shard group, _init_intra_and_inter_node_groups): --dp-replicate N / 8; --compile where
the table says compile; the models fms_fsdp/utils/config_utils.py, get_model_config builds
(llama2_7b, 13b, 34b with 8 key/value heads, 70b; vocabulary 32,000, no tied head); bf16.

Not published, so printed under each plausible value rather than picked (never fitted):
  - "Selective AC"'s fraction (selective_checkpointing, the fraction p of blocks checkpointed:
    fms_fsdp/policies/ac_handler.py; --recompute full --recompute-fraction p): each row printed
    at p = 1/3, 1/2 and 2/3; a row whose memory exceeds the GPU's 80 GiB (the README's "A100
    80G", "H100 80G") did not run as printed.
  - What "400Gbps" and "800 Gbps" measure: one figure per system, per node or per GPU not said.
    Both are printed: per node (400 Gb/s / 8 GPUs = 6.25 GB/s a GPU on A100, 12.5 on H100) and
    per GPU (50 GB/s, 100 GB/s). The figure is taken as the line rate (no nccl-tests run over
    these RoCE networks is published), 1 us a hop as the presets take it. Inside a node the
    presets' NVLink (simulate/network.py: dgx-a100 for the A100 nodes, hgx-h100 for the H100s),
    which assumes NVSwitch nodes (not stated in the README).

Latest (2026-12-07, branch hsdp after a6dc08f; error: ours against the published iteration time,
negative: we are faster), the rows with every setting published, 7B HSDP without AC, network per
node / per GPU: with compile A100 +7.4 % / +1.2 %, H100 -2.3 % / -15.9 %; without (cf6e42c) A100
-5.1 % / -9.3 %, H100 -10.6 % / -20.2 %; 5805ace's A100 -2.3 % / -6.5 %; with fms-fsdp's loss
on its bf16 logits (main, the same day) the compiled rows A100 +7.1 % / +0.9 %, H100 -2.5 % /
-16.2 %. The whole table, and the selective rows at each fraction: docs/performance.md,
"bench_fms.py". Branch titankern (2026-12-07): no FSDP gather of the rerun forward's own under
recomputation (strategy/program.py, Rerun.regathers): the rows with AC faster, per-node MAE over
the 40 rows 17.4 to 11.5 %, per-GPU 10.4 to 11.3 %; the rows above unchanged.
"""

from __future__ import annotations

import argparse
import tempfile
from fractions import Fraction
from pathlib import Path

from bench_today import Run, plan_of  # bench/bench_today.py: the script's folder is on sys.path

from modtrans import estimate
from modtrans.simulate.network import PRESETS, Network

SEQUENCE, VOCAB, PER_NODE = 4096, 32000, 8
# fms_fsdp/utils/config_utils.py, get_model_config: (emb_dim, hidden, nlayers, nheads, kvheads)
MODELS = {
    "7b": (4096, 11008, 32, 32, 32),
    "13b": (5120, 13824, 40, 40, 40),
    "34b": (8192, 22016, 48, 64, 8),
    "70b": (8192, 28672, 80, 64, 8),
}
# system: (GPUs, the preset whose NVLink a node has, the README's Gb/s, GPU memory GiB)
SYSTEMS = {"a100": (128, "dgx-a100", 400.0, 80), "h100": (96, "hgx-h100", 800.0, 80)}
SELECTIVE = (Fraction(1, 3), Fraction(1, 2), Fraction(2, 3))  # "Selective AC": p not published
# table: (compile, rows of (model, HSDP, AC: none / full / selective, micro-batch, A100, H100))
TABLES = {
    "ed74fd5": (True, (
        ("7b", True, "none", 2, 4550, 9600), ("13b", False, "selective", 2, 2150, 4850),
        ("34b", False, "selective", 2, 820, 1830), ("70b", False, "selective", 2, 410, 890),
    )),
    "cf6e42c": (False, (
        ("7b", True, "none", 2, 3650, 7500), ("13b", False, "selective", 2, 1800, 3800),
        ("34b", False, "full", 2, 700, 1550), ("70b", False, "full", 2, 370, 800),
    )),
    "5805ace": (False, (
        ("7b", True, "none", 2, 3760, 7500), ("13b", True, "none", 1, 1700, 3700),
        ("34b", False, "full", 8, 772, 1700), ("70b", False, "full", 6, 380, 850),
    )),
}  # fmt: skip


def config(model: str) -> dict[str, object]:
    """fms's Llama 2 variant as a transformers LlamaConfig (the same blocks: RMSNorm, rotary,
    SwiGLU of `hidden`, no biases, an untied head)."""
    h, ffn, layers, heads, kv = MODELS[model]
    return {
        "model_type": "llama", "torch_dtype": "bfloat16", "vocab_size": VOCAB, "hidden_size": h,
        "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
        "num_key_value_heads": kv, "max_position_embeddings": SEQUENCE, "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
    }  # fmt: skip


def networks(system: str) -> dict[str, Network]:
    """The two readings of the README's figure (per node, per GPU) as 2-D networks built as the
    presets are: the node's NVLink (line, achieved, latency) and the figure between nodes."""
    gpus, preset, gbps, _ = SYSTEMS[system]
    line, inside, near = PRESETS[preset].inside
    out = {}
    for reading, per_gpu in (("node", gbps / 8 / PER_NODE), ("GPU", gbps / 8)):
        out[reading] = Network(
            (PER_NODE, gpus // PER_NODE), (inside, per_gpu), (near, 1000.0), (line, per_gpu)
        )
    return out


def runs(table: str, system: str) -> list[tuple[Run, str, float]]:
    """The table's rows on one system as bench_today's runs, each with its AC label and the
    published tokens/s per GPU; "Selective AC" once per plausible fraction."""
    compiled, rows = TABLES[table]
    gpus, _, _, _ = SYSTEMS[system]
    out = []
    for model, hsdp, ac, micro, a100, h100 in rows:
        layout: dict[str, object] = {"framework": "fms-fsdp", "zero": 3}
        if compiled:
            layout["compile"] = True
        if hsdp:
            layout["dp_replicate"] = gpus // PER_NODE
        choices: list[tuple[str, dict[str, object]]] = [(ac, {"recompute": ac})]
        if ac == "selective":
            choices = [(f"p={p}", {"recompute": "full", "recompute_fraction": float(p)}) for p in SELECTIVE]
        tokens = float(a100 if system == "a100" else h100)
        for label, recompute in choices:
            name = f"{table}-{model}-{system}"
            run = Run(name, config(model), system, SYSTEMS[system][1], gpus, SEQUENCE, micro, micro * gpus,
                      {**layout, **recompute}, tokens)  # fmt: skip
            out.append((run, label, tokens))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", default=",".join(TABLES), help="README commits, comma-separated")
    args = parser.parse_args()
    columns = f"{'published':>9} {'ours/node':>9} {'error':>7} {'ours/GPU':>9} {'error':>7} {'GiB':>6}"
    print(f"{'row':<22} {'AC':<8} {columns}")
    with tempfile.TemporaryDirectory() as tmp:
        for table in args.table.split(","):
            for system in SYSTEMS:
                nets = networks(system)
                for run, label, published in runs(table, system):
                    plan = plan_of(run, Path(tmp))
                    cells = []
                    for net in nets.values():
                        found = estimate.plan(plan, network=net, tokens=run.batch * run.seq)
                        ours = found.tokens_per_s / run.gpus
                        cells.append(f"{ours:>9.0f} {100 * (published / ours - 1):>+6.1f}%")
                    gib = max(m.total for m in plan.memory) / 2**30
                    over = "*" if gib > SYSTEMS[system][3] else " "
                    print(
                        f"{run.name:<22} {label:<8} {published:>9.0f} {' '.join(cells)} {gib:>5.1f}{over}",
                        flush=True,
                    )
    print("error: our iteration time against the published one (negative: we are faster); * more than 80 GiB")


if __name__ == "__main__":
    main()
