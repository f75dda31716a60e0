"""Reader/validator/writer throughput on generated 10,000- and 100,000-layer workloads.

Run by hand: `python bench/bench_workload.py`. Every figure is also printed as a ratio against a
plain `str.split()` tokenizer over the same text, measured in the same run, so numbers from
different machines compare. Also times `modtrans validate` as a whole process (target: < 1 s for
10,000 layers).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import modtrans
from modtrans.workload.checks import run_checks
from modtrans.workload.model import Dialect


def generate(layers: int) -> str:
    rows = ["DATA", str(layers)]
    for i in range(layers):
        size = 4 * (i % 4096 + 1) * 1024
        rows.append(
            f"layer_{i}_conv\t-1\t{13003 + i % 97}\tNONE\t0\t{12864 + i % 89}\tNONE\t0\t"
            f"{32291 + i % 83}\tALLREDUCE\t{size}\t{(32291 + i % 83) // 10}"
        )
    return "\r\n".join(rows)


def best_of(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def split_baseline(text: str) -> list[list[str]]:
    return [line.split() for line in text.split("\n")]


def main() -> None:
    for layers in (10_000, 100_000):
        text = generate(layers)
        runs = 3 if layers <= 10_000 else 1
        baseline = best_of(runs, lambda t=text: split_baseline(t))
        parsed = modtrans.parse(text)
        workload = parsed.workload
        assert workload is not None
        assert parsed.ok
        rows = {
            "str.split baseline": baseline,
            "parse": best_of(runs, lambda t=text: modtrans.parse(t)),
            "checks only": best_of(runs, lambda w=workload: run_checks(w, Dialect.ASTRA_SIM)),
            "validate (parse+checks)": best_of(runs, lambda t=text: modtrans.validate(t)),
            "write lossless": best_of(runs, lambda w=workload: modtrans.write(w)),
            "write canonical": best_of(runs, lambda w=workload: modtrans.write(w, "astra-sim")),
        }
        tracemalloc.start()
        modtrans.parse(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"\n{layers:,} layers, {len(text) / 1e6:.1f} MB")
        for name, seconds in rows.items():
            rate = layers / seconds
            print(
                f"  {name:<26} {seconds * 1000:9.1f} ms  {rate:12,.0f} layers/s  "
                f"{seconds / baseline:7.1f}x split"
            )
        print(f"  parse peak memory          {peak / 1e6:9.1f} MB  ({peak / len(text):.1f}x file size)")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "w.txt"
            path.write_text(text, newline="")
            command = [sys.executable, "-m", "modtrans", "validate", str(path)]
            process = best_of(3, lambda c=command: subprocess.run(c, capture_output=True, check=True))
            startup = best_of(
                3,
                lambda: subprocess.run(
                    [sys.executable, "-m", "modtrans", "--help"], capture_output=True, check=True
                ),
            )
        print(
            f"  `modtrans validate` process {process * 1000:8.1f} ms  (of which start-up "
            f"{startup * 1000:.0f} ms)"
        )


if __name__ == "__main__":
    main()
