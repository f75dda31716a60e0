"""Every parallelism and schedule ModTrans writes, run on the simulators: does it finish, and does
`modtrans estimate`'s exact tier say what ASTRA-sim 2.x says, to the nanosecond?

Run by hand: `python bench/bench_sim_matrix.py [--only llama,mixtral] [--text]`, with
MODTRANS_ASTRA_SIM naming an ASTRA-sim 2.x binary (the analytical congestion-unaware backend);
`--text` also writes each layout in the ASTRA-sim 1.0 and SimAI dialects and runs them
(MODTRANS_ASTRA_SIM_1, MODTRANS_SIMAI), printing the one line each refuses with where it does.
Each layout is `modtrans translate --format chakra-et`, `modtrans validate` of the set (clean or
its findings), `modtrans estimate --format json` and `modtrans simulate --format json` on the same
traces and network, each a fresh process as a user runs them; a run where no rank finished is
tried again, twice (ASTRA-sim 2.x exits early now and then, simulate/astra2.py). The baseline is
the simulator itself: nothing here is fitted.

Latest (2026-12-07, branch simhunt at 422a593; ASTRA-sim master 518bd51, ASTRA-sim-1.0 07d5d19,
SimAI 1.6 f5efb5a9; 2 shared cores): all 55 layouts below validated clean, every rank finished on
ASTRA-sim 2.x at the first try, and each simulated iteration was the exact tier's to the
nanosecond, each layout in 12 s or less (in an earlier run of the same layouts one, Llama-3 8B at
`--tp 2 --pp 2 --dp 2 --sp` on switch:8:300, had no rank finish and did at the second try). Before
the two fixes of 2026-12-07 (estimate/collectives.py: a reducing ring step's passes over its
message at local-mem-bw; simulate/astra2.py replay_ns: a compute node of 0 us runs 1 ns), at main
9d67eee, 22 of them simulated 3 to 198 ns over the exact tier: Llama-3 8B `--tp 2 --dp 4 --sp`
36 ns (a 16 GB gradient all-reduce, 4 GB a ring step), `--pp 2 --dp 4` 72 ns, under torchtitan
65 ns (65 norms' weight gradients of 0 us), torchtitan's HSDP 130 ns, Mixtral `--etp 1` 198 ns,
T5-base 3-6 ns; the other 33 were equal then too.
The text dialects (`--text`): ASTRA-sim 1.0 took every layout of one program and one micro-batch
it can express and refused the rest in one line (D310), except GPT-3 13B at `--tp 8 --dp 2` and
LLaVA-1.5 7B at `--tp 2 --dp 4`, whose one-line gradient all-reduce is over 2^31 - 1 bytes: the
simulator aborted (`did not finish every pass`), now refused before it runs (D315). T5-base at
`--tp 2 --dp 4` (261 lines) finished its pass in seconds and its report in 4.6 minutes: it
rewrites EndToEnd.csv and detailed.csv byte by byte for every cell (workload/CSVWriter.cc,
write_cell), quadratic in the lines. SimAI ran every layout it can express (pipelines,
interleaving, experts, ZeRO 1-3, FSDP, fp8, --tp-comm-overlap) with its compute the traces' first
stage's to 1 us, and refused the rest in one line: schedules other than 1F1B, context and
replicate groups, selective and partial recomputation, experts over tensor x data ranks (--etp 1).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

H100 = "--device h100"
LLAMA = f"llama-3-8b {H100}"
MIXTRAL = f"mixtral-8x7b {H100} --seq-len 1024"
LAYOUTS: tuple[tuple[str, str, str], ...] = (
    # (name, network preset, translate arguments)
    ("gpt2 tp8", "switch:8:300", "gpt2 --tp 8"),
    ("gpt2 tp2 pp2 dp2", "switch:8:300", "gpt2 --tp 2 --pp 2 --dp 2 --global-batch 8"),
    ("gpt2 dp8", "switch:8:300", "gpt2 --dp 8 --global-batch 16"),
    ("gpt2 dp8 zero1 overlap", "switch:8:300",
     "gpt2 --dp 8 --zero 1 --overlap-grad-reduce --overlap-param-gather --global-batch 16"),
    ("gpt2 deepspeed zero1", "switch:8:300", "gpt2 --dp 8 --framework deepspeed --zero 1 --global-batch 16"),
    ("gpt2 deepspeed zero2", "switch:8:300", "gpt2 --dp 8 --framework deepspeed --zero 2 --global-batch 16"),
    ("gpt2 deepspeed zero3", "switch:8:300", "gpt2 --dp 8 --framework deepspeed --zero 3 --global-batch 16"),
    ("gpt2 fsdp zero2", "switch:8:300", "gpt2 --framework fsdp --zero 2 --dp 8 --global-batch 8"),
    ("gpt2 fsdp zero3", "switch:8:300", "gpt2 --dp 8 --framework fsdp --zero 3 --global-batch 16"),
    ("gpt2 hsdp", "switch:8:300", "gpt2 --dp 8 --dp-replicate 2 --framework fsdp --zero 3 --global-batch 16"),
    ("gpt2 llm-foundry", "switch:8:300", "gpt2 --framework llm-foundry --zero 3 --dp 8 --global-batch 8"),
    ("gpt2 fms-fsdp half recomputed", "switch:8:300",
     "gpt2 --framework fms-fsdp --zero 3 --dp 8 --recompute full --recompute-fraction 0.5 --global-batch 8"),
    ("gpt2 tp4 sp dp2", "switch:8:300", "gpt2 --tp 4 --sp --dp 2"),
    ("gpt2 2 passes", "switch:8:300", "gpt2 --tp 2 --pp 2 --dp 2 --global-batch 8 --passes 2"),
    ("llama tp2 pp2 dp2 sp", "hgx-h100", f"{LLAMA} --tp 2 --pp 2 --dp 2 --sp --global-batch 8"),
    ("llama tp2 dp4 sp", "hgx-h100", f"{LLAMA} --tp 2 --dp 4 --sp --global-batch 4"),
    ("llama pp2 dp4", "hgx-h100", f"{LLAMA} --pp 2 --dp 4 --global-batch 8"),
    *(
        (f"llama pp4 {s}", "hgx-h100", f"{LLAMA} --tp 2 --pp 4 --sp --global-batch 16 --schedule {s}")
        for s in ("1f1b", "gpipe", "zb-h1", "dualpipev")
    ),
    ("llama pp4 interleaved vpp2", "hgx-h100",
     f"{LLAMA} --tp 2 --pp 4 --sp --global-batch 16 --schedule interleaved --vpp 2"),
    ("llama pp4 dualpipe dp2", "hgx-h100",
     f"{LLAMA} --tp 2 --pp 4 --dp 2 --sp --global-batch 16 --schedule dualpipe"),
    ("llama tp8 tp-comm-overlap", "hgx-h100", f"{LLAMA} --tp 8 --sp --tp-comm-overlap --global-batch 2"),
    ("llama tp4 dp4 tp-comm-overlap", "hgx-h100",
     f"{LLAMA} --tp 4 --sp --tp-comm-overlap --dp 4 --global-batch 8"),
    ("llama cp2 tp4 dp2", "hgx-h100", f"{LLAMA} --tp 4 --cp 2 --dp 2 --sp --seq-len 8192 --global-batch 4"),
    ("llama cp4 tp2 pp2", "hgx-h100", f"{LLAMA} --tp 2 --cp 4 --pp 2 --sp --seq-len 8192 --global-batch 8"),
    ("llama full uniform 4", "hgx-h100",
     f"{LLAMA} --tp 4 --pp 2 --dp 2 --sp --recompute full --recompute-method uniform "
     "--recompute-num-layers 4 --global-batch 8"),
    ("llama full block 2", "hgx-h100",
     f"{LLAMA} --tp 4 --pp 2 --dp 2 --sp --recompute full --recompute-method block "
     "--recompute-num-layers 2 --global-batch 8"),
    ("llama selective attn+mlp", "hgx-h100",
     f"{LLAMA} --tp 4 --pp 2 --dp 2 --sp --recompute selective --recompute-modules core_attn,mlp "
     "--global-batch 8"),
    ("llama micro-batch 4", "hgx-h100",
     f"{LLAMA} --tp 4 --pp 2 --dp 2 --sp --micro-batch 4 --global-batch 32"),
    ("llama fp8", "hgx-h100", f"{LLAMA} --tp 4 --pp 2 --dp 2 --sp --precision fp8 --global-batch 8"),
    ("llama tp2 dp16 zero1 overlap", "hgx-h100",
     f"{LLAMA} --tp 2 --dp 16 --sp --zero 1 --overlap-grad-reduce --overlap-param-gather --global-batch 32"),
    ("llama fsdp dp64", "hgx-h100", f"{LLAMA} --framework fsdp --zero 3 --dp 64 --global-batch 64"),
    ("llama torchtitan dp8", "hgx-h100", f"{LLAMA} --framework torchtitan --zero 3 --dp 8 --global-batch 8"),
    ("llama torchtitan hsdp tp2", "hgx-h100",
     f"{LLAMA} --framework torchtitan --zero 3 --dp 16 --dp-replicate 2 --tp 2 --global-batch 32"),
    ("llama torchtitan compile", "hgx-h100",
     f"{LLAMA} --framework torchtitan --zero 3 --dp 8 --compile --global-batch 8"),
    ("mixtral tp2 ep4 dp4 sp", "dgx-a100", "mixtral-8x7b --tp 2 --ep 4 --dp 4 --sp --seq-len 1024"),
    ("mixtral pp2 ep8 zero1", "hgx-h100", f"{MIXTRAL} --pp 2 --ep 8 --dp 8 --zero 1 --global-batch 16"),
    ("mixtral tp2 ep2 etp1", "hgx-h100", f"{MIXTRAL} --tp 2 --ep 2 --etp 1 --dp 4 --sp"),
    ("mixtral capacity 1.0 padded", "hgx-h100",
     f"{MIXTRAL} --tp 2 --ep 4 --dp 4 --sp --moe-expert-capacity-factor 1.0 "
     "--moe-pad-expert-input-to-capacity"),
    ("deepseek-moe dp4 ep2 pp2", "switch:8:300", "deepseek-moe-16b --dp 4 --ep 2 --pp 2"),
    ("deepseek-moe ep8", "hgx-h100", f"deepseek-moe-16b {H100} --dp 8 --ep 8 --global-batch 16"),
    ("deepseek-moe tp2 pp2 ep4 vpp2", "hgx-h100",
     f"deepseek-moe-16b {H100} --tp 2 --pp 2 --ep 4 --dp 4 --sp --vpp 2 --schedule interleaved "
     "--global-batch 16"),
    ("gpt3-13b tp8 pp2 dp2", "dgx-a100", "gpt3-13b --tp 8 --pp 2 --dp 2 --sp --global-batch 16"),
    ("gpt3-13b tp8 dp2 full", "switch:16:300", "gpt3-13b --tp 8 --dp 2 --recompute full"),
    ("gpt3-13b megatron-2022 selective", "selene",
     "gpt3-13b --tp 8 --pp 2 --sp --recompute selective --framework megatron-2022 --global-batch 8"),
    ("t5-base dp8", "switch:8:300", "fixtures/configs/t5-base.json --dp 8 --global-batch 16"),
    ("t5-base tp2 dp4", "switch:8:300", "fixtures/configs/t5-base.json --tp 2 --dp 4"),
    ("t5-base pp2 dp4", "switch:8:300", "fixtures/configs/t5-base.json --pp 2 --dp 4 --global-batch 8"),
    ("llava-1.5 tp2 dp4", "hgx-h100", f"fixtures/configs/llava-1.5-7b-hf.json {H100} --tp 2 --dp 4 --sp"),
    ("qwen2-vl tp4 pp2", "hgx-h100",
     f"fixtures/configs/qwen2-vl-7b-instruct.json {H100} --tp 4 --pp 2 --sp --global-batch 8"),
    ("resnet50 DATA", "switch:8:300", "resnet50 --npus 8"),
    ("vgg16 HYBRID_DATA_MODEL", "switch:8:300",
     "vgg16 -p HYBRID_DATA_MODEL --npus 8 --model-parallel-group 2"),
    ("bert tp2 dp4", "switch:8:300", "bert-base --tp 2 --dp 4"),
)  # fmt: skip
ROOT = Path(__file__).resolve().parents[1]


def _modtrans(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "modtrans", *args],
            capture_output=True, text=True, check=False, cwd=ROOT, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(list(args), 124, "", f"timed out after {timeout:.0f} s")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:160] if lines else ""


def _simulated(prefix: str, network: str) -> tuple[int | None, int]:
    """The simulated iteration (ns; None where no rank finished in three tries) and the tries."""
    for tries in range(1, 4):
        done = _modtrans("simulate", prefix, "--network", network, "--format", "json")
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            continue
        if report.get("finished"):
            return int(report["iteration_ns"]), tries
    return None, 3


def traces(name: str, network: str, args: list[str], folder: Path) -> str:
    """One layout's row: validate, the simulated and the exact iteration, and the seconds it took."""
    start = time.perf_counter()
    prefix = str(folder / "t")
    made = _modtrans("translate", *args, "--format", "chakra-et", "-q", "-o", prefix)
    if made.returncode:
        return f"{name:<34} translate exit {made.returncode}: {_last_line(made.stderr)}"
    checked = _modtrans("validate", prefix)
    clean = "clean" if checked.returncode == 0 else f"validate: {_last_line(checked.stdout + checked.stderr)}"
    said = _modtrans("estimate", prefix, "--network", network, "--format", "json")
    exact = round(json.loads(said.stdout)["iteration_s"] * 1e9) if said.returncode == 0 else None
    simulated, tries = _simulated(prefix, network)
    alike = "=" if simulated is not None and simulated == exact else "!"
    shown = "not finished" if simulated is None else f"{simulated:,}"
    again = f" ({tries} tries)" if tries > 1 else ""
    took = time.perf_counter() - start
    return f"{name:<34} {network:<13} {shown:>16} {alike} {exact or 0:>16,} {took:>5.0f} s  {clean}{again}"


