"""A unit: one workload layer (an IR layer with parameters and the parameter-free layers folded
into it) as one rank of a pipeline chunk runs it, and the collectives each technique attaches.

Where each technique attaches a collective: plan.model.Place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm, LayerDraft
from modtrans.strategy.llm.degrees import dense_data
from modtrans.strategy.roles import LayerRole

if TYPE_CHECKING:
    from modtrans.strategy.llm.userbuffers import Fused

TENSOR = frozenset({Purpose.TENSOR})
EXPERT = frozenset({Purpose.EXPERT})
# expert gradients (expert.py): the D / E ranks holding the same expert shards (experts split over
# the tensor ranks, ETP = T), or the T x D / E ranks holding the same whole experts (ETP 1); dense
# gradients: degrees.dense_data()
EXPERT_DATA = frozenset({Purpose.DATA})
TENSOR_EXPERT_DATA = frozenset({Purpose.TENSOR, Purpose.DATA})


@dataclass
class Unit:
    x: LayerDraft  # the group, its TP shard (ways, split)
    block: int | None
    scale: Fraction = Fraction(1)  # compute scale beyond the TP shard (SP: 1/T; an expert: x E_p)
    grads_over: frozenset[Purpose] = field(default_factory=dense_data)  # the dense gradients' axes
    index: int = -1  # in Plan.layers, set when the plan is assembled
    holds: int = 1  # a grouped experts' layer: this rank holds 1 / holds of its experts (E_p)
    fused: list[Fused] = field(default_factory=list)  # --tp-comm-overlap's collectives in its GEMMs

    @property
    def role(self) -> LayerRole:
        """column / row / embedding / replicated / router / expert (the draft's: rank_share reads it)."""
        return self.x.role

    @role.setter
    def role(self, role: LayerRole) -> None:
        self.x.role = role

    @property
    def name(self) -> str:
        return self.x.owner.name

    def attach(self, place: Place, comm: Comm) -> None:
        self.x.attach(place, comm)

    def grad_bytes(self) -> int:
        """This rank's share of the unit's gradients as the data-parallel reduction moves them
        (the --params convention, the framework's gradient dtype: groups.layer_bytes)."""
        return self.share(self.x.group.comm_bytes)

    def param_bytes(self) -> int:
        """This rank's share of the unit's parameters in their own dtype (parameter all-gathers)."""
        return self.share(self.x.group.param_bytes)

    def share(self, size: int) -> int:
        """This rank's share of a quantity of the unit's parameters: its experts' (E / E_p of a
        grouped layer's), then its tensor-parallel shard."""
        size = -(-size // self.holds)
        return -(-size // self.x.ways) if self.x.ways > 1 and self.x.shardable else size
