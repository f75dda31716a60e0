"""A unit: one workload layer (an IR layer with parameters and the parameter-free layers folded
into it) as one rank of a pipeline chunk runs it, and the collectives each technique attaches.

Where each technique attaches a collective: plan.model.Place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from modtrans.ir.document import Param, Role
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm, LayerDraft
from modtrans.strategy.llm.degrees import dense_data
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.share import whole

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
        g = self.x.group
        return self.share(g.comm_bytes, g.bias_comm_bytes if self.keeps(Role.BIAS) else 0)

    def param_bytes(self) -> int:
        """This rank's share of the unit's parameters in their own dtype (parameter all-gathers)."""
        g = self.x.group
        return self.share(g.param_bytes, g.bias_param_bytes if self.keeps(Role.BIAS) else 0)

    def keeps(self, role: Role) -> bool:
        """Whether every tensor-parallel rank holds the owner's parameters of `role` whole: a
        row-parallel unit's biases (share.whole)."""
        return self.x.ways > 1 and whole(role, self.x.split)

    def held(self, p: Param, size: int | None = None) -> int:
        """This rank's share of one of the owner's parameters: its elements, or `size`, a quantity
        of it (its bytes)."""
        size = p.elements if size is None else size
        return self.share(size, size if self.keeps(p.role) else 0)

    def share(self, size: int, kept: int = 0) -> int:
        """This rank's share of a quantity of the unit's parameters: its experts' (E / E_p of a
        grouped layer's), then its tensor-parallel shard of all but `kept` of it, the part every
        tensor-parallel rank holds whole (keeps)."""
        size, kept = -(-(size - kept) // self.holds), -(-kept // self.holds)
        return (-(-size // self.x.ways) if self.x.ways > 1 and self.x.shardable else size) + kept
