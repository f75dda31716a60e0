"""The fast tier's speed: layouts estimated per second, whole process, against the exact tier.

Run by hand: `python bench/bench_estimate.py [--quick]`. Issue 38's search space: Llama-3-70B on
1,024 H100s (hgx-h100: nodes of 8 on NVLink, 50 GB/s between them), global batch 1,024 sequences
of 8,192 tokens; tensor {1, 2, 4, 8} x pipeline {every divisor of the 80 blocks that divides the
GPUs} x virtual stages {1, 2, 4, 5} x context {1, 2} x micro-batch {1, 2, 4} x recompute {none,
selective, full} x distributed optimizer {off (ZeRO 0), on (ZeRO 1)}, each layout kept where
Megatron-LM's rules accept it (strategy/llm/options.py's Layout). Goal: at least 100 layouts per
second on 2 cores.

Each tier runs in a fresh process (`python -c`), timed whole (start-up, model, every layout):

    fast      modtrans.estimate.layout on every layout of the space
    baseline  the exact tier on two of them (T 8 x P 8 x D 16, 64 micro-batches: each a plan of
              every rank built and walked, modtrans.estimate.plan), the per-layout cost a sweep
              would pay without the fast tier

`--quick`: the fast tier on every 8th layout. Each child's CPU seconds are printed beside its
wall time: on a shared machine the wall time says how busy it was as much as how fast we are.
Latest (2026-12-06, 68a391d, 2 cores shared by 8 sessions, load average 9.6): 1,770 layouts in
19.0 s wall, 4.8 s CPU (93 layouts/s by the wall clock, 371 per CPU second), the baseline 0.06
layouts/s (0.21 per CPU second): 1,638 times as many layouts per second.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SPACE = """
import itertools, sys, time
from modtrans.estimate import EstimateError, layout
from modtrans.strategy.llm.options import Layout, LayoutError, Recompute, Schedule

def space():
    for tp, pp, vpp, cp, mb, rc, zero in itertools.product(
        (1, 2, 4, 8), (1, 2, 4, 5, 8, 10, 16, 20, 40, 80), (1, 2, 4, 5), (1, 2), (1, 2, 4),
        (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL), (0, 1),
    ):
        if 80 % (pp * vpp) or (vpp > 1 and pp == 1):
            continue
        try:
            yield Layout(npus=1024, tp=tp, pp=pp, cp=cp, sp=tp > 1, zero=zero, micro_batch=mb,
                         global_batch=1024, vpp=vpp, recompute=rc,
                         schedule=Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B)
        except LayoutError:
            continue
"""

FAST = (
    SPACE
    + """
every = int(sys.argv[1])
layouts = list(space())[::every]
done = failed = 0
for lay in layouts:
    try:
        layout("llama-3-70b", lay, device="h100", network="hgx-h100", seq_len=8192)
        done += 1
    except EstimateError:
        failed += 1
print(done, failed)
"""
)

EXACT = (
    SPACE
    + """
from modtrans.estimate import plan
from modtrans.estimate.context import context
from modtrans.strategy.llm.build import plan as build
ctx = context("llama-3-70b", "h100", {"seq_len": 8192})
shape = (8, 8, 1, 1, 1)
picked = [l for l in space() if (l.tp, l.pp, l.micro_batch, l.cp, l.vpp) == shape][: int(sys.argv[1])]
for lay in picked:
    p = build(ctx.ir(lay), ctx.cost, lay, params=ctx.options.params, dtype_bytes=None)
    plan(p, network="hgx-h100")
print(len(picked), 0)
"""
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 8th layout")
    quick = parser.parse_args().quick
    python = [sys.executable, "-c"]
    rows = []
    for name, code, arg in (
        ("baseline (exact tier)", EXACT, "2"),
        ("fast tier", FAST, "8" if quick else "1"),
    ):
        start = time.perf_counter()
        child = subprocess.Popen([*python, code, arg], stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        said = child.stdout.read().split()
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        if status != 0 or len(said) < 2:
            sys.exit(f"{name}: failed")
        done, failed = (int(x) for x in said[-2:])
        cpu = usage.ru_utime + usage.ru_stime
        rows.append((name, done / wall, done / cpu))
        print(
            f"{name:<22} {done:>5} layouts ({failed} refused): {wall:6.1f} s wall, {cpu:6.1f} s CPU, "
            f"{done / wall:7.2f} layouts/s ({done / cpu:7.2f} per CPU second)"
        )
    print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    ratio = rows[1][1] / rows[0][1]
    print(f"fast / baseline: {ratio:,.0f}x layouts per second")
    print(f"goal >= 100 layouts/s: {rows[1][1] >= 100} by the wall clock, {rows[1][2] >= 100} per CPU second")


if __name__ == "__main__":
    main()
