"""The sweep's memory filter (strategy/llm/footprint.py) against the memory of the plan the
translation builds for the same layout (pipeline.translate_checked -> Plan.memory): the same
numbers for every stage, over layouts that exercise each input the footprint keeps instead of
rebuilding (the tensor, context and expert splits, ZeRO under each framework, the pipeline cut,
interleaving, the tied output layer of a pipeline, recomputation, the micro-batch)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from modtrans import pipeline
from modtrans.ir.document import ModelIR
from modtrans.request import prepare, request_of
from modtrans.strategy.llm.footprint import Footprint
from modtrans.strategy.llm.options import Layout, LayoutError

CASES = [
    (
        "gpt3-13b",
        {"npus": 8, "tp": 2, "pp": 2, "sp": True, "zero": 1, "micro_batch": 2},
    ),  # tied head on the last stage
    (
        "gpt3-13b",
        {
            "npus": 16,
            "tp": 1,
            "pp": 4,
            "schedule": "interleaved",
            "vpp": 5,
            "global_batch": 32,
            "recompute": "full",
        },
    ),
    ("llama-3-8b", {"npus": 16, "tp": 2, "cp": 2, "pp": 2, "sp": True, "zero": 1, "recompute": "selective"}),
    ("llama-3-8b", {"npus": 8, "dp": 8, "framework": "fsdp", "zero": 3, "micro_batch": 4}),
    ("llama-3-8b", {"npus": 8, "tp": 2, "dp": 4, "framework": "deepspeed", "zero": 2}),
    ("mixtral-8x7b", {"npus": 16, "tp": 2, "ep": 4, "pp": 2, "sp": True, "zero": 1}),
    ("mixtral-8x7b", {"npus": 8, "tp": 2, "ep": 2, "etp": 1, "sp": True, "zero": 0, "micro_batch": 2}),
    # Transformer Engine's FP8 weight copies and saved inputs (strategy/llm/fp8.py)
    (
        "llama-3-8b",
        {"npus": 8, "tp": 2, "pp": 2, "sp": True, "zero": 1, "precision": "fp8", "device": "h100"},
    ),
    (
        "mixtral-8x7b",
        {"npus": 16, "tp": 2, "ep": 4, "pp": 2, "sp": True, "precision": "fp8", "device": "h100"},
    ),
]


def _footprint(model: str, options: Mapping[str, object]) -> Footprint:
    prepared = prepare(request_of(model, {"seq_len": 512, **options}))

    def ir_of(layout: Layout) -> ModelIR:
        multiple = layout.vocabulary_multiple
        ir, found = pipeline.extract_checked(
            model, batch=1, input_shapes=prepared.options.input_shapes, vocabulary_multiple=multiple
        )
        assert ir is not None, found
        return ir

    return Footprint(ir_of)


@pytest.mark.parametrize(("model", "options"), CASES)
def test_footprint_is_the_plans_memory(model: str, options: dict[str, object]) -> None:
    prepared = prepare(request_of(model, {"seq_len": 512, **options}))
    built = pipeline.translate_checked(model, prepared.options)
    assert built.plan is not None, built.diagnostics
    layout = prepared.options.parallel.layout
    assert layout is not None
    assert _footprint(model, options).memory(layout) == built.plan.memory


def test_a_layout_the_model_refuses_is_a_layout_error() -> None:
    """Megatron-Core's rules of the model itself, as the translation raises them: GPT-3 13B's 40
    heads over 16 tensor ranks (tensor.check_heads); its 40 blocks in 16 pipeline chunks
    (stages.partition)."""
    for options in ({"npus": 16, "tp": 16}, {"npus": 16, "pp": 16}):
        prepared = prepare(request_of("gpt3-13b", {"seq_len": 512, **options}))
        layout = prepared.options.parallel.layout
        assert layout is not None
        with pytest.raises(LayoutError):
            _footprint("gpt3-13b", options).memory(layout)
        assert pipeline.translate_checked("gpt3-13b", prepared.options).plan is None
