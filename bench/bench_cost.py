"""Filling every compute field of ResNet-50 with each analytical model, against real SCALE-Sim.

Run by hand: `python bench/bench_cost.py`. The IR is extracted once; each model then costs all
layers (strategy + cost, i.e. what `translate` adds to extraction). The baseline is one real
SCALE-Sim v3 run of ResNet-50's layer_64_1_conv2 forward GEMM (3136 x 576 x 64, WS 256x256) when the
`scalesim` extra is installed (measured in this run, cache bypassed), else the ~14 s per conv layer
documented for SCALE-Sim's convolution mode in the compute-model issue.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from modtrans import cost
from modtrans.cost import scalesim
from modtrans.pipeline import extract
from modtrans.strategy import Params, build


def main() -> None:
    ir = extract("resnet50")
    if scalesim.available():
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            scalesim.run_gemm(3136, 576, 64, 256, 256, "ws", cache=Path(tmp))
            baseline, label = time.perf_counter() - start, "one real SCALE-Sim GEMM run (measured now)"
    else:
        baseline, label = 14.0, "one SCALE-Sim conv layer (~14 s, documented; extra not installed)"
    print(f"baseline: {label}: {baseline * 1000:,.0f} ms")
    for name in ("astra-sim-reference", "scalesim-v3", "roofline"):
        model = cost.get(name)
        runs = 20
        start = time.perf_counter()
        for _ in range(runs):
            workload = build(ir, model, params=Params.WEIGHTS)
        seconds = (time.perf_counter() - start) / runs
        print(
            f"{name:<20} {len(workload.layers)} layers, {len(ir.layers)} IR layers costed in "
            f"{seconds * 1000:6.2f} ms: {baseline / seconds:,.0f}x faster than the baseline"
        )


if __name__ == "__main__":
    main()
