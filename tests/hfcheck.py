"""The check the hf tests make of a model read through modtrans/hf against transformers itself
(issue 36's acceptance): parameters equal to sum(p.numel()), matrix-product forward FLOPs within
2 % of FlopCounterMode's count of the same forward. Imported by tests that skip without torch."""

from __future__ import annotations

from typing import Any

from modtrans.hf import library
from modtrans.ir.document import Kind, ModelIR

GEMMS = (Kind.LINEAR, Kind.MATMUL, Kind.CONV)


def agrees(model: Any, given: dict[str, Any], ir: ModelIR) -> None:
    """Assert the IR's parameters and GEMM FLOPs are transformers' own for `model` on `given`."""
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    counted = library.count_forward(model, given)
    ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS)
    assert counted > 0
    assert abs(ours - counted) <= 0.02 * counted, (ours, counted)
