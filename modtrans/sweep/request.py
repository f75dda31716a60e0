"""`modtrans.sweep(...)`: the options by the option table's rules (table.SWEEP: the search
space, the cluster, how to run, and the options of `translate` every layout shares), the sweep
run (run.py), its table and picture written where `output` says (rows.py, draw.py), the rows
returned, best first."""

from __future__ import annotations

import os
from inspect import Parameter
from pathlib import Path
from typing import Any

from modtrans import table
from modtrans.request import UsageError
from modtrans.sweep.rows import Row

SPACE_FIELDS = ("tp", "pp", "cp", "ep", "vpp", "micro_batch", "recompute", "distributed_optimizer", "sp")
RUNNING = ("simulate", "astra_sim", "jobs", "engine", "scheduler", "cache", "no_cache", "output", "against")


def jobs_default() -> int:
    """The CPUs this process may use (its affinity where the platform says it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def sweep(model: str | Path, *, frame: bool = False, **options: Any) -> Any:
    """Every layout of `model` on `gpus` GPUs that Megatron-LM accepts and the device's memory
    holds, estimated (the fast tier: modtrans.estimate), the best simulated where `simulate`
    asks, as `modtrans sweep` runs it: each of its options is a keyword here, by the same name
    and rule (a search-space option a list, or its text: tp=(1, 2, 4, 8) or tp="1,2,4,8",
    pp="1:16"). Returns the rows best first (rows.Row), or with `frame` a pandas DataFrame of
    them (pandas must be installed). Writes OUTPUT.csv, OUTPUT.json and OUTPUT.svg when `output`
    is given. Raises UsageError for a value or combination the rules refuse, TypeError for a
    keyword that is no option."""
    _, rows = run_request(model, options)
    if frame:
        try:
            import pandas
        except ImportError:
            raise UsageError("a DataFrame needs pandas: pip install pandas (or take the rows)") from None
        from dataclasses import asdict

        return pandas.DataFrame([asdict(r) for r in rows])
    return rows


def run_request(model: str | Path, options: dict[str, Any]) -> tuple[Any, list[Row]]:
    """The sweep the options describe, and its rows (written where `output` says); the Outcome
    says how every layout was accounted for. Stopped, the table of what finished is written
    before KeyboardInterrupt goes on."""
    from modtrans import simulate as sim
    from modtrans.estimate import EstimateError
    from modtrans.sweep import draw, engines, rows, run, space
    from modtrans.sweep.finalists import ChoiceError

    try:
        given = table.values_of(options, "sweep", table.SWEEP)
    except ValueError as error:
        raise UsageError(str(error)) from None
    gpus = given.pop("gpus", None)
    if not gpus:
        raise UsageError("--gpus: how many GPUs has the cluster? (e.g. --gpus 1024)")
    if given.get("global_batch") is None:
        raise UsageError("--global-batch: sequences per iteration, the same for every layout compared")
    the_space = space.Space(**{k: v for k in SPACE_FIELDS if (v := given.pop(k, None)) is not None})
    how = {k: given.pop(k, None) for k in RUNNING}
    device = given.pop("device", None)
    network = str(given.pop("network", None) or "hgx-h100")
    training = tuple(sorted((k, v) for k, v in given.items() if v is not None and v is not False))
    setup = run.Setup(str(model), device, network, training, how["astra_sim"])
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
    except (EstimateError, engines.EngineError, sim.SimulateError, ChoiceError) as error:
        raise UsageError(str(error)) from None
    stopped = outcome.stopped
    found = outcome.rows
    if how["output"] is not None:
        picture = draw.svg(
            found, f"{model} on {', '.join(map(str, gpus))} GPUs", against=how["against"] or "memory"
        )
        summary = {"model": str(model), **outcome.summary()}
        outcome.written = rows.write(Path(how["output"]), found, summary, picture)
    if stopped:
        raise KeyboardInterrupt
    return outcome, found


sweep.__doc__ = f"{sweep.__doc__}\n{table.described(table.SWEEP, 'sweep')}"
sweep.__signature__ = table.signature(  # type: ignore[attr-defined]
    [
        Parameter("model", Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Path"),
        Parameter("frame", Parameter.KEYWORD_ONLY, default=False, annotation="bool"),
    ],
    "list[Row]",
    table.SWEEP,
)
