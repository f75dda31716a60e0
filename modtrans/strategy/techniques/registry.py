"""The registry of techniques: each technique module registers its function under the keywords it
builds (`@technique(...)`); techniques/__init__.py loads them all."""

from __future__ import annotations

from collections.abc import Callable

from modtrans.comm import Policy
from modtrans.strategy.draft import Draft

Technique = Callable[[Draft], None]
TECHNIQUES: dict[Policy, Technique] = {}


def technique(*policies: Policy) -> Callable[[Technique], Technique]:
    def register(apply: Technique) -> Technique:
        for policy in policies:
            TECHNIQUES[policy] = apply
        return apply

    return register
