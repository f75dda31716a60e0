"""Megatron's --overlap-param-gather in the fast tier: the distributed optimizer's parameter
all-gathers of the previous step, bucket by bucket beside the first forward of each chunk.

Megatron-Core (megatron/core/optimizer/distrib_optimizer.py at core_r0.8.0): zero_grad dispatches
the first bucket's all-gather before the forward; the forward pre-hook of the first module holding
one of a bucket's parameters waits for it and dispatches the next (_make_forward_pre_hook,
_finish_param_sync_helper), in forward order. strategy/llm/buckets.py attaches each bucket's
gather to the unit that closed it (Place.NEXT_FWD) and program.py issues the rank's gathers in
unit order, each waiting for the one before it (StageProgram._sync), the unit's first forward
compute waiting for its own. So in the walk (walk.py: a node issued once what it depends on has
finished) a stage's gathers run one after the other on its communication lane from the start of
the iteration, whatever the compute does, and a unit's first forward waits for its gathers' end.
A gather is issued in node order beside the forward's own collectives: it takes the lane where it
is ready no later than the chain wants it (the chain's collective waits for it to end); gathers
whose node comes after a later chunk's forward (the one before it waited for there) go only at
that chunk's first forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from modtrans.estimate.units import BLOCKING, CHAIN, Link

Waits = tuple[tuple[int, int], ...]
"""A chunk's gathers in forward order: (the index of the forward link that waits for it: its
unit's first compute, its ns)."""


@dataclass
class Stream:
    """One stage's gathers, chunk by chunk in forward order: (virtual stage, waiting link, ns)."""

    jobs: Sequence[tuple[int, int, int]]
    ends: list[int] = field(default_factory=list)  # the ends of the gathers run so far
    spoke: int = 0  # their ns

    def _run(self, lane: int, until: int | None = None, last: int | None = None) -> int:
        """Run the next gathers: those that start no later than `until`, or up to job `last`."""
        while len(self.ends) < len(self.jobs):
            start = max(self.ends[-1] if self.ends else 0, lane)
            if last is not None and len(self.ends) > last:
                break
            if until is not None and start > until:
                break
            lane = start + self.jobs[len(self.ends)][2]
            self.ends.append(lane)
            self.spoke += self.jobs[len(self.ends) - 1][2]
        return lane

    def forward(self, v: int, links: Sequence[Link], start: int, lane: int) -> tuple[int, int]:
        """Chunk `v`'s first forward from `start`, the lane free at `lane`: when it ends, and when
        the lane is free after it and the gathers its units issued."""
        waits = {i: k for k, (w, i, _) in enumerate(self.jobs) if w == v}
        t, c = start, lane
        for i, (kind, ns) in enumerate(links):
            if i in waits:
                c = self._run(c, last=waits[i])
                t = max(t, self.ends[waits[i]])
            if kind == CHAIN:
                t += ns
                continue
            c = self._run(c, until=max(t, c))
            if kind == BLOCKING:
                t = c = max(t, c) + ns
            else:
                c = max(t, c) + ns
        issued = max((k + 1 for k, (w, _, _) in enumerate(self.jobs) if w <= v), default=0)
        return t, self._run(c, last=issued)


def streams(stages: int, held: Sequence[Sequence[int]], waits: Sequence[Waits]) -> list[Stream]:
    """Each stage's Stream: `held[s]` its virtual stages, `waits[v]` each chunk's gathers."""
    return [Stream([(v, i, ns) for v in sorted(held[s]) for i, ns in waits[v]]) for s in range(stages)]
