"""IR + parallelism + cost model -> execution plan (-> the workload a text file holds).

groups.py      which IR layers become workload layers (the --params convention) and their cost
draft.py       what a technique edits: per unit its division and its collectives at each Place
share.py       what one rank computes of a unit (rank_share), for every technique
roles.py       what part of a layer each rank holds (a layer's role), which share.py reads
frameworks.py  how the training frameworks reduce gradients (in which dtype), each with its source
techniques/    the keyword presets, one module per technique, registered by keyword
llm/           the tensor x pipeline x data x expert layout, one module per technique
recompute.py   FWD_IN_BCKWD's checkpoints: the recomputed forward segments
tensors.py     the tensors each unit reads and writes (memory tracking)
saved.py       the tensors autograd saves for the backward: any model's activation memory
derivatives.py what each op saves, by PyTorch's derivative formulas (saved.py reads the graph)
schedule.py    pipeline schedules: the order of micro-batches' forwards and backwards
program.py     the one program builder: units, schedule, recomputation -> a stage's operations
parallel.py    plan() and build(): the techniques applied, the plan projected onto the text
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modtrans.strategy.draft import Parallelism, StrategyError
    from modtrans.strategy.groups import Group, Params, group, group_times, layer_bytes
    from modtrans.strategy.parallel import SUPPORTED, build, plan
    from modtrans.strategy.share import Folded, rank_share, shard

# name -> the module that defines it. Imported on first use (PEP 562): the command line reads
# Params (groups.py) for its options without the planner behind parallel.py (tests/test_startup.py).
_HOME = {
    "Parallelism": "draft",
    "StrategyError": "draft",
    "Group": "groups",
    "Params": "groups",
    "group": "groups",
    "group_times": "groups",
    "layer_bytes": "groups",
    "SUPPORTED": "parallel",
    "build": "parallel",
    "plan": "parallel",
    "Folded": "share",
    "rank_share": "share",
    "shard": "share",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'modtrans.strategy' has no attribute {name!r}")
    value = getattr(__import__(f"modtrans.strategy.{home}", fromlist=[name]), name)  # -X importtime sees it
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


__all__ = [
    "SUPPORTED",
    "Folded",
    "Group",
    "Parallelism",
    "Params",
    "StrategyError",
    "build",
    "group",
    "group_times",
    "layer_bytes",
    "plan",
    "rank_share",
    "shard",
]
