"""What every layout of one model on one cluster shares: the options' rules applied once (the
option table, as `translate` applies them: request.py), the model's IR per vocabulary padding, the
cost model and the device's peak. Made once per (model, device, training options) and kept."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modtrans import cost
from modtrans.diagnostics import Diagnostic
from modtrans.estimate.result import peak_of
from modtrans.estimate.walk import EstimateError
from modtrans.ir.document import ModelIR
from modtrans.pipeline import Options
from modtrans.strategy.draft import Parallelism
from modtrans.strategy.llm.options import Layout

TOKENS = ("input_ids", "decoder_input_ids")
"""The inputs whose first dimension is the micro-batch a sweep's layout sets (a sweep takes
--seq-len, never --input-shape: table.SWEEP_SHARED)."""


@dataclass(frozen=True)
class Context:
    model: str
    options: Options  # the training options, a layout's own aside
    cost: cost.CostModel
    peak_flops: float | None  # the device's dense BF16 FLOP/s
    sequence: int  # tokens per sequence
    said: tuple[Diagnostic, ...] = ()  # what settling the model's own attention said (M807, M808)
    irs: dict[tuple[int, int], ModelIR] = field(default_factory=dict, compare=False)
    made: dict[object, object] = field(default_factory=dict, compare=False)  # what the fast tier keeps

    def ir(self, layout: Layout) -> ModelIR:
        """The model's IR for one micro-batch of `layout` (request.py: the IR is one micro-batch),
        its vocabulary padded as the layout pads it (Megatron: a multiple of 128 T)."""
        key = (layout.vocabulary_multiple, layout.micro_batch)
        if key not in self.irs:
            micro = layout.micro_batch
            shapes = {  # --seq-len's input_ids=BxS (request._shapes), B the layout's micro-batch
                name: (micro, *dims[1:]) if name in TOKENS and dims else dims
                for name, dims in self.options.input_shapes.items()
            }
            self.irs[key] = _ir(self.model, replace(self.options, batch=micro, input_shapes=shapes), key[0])
        return self.irs[key]

    def parallelism(self, layout: Layout) -> Parallelism:
        return replace(self.options.parallel, npus=layout.npus, layout=layout)


def context(model: str | Path, device: str | None, training: Mapping[str, Any]) -> Context:
    """The shared part of every layout's estimate (EstimateError for options the table refuses)."""
    key = tuple(sorted((k, _hashable(v)) for k, v in training.items()))
    return _context(str(model), device, key)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    return value


@functools.lru_cache(maxsize=16)
def _context(model: str, device: str | None, training: tuple[tuple[str, Any], ...]) -> Context:
    from modtrans.request import UsageError, prepare, request_of

    given = {**dict(training), "time_unit": "ns", "tp": 1}
    if given.get("overlap_param_gather") and "zero" not in given:  # a sweep's: its layouts' --zero
        given["zero"] = 1  # the rule the one-GPU reading is held to (options.py: the distributed optimizer)
    if device is not None:
        given["device"] = device
    from modtrans.pipeline import own_attention

    try:
        options = prepare(request_of(model, given, caller="estimate")).options
    except UsageError as error:
        raise EstimateError(str(error)) from None
    ir = _ir(model, options, 1)
    options, said = own_attention(options, ir, model)  # the model's own kernel, where that is the rule
    try:
        model_cost = cost.get(options.compute, options.cost)
    except cost.CostError as error:
        raise EstimateError(str(error)) from None
    peak = peak_of(model_cost.describe())
    shapes = ir.provenance.input_shapes
    first = next(iter(shapes.values()), ())
    sequence = int(first[-1]) if first else 1
    return Context(model, options, model_cost, peak, sequence, tuple(said))


def _ir(model: str, options: Options, vocabulary_multiple: int) -> ModelIR:
    from modtrans.diagnostics import has_errors
    from modtrans.pipeline import extract_checked

    ir, found = extract_checked(
        model,
        batch=options.batch,
        input_shapes=options.input_shapes,
        input_values=options.input_values,
        vocabulary_multiple=vocabulary_multiple,
        per_expert=options.per_expert,
        trust_remote_code=options.trust_remote_code,
        file_hash=False,
        precision=options.precision,
    )
    if ir is None or has_errors(found):
        first = next((d for d in found if d.severity == 1), None)
        raise EstimateError(f"{model}: {first.message if first else 'cannot be read'}")
    return ir
