"""The execution plan: the one thing strategies produce and every writer reads.

model.py     Plan, Mesh, the operations (Compute, Collective, Transfer) and communicator groups, and
             what built the plan: a keyword Preset or a layout's LayoutFacts (no file format's header)
programs.py  a layout's programs, each built when read (two kept), and outlined for what reads only
             their communication (the group ids, check.py)
text.py      Plan -> the text workload model, its header derived (refuses, D310, what it cannot say)
simai.py     a layout's Plan -> SimAI's text workload, its pipeline header derived
lines.py     a layout's units as text lines, a column's further collectives on lines of their own
sizes.py     what each consumer reads as a collective's size (an all-gather's: its part or the whole)
check.py     whether the plan's ranks can meet, decided on the plan (no traces decoded)
timeline.py  the schedule in time: when each stage computes what (--timeline)

The Chakra writer (modtrans/chakra/write.py) turns a plan into one trace per rank.
"""

from modtrans.plan.lines import ProjectionError
from modtrans.plan.model import (
    Axis,
    Checkpoints,
    Chunk,
    Collective,
    CommGroup,
    Compute,
    Direction,
    LayerInfo,
    LayoutFacts,
    Mesh,
    Op,
    Place,
    Plan,
    Preset,
    Purpose,
    Recompute,
    Schedule,
    Step,
    Tensor,
    Transfer,
)
from modtrans.plan.text import project

__all__ = [
    "Axis",
    "Checkpoints",
    "Chunk",
    "Collective",
    "CommGroup",
    "Compute",
    "Direction",
    "LayerInfo",
    "LayoutFacts",
    "Mesh",
    "Op",
    "Place",
    "Plan",
    "Preset",
    "ProjectionError",
    "Purpose",
    "Recompute",
    "Schedule",
    "Step",
    "Tensor",
    "Transfer",
    "project",
]
