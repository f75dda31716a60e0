"""The check the hf tests make of a model read through modtrans/hf against transformers itself
(issue 36's acceptance): parameters equal to sum(p.numel()), matrix-product forward FLOPs within
2 % of FlopCounterMode's count of the same forward, an experts module that runs every expert on
every token counted as the routed run a training framework makes (dense_surplus). Imported by
tests that skip without torch."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from modtrans.hf import library
from modtrans.ir.document import Kind, ModelIR

GEMMS = (Kind.LINEAR, Kind.MATMUL, Kind.CONV)


def agrees(model: Any, given: dict[str, Any], ir: ModelIR) -> None:
    """Assert the IR's parameters and GEMM FLOPs are transformers' own for `model` on `given`."""
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    counted = library.count_forward(model, given) - dense_surplus(model, given)
    ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS)
    assert counted > 0
    assert abs(ours - counted) <= 0.02 * counted, (ours, counted)


def dense_surplus(model: Any, given: dict[str, Any]) -> int:
    """The FLOPs transformers counts beyond the routed run in experts modules that run every expert
    on every token: a module named experts of [E, ...] weights whose count is each of its weights
    on each token (2 x tokens x its parameters: Llama4TextExperts' bmm over [E, tokens, h],
    modeling_llama4.py) is charged k / E of it, k its MoE's top_k (or the configuration's
    num_experts_per_tok), as Megatron-Core's GroupedMLP and torchtitan's grouped_mm run only the
    routed tokens (modtrans/hf/mixture.py, routed). A routed module's count (tokens x k rows) is
    kept whole; 0 where no module ran densely."""
    ids = given.get("input_ids")
    fused = {
        name: module
        for name, module in model.named_modules()
        if name.rsplit(".", 1)[-1] == "experts"
        and any(p.dim() == 3 for p in module.parameters(recurse=False))
    }
    if ids is None or not fused:
        return 0
    tokens = ids.numel()
    text = model.config.get_text_config()
    counted = library.count_modules(model, given)
    surplus = 0
    for name, module in fused.items():
        held = sum(p.numel() for p in module.parameters())
        count = counted.get(f"{type(model).__name__}.{name}", 0)
        if count != 2 * tokens * held:
            continue  # not every weight on every token: a routed run
        e = next(p.shape[0] for p in module.parameters(recurse=False) if p.dim() == 3)
        parent = model.get_submodule(name.rpartition(".")[0])
        k = getattr(parent, "top_k", None) or text.num_experts_per_tok
        surplus += count - int(count * Fraction(k, e))
    return surplus
