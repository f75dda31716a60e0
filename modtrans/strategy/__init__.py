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
schedule.py    pipeline schedules: the order of micro-batches' forwards and backwards
program.py     the one program builder: units, schedule, recomputation -> a stage's operations
parallel.py    plan() and build(): the techniques applied, the plan projected onto the text
"""

from modtrans.strategy.draft import Parallelism, StrategyError
from modtrans.strategy.groups import Group, Params, group, group_times, layer_bytes, needs_input_grad
from modtrans.strategy.parallel import SUPPORTED, build, plan
from modtrans.strategy.share import Folded, rank_share, shard

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
