"""A plan's schedule in time: when each pipeline stage computes what, as a picture shows it.

Each stage's program (its first rank's) runs its computes one after another in program order on
one stream; an operation starts once the operations it depends on have ended, and a receive once
the matching send (the same tag, from the peer stage) has. Sends and receives take no time and
collectives are not timed: the compute times are the plan's and the network is the simulator's,
so this is the schedule with a free network (the bubble as the schedule makes it, not as a slow
link widens it). Consecutive computes of one step, micro-batch and model chunk are one block; a
backward whose units each run their weight gradient then their input gradient is one block, and
weight gradients run apart from their input gradients (ZB-H1's, DualPipe's W) are blocks of their own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modtrans.plan.model import Compute, Direction, Op, Plan, Schedule, Step, Transfer

_MICRO = re.compile(r"#m(\d+)")


class TimelineError(ValueError):
    """The programs wait on each other in a cycle (a plan no schedule runs)."""


@dataclass(frozen=True, slots=True)
class Block:
    stage: int
    step: Step
    micro: int  # the micro-batch (-1: not known)
    chunk: int  # the model chunk on its stage (interleaved: 0 .. V - 1)
    start: int  # ticks
    end: int


@dataclass(frozen=True, slots=True)
class Timeline:
    stages: int
    blocks: tuple[Block, ...]
    sends: tuple[tuple[int, int], ...]  # (stage, tick) of each send
    end: int  # the last compute's end: the iteration with a free network

    def busy(self, stage: int) -> int:
        return sum(b.end - b.start for b in self.blocks if b.stage == stage)


def timeline(plan: Plan) -> Timeline:
    """The schedule of `plan`'s stage programs (TimelineError when they deadlock)."""
    layout = plan.layout
    half = layout.micro_batches // 2 if layout is not None and layout.schedule is Schedule.DUALPIPE else None
    return schedule(plan.programs, _chunks(plan), reverse_from=half)


def schedule(
    programs: Sequence[Sequence[Op]], chunk_of: Mapping[int, int], *, reverse_from: int | None = None
) -> Timeline:
    """The schedule of one program per stage (a send's `offset` the receiving stage's distance,
    `tag` what its receive matches); `chunk_of`: layer index -> model chunk on its stage;
    `reverse_from`: DualPipe's first micro-batch of the reverse direction, whose blocks are each
    stage's second chunk (a layer is in the first chunk of one stage and the second of another)."""
    ends: list[list[int | None]] = [[None] * len(p) for p in programs]
    sent: dict[tuple[int, int], int] = {}  # (receiving stage, tag) -> the send's tick
    clock = [0] * len(programs)
    cursor = [0] * len(programs)
    raw: list[tuple[int, Compute, int, int]] = []
    sends: list[tuple[int, int]] = []
    while any(cursor[s] < len(programs[s]) for s in range(len(programs))):
        progressed = False
        for s, program in enumerate(programs):
            while cursor[s] < len(program):
                op = program[cursor[s]]
                deps = [ends[s][d] for d in op.deps]
                if any(d is None for d in deps):
                    break
                ready = max((d for d in deps if d is not None), default=0)
                if isinstance(op, Transfer) and op.direction is Direction.RECV:
                    key = (s, op.tag)
                    if key not in sent:
                        break
                    end = max(ready, sent[key])
                elif isinstance(op, Transfer):
                    end = ready
                    sent[(s + op.offset, op.tag)] = end
                    sends.append((s, end))
                elif isinstance(op, Compute):
                    start = max(ready, clock[s])
                    end = clock[s] = start + op.time
                    raw.append((s, op, start, end))
                else:
                    end = ready
                ends[s][cursor[s]] = end
                cursor[s] += 1
                progressed = True
        if not progressed:
            raise TimelineError("the stages' programs wait on each other: no schedule runs them")
    blocks = _merge(raw, chunk_of, reverse_from)
    return Timeline(len(programs), tuple(blocks), tuple(sends), max((b.end for b in blocks), default=0))


def _chunks(plan: Plan) -> dict[int, int]:
    """Plan layer index -> its model chunk on its stage (chunk v is stage v % P's chunk v // P)."""
    layout = plan.layout
    if layout is None or not layout.chunks:
        return {}
    names = [info.name for info in plan.layers]
    stages = len(plan.programs)
    out: dict[int, int] = {}
    for v, chunk in enumerate(layout.chunks):
        if chunk.first in names and chunk.last in names:
            for i in range(names.index(chunk.first), names.index(chunk.last) + 1):
                out[i] = v // stages
    return out


def _merge(
    raw: Sequence[tuple[int, Compute, int, int]], chunk_of: Mapping[int, int], reverse_from: int | None = None
) -> list[Block]:
    blocks: list[Block] = []
    whole: set[int] = set()  # blocks that are whole backwards (each unit's W, then its I)
    following = _following(raw)
    for n, (stage, op, start, end) in enumerate(raw):
        micro = _micro(op)
        chunk = chunk_of.get(op.layer, 0) if reverse_from is None else int(micro >= reverse_from)
        last = blocks[-1] if blocks else None
        joins = (
            last is not None
            and (last.stage, last.micro, last.chunk, last.end) == (stage, micro, chunk, start)
            and end > start
        )
        kind = op.step
        if kind is Step.WEIGHT_GRAD:
            after = following[n]
            in_whole = joins and len(blocks) - 1 in whole
            if in_whole or (after is not None and _backs(after, stage, micro, end)):
                kind = Step.INPUT_GRAD  # part of a whole backward
        if joins and last is not None and last.step is kind:
            blocks[-1] = Block(stage, kind, micro, chunk, last.start, end)
        elif end > start:
            blocks.append(Block(stage, kind, micro, chunk, start, end))
        if kind is Step.INPUT_GRAD and op.step is Step.WEIGHT_GRAD:
            whole.add(len(blocks) - 1)
    return blocks


def _following(raw: Sequence[tuple[int, Compute, int, int]]) -> list[tuple[int, Compute, int, int] | None]:
    """For each compute, the next one of its stage (None: its stage's last)."""
    out: list[tuple[int, Compute, int, int] | None] = [None] * len(raw)
    latest: dict[int, int] = {}
    for n, item in enumerate(raw):
        if item[0] in latest:
            out[latest[item[0]]] = item
        latest[item[0]] = n
    return out


def _backs(item: tuple[int, Compute, int, int], stage: int, micro: int, end: int) -> bool:
    """Whether `item` is the same micro-batch's input gradient, straight after `end` on `stage`:
    a weight gradient so followed is its unit's part of a whole backward."""
    return (
        item[1].step is Step.INPUT_GRAD and item[2] == end and _micro(item[1]) == micro and item[0] == stage
    )


def _micro(op: Compute) -> int:
    for tensor in (*op.outputs, *op.inputs):
        found = _MICRO.search(tensor.name)
        if found:
            return int(found.group(1))
    return -1
