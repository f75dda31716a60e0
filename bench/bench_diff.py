"""`modtrans diff` on two generated 100,000-layer workloads: 1 % of layers changed, a block moved.

Run by hand: `python bench/bench_diff.py [layers]`. Prints the time of each stage (parse both,
compare, render the text report, whole `modtrans diff` process) and peak memory, with the parse of
the same two files as the baseline measured in the same run (a diff should cost about as much as
reading its inputs).
"""

from __future__ import annotations

import io
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from rich.console import Console

from modtrans.diff import compare
from modtrans.diff.render import render
from modtrans.workload.parse import parse


def generate(layers: int, seed: int = 1) -> tuple[str, str]:
    rng = random.Random(seed)
    rows = [
        f"layer_{i}\t-1\t{1000 + i % 997}\tNONE\t0\t{900 + i % 991}\tNONE\t0\t{800 + i % 983}\tALLREDUCE\t"
        f"{4096 * (1 + i % 4099)}\t{80 + i % 97}"
        for i in range(layers)
    ]
    reference = ["DATA", str(layers), *rows]
    first = list(rows)
    for i in rng.sample(range(layers), layers // 100):  # 1 % changed
        fields = first[i].split("\t")
        fields[2] = str(int(fields[2]) + 7)
        first[i] = "\t".join(fields)
    start = layers // 3
    block = first[start : start + 50]  # a block of 50 layers moved 1,000 places down
    del first[start : start + 50]
    first[start + 1000 : start + 1000] = block
    return "\n".join(["DATA", str(layers), *first]) + "\n", "\n".join(reference) + "\n"


def timed(label: str, fn, baseline: float | None = None):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - start
    ratio = f"  ({seconds / baseline:.2f}x the parse of both files)" if baseline else ""
    print(f"{label:<28} {seconds * 1000:9.0f} ms{ratio}")
    return value, seconds


def main() -> None:
    layers = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    first_text, reference_text = generate(layers)
    print(f"{layers:,} layers per file, {layers // 100:,} changed, a block of 50 moved")
    (pair, parse_s) = timed("parse both (baseline)", lambda: (parse(first_text), parse(reference_text)))
    a, b = pair[0].workload, pair[1].workload
    assert a is not None
    assert b is not None
    diff, _ = timed("compare", lambda: compare(a, b), parse_s)
    tracemalloc.start()  # a second run for memory only: tracing slows Python several times
    compare(a, b)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"{'compare peak memory':<28} {peak / 1e6:9.0f} MB")
    print(f"  {diff.counts}")
    out = io.StringIO()
    timed(
        "render text report",
        lambda: render(diff, Console(file=out, width=100), first="a", reference="b"),
        parse_s,
    )
    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = Path(tmp, "a.txt"), Path(tmp, "b.txt")
        pa.write_text(first_text)
        pb.write_text(reference_text)
        command = [sys.executable, "-m", "modtrans", "diff", str(pa), str(pb), "--no-color"]
        timed(
            "modtrans diff (process)",
            lambda: subprocess.run(command, capture_output=True, check=False),
            parse_s,
        )
        probe = (
            "import resource,subprocess,sys; subprocess.run(sys.argv[1:], capture_output=True);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        )
        rss = subprocess.run(
            [sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True
        )
        print(f"{'modtrans diff peak RSS':<28} {int(rss.stdout) / 1024:9.0f} MB")


if __name__ == "__main__":
    main()
