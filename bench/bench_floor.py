"""Chakra traces against the floor: a plain Python loop writing the same bytes to as many files.

Run by hand: `python bench/bench_floor.py [--runs N] [--only C1|C4] [--against DIR]` (C4 writes 1.3 GB
a run, three times over; about a minute a round on 2 cores). `--against DIR` runs another checkout
(`git archive main | tar -x -C DIR`) after ours in each round, so both meet the same load, and
compares its bytes with ours once. Configurations as issue 39 names them:

    C1  Llama-3-8B  TP 2 x PP 2 x DP 2 + SP, global batch 8      (8 ranks)
    C4  Llama-3-70B TP 8 x PP 8 x DP 16 + SP, global batch 128   (1,024 ranks, 1.3 GB)

Each round, in fresh processes, taking turns: `modtrans translate ... --format chakra-et` into an
empty folder, then the floor twice into another: a child that reads the files ModTrans wrote into
memory and writes them back out, file by file (open, one write, close), without an fsync (the page
cache's speed: new files, as ModTrans writes them here, are not fsynced: fileio.durable) and with
one of each file (what MODTRANS_FSYNC=1, or replacing every file, costs). A floor is the child's
whole wall time less the reading it reports, so it holds the interpreter's start and the writes.
`os.sync()` before each child: no run waits for the previous one's write-back. CPU is the child's
user and system time (the floor's less its reading), what a loaded machine's wall time blurs.
ModTrans runs with its bytecode cached, as an installed copy does (PYTHONDONTWRITEBYTECODE, set in
some shells, is dropped). Figures are the best of the rounds; the ratio is ModTrans over a floor
(issue 39's goal for C4: at most 1.5x the floor without fsync). A shared VM's speed moves between
rounds (the floor 0.43-0.89 s within a quarter hour at a load under 1.5), so each round's own
ratios are printed too, ModTrans over the floor run next to it (and over the other checkout), and
their median.

Latest figures (2026-12-06, main 6c7ed0f, the project's 2-core VM at a load of 0.2-0.9, three
runs of `--only C4 --runs 4|5|6` one after another, 15 rounds): C4 at 1.60x, 1.25x and 1.22x the
floor without fsync, best against best (ModTrans 0.62-0.70 s, the floor 0.44-0.54 s); each
round's own ratio 1.09-1.60x, median 1.25x, at or under 1.5x in 14 of the 15; CPU 2.07-2.70x the
floor's. C1 (8 ranks, made in the main process, no workers): 0.33 s, the floor 0.01 s. Under
load the ratio grows (the floor is one process, ModTrans's writers two): main a972908 in ten
rounds at a load of 0.6-1.3 beside other work made 1.24-1.78x, 5 of 10 at or under 1.5x. History
and what is left: docs/performance.md, Large translations and History (bench_floor.py).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

CONFIGS = {
    "C1": ["llama-3-8b", "--tp", "2", "--pp", "2", "--dp", "2", "--sp", "--global-batch", "8"],
    "C4": ["llama-3-70b", "--tp", "8", "--pp", "8", "--dp", "16", "--sp", "--global-batch", "128"],
}

FLOOR = """
import os, sys, time
source, target, durable = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
start = time.perf_counter()
files = [(name, open(os.path.join(source, name), "rb").read()) for name in sorted(os.listdir(source))]
print(time.perf_counter() - start, time.process_time())
for name, data in files:
    with open(os.path.join(target, name), "wb") as out:
        out.write(data)
        if durable:
            out.flush()
            os.fsync(out.fileno())
