"""A sweep from end to end: enumerate the layouts (space.py), keep those that fit the device's
memory (fit.py), estimate each (modtrans.estimate.layout, the fast tier) on the engine
(engines.py, tasks.py), simulate the best K on ASTRA-sim 2.x (finalists.py), rank them
(rows.py). Every result is kept by the digest of what made it (cache.py): a sweep run again, or
stopped and run again, does only what is left. Stopped (Ctrl-C, SIGTERM), it returns what it
finished, complete rows only, with `stopped` set; the caller writes that table and ends."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modtrans import progress
from modtrans.plan.model import StageMemory
from modtrans.strategy.llm.footprint import Footprint
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.sweep import cache as caching
from modtrans.sweep import engines, fit, space
from modtrans.sweep.rows import Row, ranked
from modtrans.sweep.tasks import Outcome, Setup, estimated, simulated

if TYPE_CHECKING:
    from modtrans.cost import CostModel


def model_digest_of(model: str) -> str:
    """What a result depends on besides its options: the model file's content and modtrans's
    source (cache.code)."""
    from modtrans.pipeline import model_file

    return caching.digest({"model": caching.content(model_file(model)), "code": caching.code()})


def cache_folder(given: Path | str | None, use: bool) -> Path | None:
    if not use:
        return None
    return Path(given) if given is not None else caching.default_folder()


def sweep(
    setup: Setup,
    the_space: space.Space,
    gpus: Sequence[int],
    *,
    simulate: str = "none",
    jobs: int = 1,
    engine: str = engines.LOCAL,
    scheduler: str | None = None,
    cache: Path | None = None,
) -> Outcome:
    """The sweep of the module's docstring. Raises EngineError, SimulateError, ChoiceError,
    EstimateError (a model or option the estimate refuses), CacheError before any long work
    starts."""
    from modtrans.estimate.context import context
    from modtrans.simulate import binary
    from modtrans.sweep.finalists import how_many

    if how_many(simulate, 1):  # the spelling, and the simulator, checked before anything runs
        binary(setup.astra_sim)
    ctx = context(setup.model, setup.device, setup.options)
    base = _base_layout(setup.model, setup.options, setup.device)
    _estimable(setup, base, gpus)
    caching.Cache(cache).close()  # CacheError: a folder that cannot keep results, said now
    described = ctx.cost.describe().get("memory_bytes")
    outcome = Outcome([], capacity_bytes=described if isinstance(described, int) else None)
    outcome.warnings = [f"warning {d.code} {d.message}" for d in ctx.said]  # every layout's alike
    runner = engines.start(engine, jobs, scheduler)
    done: list[tuple[Layout, Row, dict[str, Any]]] = []
    try:  # stopped anywhere from here (estimating, simulating, closing), the finished rows stay
        try:
            fitted = _fitting(base, the_space, gpus, Footprint(ctx.ir), ctx.cost, outcome)
            digest = model_digest_of(setup.model)
            with caching.Cache(cache) as store:
                estimated(setup, fitted, runner, store, digest, outcome, done)
                if not outcome.stopped:
                    order = {id(row): i for i, row in enumerate(ranked([row for _, row, _ in done]))}
                    timed = sorted(
                        (d for d in done if d[1].estimate_s is not None), key=lambda d: order[id(d[1])]
                    )
                    simulated(setup, timed[: how_many(simulate, len(timed))], runner, store, digest, outcome)
        finally:
            runner.close()
    except KeyboardInterrupt:
        outcome.stopped = True
    outcome.rows = ranked([row for _, row, _ in done])
    return outcome


def _checked(footprint: Footprint, cost: CostModel) -> Callable[[Layout], None]:
    """The model's rules (Footprint.check) and, for a layout with --tp-comm-overlap, the node
    Transformer Engine's userbuffers need (userbuffers.fabric: --compute gpu, an NVLink node
    known for the device, T within it; judged once per T): a layout they refuse is counted
    under its rule, not estimated into an error row."""
    from modtrans.strategy.llm import userbuffers

    nodes: dict[int, str | None] = {}

    def check(layout: Layout) -> None:
        footprint.check(layout)
        if not layout.tp_comm_overlap:
            return
        if layout.tp not in nodes:
            try:
                userbuffers.fabric(cost, layout.tp)
                nodes[layout.tp] = None
            except LayoutError as error:
                nodes[layout.tp] = str(error)
        refused = nodes[layout.tp]
        if refused is not None:
            raise LayoutError(refused)

    return check


def _estimable(setup: Setup, base: Layout, gpus: Sequence[int]) -> None:
    """EstimateError, before anything runs, for what would leave every row of a GPU count without
    an estimate: a network that is none or does not hold N GPUs (the estimate's own sizing,
    estimate.network), an option the fast tier does not model (estimate.modelled, read off the
    fields every layout shares)."""
    from modtrans import estimate

    for n in gpus:
        estimate.network(setup.network, n)
    estimate.modelled(base)


def _fitting(
    base: Layout,
    the_space: space.Space,
    gpus: Sequence[int],
    footprint: Footprint,
    cost: CostModel,
    outcome: Outcome,
) -> list[tuple[Layout, tuple[StageMemory, ...]]]:
    """Every layout of the space on each GPU count that the rules accept and the memory holds,
    the others counted in `outcome` by why; `base` the fields they share and the global batch."""
    fixed = {name: getattr(base, name) for name in _SHARED}
    experts = max((x.moe.experts for x in footprint.ir(base).layers if x.moe is not None), default=0)
    model = space.Model(footprint.blocks(base), experts)
    fitted: list[tuple[Layout, tuple[StageMemory, ...]]] = []
    check = _checked(footprint, cost)
    with progress.task("enumerating", total=None):
        for n in gpus:
            found = space.enumerate_layouts(
                the_space, npus=n, global_batch=base.batch, model=model, check=check, **fixed
            )
            kept = fit.fitting(found.layouts, footprint, outcome.capacity_bytes)
            outcome.refused.update(found.refused + kept.refused)
            outcome.over.update(kept.over)
            outcome.enumerated += len(found.layouts)
            fitted += kept.layouts
    return fitted


_SHARED = (
    "framework",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "vocab_divisor",
    "capacity_factor",
    "pad_to_capacity",
    "etp",
    "attention",
    "fp8",
)
"""The Layout fields every layout of a sweep takes from the training options (request.py's reading)."""


def _base_layout(model: str, training: dict[str, Any], device: str | None = None) -> Layout:
    """The training options' layout on one GPU (request._layout's reading of them): the fields
    every layout shares, and the global batch; on `device`, which the options' rules may read
    (--precision fp8 needs FP8 tensor cores)."""
    from modtrans.cost import OWN_ATTENTION
    from modtrans.estimate.context import context
    from modtrans.request import prepare, request_of

    given = {**training, "npus": 1, "tp": 1, **({"device": device} if device is not None else {})}
    if training.get("overlap_param_gather") and "zero" not in training:
        given["zero"] = 1  # its rule (options.py): the distributed optimizer, which the layouts' --zero tries

    prepared = prepare(request_of(model, given, caller="sweep"))
    layout = prepared.options.parallel.layout
    assert layout is not None  # --tp lays a transformer out
    if layout.attention == OWN_ATTENTION:  # the model's own kernel, as the estimate settled it
        layout = dataclasses.replace(
            layout, attention=context(model, device, training).options.cost.attention
        )
    return layout
