"""Plans of a transformer under an LLM layout, for tests: one definition of the toy Llama whose
sizes the tests count by hand, and of translating a configuration under `--tp`/`--pp`/...
for Chakra, so that each test states only its layout and its token shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from modtrans import pipeline
from modtrans.comm import Policy
from modtrans.plan import Plan
from modtrans.strategy import Parallelism
from modtrans.strategy.llm import Layout
from modtrans.strategy.llm.activations import Dims, dims

# a two-block Llama in bf16: hidden 64, 4 heads in 2 key/value groups, MLP 128, vocabulary 96
TOY: dict[str, Any] = {
    "model_type": "llama",
    "vocab_size": 96,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "torch_dtype": "bfloat16",
}


def config(folder: Path, values: dict[str, Any]) -> Path:
    """`values` written as folder/config.json, the file a Hugging Face model ships."""
    path = folder / "config.json"
    path.write_text(json.dumps(values))
    return path


def translated(model: str | Path, layout: Layout, tokens: tuple[int, int]) -> pipeline.Translation:
    """`model` under `layout` for Chakra, its input_ids of `tokens` (micro-batch, sequence)."""
    options = pipeline.Options(
        parallel=Parallelism(Policy.HYBRID_TRANSFORMER, layout.npus, layout=layout),
        input_shapes={"input_ids": tokens},
        format="chakra-et",
    )
    return pipeline.translate_checked(model, options)


def plan(model: str | Path, layout: Layout, tokens: tuple[int, int]) -> Plan:
    """The plan of `translated`, which must have no error (the diagnostics say why otherwise)."""
    result = translated(model, layout, tokens)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan


def dims_of(folder: Path, values: dict[str, Any], tokens: tuple[int, int]) -> Dims:
    """The activation model's dimensions of the configuration `values` for input_ids of `tokens`
    (micro-batch, sequence), read as translate reads it; it must have no error."""
    ir, found = pipeline.extract_checked(config(folder, values), input_shapes={"input_ids": tokens})
    assert ir is not None, [d.message for d in found]
    got = dims(ir, tokens[0])
    assert got is not None
    return got
