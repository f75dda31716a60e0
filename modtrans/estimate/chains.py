"""A chunk's chains of links on two lanes, compute and communication, as walk.py runs one rank's
chain; and how much the communication lane, held at the chain's start by what the stage queued
before it (a send, a chunk's data-parallel reduction), delays the chain's end.

The workload layer runs one collective or send at a time (ASTRA-sim's HardwareResource: one
GPU communication op in flight) and issues ready nodes by id, so what the stage queued before a
step goes before the step's own collectives. A chain's end is max-plus linear in when its lanes
are free: started at 0 with the lane free at c0, it ends at max(T, c0 + K). T is the chain's time
on free lanes, K the longest path from the lane's start through the lane to the chain's end, or
NEVER where no blocking collective ties the lane to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from modtrans.estimate.units import BLOCKING, CHAIN, Link

NEVER = -(1 << 62)
"""K of a chain whose end the lane does not reach (no blocking collective): lane + NEVER < 0."""
_HELD = 1 << 50
"""A lane start later than any chain (ns: some 13 days)."""


def lanes(links: Iterable[Link], lane: int = 0) -> tuple[int, int]:
    """A chain's two lanes from time 0, the communication lane free at `lane`: when its compute
    (and blocking collectives) end, when its communication does."""
    t, c = 0, lane
    for kind, ns in links:
        if kind == CHAIN:
            t += ns
        elif kind == BLOCKING:
            t = c = max(t, c) + ns
        else:
            c = max(t, c) + ns
    return t, c


def timed(links: Sequence[Link]) -> tuple[int, int]:
    """(T, K) of a chain: its end on free lanes, and the lane's path to its end (NEVER: none)."""
    free = lanes(links)[0]
    held = lanes(links, _HELD)[0]
    return free, held - _HELD if held >= _HELD else NEVER


def timed_and_spill(links: Sequence[Link]) -> tuple[tuple[int, int], tuple[int, int]]:
    """`timed`'s (T, K) and the chain's (C, KC) from the same two walks: when its communication
    lane ends on free lanes, and the path to that end from the lane's start (max-plus as `timed`:
    started at 0 with the lane free at c0, the lane is free again at max(C, c0 + KC)). What a step
    leaves on the lane past its compute (an FSDP reduce-scatter after the last weight gradient)
    holds the next step's collectives."""
    t, c = lanes(links)
    held_t, held_c = lanes(links, _HELD)
    return (t, held_t - _HELD if held_t >= _HELD else NEVER), (c, held_c - _HELD)


def then(first: tuple[int, int], second: tuple[int, int]) -> tuple[int, int]:
    """(T, K) of `first` then `second` where neither has an overlapped collective (a blocking one
    leaves both lanes at its end, so the lane held at the start reaches past it only through the
    first's): a chain's of consecutive blocks."""
    t1, k1 = first
    t2, k2 = second
    return t1 + t2, (k1 + t2 if k1 != NEVER else k2)


def delayed(start: int, lane: int, chain: tuple[int, int]) -> int:
    """The end of a chain (T, K) started at `start` with the lane free at `lane` (both absolute)."""
    t, k = chain
    return max(start + t, lane + k)