def text(args: list[str], network: str, folder: Path) -> str:
    """What ASTRA-sim 1.0 and SimAI make of the layout's text: ok, or the one line refusing it."""
    said = []
    for dialect, label in (("astra-sim", "ASTRA-sim 1.0"), ("simai", "SimAI")):
        path = str(folder / f"{dialect}.txt")
        made = _modtrans("translate", *args, "-d", dialect, "-q", "-o", path)
        if made.returncode:
            said.append(f"{label}: refused at translate: {_last_line(made.stderr)}")
            continue
        done = _modtrans("simulate", path, "--network", network, "--format", "json")
        outcome = "ok" if done.returncode == 0 else f"exit {done.returncode}: {_last_line(done.stderr)}"
        said.append(f"{label}: {outcome}")
    return "\n".join(f"    {line}" for line in said)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="layouts whose name holds one of these, e.g. llama,t5")
    parser.add_argument("--text", action="store_true", help="also the ASTRA-sim 1.0 and SimAI dialects")
    args = parser.parse_args()
    if not os.environ.get("MODTRANS_ASTRA_SIM"):
        raise SystemExit("give the ASTRA-sim 2.x binary: MODTRANS_ASTRA_SIM=PATH")
    wanted = [w.strip() for w in args.only.split(",") if w.strip()]
    print(f"{'layout':<34} {'network':<13} {'ASTRA-sim (ns)':>16}   {'exact tier (ns)':>16} {'took':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, network, line) in enumerate(LAYOUTS):
            if wanted and not any(w in name for w in wanted):
                continue
            folder = Path(tmp) / str(i)
            folder.mkdir()
            print(traces(name, network, shlex.split(line), folder), flush=True)
            if args.text:
                print(text(shlex.split(line), network, folder), flush=True)


if __name__ == "__main__":
    main()
