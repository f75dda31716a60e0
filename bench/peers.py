"""ModTrans beside its peers on the same configurations, as ratios measured in one run: Chakra
traces against STG (astra-sim/stage, its main.py) and SimAI text against AICB (aliyun/aicb, its
SimAI training workload generator). The configurations are issue 39's:

    C1  Llama-3-8B    TP 2 x PP 2 x DP 2 + SP, global batch 8
    C2  GPT-3 13B     TP 4 x DP 4 + SP
    C3  Mixtral-8x7B  TP 2 x DP 4 x EP 4 + SP
    C4  Llama-3-70B   TP 8 x PP 8 x DP 16 + SP (1,024 ranks), global batch 128

each with sequence 2048 and micro-batch 1, the peer given the model's own widths (layers, hidden,
FFN, heads, key/value heads, vocabulary, experts and top-k, from the configurations the zoo
cites). A peer runs only when installed, its checkout and interpreter named by environment
variables; without them its rows are skipped, with the line to install it. Nothing of a peer is in
this repository. To install them, outside it (the commits issue 39 compared against):

    git clone https://github.com/aliyun/aicb && git -C aicb checkout 23eec3c
    python -m venv aicb-venv && aicb-venv/bin/pip install pandas numpy
    export MODTRANS_AICB=$PWD/aicb MODTRANS_AICB_PYTHON=$PWD/aicb-venv/bin/python

    git clone https://github.com/astra-sim/stage && git -C stage checkout 9ec6c02
    python -m venv stage-venv && stage-venv/bin/pip install -r stage/requirements.txt
    export MODTRANS_STG=$PWD/stage MODTRANS_STG_PYTHON=$PWD/stage-venv/bin/python

AICB's generator imports torch when it is there and goes on without it (it prints "Failed to
import 'torch'."); a run without torch is what it costs to write the text. STG takes minutes per
configuration (261 s for C4 in issue 39): `--only simai` leaves it out.

Run by hand: `python bench/peers.py [--rounds 3] [--only simai|traces] [--configs C1,C2]`. Each
round runs every pair, ModTrans then its peer, configuration after configuration, so a change in
the machine's load reaches both sides of a ratio; each figure is the median of the rounds. Wall
is the child's elapsed time, CPU its user and system time from its own rusage (a shared machine's
wall time measures the neighbours too: the issue's goal for SimAI text is CPU). Each side writes
into a fresh temporary folder, after one untimed run of each (bytecode compiled, page cache warm);
`--cold` leaves the untimed runs out (STG's run of minutes on a loaded machine: its compiling
bytecode is not what it costs, and its warm-up would double the wait).

Latest figures (2026-12-06, planfast 0f929d6 once and 4ded667 twice, the project's 2-core VM at a
load of 2.6-3.5, `--only simai --rounds 3`, taking turns with main 425c617 in a second worktree):
SimAI text's CPU ratio C1 0.36-0.39, C2 0.36-0.37, C3 0.38-0.39, C4 0.42-0.44 (ModTrans
0.13-0.18 s, AICB 0.36-0.42 s); main in the same turns: 0.39-0.43, 0.37-0.39, 0.34-0.41,
0.47-0.50. Issue 39's 0.5x holds on C1-C4, and 0.45 on C4 by 0.01-0.03. Earlier figures:
docs/performance.md (Beside the peers, and History: peers.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from children import Usage, measure  # bench/children.py: the script's own folder is on sys.path

PY = sys.executable


@dataclass(frozen=True)
class Model:
    """A model's widths as the peers take them (the zoo's configuration of the same model)."""

    zoo: str  # ModTrans's built-in
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocabulary: int
    experts: int = 1
    top_k: int = 1
    swiglu: bool = True


# meta-llama/Meta-Llama-3-8B and -70B, mistralai/Mixtral-8x7B-v0.1 config.json; GPT-3 13B: Brown et
# al. 2020 table 2.1 (40 layers, d_model 5120, 40 heads, d_ff 4 d_model), GPT-2's vocabulary.
LLAMA_8B = Model("llama-3-8b", 32, 4096, 14336, 32, 8, 128256)
GPT3_13B = Model("gpt3-13b", 40, 5120, 20480, 40, 40, 50257, swiglu=False)
MIXTRAL = Model("mixtral-8x7b", 32, 4096, 14336, 32, 8, 32000, experts=8, top_k=2)
LLAMA_70B = Model("llama-3-70b", 80, 8192, 28672, 64, 8, 128256)
SEQUENCE = 2048


@dataclass(frozen=True)
class Config:
    name: str
    model: Model
    tp: int
    pp: int
    dp: int
    ep: int = 1
    global_batch: int | None = None  # None: M D P, ModTrans's default

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def batch(self) -> int:
        return self.global_batch or self.dp * self.pp

    def modtrans(self, out: str, traces: bool) -> list[str]:
        layout = ["--tp", str(self.tp), "--pp", str(self.pp), "--dp", str(self.dp), "--sp"]
        if self.ep > 1:
            layout += ["--ep", str(self.ep)]
        if self.global_batch is not None:
            layout += ["--global-batch", str(self.global_batch)]
        target = ["--format", "chakra-et", "-o", f"{out}/{self.name}/t"] if traces else ["--dialect", "simai"]
        written = [] if traces else ["-o", f"{out}/{self.name}.txt"]
        return [PY, "-m", "modtrans", "translate", self.model.zoo, *layout, *target, *written, "-q"]

    def aicb(self, python: str) -> list[str]:
        """AICB's generator as its scripts/megatron_workload_with_aiob.sh calls it (Megatron, the
        distributed optimizer, flash attention, sequence parallelism; MoE with grouped GEMM)."""
        m = self.model
        args = [
            python, "-m", "workload_generator.SimAI_training_workload_generator", "--frame=Megatron",
            f"--world_size={self.ranks}", f"--tensor_model_parallel_size={self.tp}",
            f"--pipeline_model_parallel={self.pp}", f"--global_batch={self.batch}", "--micro_batch=1",
            f"--num_layers={m.layers}", f"--seq_length={SEQUENCE}", f"--hidden_size={m.hidden}",
            f"--ffn_hidden_size={m.ffn}", f"--num_attention_heads={m.heads}", f"--vocab_size={m.vocabulary}",
            f"--max_position_embeddings={SEQUENCE}", f"--model_name={m.zoo}", "--use_flash_attn",
            "--enable_sequence_parallel", "--use-distributed-optimizer",
        ]  # fmt: skip
        if m.swiglu:
            args.append("--swiglu")
        if m.experts > 1:
            args += [
                "--moe_enable", f"--num_experts={m.experts}", f"--moe_router_topk={m.top_k}",
                f"--expert_model_parallel_size={self.ep}", "--moe_grouped_gemm",
            ]  # fmt: skip
        return args

    def stg(self, python: str, checkout: str, out: str) -> list[str]:
        """STG's main.py as its argument parser at 9ec6c02 takes it (its README's --comm_group_file
        is gone), tensor parallelism with sequence parallelism (--tpsp)."""
        m = self.model
        kind = "moe" if m.experts > 1 else ("llama" if m.swiglu else "gpt")
        args = [
            python, f"{checkout}/main.py", "--output_dir", f"{out}/{self.name}", "--output_name",
            f"{self.name}.%d.et", "--dp", str(self.dp),
            "--tp", str(self.tp), "--pp", str(self.pp), "--ep", str(self.ep), "--sp", "1", "--tpsp", "1",
            "--weight_sharded", "0", "--dvocal", str(m.vocabulary), "--dmodel", str(m.hidden),
            "--dff", str(m.ffn), "--batch", str(self.batch), "--micro_batch", "1", "--seq", str(SEQUENCE),
            "--head", str(m.heads), "--kvhead", str(m.kv_heads), "--num_stacks", str(m.layers),
            "--model_type", kind, "--chakra_schema_version", "v0.0.4",
        ]  # fmt: skip
        if m.experts > 1:
            args += ["--experts", str(m.experts), "--kexperts", str(m.top_k)]
        return args


CONFIGS = (
    Config("C1", LLAMA_8B, tp=2, pp=2, dp=2, global_batch=8),
    Config("C2", GPT3_13B, tp=4, pp=1, dp=4),
    Config("C3", MIXTRAL, tp=2, pp=1, dp=4, ep=4),
    Config("C4", LLAMA_70B, tp=8, pp=8, dp=16, global_batch=128),
)


@dataclass(frozen=True)
class Peer:
    name: str  # what it writes: "simai" (AICB) or "traces" (STG)
    tool: str
    checkout: str | None
    python: str | None
    install: str

    @property
    def installed(self) -> bool:
        return bool(
            self.checkout and self.python and Path(self.checkout).is_dir() and Path(self.python).exists()
        )

    def command(self, config: Config, out: str) -> list[str]:
        assert self.checkout is not None
        assert self.python is not None
        if self.name == "simai":
            return config.aicb(self.python)
        return config.stg(self.python, self.checkout, out)

    def workdir(self, out: str) -> str:
        """Where the peer runs: AICB writes under its working directory's results/workload/, STG
        reads its sharding spreadsheets from ./sharding_spreadsheets (its checkout)."""
        if self.name == "simai" or self.checkout is None:
            return out
        return self.checkout

    def environment(self) -> dict[str, str]:
        """AICB's modules are read from its checkout (its generator runs as `python -m`)."""
        env = dict(os.environ)
        if self.name == "simai" and self.checkout is not None:
            env["PYTHONPATH"] = self.checkout
        return env


