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
    return _Walk(actors).run()


class _Walk:
    """The walk's state: per actor the dependencies left, the ready nodes by resource (compute,
    collectives and sends, receives; each in node order), the busy resources and the spans run."""

    def __init__(self, actors: Sequence[Sequence[Node]]) -> None:
        self.actors = actors
        count = len(actors)
        self.left = [[len(n.deps) for n in nodes] for nodes in actors]
        self.after: list[list[list[int]]] = [[[] for _ in nodes] for nodes in actors]
        for a, nodes in enumerate(actors):
            for i, node in enumerate(nodes):
                for d in node.deps:
                    self.after[a][d].append(i)
        self.ready: list[tuple[list[int], list[int], list[int]]] = [([], [], []) for _ in range(count)]
        self.busy = [[False, False] for _ in range(count)]
        self.computing: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        self.talking: list[list[tuple[int, int]]] = [[] for _ in range(count)]
        self.finish = [0] * count
        self.done = [0] * count
        self.events: list[tuple[int, int, int, int]] = []
        self.seq = 0
        self.occurrence: dict[tuple[int, Hashable], int] = defaultdict(int)
        self.meeting: dict[tuple[Hashable, int], list[tuple[int, int, int]]] = {}
        self.arrived: dict[Hashable, deque[int]] = defaultdict(deque)
        self.waiting: dict[Hashable, deque[tuple[int, int, int]]] = defaultdict(deque)

    def run(self) -> list[Lane]:
        actors = self.actors
        for a, nodes in enumerate(actors):
            for i, node in enumerate(nodes):
                if not node.deps:
                    self.become_ready(a, i)
            self.issue(a, 0)
        events = self.events
        while events:
            t, _, a, i = heapq.heappop(events)
            kind = actors[a][i].kind
            if kind == COMPUTE:
                self.busy[a][0] = False
            elif kind != RECV:
                self.release(a, actors[a][i])
            self.done[a] += 1
            self.finish[a] = max(self.finish[a], t)
            left = self.left[a]
            for j in self.after[a][i]:
                left[j] -= 1
                if not left[j]:
                    self.become_ready(a, j)
            self.issue(a, t)
        stuck = [a for a in range(len(actors)) if self.done[a] != len(actors[a])]
        if stuck:
            a = stuck[0]
            raise EstimateError(
                f"the ranks wait for each other for ever: actor {a} "
                f"finished {self.done[a]} of {len(actors[a])} operations"
            )
        return [
            Lane(
                self.finish[a],
                _length(self.computing[a]),
                _length(self.talking[a]),
                _uncovered(self.talking[a], self.computing[a]),
            )
            for a in range(len(actors))
        ]

    def push(self, t: int, a: int, i: int) -> None:
        heapq.heappush(self.events, (t, self.seq, a, i))
        self.seq += 1

    def become_ready(self, a: int, i: int) -> None:
        kind = self.actors[a][i].kind
        heapq.heappush(self.ready[a][0 if kind == COMPUTE else 2 if kind == RECV else 1], i)

    def issue(self, a: int, t: int) -> None:
        """Issue what the actor's free resources can take (issue_dep_free_nodes)."""
        computes, comms, recvs = self.ready[a]
        busy = self.busy[a]
        if computes and not busy[0]:
            i = heapq.heappop(computes)
            busy[0] = True
            end = t + self.actors[a][i].time
            self.computing[a].append((t, end))
            self.push(end, a, i)
        if comms:
            self.converse(a, comms, t)
        while recvs:
            i = heapq.heappop(recvs)
            key = self.actors[a][i].key
            if self.arrived[key]:
                self.push(max(t, self.arrived[key].popleft()), a, i)
            else:
                self.waiting[key].append((a, i, t))

    def converse(self, a: int, comms: list[int], t: int) -> None:
        """Issue what of the ready collectives and sends (a heap in node order) the actor's
        communication can take: one at a time (HardwareResource::is_available)."""
        busy = self.busy[a]
        if not busy[1]:
            busy[1] = True
            self.communicate(a, heapq.heappop(comms), t)

    def release(self, a: int, node: Node) -> None:
        """A collective or send of the actor finished: what it held is free."""
        self.busy[a][1] = False

    def communicate(self, a: int, i: int, t: int) -> None:
        """A collective joins its parties (all there: it runs); a send runs and arrives."""
        node = self.actors[a][i]
        if node.kind == COLLECTIVE:
            n = self.occurrence[a, node.key]
            self.occurrence[a, node.key] = n + 1
            group = self.meeting.setdefault((node.key, n), [])
            group.append((a, i, t))
            if len(group) == node.parties:
                end = max(s for _, _, s in group) + node.time
                for b, j, s in group:
                    self.talking[b].append((s, end))
                    self.push(end, b, j)
                del self.meeting[node.key, n]
            return
        end = t + node.time
        self.talking[a].append((t, end))
        self.push(end, a, i)
        if self.waiting[node.key]:
            b, j, s = self.waiting[node.key].popleft()
            self.push(max(s, end), b, j)
        else:
            self.arrived[node.key].append(end)


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
