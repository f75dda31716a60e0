"""IR + parallelism + cost model -> execution plan (-> the workload a text file holds).

groups.py      which IR layers become workload layers (the --params convention) and their cost
draft.py       what a technique edits, and its assembly into a Plan (operations, tensors, order)
techniques/    one module per parallelism technique, registered by keyword
recompute.py   activation checkpointing: the recomputed forward segments
parallel.py    plan() and build(): the techniques applied, the plan projected onto the text
"""

from modtrans.strategy.draft import Folded, Parallelism, StrategyError, rank_share, shard
from modtrans.strategy.groups import Group, Params, group, group_times, layer_bytes, needs_input_grad
from modtrans.strategy.parallel import SUPPORTED, build, plan

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
    "needs_input_grad",
    "plan",
    "rank_share",
    "shard",
]
