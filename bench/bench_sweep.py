"""`modtrans sweep` on issue 38's acceptance space, whole process, against one translation of one
of its layouts measured in the same run (the unit of the loop a user writes by hand).

Run by hand: `python bench/bench_sweep.py [--quick]`. The sweep: Llama-3-70B on 1,024 H100s,
global batch 1,024 sequences of 8,192 tokens, tensor {1,2,4,8} x pipeline {every divisor Megatron
accepts} x virtual stages {every V the blocks allow} x context {1,2} x micro-batch {1,2,4} x
recompute {none, selective, full} x distributed optimizer {on, off}, --jobs 2, no cache, no
simulation. The baseline: `modtrans translate llama-3-70b` at TP 8 x PP 8 x DP 16, micro-batch 1,
as SimAI workload text. Prints the layouts enumerated, the sweep's wall time, layouts per second (the
issue's goal: 100 or more on 2 cores) and the sweep's time in translations. `--quick`: 128 GPUs
and global batch 128.

Latest (2026-12-06, main 43382bc, the project's 2-core machine at a load of about 2): 3,312 layouts
(702 refused by a rule, 1,681 over the H100's memory, 929 estimated) in 7.0 s, 474 layouts/s, 104
MB; the one translation (SimAI text) took 0.21 s. Earlier figures: docs/performance.md, History.

The acceptance run with its finalists, by hand (2026-12-06, main 159b67f, astra-sim 518bd51's
analytical congestion-unaware binary): the same sweep with `--simulate top:20 --jobs 2 --cache DIR`
took 1 h 33 min of wall on the 2-core, 23 GiB machine (shared with other work; 3,981 s of CPU, the
sweep's own peak 11.4 GB). Of the top 20, the 9 without context parallelism ran on ASTRA-sim 2.x,
every rank finished, each simulated iteration the exact tier's to the nanosecond (7.007 to 7.247 s;
the fast tier within 0.4 %, Kendall's tau 0.94). The 11 with CP 2 were not simulated: 17.7 to 18.9
million trace nodes each, some 21.1 to 22.6 GiB for ASTRA-sim's feeder (finalists.NODE_BYTES),
more than the machine holds beside anything else; each row says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from children import run  # bench/children.py: the script's own folder is on sys.path

SPACE = ["--tp", "1,2,4,8", "--cp", "1,2", "--micro-batch", "1,2,4"]
SPACE += ["--recompute", "none,selective,full", "--distributed-optimizer", "on,off"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    gpus, batch = (128, 128) if parser.parse_args().quick else (1024, 1024)
    python = [sys.executable, "-m", "modtrans"]
    shared = ["--seq-len", "8192", "--global-batch", str(batch), "--device", "h100"]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "sweep"
        one = [
            "--tp",
            "8",
            "--pp",
            "8",
            "--sp",
            "--zero",
            "1",
            "--npus",
            str(gpus),
            *shared,
            "--dialect",
            "simai",
        ]
        base, base_mb = run([*python, "translate", "llama-3-70b", *one, "-o", str(Path(folder) / "one.txt")])
        sweep = ["--gpus", str(gpus), *shared, *SPACE, "--jobs", "2", "--no-cache", "-o", str(out)]
        wall, mb = run([*python, "sweep", "llama-3-70b", *sweep])
        summary = json.loads(out.with_suffix(".json").read_text())
    layouts = summary["enumerated"]
    refused, over = sum(summary["refused_by_rule"].values()), sum(summary["over_memory"].values())
    print(f"baseline: one translation (TP8 PP8, {gpus} GPUs) {base:.2f} s, {base_mb:.0f} MB")
    print(
        f"sweep: {layouts:,} layouts enumerated ({refused:,} refused by a rule, {over:,} over memory, "
        f"{summary['estimated']:,} estimated) in {wall:.1f} s, {mb:.0f} MB: {layouts / wall:.0f} layouts/s; "
        f"the sweep took {wall / base:.1f} translations' time"
    )


if __name__ == "__main__":
    main()
