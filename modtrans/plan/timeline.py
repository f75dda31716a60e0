"""A plan's schedule in time: when each pipeline stage computes what, as a picture shows it.

Each stage's program (its first rank's) runs its computes one after another in program order on
one stream; an operation starts once the operations it depends on have ended, and a receive once
the matching send (the same tag, from the peer stage) has. Sends and receives take no time and
collectives are not timed: the compute times are the plan's and the network is the simulator's,
so this is the schedule with a free network (the bubble as the schedule makes it, not as a slow
link widens it). Consecutive computes of one step, micro-batch and model chunk are one block.
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
    split = plan.layout is not None and plan.layout.schedule is Schedule.ZB_H1
    return schedule(plan.programs, _chunks(plan), split_weights=split)


def schedule(
    programs: Sequence[Sequence[Op]], chunk_of: Mapping[int, int], *, split_weights: bool = False
) -> Timeline:
    """The schedule of one program per stage (a send's `offset` the receiving stage's distance,
    `tag` what its receive matches); `chunk_of`: layer index -> model chunk on its stage;
    `split_weights`: weight gradients are blocks of their own (ZB-H1 runs them as steps)."""
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
    blocks = _merge(raw, chunk_of, split_weights)
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
    raw: Sequence[tuple[int, Compute, int, int]], chunk_of: Mapping[int, int], split_weights: bool = False
) -> list[Block]:
    blocks: list[Block] = []
    for stage, op, start, end in raw:
        micro = _micro(op)
        chunk = chunk_of.get(op.layer, 0)
        kind = op.step if split_weights and op.step is Step.WEIGHT_GRAD else _kind(op.step)
        last = blocks[-1] if blocks else None
        if (
            last is not None
            and last.stage == stage
            and last.step is kind
            and last.micro == micro
            and last.chunk == chunk
            and last.end == start
        ):
            blocks[-1] = Block(stage, kind, micro, chunk, last.start, end)
        elif end > start:
            blocks.append(Block(stage, kind, micro, chunk, start, end))
    return blocks


def _kind(step: Step) -> Step:
    """A block's kind: the forward, the recomputed forward, or the backward (a unit's input and
    weight gradients run back to back in these schedules: one block)."""
    return Step.INPUT_GRAD if step is Step.WEIGHT_GRAD else step


def _micro(op: Compute) -> int:
    for tensor in (*op.outputs, *op.inputs):
        found = _MICRO.search(tensor.name)
        if found:
            return int(found.group(1))
    return -1
