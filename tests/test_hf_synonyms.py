"""A config.json may spell a field under either name its configuration class's attribute_map
gives (transformers 5 saves Qwen3-MoE's expert count as num_local_experts; its published files
say num_experts): the hand-written path reads both (llm/families.py, SYNONYMS), held here to
transformers' own attribute maps and to the files transformers itself writes.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import transformers

from modtrans import pipeline
from modtrans.hf import classes, library
from modtrans.llm.config import FAMILIES
from modtrans.llm.families import SYNONYMS

pytestmark = pytest.mark.hf


def _config_class(family: str) -> Any:
    try:
        return transformers.CONFIG_MAPPING[family]
    except KeyError:  # a family transformers does not define (DeepSeek V1: its own code)
        return None


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_s_synonyms_are_its_configuration_class_s(family: str) -> None:
    config_class = _config_class(family)
    if config_class is None:
        assert family not in SYNONYMS
        return
    assert SYNONYMS.get(family, {}) == dict(getattr(config_class, "attribute_map", {}))


SAVED = {
    # family: fields that make transformers' default configuration small enough to build quickly
    "qwen3_moe": {"num_hidden_layers": 2},
    "mixtral": {"num_hidden_layers": 2},
    "deepseek_v2": {"num_hidden_layers": 2, "first_k_dense_replace": 1, "num_experts_per_tok": 6},
    "deepseek_v3": {"num_hidden_layers": 2, "first_k_dense_replace": 1},
    "jamba": {"num_hidden_layers": 8},
    "gpt2": {"n_layer": 2},
}


@pytest.mark.parametrize("family", sorted(SAVED))
def test_a_configuration_transformers_saves_is_read_by_hand(family: str, tmp_path: Path) -> None:
    """The config.json transformers' save_pretrained writes (its canonical names, not the ones
    the published files use), read by llm/: the parameters transformers' model holds."""
    config = transformers.AutoConfig.for_model(family, **SAVED[family])
    config.save_pretrained(tmp_path)
    saved = tmp_path / "config.json"
    ir, found = pipeline.extract_checked(saved, batch=1, input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    assert ir.provenance.producer != "transformers configuration (meta device)"  # the hand-written path
    model = library.build(classes.config_of(json.loads(saved.read_text())))
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
