"""A chunk's last backward walked as one rank runs it (walk.py), for the fast tier: its chain,
each unit's tail collectives as its weight gradient readies them, the send of the input gradient
and the chunk's data-parallel buckets after it, in program.py's node order. What the lane holds
there decides whether a bucket or the send goes first, and how long the blocking collectives of
the backward wait: with a per-hop latency (a preset's 5.6 us) neither is negligible."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modtrans.estimate.units import BLOCKING, CHAIN, Skeleton, UnitCost, rerun_links
from modtrans.estimate.walk import COLLECTIVE, COMPUTE, Node, _Walk
from modtrans.plan.model import Recompute


class _Noted(_Walk):
    """The walk, noting when each node ends and each collective starts."""

    def __init__(self, actors: Sequence[Sequence[Node]]) -> None:
        super().__init__(actors)
        self.ends: dict[int, int] = {}
        self.starts: dict[int, int] = {}

    def push(self, t: int, a: int, i: int) -> None:
        self.ends[i] = t
        super().push(t, a, i)

    def communicate(self, a: int, i: int, t: int) -> None:
        self.starts[i] = t
        super().communicate(a, i, t)


def last_backward(
    sk: Skeleton,
    costs: Sequence[UnitCost],
    parts: Sequence[tuple[int, ...]],
    rerun: Recompute,
    split: bool,
    buckets: dict[int, list[int]],
) -> tuple[int, int, int]:
    """The chunk's last backward (its weight gradient alone where the schedule splits it) walked
    as one rank runs it (walk.py): its chain with each unit's tail collectives once its last
    weight gradient is done (the lane takes them as they come, before the chain's next blocking
    collective: a per-hop latency makes them count, found against the exact tier), then the send
    of the input gradient and, numbered after it, each bucket's collectives, the unit done last
    first (program.py's tail order): a bucket ready while the lane is free goes before the send.
    Returns the chain's end, when the send can start after it, and the lane's work left after
    the send (ns)."""
    kind = "weight_grad" if split else "backward"
    nodes: list[Node] = []

    def add(what: int, ns: int, after: int) -> int:
        key = ("last", len(nodes)) if what == COLLECTIVE else None
        nodes.append(Node(what, ns, (after,) if after >= 0 else (), key, 1))
        return len(nodes) - 1

    prev, weight = -1, {}
    for p in reversed(parts):
        links = list(rerun_links(sk, costs, p)) if rerun is Recompute.FULL and not split else []
        for kind_, ns in links:
            prev = _linked(add, kind_, ns, prev)
        for u in reversed(p):
            own = getattr(costs[u], kind)
            at = costs[u].weight_end if not split and costs[u].weight_end >= 0 else len(own)
            for k, (kind_, ns) in enumerate([*own, (-1, 0)]):
                if k == at or (k == len(own) and u not in weight):
                    weight[u] = prev
                    if costs[u].tail:
                        add(COLLECTIVE, costs[u].tail, prev)
                if kind_ >= 0:
                    prev = _linked(add, kind_, ns, prev)
    end = prev
    send = add(COLLECTIVE, 0, end) if not split else -1  # where the send's turn comes
    for u in sorted(weight, key=lambda u: -weight[u]):
        after = weight[u]
        for ns in buckets.get(u, ()):
            after = add(COLLECTIVE, ns, after)
    noted = _Noted([nodes])
    noted.run()
    done = noted.ends[end] if end >= 0 else 0
    lane = max((noted.ends[i] for i, n in enumerate(nodes) if n.kind == COLLECTIVE), default=done)
    starts = noted.starts[send] if send >= 0 else max(lane, done)
    return done, max(starts - done, 0), max(lane - starts, 0)


def _linked(add: Any, kind: int, ns: int, prev: int) -> int:
    """A link of a chain as a node after `prev`: what the chain's next link waits for."""
    if kind == CHAIN:
        return int(add(COMPUTE, ns, prev))
    made = int(add(COLLECTIVE, ns, prev))
    return made if kind == BLOCKING else prev
