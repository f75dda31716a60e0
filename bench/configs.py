"""The model configurations the benchmarks translate, written once for them all."""

from __future__ import annotations

import json
from pathlib import Path

VOCAB, SEQUENCE = 51_200, 2_048
"""Korthikanti et al. 2022 (arXiv 2205.05198), Table 3: vocabulary 51,200, sequence 2,048."""


def megatron_gpt(
    layers: int,
    hidden: int,
    heads: int,
    *,
    dropout: float | None = 0.1,
    vocab: int = VOCAB,
    positions: int = SEQUENCE,
    dtype: str = "float16",
    tied: bool = True,
) -> dict[str, object]:
    """A GPT-2-architecture configuration of a Megatron-LM GPT (learned positions, LayerNorm, GeLU
    MLP of 4h, tied output layer unless `tied` is False: Megatron-LM's
    --untie-embeddings-and-output-weights), trained in `dtype` (Table 3's: fp16); `dropout` its
    attention dropout (None: not given, the configuration's default)."""
    config: dict[str, object] = {
        "model_type": "gpt2", "n_embd": hidden, "n_layer": layers, "n_head": heads,
        "n_positions": positions, "vocab_size": vocab, "torch_dtype": dtype,
    }  # fmt: skip
    if dropout is not None:
        config["attn_pdrop"] = dropout
    if not tied:
        config["tie_word_embeddings"] = False
    return config


def written(config: dict[str, object], path: Path) -> Path:
    """`config` as a config.json at `path`."""
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
