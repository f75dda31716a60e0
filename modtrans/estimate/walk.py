"""An event simulation of ranks' operations, run as ASTRA-sim 2.x's workload layer runs a trace
(astra-sim/astra-sim 518bd51, astra-sim/workload/Workload.cc and HardwareResource.cc):

  - a node is issued once every node it depends on has finished (issue_dep_free_nodes, in node
    order, each time a node of the rank finishes);
  - a rank runs one compute node at a time and one collective or send at a time
    (HardwareResource::is_available); receives take no resource;
  - a compute node takes its duration (replay mode);
  - a collective starts when every rank of its group has issued it (a ring step waits for the
    previous rank's message) and takes its time (collectives.py); the rank's communication is busy
    from its issue to the end;
  - a send takes the link's time and finishes whether or not its receive was posted; a receive
    finishes when its message has arrived (CommonNetworkApi::process_chunk_arrival, sim_recv).

Ranks that run the same program with the same peers behave alike, so an actor stands for every
rank of one program: a collective's parties are the actors whose ranks its group holds, a
transfer's ends the actors of its two ranks.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

COMPUTE, COLLECTIVE, SEND, RECV = 0, 1, 2, 3


class EstimateError(ValueError):
    """A plan or trace set the estimate cannot walk (one line)."""


@dataclass(frozen=True, slots=True)
class Node:
    kind: int  # COMPUTE, COLLECTIVE, SEND or RECV
    time: int  # ns: the compute's duration, the collective's or the send's time (a receive: 0)
    deps: tuple[int, ...] = ()  # indices of earlier nodes of the same actor
    key: Hashable = None  # a collective's channel (its parties agree on it); a transfer's (src, dst, tag)
    parties: int = 1  # a collective's actors


@dataclass(frozen=True, slots=True)
class Lane:
    """What one actor did: when it finished, its compute, its communication (collectives and
    sends in flight) and the part of that no compute overlapped, in ns."""

    finish: int
    compute: int
    comm: int
    exposed: int

    @property
    def idle(self) -> int:
        """Neither computing nor communicating: waiting for another stage (the bubble)."""
        return self.finish - self.compute - self.exposed


def walk(actors: Sequence[Sequence[Node]]) -> list[Lane]:
    """Every actor's lane. Raises EstimateError when the actors wait for each other for ever."""
    count = len(actors)
    left = [[len(n.deps) for n in nodes] for nodes in actors]
    after: list[list[list[int]]] = [[[] for _ in nodes] for nodes in actors]
    for a, nodes in enumerate(actors):
        for i, node in enumerate(nodes):
            for d in node.deps:
                after[a][d].append(i)
    ready: list[tuple[list[int], list[int], list[int]]] = [([], [], []) for _ in range(count)]
    busy = [[False, False] for _ in range(count)]
    computing: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    talking: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    finish = [0] * count
    done = [0] * count
    events: list[tuple[int, int, int, int]] = []
    seq = 0
    occurrence: dict[tuple[int, Hashable], int] = defaultdict(int)
    meeting: dict[tuple[Hashable, int], list[tuple[int, int, int]]] = {}
    arrived: dict[Hashable, deque[int]] = defaultdict(deque)
    waiting: dict[Hashable, deque[tuple[int, int, int]]] = defaultdict(deque)

    def push(t: int, a: int, i: int) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, a, i))
        seq += 1

    def become_ready(a: int, i: int) -> None:
        kind = actors[a][i].kind
        heapq.heappush(ready[a][0 if kind == COMPUTE else 2 if kind == RECV else 1], i)

    def issue(a: int, t: int) -> None:
        computes, comms, recvs = ready[a]
        if computes and not busy[a][0]:
            i = heapq.heappop(computes)
            busy[a][0] = True
            end = t + actors[a][i].time
            computing[a].append((t, end))
            push(end, a, i)
        if comms and not busy[a][1]:
            i = heapq.heappop(comms)
            busy[a][1] = True
            node = actors[a][i]
            if node.kind == COLLECTIVE:
                n = occurrence[a, node.key]
                occurrence[a, node.key] = n + 1
                group = meeting.setdefault((node.key, n), [])
                group.append((a, i, t))
                if len(group) == node.parties:
                    end = max(s for _, _, s in group) + node.time
                    for b, j, s in group:
                        talking[b].append((s, end))
                        push(end, b, j)
                    del meeting[node.key, n]
            else:
                end = t + node.time
                talking[a].append((t, end))
                push(end, a, i)
                if waiting[node.key]:
                    b, j, s = waiting[node.key].popleft()
                    push(max(s, end), b, j)
                else:
                    arrived[node.key].append(end)
        while recvs:
            i = heapq.heappop(recvs)
            key = actors[a][i].key
            if arrived[key]:
                push(max(t, arrived[key].popleft()), a, i)
            else:
                waiting[key].append((a, i, t))

    for a, nodes in enumerate(actors):
        for i, node in enumerate(nodes):
            if not node.deps:
                become_ready(a, i)
        issue(a, 0)
    while events:
        t, _, a, i = heapq.heappop(events)
        node = actors[a][i]
        if node.kind == COMPUTE:
            busy[a][0] = False
        elif node.kind != RECV:
            busy[a][1] = False
        done[a] += 1
        finish[a] = max(finish[a], t)
        for j in after[a][i]:
            left[a][j] -= 1
            if not left[a][j]:
                become_ready(a, j)
        issue(a, t)
    stuck = [a for a in range(count) if done[a] != len(actors[a])]
    if stuck:
        a = stuck[0]
        raise EstimateError(
            f"the ranks wait for each other for ever: actor {a} "
            f"finished {done[a]} of {len(actors[a])} operations"
        )
    return [
        Lane(finish[a], _length(computing[a]), _length(talking[a]), _uncovered(talking[a], computing[a]))
        for a in range(count)
    ]


def _length(spans: list[tuple[int, int]]) -> int:
    """The time the union of the spans covers."""
    total, reach = 0, None
    for s, e in sorted(spans):
        if reach is None or s > reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


def _uncovered(spans: list[tuple[int, int]], cover: list[tuple[int, int]]) -> int:
    """The time the spans cover that `cover` (disjoint, in order) does not."""
    merged: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    total, k = 0, 0
    cover = sorted(cover)
    for s, e in merged:
        total += e - s
        while k < len(cover) and cover[k][1] <= s:
            k += 1
        j = k
        while j < len(cover) and cover[j][0] < e:
            total -= min(e, cover[j][1]) - max(s, cover[j][0])
            j += 1
    return total
