"""What `modtrans simulate`'s fusion of a trace set costs (simulate/fusion.py), against its code at
a baseline revision in the same run: the set of bench_sweep_finalists.py's layout (Llama-3-70B at
TP 4 x PP 4, 20 chunks a stage, sequences of 8,192) written once, then fused by each version in a
process of its own, the two alternated; only the fusion step is timed (its CPU seconds, the
least of the repeats), and the fused sets must be byte for byte the same.

Run by hand: `python bench/bench_fusion.py [--npus 32] [--baseline main] [--repeat 3]`.

Latest (2026-12-06, the project's 2-core machine under a load of 5 to 7; this tree's one varint
decoder, integers.py `decoded`, against main 159b67f's fusion.py with a decoder of its own;
the least CPU of 3 runs each, alternated):

    ranks  nodes      fused      main      this      ratio
    32     423,976    255,368    2.29 s    2.25 s    0.983  (the decoder in chakra/wire.py, 776d904)
    32     423,976    255,368    2.30 s    2.26 s    0.986  (in integers.py, 78d1e2e)
    64     847,952    510,736    4.08 s    4.22 s    1.034  (runs 4.08-4.26 s and 4.22-4.46 s; 776d904)

The same bytes at both; the ratios within the runs' spread under the shared machine's load.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from against import alternated, options
from bench_sweep_finalists import plan_of

from modtrans.chakra import write

ROOT = Path(__file__).resolve().parents[1]
FUSE = """
import hashlib, importlib.util, sys, tempfile, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("fusion_under_test", sys.argv[1])
fusion = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
spec.loader.exec_module(fusion)
with tempfile.TemporaryDirectory() as folder:
    start = time.process_time()
    done = fusion.fused_set(sys.argv[2], int(sys.argv[3]), folder)
    cpu = time.process_time() - start
    digest = hashlib.sha256()
    for rank in range(int(sys.argv[3])):
        digest.update(Path(f"{done.prefix}.{rank}.et").read_bytes())
print(cpu, done.nodes, done.kept, digest.hexdigest())
"""


def fused(source: Path, prefix: Path, npus: int) -> tuple[float, int, int, str]:
    """One version's fusion of the set, in a process of its own: CPU seconds, nodes before and
    after, the SHA-256 of the fused ranks."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", FUSE, str(source), str(prefix), str(npus)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode:
        sys.exit(f"{source}: {done.stderr[-2000:]}")
    cpu, nodes, kept, digest = done.stdout.split()
    return float(cpu), int(nodes), int(kept), digest


def main() -> None:
    args = options("The fusion of a trace set by this tree against a baseline revision's.")
    npus = args.npus
    baseline = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{args.baseline}:modtrans/simulate/fusion.py"],
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bench-") as folder:
        prefix = Path(folder) / "plain"
        write(plan_of(npus, folder), prefix, tick_ns=1.0)
        old = Path(folder) / "baseline_fusion.py"
        old.write_bytes(baseline)
        versions = {"baseline": old, "this": ROOT / "modtrans" / "simulate" / "fusion.py"}

        def run(source: Path) -> tuple[float, tuple[int, int, str]]:
            cpu, nodes, kept, digest = fused(source, prefix, npus)
            return cpu, (nodes, kept, digest)

        times, (nodes, kept, digest) = alternated(versions, args.repeat, run)
    base, this = min(times["baseline"]), min(times["this"])
    print(f"{npus} ranks: {nodes:,} nodes fused to {kept:,}, the same bytes (SHA-256 {digest[:12]}...)")
    print(f"baseline ({args.baseline}): {base:.2f} s CPU  {times['baseline']}")
    print(f"this tree:      {this:.2f} s CPU  {times['this']}")
    print(f"ratio this / baseline: {this / base:.3f}")


if __name__ == "__main__":
    main()
