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

Both writers then settle each layer's optimizer step where its reader runs it once an iteration
(settle: the update column, or the weight-gradient compute) and, for a layout's full
recomputation, name the blocks as FWD_IN_BCKWD's one segment (segment).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Sequence

from modtrans.comm import CommType
from modtrans.plan.model import Collective, Compute, Place, Plan, Purpose, Step, Transfer
from modtrans.plan.sizes import Consumer
from modtrans.workload.model import Header, Layer, Phase

FWD, IG, WG = 0, 1, 2
PER_MICRO = (Place.BEFORE_FWD, Place.AFTER_FWD, Place.BEFORE_BWD, Place.AFTER_WG, Place.AFTER_IG)
_COLUMN = {Step.FWD: FWD, Step.INPUT_GRAD: IG, Step.WEIGHT_GRAD: WG}  # a compute's column

Placed = dict[Place, list[Collective]]


def reruns(head: Header, count: int) -> frozenset[int]:
    """The lines whose forward FWD_IN_BCKWD runs again in the backward: for each initiating line,
    from the nearest checkpoint at or before it to the line before it (ASTRA-sim 1.0 and SimAI
    Workload.cc, iterate_hybrid_parallel_Transformer_fwd_in_bckwd, LoopState::Forward_In_BackPass).
    SimAI reads each list's first index only (workload-format spec section 3.3)."""
    starts, initiates = head.checkpoints or (), head.checkpoint_initiates or ()
    out: set[int] = set()
    for end in initiates:
        out.update(range(max((s for s in starts if s <= end), default=0), min(end, count)))
    return frozenset(out)


def waits(layer: Layer, rerun: bool, reader: Consumer) -> int:
    """How many times `reader` waits a line's update field in one iteration. ASTRA-sim 1.0: after
    each collective the line issues, a rerun forward's again (Layer::call registers Fwd_,
    Input_Grad_ and Wight_Grad_Comm_Finished_After_Delay `weight_grad_update_time` ticks after each
    collective; Layer.cc sets fwd_update_time = input_grad_update_time = weight_grad_update_time),
    none on a line without one (ComType::None issues nothing). Measured on ASTRA-sim-1.0 07d5d19
    (tests/test_astra_sim_1_reads.py). SimAI's analytical simulator never: Layer::issue_*_comm
    return under `#ifdef ANALYTI` before any event (SimAI 1.6 f5efb5a9: a second in every line's
    field changed no result). ModTrans writes a collective only in a column the keyword issues."""
    if reader is Consumer.SIMAI:
        return 0
    issued = [p for _, p in layer.phases if p.comm_type is not CommType.NONE]
    return len(issued) + (rerun and layer.fwd.comm_type is not CommType.NONE)


def settle(head: Header, layers: Sequence[Layer], reader: Consumer) -> tuple[Layer, ...]:
    """The lines with each layer's optimizer step (its update field as the plan gives it) where
    `reader` runs it once an iteration, as the traces and the estimate do: in the update field
    where the reader waits it exactly once (ASTRA-sim 1.0, a line with one collective: DATA's
    gradient all-reduce), else in the weight-gradient compute, which every reader runs once an
    iteration (FWD_IN_BCKWD reruns forwards only). ASTRA-sim 1.0's field stays 1 tick at least on
    a line with a collective: its analytical event queue aborts on an event at the current tick
    (D313)."""
    again = reruns(head, len(layers))
    out = []
    for i, layer in enumerate(layers):
        times = waits(layer, i in again, reader)
        wg, update = layer.weight_grad, layer.update_time
        if times != 1 and update:
            wg, update = Phase(wg.compute_time + update, wg.comm_type, wg.comm_size), 0
        if times and reader is Consumer.ASTRA_SIM:
            update = max(update, 1)
        out.append(dataclasses.replace(layer, weight_grad=wg, update_time=update))
    return tuple(out)


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
        if isinstance(op, Transfer) or op.step in (Step.RECOMPUTE, Step.UPDATE, Step.GRAD_SYNC):
            continue  # the update column holds the optimizer step and the bucket kernels
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


def recomputed_units(plan: Plan) -> frozenset[int]:
    """The units whose forward stage 0 computes again in the backward (a layout's --recompute full:
    its transformer blocks)."""
    ops = plan.outline(0)
    return frozenset(op.layer for op in ops if isinstance(op, Compute) and op.step is Step.RECOMPUTE)


def segment(recomputed: Sequence[bool]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """FWD_IN_BCKWD's lists for a layout's full recomputation, `recomputed[i]`: whether line i
    belongs to a unit the plan recomputes (the transformer blocks). One checkpoint at the first
    such line and the rerun started at the line after the last: the readers rerun the lines from
    the checkpoint to the one before the initiating line (`reruns`), so the blocks' forwards alone,
    as Megatron-LM's checkpoints cover the blocks only (megatron/core/transformer/
    transformer_block.py, TransformerBlock._checkpointed_forward: the embedding runs before it, the
    final norm and the output layer after). One segment, as SimAI reads one index of each list.
    Where the blocks end the file (a pipeline's first stage) the last line cannot initiate its own
    rerun: the rerun starts there and leaves that line's forward out."""
    count = len(recomputed)
    marked = [i for i, r in enumerate(recomputed) if r]
    if count < 2 or not marked:
        return (0,), (max(count - 1, 0),)
    initiate = min(marked[-1] + 1, count - 1)
    return (min(marked[0], initiate - 1),), (initiate,)
