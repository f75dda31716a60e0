"""The iteration time of a training run without the simulator: what ASTRA-sim 2.x's analytical
congestion-unaware backend would say of the traces, from the plan (`modtrans estimate`).

    modtrans.estimate.plan(the_plan, network=net)                      the exact tier: a built plan
    modtrans.estimate.layout("llama-3-70b", Layout(npus=1024, tp=8, pp=8), device="h100",
                             network="hgx-h100", seq_len=8192)         the fast tier: one layout
    modtrans.estimate.trace_set("out/llama-3-8b", network="dgx-a100")  a trace set on disk

Both return an Estimate: the iteration, its compute, exposed communication and bubble (of the
stage the iteration waits for), per stage the same and the memory, and tokens/s, TFLOP/s per GPU
and MFU derived from them.

    collectives.py  a collective's and a send's time on the network, as the backend computes it
    walk.py         the event simulation of ranks' operations, as ASTRA-sim's workload layer runs them
    exact.py        a plan's programs as the trace writer writes them, walked
    fast.py         one layout's estimate: chunks from per-unit costs, then the pipeline
    chains.py       a chunk's chains on two lanes, and how a lane held at their start delays them
    units.py        per-unit costs: the reduced model's one-stage plan read back and timed
    reductions.py   Megatron's data-parallel buckets of a chunk, filled once per block and timed
    lastback.py     a chunk's last backward walked: its tails, the send and its buckets on the lane
    gathers.py      --overlap-param-gather: a stage's parameter gathers beside each chunk's first forward
    pipeline.py     the pipeline over stages: the schedule's steps as a recurrence, not an event walk
    memory.py       the fast tier's memory per stage: the footprint's, fed the reduced model's units
    reduced.py      a model reduced to its layers outside the blocks and one block of each shape
    context.py      what every layout of a model on a cluster shares: options, IR, cost model
    traces.py       a trace set on disk read back into the walk's operations
    result.py       Estimate and StageTime
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modtrans.estimate.collectives import Fabric, sized
from modtrans.estimate.result import Estimate, StageTime
from modtrans.estimate.walk import EstimateError
from modtrans.plan.model import Plan as _Plan
from modtrans.simulate.network import Network
from modtrans.strategy.llm.options import Layout

__all__ = [
    "Estimate",
    "EstimateError",
    "Fabric",
    "Layout",
    "StageTime",
    "layout",
    "modelled",
    "network",
    "plan",
    "trace_set",
]


network = sized


def modelled(the_layout: Layout) -> None:
    """EstimateError (one line) where the fast tier does not model the layout's options
    (fast.modelled): what a sweep checks once, on the options its layouts share."""
    from modtrans.estimate.fast import modelled as checked

    checked(the_layout)


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

    net = sized(network, the_plan.npus)
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


def trace_set(prefix: str | Path, *, network: str | Network) -> Estimate:
    """A trace set on disk (PREFIX.<rank>.et, PREFIX.comm_groups.json, PREFIX.et-meta.json) as
    ASTRA-sim 2.x would run it on `network`: one trace per pipeline stage read where the
    .meta.json gives the mesh. Raises EstimateError for a set that cannot be read (one line)."""
    from modtrans import sidecar
    from modtrans.chakra.read import prefix_of
    from modtrans.chakra.validate import expand
    from modtrans.estimate.traces import estimate

    base = prefix_of(str(prefix)) or str(prefix)
    members = next(iter(expand([Path(base)]).values()), [])
    if not members:
        raise EstimateError(f"{prefix}: no trace files {base}.<rank>.et")
    net = sized(network, len(members))
    return estimate(base, members, sidecar.read(sidecar.of_set(base)), net)
