"""What a sweep's finalist costs ASTRA-sim 2.x, its traces plain and fused (chakra/fuse.py): the
simulator's peak memory and CPU time, whole process, against the nodes it loads, and that both
runs give every rank the same time. ASTRA-sim's feeder (FeederV3, et_feeder.cpp:
build_index_dependancy_cache) indexes every node of every rank's trace and holds three
dependency graphs of them before it runs, so its memory grows with the nodes of the whole set.

Run by hand, one at a time (over 64 ranks under the shared machine's simulator lock), with the
simulator's binary in MODTRANS_ASTRA_SIM:
`python bench/bench_sweep_finalists.py [--npus N] [--plain]` (default 64 ranks; `--plain` also
runs the plain traces). The layout: the acceptance sweep's best by the estimate, Llama-3-70B at
TP 4 x PP 4, 20 chunks a stage, micro-batch 1, 16 micro-batches per replica, sequences of 8,192,
the distributed optimizer, on hgx-h100: N / 16 data ranks, every rank's trace the same size at
every N.

Latest (2026-12-06, 0e20bcc, the project's 2-core machine at a load of 11-13), astra-sim
518bd51's analytical congestion-unaware binary (peak RSS and CPU of the run, its Python caller's
included; 128 and 256 ranks under the simulator lock):

    ranks  traces  nodes        peak RSS   CPU      iteration
    32     fused      255,368     331 MB    7.3 s   17,731,199,739 ns
    64     plain      847,952   1,039 MB   30.3 s   17,770,324,275 ns
    64     fused      510,736     629 MB   17.3 s   17,770,324,275 ns
    128    fused    1,021,472   1,227 MB   44.9 s   17,791,047,318 ns
    256    fused    2,042,944   2,426 MB  105.6 s   17,803,730,475 ns

1.2 KiB a node (1.20 KiB from 32 to 256 ranks fused, 1.25 KiB between 64 ranks plain and fused),
32 MB besides; CPU 2.4 times for twice the ranks. At 1,024 ranks the fused set has 8.2 million
nodes: some 9.3 GiB for one simulation (the plain set 13.6 million, 15.5 GiB), twice that for
--jobs 2.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from modtrans import api
from modtrans.chakra import fuse, write
from modtrans.chakra.read import read
from modtrans.plan.model import Plan
from modtrans.request import prepare, request_of
from modtrans.simulate import astra2, network
from modtrans.simulate.network import write_configurations

LAYOUT = {"tp": 4, "pp": 4, "vpp": 20, "schedule": "interleaved", "micro_batch": 1, "zero": 1, "sp": True}


def simulated(binary: Path, prefix: Path, npus: int) -> tuple[float, float, list[tuple[str, ...]]]:
    """Peak RSS (MB), CPU seconds and every rank's `sys[i] finished` figures of one run (the binary
    exits 134 at teardown, after its results: they are what is judged)."""
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        files = write_configurations(folder, astra2.configurations(network("hgx-h100", npus)))
        command = [
            str(binary),
            f"--workload-configuration={prefix}",
            f"--system-configuration={files['system.json']}",
            f"--network-configuration={files['network.yml']}",
            f"--remote-memory-configuration={files['memory.json']}",
            f"--logging-folder={folder}",
            f"--comm-group-configuration={prefix}.comm_groups.json",
        ]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert child.stdout is not None
        log = child.stdout.read().decode(errors="replace")
        _, _, usage = os.wait4(child.pid, 0)
    said = re.findall(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+)", log)
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, sorted(said)


def plan_of(npus: int, folder: str | Path) -> Plan:
    """Llama-3-70B's plan in LAYOUT on `npus` ranks (a sequence of 8,192 a rank), as a translation
    to Chakra traces into `folder` makes it: the set this script and bench_fusion.py and
    bench_validate.py write."""
    options = {**LAYOUT, "npus": npus, "global_batch": npus, "seq_len": 8192}
    options |= {"format": "chakra-et", "output": f"{folder}/x"}
    plan = api.run(prepare(request_of("llama-3-70b", options))).plan
    assert plan is not None
    return plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--npus", type=int, default=64)
    parser.add_argument("--plain", action="store_true")
    args = parser.parse_args()
    binary = astra2.binary(None)
    npus = args.npus
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        plan = plan_of(npus, folder)
        runs = {}
        for name in ("fused", "plain") if args.plain else ("fused",):
            prefix = Path(folder) / name
            write(fuse.fused(plan) if name == "fused" else plan, prefix, tick_ns=1.0)
            nodes = sum(len(read(p.read_bytes(), p.name).nodes) for p in Path(folder).glob(f"{name}.*.et"))
            start = time.perf_counter()
            rss, cpu, said = simulated(binary, prefix, npus)
            if len(said) != npus:
                sys.exit(f"{name}: ASTRA-sim finished {len(said)} of {npus} ranks")
            wall = max(int(cycles) for _, cycles, _ in said)
            print(
                f"{npus} ranks, {name}: {nodes:,} nodes, peak RSS {rss:,.0f} MB, CPU {cpu:.1f} s "
                f"(wall {time.perf_counter() - start:.0f} s), iteration {wall:,} ns",
                flush=True,
            )
            runs[name] = said
            for path in Path(folder).glob(f"{name}.*.et"):
                path.unlink()
    if len(runs) == 2:
        print("every rank the same plain and fused:", runs["plain"] == runs["fused"])


if __name__ == "__main__":
    main()
