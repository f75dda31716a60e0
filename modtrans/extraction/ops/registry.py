"""The op registry: what a handler sees of a node (NodeView), what it says the layer is
(Facts), and the table of handlers keyed by (domain, op_type)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from modtrans.ir.document import Flops, Gemm, Kind, Role

Shape = tuple[int, ...]
DEFAULT = ""  # the ONNX domain ("" and "ai.onnx" are the same)
MICROSOFT = "com.microsoft"


@dataclass(frozen=True)
class NodeView:
    """What a handler may look at. Shapes are None unless every dim is known."""

    op_type: str
    attrs: dict[str, Any]
    inputs: tuple[str, ...]
    in_shapes: tuple[Shape | None, ...]
    out_shapes: tuple[Shape | None, ...]
    is_param: tuple[bool, ...]  # per input: a parameter (initializer or constant, non-scalar)
    domain: str = DEFAULT
    opset: int = 0  # the model's opset version for the node's domain (0: not declared)

    def text(self, name: str, default: str = "") -> str:
        """A string attribute (ONNX stores them as bytes)."""
        value = self.attrs.get(name, default)
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    def shape(self, index: int) -> Shape | None:
        return self.in_shapes[index] if index < len(self.in_shapes) else None

    def param(self, index: int) -> bool:
        return index < len(self.is_param) and self.is_param[index]

    @property
    def out_elements(self) -> int | None:
        first = self.out_shapes[0] if self.out_shapes else None
        return None if first is None else math.prod(first)


@dataclass(frozen=True)
class Facts:
    kind: Kind
    roles: dict[int, Role] = field(default_factory=dict)  # input index -> parameter role
    flops: Flops = field(default_factory=Flops)
    gemm: Gemm | None = None
    costed: bool = True  # False: the FLOPs depend on a shape that is unknown (X510)
    conflict: str | None = None  # the input shapes contradict the weights (X511), in words
    param_elements: dict[int, int] = field(default_factory=dict)  # input -> values packed in it (4-bit)


Handler = Callable[[NodeView], Facts]
REGISTRY: dict[tuple[str, str], Handler] = {}


def handles(*op_types: str, domains: Sequence[str] = (DEFAULT,)) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for domain in domains:
            for op in op_types:
                REGISTRY[(domain, op)] = fn
        return fn

    return register


def param_roles(node: NodeView, roles: Sequence[tuple[int, Role]]) -> dict[int, Role]:
    return {i: role for i, role in roles if node.param(i)}


def unknown(kind: Kind, roles: dict[int, Role]) -> Facts:
    """A layer whose cost needs a shape shape inference left unknown."""
    return Facts(kind, roles, costed=False)
