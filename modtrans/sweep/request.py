"""A sweep's options by the option table's rules (table.SWEEP: the search space, the cluster, how
to run, and the options of `translate` every layout shares), the sweep run (run.py), its table
and picture written where `output` says (rows.py, draw.py): what `modtrans sweep` and
`modtrans.sweep(...)` (api.py) both call."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modtrans import limits, stopping, table
from modtrans.request import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from modtrans.sweep.rows import Row
    from modtrans.sweep.tasks import Outcome

SPACE_FIELDS = tuple(o.name for o in table.SWEEP_OWN if o.group == table.SPACE)
"""The search space's options: the option table's rows in its group, space.Space's fields."""
GPU_COUNTS = 64
"""Cluster sizes one sweep compares at most (--gpus 1:1000000 is a typo, not a million sweeps)."""
RUNNING = ("simulate", "astra_sim", "jobs", "engine", "scheduler", "cache", "no_cache", "output", "against")


def jobs_default() -> int:
    """The CPUs this process may use (its affinity where the platform says it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def run_request(model: str | Path, options: dict[str, Any]) -> tuple[Any, list[Row]]:
    """The sweep the options describe, and its rows (written where `output` says); the Outcome
    says how every layout was accounted for. Stopped, the table of what finished is written
    before KeyboardInterrupt goes on; a worker lost (engines.WorkerError), before that error."""
    from modtrans import simulate as sim
    from modtrans.estimate import EstimateError
    from modtrans.sweep import engines, run, space, tasks
    from modtrans.sweep.cache import CacheError
    from modtrans.sweep.finalists import ChoiceError

    try:
        given = table.values_of(options, "sweep", table.SWEEP)
    except ValueError as error:
        raise UsageError(str(error)) from None
    for name in ("gpus", *SPACE_FIELDS):  # one value given for a list of them
        if isinstance(given.get(name), int | bool | str):
            given[name] = (given[name],)
    _writable(given.get("output"), model)
    gpus = given.pop("gpus", None)
    if not gpus:
        raise UsageError("--gpus: how many GPUs has the cluster? (e.g. --gpus 1024)")
    too_many = limits.at_most("--gpus", max(gpus), limits.NPUS, "GPUs") or limits.at_most(
        "--gpus", len(gpus), GPU_COUNTS, "cluster sizes in one sweep"
    )
    if too_many:
        raise UsageError(too_many)
    if given.get("global_batch") is None:
        raise UsageError("--global-batch: sequences per iteration, the same for every layout compared")
    if given.get("zero") is not None and given.get("distributed_optimizer") is not None:
        raise UsageError("--zero and --distributed-optimizer both give the ZeRO stages tried: give one")
    _megatrons(given)
    the_space = space.Space.of(**{k: v for k in SPACE_FIELDS if (v := given.pop(k, None)) is not None})
    how = {k: given.pop(k, None) for k in RUNNING}
    device = given.pop("device", None)
    network = str(given.pop("network", None) or "hgx-h100")
    training = tuple(sorted((k, v) for k, v in given.items() if v is not None and v is not False))
    setup = tasks.Setup(str(model), device, network, training, how["astra_sim"])
    cache = None if how["no_cache"] else run.cache_folder(how["cache"], True)
    stopped = False
    try:
        outcome = run.sweep(
            setup,
            the_space,
            gpus,
            simulate=how["simulate"] or "none",
            jobs=how["jobs"] or jobs_default(),
            engine=how["engine"] or engines.LOCAL,
            scheduler=how["scheduler"],
            cache=cache,
        )
    except (EstimateError, engines.EngineError, sim.SimulateError, ChoiceError, CacheError) as error:
        raise UsageError(str(error)) from None
    stopped = outcome.stopped
    found = outcome.rows
    if how["output"] is not None:
        with stopping.held():  # a signal now (the sweep done) stops the command once this is written
            outcome.written = _write(Path(how["output"]), str(model), gpus, how["against"], outcome)
    if outcome.failed is not None:
        raise engines.WorkerError(outcome.failed)
    if stopped:
        raise KeyboardInterrupt
    return outcome, found


def _megatrons(given: dict[str, Any]) -> None:
    """--distributed-optimizer is Megatron-LM's: another framework's sweep tries its own ZeRO
    stages (space.own_stages), so the switch would be passed over without a word."""
    from modtrans.strategy.frameworks import Framework
    from modtrans.sweep.space import own_stages

    framework = Framework(given.get("framework") or Framework.MEGATRON)
    stages = own_stages(framework)
    if given.get("distributed_optimizer") is not None and stages is not None:
        tried = ("stages " if len(stages) > 1 else "stage ") + ", ".join(map(str, stages))
        raise UsageError(
            f"--distributed-optimizer is Megatron-LM's; --framework {framework.value} tries its ZeRO "
            f"{tried} (--zero chooses among a framework's stages)"
        )


def _write(
    prefix: Path, model: str, gpus: Sequence[int], against: str | None, outcome: Outcome
) -> list[Path]:
    """The table, its JSON summary and picture at `prefix` (rows.write); UsageError unwritable."""
    from modtrans.sweep import draw, rows

    found = outcome.rows
    picture = draw.svg(found, f"{model} on {', '.join(map(str, gpus))} GPUs", against=against or "memory")
    summary = {"model": model, **outcome.summary(), "agreement": rows.agreement(found)}
    try:
        return rows.write(prefix, found, summary, picture)
    except OSError as error:
        raise UsageError(str(error)) from None


def _writable(output: str | Path | None, model: str | Path) -> None:
    """-o PREFIX: its folder must be there (a typo is not made: outputs.new_folder's rule), no
    table file a folder, and none the model's own file (outputs.refuse_inputs, as translate
    refuses: `sweep config.json -o config` wrote its table's JSON over the configuration); said
    before the sweep runs."""
    if output is None:
        return
    from modtrans.fileio import file_ids
    from modtrans.pipeline import inputs_of
    from modtrans.sweep.rows import files

    prefix = Path(output)
    if str(output).endswith("/") or not prefix.name:
        raise UsageError(f"-o {output}: a PREFIX for PREFIX.csv, PREFIX.json and PREFIX.svg, not a folder")
    if not prefix.parent.is_dir():
        raise UsageError(f"-o {output}: the folder {prefix.parent} does not exist")
    taken = [path for path in files(prefix) if path.is_dir()]
    if taken:
        raise UsageError(f"-o {output}: {taken[0]} is a folder")
    read = file_ids(inputs_of(model))
    model_own = [path for path in files(prefix) if file_ids([path]) & read]
    if model_own:
        raise UsageError(
            f"-o {output}: refusing to overwrite the model's file {model_own[0]}; give another PREFIX"
        )
