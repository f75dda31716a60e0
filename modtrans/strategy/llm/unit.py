"""A unit: one workload layer (an IR layer with parameters and the parameter-free layers folded
into it) as one rank of a pipeline chunk runs it, and the collectives each technique attaches.

Places a collective can be attached (each one blocking: what follows waits for it, unless noted):
    before_fwd   before the unit's forward compute (SP all-gather, ZeRO-3 parameter all-gather)
    after_fwd    after it (TP all-reduce or SP reduce-scatter, EP dispatch / combine all-to-all)
    before_bwd   before its weight-gradient compute (SP all-gather of the output gradient,
                 EP all-to-all of gradients, ZeRO-3 all-gather)
    after_wg     after the weight-gradient compute, left to overlap (ZeRO-3 reduce-scatter)
    after_ig     after the input-gradient compute (TP all-reduce or SP reduce-scatter)
    tail         once per iteration after the unit's last micro-batch, left to overlap (data
                 parallelism: all-reduce, or ZeRO-1/2 reduce-scatter then all-gather)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from modtrans.plan.model import Purpose
from modtrans.strategy.draft import Comm, LayerDraft

PLACES = ("before_fwd", "after_fwd", "before_bwd", "after_wg", "after_ig", "tail")
TENSOR = frozenset({Purpose.TENSOR})
EXPERT = frozenset({Purpose.EXPERT})
DATA = frozenset({Purpose.EXPERT, Purpose.DATA})  # dense gradients: every data-parallel rank
EXPERT_DATA = frozenset({Purpose.DATA})  # expert gradients: the D / E ranks holding the same experts


@dataclass
class Unit:
    x: LayerDraft  # the group, its TP shard (ways, split)
    block: int | None
    scale: Fraction = Fraction(1)  # compute scale beyond the TP shard (SP: 1/T; an expert: x E_p)
    grads_over: frozenset[Purpose] = DATA
    comms: dict[str, list[Comm]] = field(default_factory=dict)
    index: int = -1  # in Plan.layers, set when the plan is assembled

    @property
    def role(self) -> str:
        """column / row / embedding / replicated / router / expert (the draft's: rank_share reads it)."""
        return self.x.role

    @role.setter
    def role(self, role: str) -> None:
        self.x.role = role

    @property
    def name(self) -> str:
        return self.x.owner.name

    def attach(self, place: str, comm: Comm) -> None:
        assert place in PLACES, place
        if comm.bytes > 0:
            self.comms.setdefault(place, []).append(comm)

    def param_bytes(self) -> int:
        """The bytes of this rank's share of the unit's gradients (the --params convention)."""
        p = self.x.group.comm_bytes
        return -(-p // self.x.ways) if self.x.ways > 1 and self.x.shardable else p
