"""A plan's schedule in time: when each pipeline stage computes what, as a picture shows it.

Each stage's program (its first rank's) runs its computes one after another in program order on
one stream; an operation starts once the operations it depends on have ended, and a receive once
the matching send (the same tag, from the peer stage) has. Sends and receives take no time and
collectives are not timed: the compute times are the plan's and the network is the simulator's,
so this is the schedule with a free network (the bubble as the schedule makes it, not as a slow
link widens it). Consecutive computes of one step, micro-batch and model chunk are one block; a
backward whose units each run their weight gradient then their input gradient is one block, and
weight gradients run apart from their input gradients (ZB-H1's, DualPipe's W) are blocks of their own.
A forward and a backward whose computes alternate (DualPipe's overlapped F&B) are two blocks over
the pair's span, the forward the lane's upper half and the backward its lower.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

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
    half: int = 0  # 0: the whole lane; 1 (upper), 2 (lower): one of an overlapped pair (DualPipe's F&B)


@dataclass(frozen=True, slots=True)
class Timeline:
    stages: int
    blocks: tuple[Block, ...]
    sends: tuple[tuple[int, int], ...]  # (stage, tick) of each send
    end: int  # the last compute's end: the iteration with a free network

    def busy(self, stage: int) -> int:
        """Ticks the stage computes (an overlapped pair's span once)."""
        total, reach = 0, 0
        for b in sorted((b for b in self.blocks if b.stage == stage), key=lambda b: b.start):
            total += max(b.end - max(b.start, reach), 0)
            reach = max(reach, b.end)
        return total


def timeline(plan: Plan) -> Timeline:
    """The schedule of `plan`'s stage programs (TimelineError when they deadlock). It runs every
    stage at once: the programs are built once and held together (plan/programs.py keeps two)."""
    layout = plan.layout
    half = layout.micro_batches // 2 if layout is not None and layout.schedule is Schedule.DUALPIPE else None
    return schedule(tuple(plan.programs), _chunks(plan), reverse_from=half)


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
    recent: dict[int, list[int]] = {}  # per stage, its last two blocks (indices into blocks)
    whole: set[int] = set()  # blocks that are whole backwards (each unit's W, then its I)
    following = _following(raw)
    for n, (stage, op, start, end) in enumerate(raw):
        if end <= start:
            continue
        micro = _micro(op)
        chunk = chunk_of.get(op.layer, 0) if reverse_from is None else int(micro >= reverse_from)
        mine = recent.setdefault(stage, [])
        kind = op.step
        if kind is Step.WEIGHT_GRAD and (
            any(i in whole and blocks[i].micro == micro and blocks[i].chunk == chunk for i in mine)
            or _backs(following[n], micro, chunk, chunk_of, reverse_from)
        ):
            kind = Step.INPUT_GRAD  # its unit's part of a whole backward
        joined = _join(blocks, mine, (kind, micro, chunk), start, end)
        if joined is None:
            blocks.append(Block(stage, kind, micro, chunk, start, end))
            mine[:] = [*mine[-1:], len(blocks) - 1]
            joined = len(blocks) - 1
        if kind is Step.INPUT_GRAD and op.step is Step.WEIGHT_GRAD:
            whole.add(joined)
    return blocks


def _join(
    blocks: list[Block], mine: list[int], key: tuple[Step, int, int], start: int, end: int
) -> int | None:
    """Extend the stage's block of this (step, micro-batch, chunk) to `end` if it, or the other of
    its last two blocks (the overlapped partner), ends at `start`; the block's index, or None."""
    ends = {blocks[i].end for i in mine}
    for i in mine:
        b = blocks[i]
        if (b.step, b.micro, b.chunk) != key or start not in ends or b.end > start:
            continue
        if b.end < start:  # through its partner: the two overlap
            other = next(j for j in mine if j != i)
            halves = (1, 2) if b.step is Step.FWD or blocks[other].step is not Step.FWD else (2, 1)
            blocks[i] = replace(b, half=halves[0])
            blocks[other] = replace(blocks[other], half=halves[1])
        blocks[i] = replace(blocks[i], end=end)
        return i
    return None


def _following(raw: Sequence[tuple[int, Compute, int, int]]) -> list[tuple[Compute, int] | None]:
    """For each compute, the next one of its stage with the same micro-batch, and that one's layer."""
    out: list[tuple[Compute, int] | None] = [None] * len(raw)
    latest: dict[tuple[int, int], int] = {}
    for n, (stage, op, _, _) in enumerate(raw):
        key = (stage, _micro(op))
        if key in latest:
            out[latest[key]] = (op, op.layer)
        latest[key] = n
    return out


def _backs(
    item: tuple[Compute, int] | None,
    micro: int,
    chunk: int,
    chunk_of: Mapping[int, int],
    reverse_from: int | None,
) -> bool:
    """Whether `item`, the micro-batch's next compute on the stage, is an input gradient of the same
    chunk: a weight gradient so followed is its unit's part of a whole backward (a deferred one is
    followed by weight gradients or by nothing)."""
    if item is None or item[0].step is not Step.INPUT_GRAD:
        return False
    return (chunk_of.get(item[1], 0) if reverse_from is None else chunk) == chunk


def _micro(op: Compute) -> int:
    for tensor in (*op.outputs, *op.inputs):
        found = _MICRO.search(tensor.name)
        if found:
            return int(found.group(1))
    return -1
