"""IR + parallelism + cost model -> Workload (which layers, what each phase computes and sends).

groups.py    which IR layers become workload layers (the --params convention) and their cost
parallel.py  the strategies: each phase's collective and size, and the shard each NPU computes
"""

from modtrans.strategy.groups import Group, Params, group, group_times, layer_bytes, needs_input_grad
from modtrans.strategy.parallel import SUPPORTED, Parallelism, StrategyError, build

__all__ = [
    "SUPPORTED",
    "Group",
    "Parallelism",
    "Params",
    "StrategyError",
    "build",
    "group",
    "group_times",
    "layer_bytes",
    "needs_input_grad",
]
