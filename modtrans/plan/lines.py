"""A layout's units as lines of a text workload, each column holding at most one collective.

Both text projections read it: SimAI's (simai.py) and ASTRA-sim 1.0's (text.py). Their readers
run every line's forward in file order, then every line's backward in reverse file order, each
line's compute then its column's collective (ASTRA-sim 1.0 and SimAI Workload.cc,
iterate_hybrid_parallel_Transformer*). One column holds one collective, so a unit whose program
issues more (sequence parallelism's all-gathers, the loss's three all-reduces after the LM head,
ZeRO's reduce-scatter then all-gather) puts the others on lines with no compute around its own,
where the reader then issues them in the plan's order: before it, what precedes its forward and
what follows its backward; after it, what follows its forward and what precedes its backward.
They are named UNIT.pre1, UNIT.post1 ... (pre1 and post1 nearest the unit's line).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

from modtrans.plan.model import Collective, Compute, Place, Plan, Purpose, Step, Transfer
from modtrans.plan.sizes import Consumer
from modtrans.workload.model import Phase

FWD, IG, WG = 0, 1, 2
PER_MICRO = (Place.BEFORE_FWD, Place.AFTER_FWD, Place.BEFORE_BWD, Place.AFTER_WG, Place.AFTER_IG)
_COLUMN = {Step.FWD: FWD, Step.INPUT_GRAD: IG, Step.WEIGHT_GRAD: WG}  # a compute's column

Placed = dict[Place, list[Collective]]


def optimizer_step(update: int, wg: Phase, reader: Consumer) -> tuple[Phase, int]:
    """A line's weight-gradient column and update field with the layer's optimizer step where its
    reader runs it. ASTRA-sim 1.0 waits the update field after each of the layer's collectives
    (Layer::call, `..._Comm_Finished_After_Delay`). SimAI's analytical simulator issues no
    collective event (Layer::issue_*_comm return under `#ifdef ANALYTI`), so never waits it: the
    field is ignored (measured, SimAI 1.6 f5efb5a9: a second in every line's field changed no
    result), and the step goes into the weight-gradient compute, which it sums."""
    if reader is Consumer.SIMAI and update:
        return Phase(wg.compute_time + update, wg.comm_type, wg.comm_size), 0
    return wg, update


class ProjectionError(ValueError):
    """The plan holds something the text format cannot say (one line, for a D310)."""


@dataclasses.dataclass
class Line:
    """One line being filled: a column -> its collective."""

    comms: dict[int, Collective] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class UnitLines:
    """A unit's own line and its extra lines (`pre` and `post`, nearest the unit's line first)."""

    pre: tuple[Line, ...]
    main: Line
    post: tuple[Line, ...]


def first_stage(
    plan: Plan, micro_batches: int
) -> tuple[list[int], dict[tuple[int, int], int], dict[int, Placed]]:
    """Stage 0's units in forward order, their compute per column, and per unit the collectives of
    one micro-batch (and the once-per-iteration ones) by place. Recomputed forwards and transfers
    are left out: the header's checkpoints and pipeline fields say them, where the format can.
    Read from the stage's outline (plan/programs.py: its computes' times, its collectives, no
    tensors), a fraction of the program's work on many micro-batches."""
    units: list[int] = []
    times: dict[tuple[int, int], int] = {}
    every: dict[int, Placed] = defaultdict(lambda: defaultdict(list))
    for op in plan.outline(0):
        if isinstance(op, Transfer) or op.step in (Step.RECOMPUTE, Step.UPDATE):
            continue  # the update column holds the optimizer step
        if isinstance(op, Compute):
            column = _COLUMN[op.step]
            if op.step is Step.FWD and (op.layer, FWD) not in times:
                units.append(op.layer)
            times.setdefault((op.layer, column), op.time)  # every micro-batch computes the same
            continue
        if op.place is None:
            raise ProjectionError(f"layer {plan.layers[op.layer].name}: a collective the plan does not place")
        every[op.layer][op.place].append(op)
    placed: dict[int, Placed] = {}
    for layer, by_place in every.items():
        placed[layer] = {
            place: ops[: len(ops) // micro_batches] if place in PER_MICRO else ops
            for place, ops in by_place.items()
        }
    return units, times, placed


def arrange(placed: Placed, column: Callable[[Collective, bool], int], *, tail: bool = True) -> UnitLines:
    """Where each of a unit's collectives goes: `column(c, forward)` is the column a collective takes
    (forward: it runs with the forward); `tail`: whether the once-per-iteration ones are written."""
    got = {place: placed.get(place, []) for place in Place}
    if not tail:
        got[Place.TAIL] = got[Place.AFTER_STEP] = got[Place.NEXT_FWD] = []
    main = Line()
    pre: list[Line] = []
    post: list[Line] = []
    for c in reversed(got[Place.BEFORE_FWD]):  # the forward runs pre lines farthest first
        _put(pre, column(c, True), c, fresh=True)
    for c in got[Place.AFTER_FWD]:
        _put_main_or(main, post, FWD, c)
    for c in reversed(got[Place.BEFORE_BWD]):  # the backward runs post lines farthest first
        _put(post, column(c, False), c, fresh=True)
    # the parameter gathers after the step or before the next forward: no column runs there, so
    # they are written with the tail, after the reduction they follow
    once = (*got[Place.TAIL], *got[Place.AFTER_STEP], *got[Place.NEXT_FWD])
    for c in (*got[Place.AFTER_WG], *got[Place.AFTER_IG], *once):
        _put_main_or(main, pre, column(c, False), c)
    return UnitLines(tuple(pre), main, tuple(post))


def backward_column(c: Collective, forward: bool) -> int:
    """fwd for what runs with the forward; in the backward wg for the data-parallel group (the
    column both readers give that group), ig for the others."""
    if forward:
        return FWD
    return WG if Purpose.DATA in c.over else IG


def _put_main_or(main: Line, extra: list[Line], column: int, c: Collective) -> None:
    if column not in main.comms:
        main.comms[column] = c
    else:
        _put(extra, column, c, fresh=False)


def _put(lines: list[Line], column: int, c: Collective, *, fresh: bool) -> None:
    """On the nearest line whose column is free, or (`fresh`: collectives of one place, which
    must keep their order) on a new line beyond the others."""
    if not fresh:
        for line in lines:
            if column not in line.comms:
                line.comms[column] = c
                return
    lines.append(Line({column: c}))
