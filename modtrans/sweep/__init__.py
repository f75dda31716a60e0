"""`modtrans sweep`: the fastest layouts of a model on a cluster. Every layout Megatron-LM accepts
on N GPUs within a search space, those over the device's memory dropped, the rest estimated (the
fast tier, modtrans.estimate), the best simulated on ASTRA-sim 2.x, ranked in one table.

space.py      the search space, its values as lists or ranges, the enumeration by the rules
fit.py        the memory filter (strategy/llm/footprint.py's memory per stage), why each was dropped
engines.py    where tasks run: this process, a local process pool, or a Dask cluster
cache.py      results kept by the digest of what made them (SQLite), to resume and repeat
finalists.py  the best K translated to traces and simulated on ASTRA-sim 2.x
run.py        the sweep from end to end: enumerate, fit, estimate, simulate, rank
tasks.py      what runs on the engine: a batch of estimates, a finalist simulated; their rows
rows.py       the table's rows, their ranking and Pareto front, CSV and JSON written atomically
draw.py       the picture: throughput against memory or GPUs, the front and the finalists marked
request.py    the option table's rules applied, the sweep run, its files written

`modtrans.sweep(...)` is the function below: modtrans/__init__.py gives it on first use, and this
package's module is callable as the function, so that `modtrans.sweep` works either way once a
module of it is imported (`from modtrans.sweep import space` sets the package's attribute).
"""

from __future__ import annotations

import sys
import types
from inspect import Parameter
from pathlib import Path
from typing import Any

from modtrans import table
from modtrans.request import UsageError


def sweep(model: str | Path, *, frame: bool = False, **options: Any) -> Any:
    """Every layout of `model` on `gpus` GPUs that Megatron-LM accepts and the device's memory
    holds, estimated (the fast tier: modtrans.estimate), the best simulated where `simulate`
    asks, as `modtrans sweep` runs it: each of its options is a keyword here, by the same name
    and rule (a search-space option a list, or its text: tp=(1, 2, 4, 8) or tp="1,2,4,8",
    pp="1:16"). Returns the rows best first (rows.Row), or with `frame` a pandas DataFrame of
    them (pandas must be installed). Writes OUTPUT.csv, OUTPUT.json and OUTPUT.svg when `output`
    is given. Raises UsageError for a value or combination the rules refuse, TypeError for a
    keyword that is no option."""
    from modtrans.sweep.request import run_request

    _, rows = run_request(model, options)
    if frame:
        try:
            import pandas
        except ImportError:
            raise UsageError("a DataFrame needs pandas: pip install pandas (or take the rows)") from None
        from dataclasses import asdict

        return pandas.DataFrame([asdict(r) for r in rows])
    return rows


sweep.__doc__ = f"{sweep.__doc__}\n{table.described(table.SWEEP, 'sweep')}"
sweep.__signature__ = table.signature(  # type: ignore[attr-defined]
    [
        Parameter("model", Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Path"),
        Parameter("frame", Parameter.KEYWORD_ONLY, default=False, annotation="bool"),
    ],
    "list[Row]",
    table.SWEEP,
)


class _Callable(types.ModuleType):
    """This package's module, called as its function (modtrans.sweep(...))."""

    def __call__(self, model: str | Path, *, frame: bool = False, **options: Any) -> Any:
        return sweep(model, frame=frame, **options)


sys.modules[__name__].__class__ = _Callable
# inspect.signature(modtrans.sweep), the module called: the function's
__signature__ = sweep.__signature__  # type: ignore[attr-defined]