"""


def timed(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """A child's wall and CPU seconds (user and system, its threads' too) and its standard output;
    exits with its error output when it fails."""
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=env)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(args)}\n{done.stderr[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return seconds, cpu, done.stdout


def empty(folder: Path) -> None:
    for path in folder.iterdir():
        path.unlink()


def same(ours: Path, theirs: Path) -> bool:
    """Whether two folders hold the same files, byte for byte."""
    names = sorted(p.name for p in ours.iterdir())
    if names != sorted(p.name for p in theirs.iterdir()):
        return False
    return all(filecmp.cmp(ours / name, theirs / name, shallow=False) for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="rounds; each figure is the best of them")
    parser.add_argument("--only", choices=sorted(CONFIGS), help="one configuration")
    parser.add_argument(
        "--against",
        metavar="DIR",
        help="another checkout (`git archive main | tar -x -C DIR`), run after ours each round",
    )
    options = parser.parse_args()
    names = [options.only] if options.only else list(CONFIGS)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # ModTrans as installed: its bytecode cached
    other = None
    if options.against:
        other = {**os.environ, "PYTHONPATH": str(Path(options.against).resolve())}
    with tempfile.TemporaryDirectory() as tmp:
        ours, floor, theirs = Path(tmp, "ours"), Path(tmp, "floor"), Path(tmp, "theirs")
        for folder in (ours, floor, theirs):
            folder.mkdir()
        for name in names:
            load = os.getloadavg()[0]
            translate = [sys.executable, "-m", "modtrans", "translate", *CONFIGS[name]]
            translate += ["--format", "chakra-et", "-q", "-o"]
            best = {
                "modtrans": float("inf"),
                "fsync": float("inf"),
                "write": float("inf"),
                "theirs": float("inf"),
            }
            cpu = dict(best)
            rounds: dict[str, list[float]] = {"floor": [], "theirs": []}  # each round's own ratios
            for turn in range(options.runs):
                empty(ours)
                seconds, used, _ = timed([*translate, str(ours / "t")])
                mine = seconds
                best["modtrans"], cpu["modtrans"] = min(best["modtrans"], seconds), min(cpu["modtrans"], used)
                for label, durable in (("fsync", "1"), ("write", "0")):
                    empty(floor)
                    args = [sys.executable, "-c", FLOOR, str(ours), str(floor), durable]
                    seconds, used, out = timed(args)
                    wall_read, cpu_read = map(float, out.split())
                    best[label] = min(best[label], seconds - wall_read)
                    cpu[label] = min(cpu[label], used - cpu_read)
                rounds["floor"].append(mine / (seconds - wall_read))
                empty(floor)
                if other is not None:
                    empty(theirs)
                    seconds, used, _ = timed([*translate, str(theirs / "t")], other)
                    best["theirs"], cpu["theirs"] = min(best["theirs"], seconds), min(cpu["theirs"], used)
                    rounds["theirs"].append(mine / seconds)
                    if turn == 0 and not same(ours, theirs):
                        print(f"{name}: {options.against} writes other bytes than ours")
                    empty(theirs)
            files = list(ours.iterdir())
            size = sum(p.stat().st_size for p in files)
            empty(ours)
            print(
                f"{name}: {len(files):,} files, {size:,} bytes; modtrans {best['modtrans']:.2f} s, "
                f"floor {best['fsync']:.2f} s with fsync ({best['modtrans'] / best['fsync']:.2f}x), "
                f"{best['write']:.2f} s without ({best['modtrans'] / best['write']:.2f}x); CPU "
                f"{cpu['modtrans']:.2f} s, the floor's {cpu['write']:.2f} s "
                f"({cpu['modtrans'] / cpu['write']:.2f}x); load {load:.1f} to {os.getloadavg()[0]:.1f}; "
                f"each round's own ratio to the floor without fsync: median {median(rounds['floor']):.2f}x "
                f"({', '.join(f'{r:.2f}' for r in rounds['floor'])})"
            )
            if other is not None:
                print(
                    f"{name}: {options.against} in turns: {best['theirs']:.2f} s "
                    f"({best['theirs'] / best['write']:.2f}x the floor without fsync), CPU "
                    f"{cpu['theirs']:.2f} s ({cpu['theirs'] / cpu['write']:.2f}x); ours over theirs: wall "
                    f"{best['modtrans'] / best['theirs']:.2f}, CPU {cpu['modtrans'] / cpu['theirs']:.2f}; "
                    f"each round's ours over theirs: median {median(rounds['theirs']):.2f}"
                )


if __name__ == "__main__":
    main()
