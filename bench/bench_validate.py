"""What checking a trace set costs (chakra/validate.py, ranks.py, read.py), against the package at a
baseline revision in the same run: the set of bench_sweep_finalists.py's layout (Llama-3-70B at
TP 4 x PP 4, 20 chunks a stage, sequences of 8,192) written once, then checked by each version in
a process of its own, the two alternated: the whole set across ranks (validate_paths: the
scanner's records) and each trace alone (check_set complete=False: read.py's records). Only the
checks are timed (their CPU seconds, the least of the repeats), and both versions must find the
same.

Run by hand: `python bench/bench_validate.py [--npus 32] [--baseline main] [--repeat 3]`.

Latest (2026-12-06, the project's 2-core machine under a simulation's load; this tree's length
prefixes read by integers.py `decoded`, against main 425c617's inline one- and two-byte paths;
32 traces, no finding in either version; the least CPU of the repeats):

    repeats  across ranks (base, this, ratio)   each alone (base, this, ratio)
    3        3.03 s  3.15 s  1.042              8.67 s  8.74 s  1.008
    5        3.05 s  2.98 s  0.977              8.77 s  8.11 s  0.925
    1        3.15 s  3.03 s  0.963              9.12 s  8.75 s  0.960

Each version's own runs spread 3.0-3.4 s and 8.1-10.9 s: the ratios are within that spread.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from against import alternated, options
from bench_sweep_finalists import plan_of

from modtrans.chakra import write

ROOT = Path(__file__).resolve().parents[1]
CHECK = """
import sys, time
from pathlib import Path
from modtrans.chakra.validate import check_set, validate_paths
files = sorted(Path(sys.argv[1]).glob("*.et"))
start = time.process_time()
across, checked = validate_paths(files)
middle = time.process_time()
alone = check_set({path: path.read_bytes() for path in files}, None, complete=False)
end = time.process_time()
print(middle - start, end - middle, checked, len(across), len(alone))
"""


def checked(tree: Path, folder: Path) -> tuple[float, float, tuple[int, int, int]]:
    """One version's checks of the set, in a process of its own: CPU seconds across ranks and
    alone, and what they found (files, findings across, findings alone)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(folder)], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode:
        sys.exit(f"{tree}: {done.stderr[-2000:]}")
    across, alone, *found = done.stdout.split()
    files, in_set, each = (int(n) for n in found)
    return float(across), float(alone), (files, in_set, each)


def main() -> None:
    args = options("The checks of a trace set by this tree against a baseline revision's.")
    npus = args.npus
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", args.baseline, "modtrans", "grammar", "schemas"],
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        base = Path(folder) / "baseline"
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(base, filter="data")
        traces = Path(folder) / "set"
        traces.mkdir()
        write(plan_of(npus, folder), traces / "plain", tick_ns=1.0)
        versions = {"baseline": base, "this": ROOT}

        def run(tree: Path) -> tuple[tuple[float, float], tuple[int, int, int]]:
            across, alone, found = checked(tree, traces)
            return (across, alone), found

        times, (files, in_set, each) = alternated(versions, args.repeat, run)
    print(f"{files} traces of {npus} ranks: {in_set} findings across ranks, {each} alone in both versions")
    for index, what in enumerate(("across ranks (validate_paths)", "each alone (read.py)")):
        old = min(t[index] for t in times["baseline"])
        new = min(t[index] for t in times["this"])
        print(f"{what}: baseline ({args.baseline}) {old:.2f} s, this tree {new:.2f} s, ratio {new / old:.3f}")
        runs = {name: [round(t[index], 2) for t in times[name]] for name in versions}
        print(f"  runs: baseline {runs['baseline']}, this tree {runs['this']}")


if __name__ == "__main__":
    main()
