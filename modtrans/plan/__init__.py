"""The execution plan: the one thing strategies produce and every writer reads.

model.py  Plan, Mesh, the operations (Compute, Collective, Transfer) and communicator groups
text.py   Plan -> the text workload model (refuses, D310, what a workload file cannot say)

The Chakra writer (modtrans/chakra/write.py) turns a plan into one trace per rank.
"""

from modtrans.plan.model import (
    Axis,
    Collective,
    CommGroup,
    Compute,
    Direction,
    LayerInfo,
    Mesh,
    Op,
    Plan,
    Purpose,
    Step,
    Tensor,
    Transfer,
)
from modtrans.plan.text import ProjectionError, project

__all__ = [
    "Axis",
    "Collective",
    "CommGroup",
    "Compute",
    "Direction",
    "LayerInfo",
    "Mesh",
    "Op",
    "Plan",
    "ProjectionError",
    "Purpose",
    "Step",
    "Tensor",
    "Transfer",
    "project",
]
