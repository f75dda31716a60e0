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

CLOSE = 2000
"""ns: the carried rounding moves a compute's end by under a microsecond either way, so two of
the chain's times by under two: a call decided by more is the same in the trace."""


def last_backward(
    sk: Skeleton,
    costs: Sequence[UnitCost],
    parts: Sequence[tuple[int, ...]],
    rerun: Recompute,
    split: bool,
    buckets: dict[tuple[int, int], tuple[int, list[int]]],
    phase: int | None = None,
    swaps: dict[int, int] | None = None,
    after_send: bool = False,
) -> tuple[int, int, int, bool]:
    """The chunk's last backward (its weight gradient alone where the schedule splits it): the
    chain's end, when the send can start after it, the lane's work left after the send (ns), and
    whether what the lane took first was decided by less than CLOSE ns.

    `phase`: the compute ns the stage's trace runs before this backward (its file order): the
    computes are then timed as the trace holds them, each a whole number of microseconds, the
    rounding carried in file order (chakra/encode.py, durations; astra2.replay_ns), which moves a
    compute's end by under a microsecond and so decides a race that close: at T 2, SP and D 2 the
    input norm's input gradient (9,871 ns; 9 or 10 us in the trace) against its gradient's
    all-reduce over the tensor group (9,636 ns), after which the stage's data-parallel bucket
    (9.7 ms) is ready: the send to the previous stage goes first only where the input gradient
    ends first, and the previous stages wait for it (the fast tier 0.94 % over the exact tier on
    Llama-3 8B at T 2, P 4, D 2 with 16 micro-batches a stage). The chain's end given is its ns
    end all the same. `swaps`: per unit, the send of its tied weight's gradient to the other
    stage (program.py's _exchange), ready when its last weight gradient ends, after its tails in
    node order. `buckets`: per (block of `parts`, unit) closing buckets (one a buffer, or with
    --overlap-grad-reduce Megatron's sized buckets: fast.py's _sized), the ns of the kernels
    before their collectives (program.py's _sync_kernels: a compute on the chain after the
    unit's weight gradient, which its tails and buckets wait for) and their collectives' ns.
    `after_send`: the tails, buckets and swaps wait for the send as well (program.py,
    Pipeline.reduce_after_send: Megatron's 1F1B on a stage but the first, and its interleaved
    schedule's Pipeline.chunk_reduction on every stage: pipeline.py then takes the reduction
    after a later step's send), so none takes the lane
    before it and no race is left to decide.

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
    ready: dict[tuple[int, int], int] = {}  # per (block, unit) closing buckets: its weight gradient's end
    sends: dict[int, int] = {}  # link index a tied weight's swap is ready at: its send's ns
    swaps = swaps or {}
    for k, p in reversed(list(enumerate(parts))):
        if rerun is Recompute.FULL and not split:
            links += rerun_links(sk, costs, p)
        for u in reversed(p):
            own = list(getattr(costs[u], kind))
            at = costs[u].weight_end if not split and costs[u].weight_end >= 0 else len(own)
            closes = buckets.get((k, u))
            if closes is not None and closes[0]:  # its buckets' kernels, on the chain after it
                own.insert(at, (CHAIN, closes[0]))
                at += 1
            if costs[u].tail:  # each block's own, issued in the tail section one by one
                marks.setdefault(len(links) + at, []).extend(costs[u].tails or (costs[u].tail,))
            if closes is not None:  # a block's units repeat: (block, unit) says which closes it
                ready[k, u] = len(links) + at
            if u in swaps:
                sends[len(links) + at] = swaps[u]
            links += own
    for key, k in ready.items():
        if buckets[key][1]:  # none over one data rank: its kernels alone
            marks.setdefault(k, []).extend(buckets[key][1])
    pending: list[tuple[int, int, list[int]]] = []  # (ready ns, order, its collectives' ns)
    t = c = drift = 0
    margin = [CLOSE]
    for k, (what, ns) in enumerate(links):
        _ready(pending, marks, sends, k, t)
        if what == CHAIN:
            if phase is not None:
                replayed = replay_ns((phase + ns) // 1000 - phase // 1000)
                phase, drift = phase + ns, drift + replayed - ns
                ns = replayed
            t += ns
            continue
        c = c if after_send else _idle(pending, c, t, margin)
        if what == BLOCKING:
            t = c = max(t, c) + ns
        else:  # overlapped, or a tail
            c = max(t, c) + ns
    _ready(pending, marks, sends, len(links), t)
    c = c if after_send else _idle(pending, c, t, margin)
    send = max(t, c)
    return t - drift, send - t, sum(sum(times) for _, _, times in pending), margin[0] < CLOSE


def _ready(
    pending: list[tuple[int, int, list[int]]],
    marks: dict[int, list[int]],
    sends: dict[int, int],
    k: int,
    t: int,
) -> None:
    """What the weight gradient ending at link `k` readies at `t`, in the tail section's node
    order (the unit done last first): its tails and bucket, one after the other, then its swap."""
    if k in marks:
        pending.append((t, -2 * k, list(marks[k])))
    if k in sends:
        pending.append((t, 1 - 2 * k, [sends[k]]))


def _idle(pending: list[tuple[int, int, list[int]]], lane: int, until: int, margin: list[int]) -> int:
    """Buckets' collectives run where the lane idles before `until` (the next item's ready time),
    the one ready first first, ties in node order; returns when the lane is free. `margin[0]`
    becomes the closest call's ns where closer: between the one taken and the next, or it and
    `until`."""
    while pending:
        k = min(range(len(pending)), key=lambda i: (max(pending[i][0], lane), pending[i][1]))
        start, order, times = pending[k]
        if len(pending) > 1:
            at = max(start, lane)
            gap = min(max(p[0], lane) - at for i, p in enumerate(pending) if i != k)
            margin[0] = min(margin[0], gap)
        margin[0] = min(margin[0], abs(max(start, lane) - until))
        if max(start, lane) >= until:
            break
        lane = max(start, lane) + times[0]
        if len(times) > 1:
            pending[k] = (lane, order, times[1:])
        else:
            del pending[k]
    return lane
