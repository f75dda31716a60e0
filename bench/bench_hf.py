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

`python bench/bench_hf.py scans [SEQUENCE]` times instead the recurrent and state-space families'
reads (`modtrans translate` of each default configuration at SEQUENCE tokens, default 2,048, no
cache), once each after the import's baseline: without mamba-ssm's and causal-conv1d's CUDA
kernels transformers runs their scans a token at a time, the same ops on the same shapes per step
(hf/kernels.py remembers each step's meta kernels and GEMM counts).

Latest, `modtrans translate` of each default configuration (wall s, one fresh process each, no
cache, 2 shared cores at load 1.5-2.8; before: 95d71a5, after: ae90a3e; the workloads byte for
byte the same; Zamba before at 2,048 tokens is hf37's figure, 47187dc):

                        256 tokens             2,048 tokens
                        before     after       before     after
    FalconMamba          12.1       7.9         66.7       46.5
    RecurrentGemma        5.1       3.2         18.2        8.1
    Zamba                45.8      20.4        345        152.1
    Jamba                 0.3       0.3          -          0.4   (the hand-written path: no torch)

72049da (Values' copies' `in` without a weak reference) took Zamba at 256 tokens from 20.5 s to
19.3 s CPU more. What remains is per op: torch's dispatch into the two modes and the recording,
about 37 us an op; Zamba's forward dispatches 516,000 ops at 256 tokens (cProfile), about 4
million at 2,048 (8x the steps).
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


SCANS = ("falcon_mamba", "recurrent_gemma", "jamba", "zamba")


def scans(sequence: int) -> None:
    """Each recurrent family's default configuration translated at `sequence` tokens, no cache."""
    import transformers

    base, _ = once([PY, "-c", "import torch, transformers"], None)
    print(f"{'import torch, transformers':28s} {base:7.2f} s  (baseline)")
    with tempfile.TemporaryDirectory() as folder:
        for family in SCANS:
            config = Path(folder) / f"{family}.json"
            config.write_text(
                json.dumps(transformers.AutoConfig.for_model(family).to_dict()), encoding="utf-8"
            )
            out = str(Path(folder) / "out.txt")
            wall, cpu = once(
                [PY, "-m", "modtrans", "translate", str(config), "--seq-len", str(sequence), "-o", out], None
            )
            print(f"{family:28s} {wall:7.2f} s {wall / base:6.1f}x   CPU {cpu:7.2f} s")


def main() -> None:
    import transformers

    if sys.argv[1:2] == ["scans"]:
        scans(int(sys.argv[2]) if len(sys.argv) > 2 else 2048)
        return
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