PEERS = (
    Peer(
        "simai", "AICB", os.environ.get("MODTRANS_AICB"), os.environ.get("MODTRANS_AICB_PYTHON"),
        "set MODTRANS_AICB and MODTRANS_AICB_PYTHON (this script's docstring says how)",
    ),
    Peer(
        "traces", "STG", os.environ.get("MODTRANS_STG"), os.environ.get("MODTRANS_STG_PYTHON"),
        "set MODTRANS_STG and MODTRANS_STG_PYTHON (this script's docstring says how)",
    ),
)  # fmt: skip


def _pair(peer: Peer, config: Config, root: str) -> tuple[Usage, Usage]:
    """One run of each side, each writing into a fresh folder under `root` (AICB into its working
    directory's results/workload/)."""
    ours = tempfile.mkdtemp(dir=root)
    os.makedirs(f"{ours}/{config.name}", exist_ok=True)
    mine = measure(config.modtrans(ours, traces=peer.name == "traces"))
    theirs_dir = tempfile.mkdtemp(dir=root)
    os.makedirs(f"{theirs_dir}/{config.name}", exist_ok=True)
    theirs = measure(peer.command(config, theirs_dir), cwd=peer.workdir(theirs_dir), env=peer.environment())
    return mine, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is their median")
    parser.add_argument("--only", choices=[p.name for p in PEERS], help="one output and its peer")
    parser.add_argument("--configs", default=",".join(c.name for c in CONFIGS), help="e.g. C1,C2")
    parser.add_argument("--cold", action="store_true", help="no untimed run of each pair first")
    args = parser.parse_args()
    wanted = set(args.configs.split(","))
    configs = [c for c in CONFIGS if c.name in wanted]
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    peers = [p for p in PEERS if args.only in (None, p.name)]
    for peer in peers:
        if not peer.installed:
            print(f"{peer.tool} ({peer.name}): skipped, not installed: {peer.install}")
    peers = [p for p in peers if p.installed]
    with tempfile.TemporaryDirectory() as root:
        for peer in [] if args.cold else peers:  # the untimed runs
            for config in configs:
                _pair(peer, config, root)
        runs: dict[tuple[str, str], list[tuple[Usage, Usage]]] = {}
        for _ in range(args.rounds):
            for peer in peers:
                for config in configs:
                    runs.setdefault((peer.name, config.name), []).append(_pair(peer, config, root))
    for peer in peers:
        print(
            f"\nModTrans {peer.name} / {peer.tool}, median of {args.rounds} (seconds: ModTrans, {peer.tool})"
        )
        print(f"{'':4} {'wall ratio':>10} {'CPU ratio':>10}   {'wall':>15}   {'CPU':>15}")
        for config in configs:
            pairs = runs[(peer.name, config.name)]
            wall = [statistics.median(u.wall for u in side) for side in zip(*pairs, strict=True)]
            cpu = [statistics.median(u.cpu for u in side) for side in zip(*pairs, strict=True)]
            print(
                f"{config.name:4} {wall[0] / wall[1]:>10.3f} {cpu[0] / cpu[1]:>10.3f}   "
                f"{wall[0]:>6.2f} {wall[1]:>8.2f}   {cpu[0]:>6.2f} {cpu[1]:>8.2f}"
            )


if __name__ == "__main__":
    main()
