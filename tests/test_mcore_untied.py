"""Megatron-LM's model_table sizes count an output layer of its own (bench/bench_today.py's rows).

NVIDIA/Megatron-LM's README "Performance Benchmarking" (d98e8a6; images/model_table.png came with
f2e5db4, Megatron-Core r0.8.0) names nine GPTs by size, vocabulary 131,072 and sequence 4,096 for
all. A Megatron-Core GPT (megatron/core/models/gpt/gpt_model.py at core_r0.8.0, GPTModel with
get_gpt_layer_with_transformer_engine_spec) holds:

    word embedding       VocabParallelEmbedding, V x h
    position embedding   learned_absolute by default (--position-embedding-type, arguments.py): s x h
    each layer           linear_qkv (TELayerNormColumnParallelLinear: its LayerNorm's 2h, 3h x h, 3h
                         of bias), linear_proj (h x h, h), linear_fc1 (2h, 4h x h, 4h), linear_fc2
                         (h x 4h, h): 12 h^2 + 13 h
    final_layernorm      2h
    output_layer         ColumnParallelLinear(bias=False), V x h, its own weight only with
                         --untie-embeddings-and-output-weights (pretrain_gpt.py at core_r0.8.0:
                         share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights)

Each size in the table is the untied count rounded to the digits it prints (within half a unit of
its last digit, a little slack for the rounding), with or without the position table; tied, none of
the nine fits (the 16B is 15.3 B tied, 16.1 B untied; the 177B 175.6 B tied, 177.2 B untied: the
README's strong-scaling GPT-3, "slightly more than 175 billion parameters due to larger vocabulary
size", is the table's 177B row). No launch script of the table's runs is published: the
repository's examples/gpt3/train_gpt3_175b_distributed.sh (core_r0.8.0) ties them, so the sizes are
the evidence. Megatron-LM of 2022 (fc7f4f0, Korthikanti et al. 2022's Table 5) had no untie flag
(arguments.py: it came with 82c7ba5, 2022-12-07); Table 3's sizes (22B, 175B, 530B, 1T at
vocabulary 51,200) fit either way, and bench_table5.py keeps them tied.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans import pipeline

VOCAB, SEQ = 131072, 4096
# (size as printed, layers, hidden): the table's rows (bench/bench_today.py's docstring reads them)
TABLE = (
    ("1.7", 24, 2048), ("7.1", 30, 4096), ("16", 32, 6144), ("32", 48, 7168), ("70", 84, 8192),
    ("119", 92, 10240), ("177", 96, 12288), ("314", 96, 16384), ("462", 112, 18432),
)  # fmt: skip
HALF_UNIT = 0.55  # of the printed size's last digit: rounding to it, with a little slack


def megatron_core_gpt(layers: int, hidden: int, *, tied: bool, positions: bool) -> int:
    """Parameters of Megatron-Core r0.8.0's GPTModel as the module docstring lists them."""
    h = hidden
    embedding = VOCAB * h + (SEQ * h if positions else 0)
    return embedding + layers * (12 * h * h + 13 * h) + 2 * h + (0 if tied else VOCAB * h)


def _fits(printed: str, count: int) -> bool:
    digits = len(printed.partition(".")[2])
    return abs(count / 1e9 - float(printed)) <= HALF_UNIT * 10.0**-digits


@pytest.mark.parametrize("positions", [True, False])
def test_the_table_sizes_are_the_untied_counts(positions: bool) -> None:
    for printed, layers, hidden in TABLE:
        untied = megatron_core_gpt(layers, hidden, tied=False, positions=positions)
        tied = megatron_core_gpt(layers, hidden, tied=True, positions=positions)
        assert _fits(printed, untied), (printed, untied)
        assert not _fits(printed, tied), (printed, tied)


def test_an_untied_gpt2_config_counts_megatron_cores_untied_parameters(tmp_path: Path) -> None:
    # bench/configs.py megatron_gpt(..., tied=False) as bench_today's 1.7B row writes it
    config = {
        "model_type": "gpt2", "n_embd": 2048, "n_layer": 24, "n_head": 16, "n_positions": SEQ,
        "vocab_size": VOCAB, "torch_dtype": "bfloat16", "attn_pdrop": 0.1, "tie_word_embeddings": False,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(str(path))
    assert ir is not None, [str(d) for d in found]
    assert ir.totals.params == megatron_core_gpt(24, 2048, tied=False, positions=True)
    path.write_text(json.dumps({**config, "tie_word_embeddings": True}))
    ir, found = pipeline.extract_checked(str(path))
    assert ir is not None, [str(d) for d in found]
    assert ir.totals.params == megatron_core_gpt(24, 2048, tied=True, positions=True)
