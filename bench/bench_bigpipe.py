"""Big pipelines to Chakra traces, whole process, against a 64-rank dense model of the same run.

Run by hand: `python bench/bench_bigpipe.py [--quick]`. Each translation a fresh process, in a
temporary folder: wall time; CPU time, its workers' included (chakra/ahead.py's forked encoders,
reaped before it exits), and CPU / wall, the cores it kept busy; peak RSS (the largest of its
processes, as rusage reports it) and the peak of its processes' summed PSS (each shared page
counted once, /proc/PID/smaps_rollup sampled every 0.2 s: the memory the whole run holds); the
load average before and after (on a shared machine, wall time is only honest at a load under
the cores; CPU time / 2 is the wall time on an idle 2-core machine):

    GPT-3 530B at TP 8 x PP 35, interleaved with 3 virtual stages (one block a chunk), --sp,
        --recompute selective, micro-batch 1, global batch 280: 280 ranks, 280 micro-batches
    GPT-3 1T at TP 8 x PP 64, interleaved with 2 virtual stages (one block a chunk; the virtual
        stages are our choice), the same options, global batch 512: 512 ranks, 512 micro-batches

and, as the baseline measured in the same run, Llama-3-70B translated at TP 2 x PP 4 x DP 8 (64
ranks, as bench_moe.py). `--quick`: the two pipelines at 1/8 of their micro-batches. Issue 35's
goal, on 2 cores: each <= 60 s and <= 1 GB.

Latest (2026-12-06, c427a81, the project's shared 2-core VM at a load of 2-3): 530B 20 s wall,
22 s of CPU, 511 MB PSS; 1T 46 s, 53 s, 628 MB. Earlier figures: docs/performance.md (History).

The models are Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", arXiv 2205.05198), Table 3: 530B 105 layers, hidden 20480, 128 heads; 1T 128 layers,
hidden 25600, 160 heads; sequence 2048, tensor parallel 8, pipeline 35 and 64, global batch 280
and 512, micro-batch 1. Written as GPT-2-architecture configurations as bench_megatron.py writes
them (Megatron-LM's GPT), vocabulary 51,200, fp16.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

from children import Usage, measure  # bench/children.py: the script's own folder is on sys.path
from configs import megatron_gpt  # bench/configs.py

SAMPLED = 0.2  # seconds between two readings of the processes' PSS


def _tree(pid: int) -> list[int]:
    """The process and its descendants (Linux's /proc/PID/task/TID/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                todo += [int(c) for c in task.read_text().split()]
    return out


def _pss(pid: int) -> int:
    """The summed PSS in kB of `pid`'s processes (0 where /proc does not say)."""
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total


def run(args: list[str]) -> tuple[Usage, float]:
    """The child's usage (children.measure) and its processes' peak summed PSS in MB."""
    peak = [0]
    done = threading.Event()
    me = os.getpid()

    def sample() -> None:
        while not done.wait(SAMPLED):
            for child in _tree(me)[1:]:
                peak[0] = max(peak[0], _pss(child))
                break  # the translation's process (the first child), its workers below it

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        used = measure(args)
    finally:
        done.set()
        watcher.join()
    return used, peak[0] / 1024


GPT3 = {  # name: (layers, hidden, heads, pipeline ranks, virtual stages)
    "gpt3-530b": (105, 20480, 128, 35, 3),
    "gpt3-1t": (128, 25600, 160, 64, 2),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/8 of the micro-batches")
    quick = parser.parse_args().quick
    modtrans = [sys.executable, "-m", "modtrans"]
    rows = []
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        layout = ["--tp", "2", "--pp", "4", "--dp", "8", "--format", "chakra-et"]
        dense = run([*modtrans, "translate", "llama-3-70b", *layout, "-o", str(folder / "l")])
        for name, (layers, hidden, heads, pp, vpp) in GPT3.items():
            config = folder / f"{name}.json"
            config.write_text(json.dumps(megatron_gpt(layers, hidden, heads, dropout=None)))
            batches = pp if quick else 8 * pp  # Table 3: global batch 280 and 512, micro-batch 1
            args = [
                *modtrans, "translate", str(config), "--tp", "8", "--pp", str(pp), "--vpp", str(vpp),
                "--schedule", "interleaved", "--global-batch", str(batches),
                "--micro-batch", "1", "--sp", "--recompute", "selective", "--seq-len", "2048",
                "--format", "chakra-et", "-q", "-o", str(folder / name / "p"),
            ]  # fmt: skip
            (folder / name).mkdir()
            measured = run(args)
            size = sum(p.stat().st_size for p in (folder / name).iterdir())
            rows.append((f"{name}, {8 * pp} ranks, {batches} micro-batches", measured, size))
            for path in (folder / name).iterdir():  # the next model's traces need the disk
                path.unlink()
    after = os.getloadavg()
    print(f"load average {load[0]:.2f} before, {after[0]:.2f} after ({os.cpu_count()} cores)")
    base, base_pss = dense
    print(
        f"baseline: llama-3-70b, 64 ranks, translate:  {base.wall:6.2f} s wall, {base.cpu:6.2f} s CPU, "
        f"{base.rss:5.0f} MB peak RSS, {base_pss:5.0f} MB peak PSS"
    )
    for label, (used, pss), size in rows:
        print(
            f"{label:<42} {used.wall:6.2f} s wall, {used.cpu:6.2f} s CPU ({used.cpu / used.wall:.2f} cores), "
            f"{used.rss:5.0f} MB peak RSS, {pss:5.0f} MB peak PSS; "
            f"{used.wall / base.wall:5.2f}x the baseline's wall, {used.cpu / base.cpu:5.2f}x its CPU; "
            f"traces {size / 1e9:.2f} GB (goal <= 60 s, <= 1,000 MB)"
        )


if __name__ == "__main__":
    main()
