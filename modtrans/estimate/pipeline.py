"""The pipeline over stages: each stage's schedule steps (strategy/schedule.py), their transfers
and its chunks' data-parallel reductions, timed as walk.py would time the stage programs the fast
tier stands for, without its event queue.

A stage runs its steps in order, one compute at a time; a step waits for its input (the
activation, or the gradient, from the stage holding the neighbouring virtual stage) and starts
when both are there: start = max(the stage's previous step's end, the input's arrival). Its
blocking collectives wait for the lane to finish what the stage queued before it (chains.py). After a
step, the stage's communication lane takes, in order, what it holds before the send (after the
chunk's last backward: lastback.py walks it, its tail collectives and the buckets ready while
the lane was free), the send of the step's output and the rest of the reduction (their nodes come
after the send's: the workload layer issues ready nodes by id), each when the lane is free; a
send arrives when it ends. Under Megatron's interleaved schedule a chunk's reduction follows a
later backward's send instead, or the stage's last (_launches; frameworks.py,
chunk_reductions). The chunk's last backward takes what its tails add to it. The lane runs
beside the next steps' compute (walk.py: one collective or send at a time, beside the
compute). Steps whose input never comes mean schedules that wait for each other for ever
(EstimateError).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from modtrans.estimate.walk import EstimateError
from modtrans.plan.model import Schedule
from modtrans.strategy.frameworks import Launch
from modtrans.strategy.schedule import BWD, FWD, WGRAD, paired, stage_of, virtual_stage

KINDS = {FWD: 0, BWD: 1, WGRAD: 3}  # the input gradient alone (zero bubble's I) is 2


@dataclass(frozen=True, slots=True)
class Stage:
    """What the pipeline walk says of one stage, in ns."""

    finish: int
    compute: int  # its steps' time, the collectives inside them included
    comm: int  # its lane's: sends and reductions
    after: int  # the lane's time after its last step: communication nothing overlapped
    reduced: int = 0  # when its last reduction ends (what the optimizer step waits for; no send)


# a step: (stage, kind, virtual stage, the input's key or -1, the output's key or -1, the stage it
# goes to, whether it is its chunk's last backward, the virtual stages whose reductions the lane
# takes after it); the plan: every stage's steps in an order where each comes after its
# stage's previous step and after the step sending its input
Step = tuple[int, int, int, int, int, int, bool, tuple[int, ...]]
Plan = tuple[int, int, tuple[Step, ...]]  # stages, keys, steps


@functools.lru_cache(maxsize=256)
def steps(
    schedule: Schedule, stages: int, micro_batches: int, vpp: int, chunks: int, launch: Launch = Launch.READY
) -> Plan:
    """Every stage's steps, made once per (schedule, P, GA, V, launch), in an order the walk can
    take them one after another: a transfer's key is its boundary, micro-batch and direction (as
    program.py tags it); `launch`, when a chunk's reduction follows (_launches). EstimateError
    where the stages would wait for each other for ever."""
    rows = [_row(schedule, s, stages, micro_batches, vpp, chunks, launch) for s in range(stages)]
    order: list[Step] = []
    sent: set[int] = set()
    at = [0] * stages
    left = stages
    while left:
        moved = False
        for s, row in enumerate(rows):
            i, end = at[s], len(row)
            if i == end:
                continue
            while i < end and (row[i][3] < 0 or row[i][3] in sent):
                order.append(row[i])
                if row[i][4] >= 0:
                    sent.add(row[i][4])
                i += 1
            if i != at[s]:
                moved = True
                at[s] = i
                left -= i == end
        if left and not moved:
            raise EstimateError("the pipeline's stages wait for each other for ever")
    return stages, 2 * micro_batches * chunks + 2, tuple(order)


def _row(
    schedule: Schedule, s: int, stages: int, micro_batches: int, vpp: int, chunks: int, launch: Launch
) -> list[Step]:
    """One stage's steps, in its schedule's order."""
    regular = schedule not in (Schedule.DUALPIPE, Schedule.DUALPIPE_V)
    last = chunks - 1
    order, _ = paired(schedule, s, stages, micro_batches, vpp)
    if regular:
        virtuals = [c * stages + s for _, _, c in order]
    else:
        virtuals = [virtual_stage(schedule, s, stages, c) for _, _, c in order]
    final = {v: i for i, ((d, _, _), v) in enumerate(zip(order, virtuals, strict=True)) if d in (BWD, WGRAD)}
    reduced = set(final.values())
    launches = _launches(order, final, s, launch)
    row = []
    for i, ((direction, micro, _), v) in enumerate(zip(order, virtuals, strict=True)):
        kind = KINDS.get(direction, 2)
        recv = send = to = -1
        if direction != WGRAD:
            forward = direction == FWD
            source, target = (v - 1, v + 1) if forward else (v + 1, v - 1)
            back = 0 if forward else 1
            if 0 <= source <= last:
                where = (
                    source % stages if regular else stage_of(schedule, source, stages, micro, micro_batches)
                )
                if where != s:
                    recv = (micro * chunks + min(source, v)) * 2 + back
            if 0 <= target <= last:
                to = target % stages if regular else stage_of(schedule, target, stages, micro, micro_batches)
                if to != s:
                    send = (micro * chunks + min(target, v)) * 2 + back
        row.append((s, kind, v, recv, send, to, i in reduced, launches.get(i, ())))
    return row


def _launches(
    order: Sequence[tuple[str, int, int]], final: dict[int, int], s: int, launch: Launch
) -> dict[int, tuple[int, ...]]:
    """Per step of stage `s`, the virtual stages whose reductions the lane takes after it (after the
    step's send, which program.py numbers first): the chunk's last backward's (Launch.READY), or
    under Megatron's interleaved schedule the backward `s` backwards after it, past the end the
    stage's last (Launch.DELAYED), or that last one always (Launch.AFTER): program.py's _launch."""
    if launch is Launch.READY:
        return {i: (v,) for v, i in final.items()}
    backs = [i for i, (d, _, _) in enumerate(order) if d in (BWD, WGRAD)]
    at = {i: k for k, i in enumerate(backs)}
    lag = s if launch is Launch.DELAYED else len(backs)
    out: dict[int, tuple[int, ...]] = {}
    for v, i in sorted(final.items(), key=lambda item: -item[1]):  # the chunk done last first
        step = backs[min(at[i] + lag, len(backs) - 1)]
        out[step] = (*out.get(step, ()), v)
    return out


def phases(plan: Plan, computes: Sequence[Sequence[int]]) -> dict[int, int]:
    """Per virtual stage, the compute ns its stage's trace holds before the chunk's last backward
    (the step its reduction follows), modulo a microsecond: `computes[v][kind]` a step's compute
    alone. The trace writer rounds each compute to whole microseconds, carrying the rounding in
    file order (chakra/encode.py, durations), so where a compute ends beside a collective depends
    on it (lastback.py)."""
    count, _, order = plan
    elapsed = [0] * count
    out = {}
    for s, kind, v, _, _, _, reduce, _ in order:
        if reduce:
            out[v] = elapsed[s] % 1000
        elapsed[s] += computes[v][kind]
    return out


def run(
    plan: Plan,
    times: Sequence[Sequence[int]],
    reductions: Sequence[tuple[int, int, int]],
    send_ns: Callable[[int, int], int],
    waits: Sequence[Sequence[int]] | None = None,
    spills: Sequence[Sequence[int]] | None = None,
    opening: Callable[[int, int, int, int], tuple[int, int]] | None = None,
) -> list[Stage]:
    """Each stage's finish, compute and communication: `times[v][kind]` a step of virtual stage v,
    `reductions[v]` its chunk's reduction (the first collective, the rest) and what the tail
    collectives add to its last step, `send_ns(src, dst)` a boundary transfer's, `waits[v][kind]`
    the step's lane path (chains.timed's K): a step whose blocking collectives find the lane still
    held by what the stage queued before it ends at lane + K where that is later (its wait counted
    as the step's, a blocking collective's); `spills[v]` each kind's (C, KC) (chains.timed_and_spill): the
    collectives a step leaves overlapped hold the lane until max(start + C, lane + KC), and what
    the stage queues next goes after them (the chunk's last backward: lastback.py's walk instead);
    `opening(s, v, start, lane)`: where given, each chunk's first forward on its stage walked with
    the lane instead, its end and when the lane is free (gathers.py: --overlap-param-gather)."""
    count, keys, order = plan
    arrival = [0] * keys
    clock = [0] * count  # the end of the stage's last step
    lane = [0] * count  # when its communication lane is free
    busy = [0] * count
    talk = [0] * count
    reduced = [0] * count
    links = [[send_ns(s, d) if d != s else 0 for d in range(count)] for s in range(count)]
    begun: set[tuple[int, int]] = set()
    for s, kind, v, recv, send, to, reduce, launch in order:
        t = clock[s]
        if recv >= 0:
            arrived = arrival[recv]
            if arrived > t:
                t = arrived
        step = times[v][kind]
        if reduce:
            step += reductions[v][2]
        walked = opening is not None and kind == 0 and (s, v) not in begun
        if walked and opening is not None:
            begun.add((s, v))
            end, lane[s] = opening(s, v, t, lane[s])
            step = end - t
        elif waits is not None:
            held = lane[s] + waits[v][kind] + step - times[v][kind]
            if held > t + step:
                step = held - t
        if spills is not None and not reduce and not walked:
            c_free, c_held = spills[v][2 * kind], spills[v][2 * kind + 1]
            lane[s] = max(lane[s], t + c_free, lane[s] + c_held)
        t += step
        busy[s] += step
        if launch or send >= 0:
            c = lane[s]
            rest = 0
            for w in launch:
                first, more, _ = reductions[w]
                rest += more
                if first:
                    c = (c if c > t else t) + first
                    talk[s] += first
                reduced[s] = max(reduced[s], c)
            if send >= 0:
                ns = links[s][to]
                c = (c if c > t else t) + ns
                talk[s] += ns
                arrival[send] = c
            if rest:
                c = (c if c > t else t) + rest
                talk[s] += rest
                reduced[s] = c
            lane[s] = c
        clock[s] = t
    return [
        Stage(max(clock[s], lane[s]), busy[s], talk[s], max(lane[s] - clock[s], 0), reduced[s])
        for s in range(count)
    ]
