"""What a sweep runs on its engine and keeps: a batch of layouts estimated (the fast tier,
modtrans.estimate.layout), a finalist simulated (finalists.py), each result under the digest of
what made it (cache.py) and its row filled in (rows.py)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modtrans import progress
from modtrans._version import __version__
from modtrans.plan.model import StageMemory
from modtrans.strategy.llm.options import Layout
from modtrans.sweep import cache as caching
from modtrans.sweep import engines, space
from modtrans.sweep.rows import Row

BATCH = 16
"""Layouts a task estimates: one task's overhead (a pool's 0.5 ms, Dask's 19 ms) is spread over
them, and a stopped sweep loses at most this many estimates per worker."""


@dataclass(frozen=True)
class Setup:
    """What every task of one sweep shares (sent to the workers: picklable)."""

    model: str
    device: str | None
    network: str
    training: tuple[tuple[str, Any], ...]  # the options of `modtrans translate` every layout shares
    astra_sim: str | None = None

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.training)


@dataclass
class Outcome:
    """What a sweep found: the ranked rows and how every enumerated layout was accounted for."""

    rows: list[Row]
    enumerated: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # rule -> layouts
    over: Counter[str] = field(default_factory=Counter)  # why -> layouts over the device's memory
    estimated: int = 0
    cached: int = 0
    simulated: int = 0  # finalists with a simulated time, from the cache or run now
    unsimulated: int = 0  # finalists without one: their rows say why
    capacity_bytes: int | None = None
    stopped: bool = False
    failed: str | None = None  # why the sweep stopped short (engines.WorkerError), its rows kept
    written: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the model's, as translate says them (M807, M808)

    def summary(self) -> dict[str, Any]:
        return {
            "warnings": list(self.warnings),
            "enumerated": self.enumerated + sum(self.refused.values()),
            "refused_by_rule": dict(self.refused.most_common()),
            "over_memory": dict(self.over.most_common()),
            "fit": len(self.rows),
            "estimated": self.estimated,
            "from_cache": self.cached,
            "simulated": self.simulated,
            "not_simulated": self.unsimulated,
            "device_memory_bytes": self.capacity_bytes,
            "stopped": self.stopped,
            "failed": self.failed,
        }


def estimate_task(task: tuple[Setup, list[Layout]]) -> list[dict[str, Any] | str]:
    """A batch's estimates (in a worker): the figures a row takes, or the one-line reason."""
    from modtrans import estimate

    setup, layouts = task
    out: list[dict[str, Any] | str] = []
    for layout in layouts:
        try:
            e = estimate.layout(
                setup.model, layout, device=setup.device, network=setup.network, **setup.options
            )
        except (estimate.EstimateError, ValueError) as error:
            out.append(str(error))
            continue
        out.append(
            {
                "estimate_s": e.iteration_s,
                "compute_s": e.compute_s,
                "exposed_comm_s": e.exposed_comm_s,
                "bubble_s": e.bubble_s,
                "flops": e.flops,
                "tokens": e.tokens,
                "peak_flops": e.peak_flops,
            }
        )
    return out


def row_of(setup: Setup, layout: Layout, memory: Sequence[StageMemory]) -> Row:
    gib = [round(m.total / 2**30, 3) for m in memory]
    return Row(
        setup.model,
        layout.npus,
        **space.options_of(layout),
        memory_gib=max(gib),
        memory_per_stage_gib=gib,
        framework=layout.framework.value,  # a sweep's shared option: the label's ZeRO-1 (Row.label)
    )


def rates(row: Row, figures: dict[str, Any], iteration: float | None, tier: str) -> None:
    """Tokens/s, TFLOP/s per GPU and MFU of `iteration` (the estimate's definitions:
    estimate/result.py, Megatron-LM's TFLOP/s of every rank's FLOPs over iteration x ranks)."""
    if not iteration:
        return
    row.tier = tier
    row.tokens_per_s = figures["tokens"] / iteration
    row.tflops_per_gpu = figures["flops"] / iteration / row.gpus / 1e12
    peak = figures.get("peak_flops")
    row.mfu = row.tflops_per_gpu * 1e12 / peak if peak else None


