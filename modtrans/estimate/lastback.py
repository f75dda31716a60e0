"""A chunk's last backward on its two lanes, for the fast tier: its chain, then the send of the
input gradient, each unit's tail collectives and the chunk's data-parallel buckets (ready as
their unit's weight gradient ends), as walk.py would run them in program.py's node order. What the
lane holds there decides whether a bucket or the send goes first, and how long the backward's
blocking collectives wait: with a per-hop latency (a preset's 5.6 us) neither is negligible."""

from __future__ import annotations

from collections.abc import Sequence

from modtrans.estimate.units import BLOCKING, CHAIN, Link, Skeleton, UnitCost, rerun_links
from modtrans.plan.model import Recompute
from modtrans.simulate.astra2 import replay_ns


def last_backward(
    sk: Skeleton,
    costs: Sequence[UnitCost],
    parts: Sequence[tuple[int, ...]],
    rerun: Recompute,
    split: bool,
    buckets: dict[int, list[int]],
    phase: int | None = None,
) -> tuple[int, int, int]:
    """The chunk's last backward (its weight gradient alone where the schedule splits it): the
    chain's end, when the send can start after it, and the lane's work left after the send (ns).
    `phase`: the compute ns the stage's trace runs before this backward (its file order), where
    the computes are timed as the trace holds them (replayed: each a whole number of
    microseconds, the rounding carried) to decide what the lane takes first; the chain's end
    given is its ns end all the same.

    The lane takes what is ready in node order (walk.py, the workload layer's issue order): the
    send follows the chain; a unit's tails (Place.TAIL: the norms' gradients over the tensor
    group, the other frameworks' data-parallel reductions) and the buckets come after it, in the
    tail section program.py's _build writes after every step (the unit done last first), so
    they get the lane only where it idles: in a gap of the chain, or at its end before the send
    is ready; a unit's next collective is ready when the one before ends (the send, ready then
    too, goes first). The unit done last is numbered first. (Tails taken as they came, inside
    the step, held the lane the chain's blocking collectives wait for: FSDP's reduce-scatters
    under SP, 0.57 % over on GPT-2 at T 2, D 4.)"""
    kind = "weight_grad" if split else "backward"
    links: list[Link] = []
    marks: dict[int, list[int]] = {}  # link index a weight gradient ends at: the tail section's ns
    ready: dict[int, int] = {}  # per unit with a bucket: the link index its weight gradient ends at
    for p in reversed(parts):
        if rerun is Recompute.FULL and not split:
            links += rerun_links(sk, costs, p)
        for u in reversed(p):
            own = list(getattr(costs[u], kind))
            at = costs[u].weight_end if not split and costs[u].weight_end >= 0 else len(own)
            if costs[u].tail:  # each block's own, issued in the tail section one by one
                marks.setdefault(len(links) + at, []).extend(costs[u].tails or (costs[u].tail,))
            if u in buckets:  # a block's units repeat: the chunk's first block holds the bucket's
                ready[u] = len(links) + at
            links += own
    for u, k in ready.items():
        marks.setdefault(k, []).extend(buckets[u])
    pending: list[tuple[int, int, list[int]]] = []  # (ready ns, order, its collectives' ns)
    t = c = drift = 0
    for k, (what, ns) in enumerate(links):
        if k in marks:
            pending.append((t, -k, list(marks[k])))
        if what == CHAIN:
            if phase is not None:
                replayed = replay_ns((phase + ns) // 1000 - phase // 1000)
                phase, drift = phase + ns, drift + replayed - ns
                ns = replayed
            t += ns
            continue
        c = _idle(pending, c, t)
        if what == BLOCKING:
            t = c = max(t, c) + ns
        else:  # overlapped, or a tail
            c = max(t, c) + ns
    if len(links) in marks:
        pending.append((t, -len(links), list(marks[len(links)])))
    c = _idle(pending, c, t)
    send = max(t, c)
    return t - drift, send - t, sum(sum(times) for _, _, times in pending)


def _idle(pending: list[tuple[int, int, list[int]]], lane: int, until: int) -> int:
    """Buckets' collectives run where the lane idles before `until` (the next item's ready time),
    the one ready first first, ties in node order; returns when the lane is free."""
    while pending:
        k = min(range(len(pending)), key=lambda i: (max(pending[i][0], lane), pending[i][1]))
        start, order, times = pending[k]
        if max(start, lane) >= until:
            break
        lane = max(start, lane) + times[0]
        if len(times) > 1:
            pending[k] = (lane, order, times[1:])
        else:
            del pending[k]
    return lane
