"""The generic path's whole-process speed (modtrans/hf/, the extra `hf`), as ratios against
baselines measured in the same run on the same machine:

    extract of gpt-oss-120b's default configuration (116.8 B parameters), no cache
                                  <= 2x `python -c "import torch, transformers"` (issue 36)
    the same, its IR cached       ~ the hand-written path's extract of a configuration it reads
                                  (Gemma 2 9B, fixtures/configs), which imports no torch

Run by hand, with the extra installed: `python bench/bench_hf.py [ROUNDS]` (about 20 s a round).
Each command is a fresh process. A round runs the four commands one after another, so that each
ratio compares processes that met the same load; the ratios printed are the medians of the
rounds' (default 5, after an untimed one), with the CPU time (user + system) beside the wall time
and the load average at the start and the end. The uncached runs each get an empty cache folder
(MODTRANS_CACHE), the cached runs one the untimed round filled.

The recurrent and state-space families' reads: bench/bench_hf_read.py.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def once(args: list[str], cache: str | None) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process; `cache`: its MODTRANS_CACHE (None: a new empty one)."""
    with tempfile.TemporaryDirectory() as empty:
        env = {**os.environ, "MODTRANS_CACHE": cache or empty}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> None:
    import transformers

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "gpt-oss-120b-default.json"
        data = transformers.AutoConfig.for_model("gpt_oss").to_dict()
        config.write_text(json.dumps(data), encoding="utf-8")
        ir = Path(folder) / "ir.json"
        cache = str(Path(folder) / "cache")
        written = ROOT / "fixtures" / "configs" / "gemma-2-9b.json"
        commands = {
            "imports": ([PY, "-c", "import torch, transformers"], None),
            "cold": ([PY, "-m", "modtrans", "extract", str(config), "-o", str(ir)], None),
            "warm": ([PY, "-m", "modtrans", "extract", str(config), "-o", str(ir)], cache),
            "fast": ([PY, "-m", "modtrans", "extract", str(written), "-o", str(ir)], None),
        }
        load = os.getloadavg()[0]
        for args, where in commands.values():  # untimed: files cached, the IR cache filled
            once(args, where)
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, (args, where) in commands.items():
                runs[name].append(once(args, where))
        load_end = os.getloadavg()[0]

    def median(name: str, i: int) -> float:
        return statistics.median(r[i] for r in runs[name])

    def ratio(a: str, b: str, i: int) -> float:
        return statistics.median(x[i] / y[i] for x, y in zip(runs[a], runs[b], strict=True))

    print(f"{rounds} interleaved rounds, load average {load:.1f} at the start, {load_end:.1f} at the end")
    print("                                    wall (median)          CPU (median)")
    rows = (
        ("import torch, transformers", "imports", None, "(baseline)"),
        ("extract gpt-oss-120b, no cache", "cold", "imports", "the import (goal <= 2x)"),
        ("extract gpt-oss-120b, IR cached", "warm", "fast", "the hand-written path's"),
        ("extract Gemma 2 9B (hand-written)", "fast", None, "(baseline of the cached run)"),
    )
    for label, name, base, said in rows:
        if base is None:
            print(f"{label:34s} {median(name, 0):6.2f} s {'':13s} {median(name, 1):6.2f} s   {said}")
        else:
            print(
                f"{label:34s} {median(name, 0):6.2f} s {ratio(name, base, 0):5.2f}x   "
                f"{median(name, 1):6.2f} s {ratio(name, base, 1):5.2f}x   {said}"
            )


if __name__ == "__main__":
    main()
