"""The iteration time of a training run without the simulator: what ASTRA-sim 2.x's analytical
congestion-unaware backend would say of the traces, from the plan (`modtrans estimate`).

    modtrans.estimate.plan(the_plan, network=net)                      the exact tier: a built plan
    modtrans.estimate.layout("llama-3-70b", Layout(npus=1024, tp=8, pp=8), device="h100",
                             network="hgx-h100", seq_len=8192)         the fast tier: one layout

Both return an Estimate: the iteration, its compute, exposed communication and bubble (of the
stage the iteration waits for), per stage the same and the memory, and tokens/s, TFLOP/s per GPU
and MFU derived from them.

    collectives.py  a collective's and a send's time on the network, as the backend computes it
    walk.py         the event simulation of ranks' operations, as ASTRA-sim's workload layer runs them
    exact.py        a plan's programs as the trace writer writes them, walked
    fast.py         one layout's estimate from per-unit costs made once per (tp, cp, ep, sp, ...)
    context.py      what every layout of a model on a cluster shares: options, IR, cost model
    traces.py       a trace set on disk read back into the walk's operations
    result.py       Estimate and StageTime
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modtrans.estimate.collectives import Fabric
from modtrans.estimate.result import Estimate, StageTime
from modtrans.estimate.walk import EstimateError
from modtrans.plan.model import Plan as _Plan
from modtrans.simulate.network import Network, SimulateError
from modtrans.simulate.network import network as _network
from modtrans.strategy.llm.options import Layout

__all__ = ["Estimate", "EstimateError", "Fabric", "Layout", "StageTime", "layout", "network", "plan"]


def network(net: str | Network, npus: int) -> Network:
    """A network preset (simulate/network.py) sized to `npus`, or the Network given."""
    if isinstance(net, Network):
        return net
    try:
        return _network(net, npus)
    except SimulateError as error:
        raise EstimateError(str(error)) from None


def plan(
    the_plan: _Plan,
    *,
    network: str | Network,
    tick_ns: float = 1.0,
    tokens: int = 0,
    peak_flops: float | None = None,
) -> Estimate:
    """The exact tier: `the_plan` walked as ASTRA-sim 2.x runs its traces on `network`. `tick_ns`
    the plan's tick (1 for a plan translated for traces), `tokens` the iteration's (for tokens/s),
    `peak_flops` one GPU's (for MFU)."""
    from modtrans.estimate.exact import estimate

    net = globals()["network"](network, the_plan.npus)
    return estimate(the_plan, net, tick_ns=tick_ns, tokens=tokens, peak_flops=peak_flops)


def layout(
    model: str | Path,
    the_layout: Layout,
    *,
    device: str | None = None,
    network: str | Network = "hgx-h100",
    **training: Any,
) -> Estimate:
    """The fast tier: `model` (a built-in, a transformers config.json or an ONNX file) trained
    with `the_layout` on `network`; `training` the other options of `modtrans translate` by
    their names (seq_len, compute, dtype_bytes ...). What every layout of the model shares is
    made once and kept. Raises EstimateError for what cannot be estimated (one line)."""
    from modtrans.estimate.fast import estimate

    return estimate(model, the_layout, device=device, network=network, training=training)
