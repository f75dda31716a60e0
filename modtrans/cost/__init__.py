"""Compute-time models: an IR layer and a training phase -> simulator ticks.

A cost model is anything with a `name`, a `describe()` for the output's provenance and
`times(layer) -> PhaseTimes`. The registry maps `--compute NAME` to a factory. Only the roofline
model exists so far; the systolic-array models of the compute-model issue register here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from modtrans.ir.document import Layer


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """Ticks for one layer's forward, input-gradient and weight-gradient work, and its update."""

    forward: int
    input_grad: int
    weight_grad: int
    update: int = 0


class CostModel(Protocol):
    @property
    def name(self) -> str: ...

    def times(self, layer: Layer) -> PhaseTimes: ...

    def describe(self) -> dict[str, Any]: ...


REGISTRY: dict[str, Callable[..., CostModel]] = {}


def register(name: str) -> Callable[[Callable[..., CostModel]], Callable[..., CostModel]]:
    def add(factory: Callable[..., CostModel]) -> Callable[..., CostModel]:
        REGISTRY[name] = factory
        return factory

    return add


def get(name: str, **options: Any) -> CostModel:
    from modtrans.cost import roofline  # noqa: F401  (registers itself)

    try:
        factory = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown compute model {name!r}; known: {', '.join(sorted(REGISTRY))}") from None
    return factory(**options)