def key_of(setup: Setup, layout: Layout, tier: str, model_digest: str | None, extra: Any = None) -> str:
    return caching.digest(
        {
            "tier": tier,
            "modtrans": __version__,
            "model": model_digest or setup.model,
            "device": setup.device,
            "network": setup.network,
            "training": setup.training,
            "layout": dataclasses.asdict(layout),
            "extra": extra,
        }
    )


def estimated(
    setup: Setup,
    fitted: Iterable[tuple[Layout, tuple[StageMemory, ...]]],
    engine: engines.Engine,
    store: caching.Cache,
    model_digest: str | None,
    outcome: Outcome,
    done: list[tuple[Layout, Row, dict[str, Any]]],
) -> None:
    """Every fitting layout's row with its estimate (from the cache where it is there), appended
    to `done` as each finishes. Stopped, `done` holds the rows finished so far (outcome.stopped
    set)."""
    todo: list[tuple[Layout, Row, str]] = []
    for layout, memory in fitted:
        row = row_of(setup, layout, memory)
        key = key_of(setup, layout, "estimate", model_digest)
        found = store.get(key)
        if found is None:
            todo.append((layout, row, key))
            continue
        _fill(row, found)
        done.append((layout, row, found if isinstance(found, dict) else {}))
        outcome.cached += 1
    batches = [todo[i : i + BATCH] for i in range(0, len(todo), BATCH)]
    try:
        with progress.task("estimating", total=len(todo)) as advance:
            for index, results in engine.run(estimate_task, [(setup, [t[0] for t in b]) for b in batches]):
                for (layout, row, key), found in zip(batches[index], results, strict=True):
                    store.put(key, found)
                    _fill(row, found)
                    done.append((layout, row, found if isinstance(found, dict) else {}))
                    outcome.estimated += 1
                advance(len(results))
    except KeyboardInterrupt:
        outcome.stopped = True
    except engines.WorkerError as error:
        outcome.stopped, outcome.failed = True, str(error)


def _fill(row: Row, found: dict[str, Any] | str) -> None:
    if isinstance(found, str):
        row.error = found
        return
    for name in ("estimate_s", "compute_s", "exposed_comm_s", "bubble_s"):
        setattr(row, name, found[name])
    rates(row, found, row.estimate_s, "estimate")


def simulated(
    setup: Setup,
    best: list[tuple[Layout, Row, dict[str, Any]]],
    engine: engines.Engine,
    store: caching.Cache,
    model_digest: str | None,
    outcome: Outcome,
) -> None:
    """ASTRA-sim 2.x on each of `best` (finalists.py), their rows' simulated times filled in."""
    from modtrans.simulate import binary
    from modtrans.sweep.finalists import Passing, simulate_task

    if not best:
        return
    executable = binary(setup.astra_sim)  # SimulateError: no binary, said before anything runs
    simulator = caching.content(executable)
    todo = []
    for layout, row, figures in best:
        row.finalist = True
        key = key_of(setup, layout, "astra-sim-2", model_digest, simulator)
        found = store.get(key)
        if found is None:
            todo.append((layout, row, figures, key))
        else:
            _simulated(row, figures, found, outcome)
    tasks = [(setup.model, setup.device, setup.network, setup.options, str(executable), t[0]) for t in todo]
    try:
        with progress.task("simulating", total=len(tasks)) as advance:
            for index, found in engine.run(simulate_task, tasks):
                layout, row, figures, key = todo[index]
                if not isinstance(found, Passing):
                    store.put(key, found)
                _simulated(row, figures, found, outcome)
                advance()
    except KeyboardInterrupt:
        outcome.stopped = True
    except engines.WorkerError as error:
        outcome.stopped, outcome.failed = True, str(error)


def _simulated(row: Row, figures: dict[str, Any], found: dict[str, Any] | str, outcome: Outcome) -> None:
    if isinstance(found, str):
        row.error = found
        outcome.unsimulated += 1
        return
    outcome.simulated += 1
    row.simulated_s = found["simulated_s"]
    row.exact_s = found.get("exact_s")
    rates(row, figures, row.simulated_s, "simulation")
