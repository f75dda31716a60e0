"""The model types whose default configuration transformers itself cannot build (a field None or
absent), read from the configuration transformers' own test suite builds for each
(fixtures/hf/testers/, written by tools/hf_tester_configs.py as save_pretrained writes it; the
test file and commit of each in fixtures/hf/MANIFEST.md). Each read as a config.json is, through
the generic path, against transformers itself: parameters equal sum(p.numel()), the matrix
products' forward FLOPs within 2 % of FlopCounterMode's count (tests/hfcheck.py).

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import built, classes, library
from tests.hfcheck import agrees

pytestmark = pytest.mark.hf

TESTERS = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "testers"

BUILT = {
    # model_type: the class transformers builds (its causal-LM, masked-LM or CTC class)
    "cohere_compass_text": "CohereCompassForCausalLM",
    "dbrx": "DbrxForCausalLM",
    "deepseek_v2": "DeepseekV2ForCausalLM",
    "dots1": "Dots1ForCausalLM",
    "esm": "EsmForMaskedLM",
    "hunyuan_v1_dense": "HunYuanDenseV1ForCausalLM",
    "hunyuan_v1_moe": "HunYuanMoEV1ForCausalLM",
    "lfm2_moe": "Lfm2MoeForCausalLM",
    "ministral": "MinistralForCausalLM",
    "moonshine_streaming": "MoonshineStreamingForConditionalGeneration",
    "nemotron": "NemotronForCausalLM",
    "qwen4_exp_text": "Qwen4ExpForCausalLM",
    "reformer": "ReformerModelWithLMHead",
    "wav2vec2-bert": "Wav2Vec2BertForCTC",
    "wav2vec2-conformer": "Wav2Vec2ConformerForCTC",
    "xmod": "XmodForCausalLM",
}

SEQUENCE = 32
"""Tokens read: within every tester's configuration (Reformer's axial position embeddings hold
4 x 8 positions: its tester runs 32)."""


def test_every_fixture_is_checked() -> None:
    assert {p.stem for p in TESTERS.glob("*.json")} == set(BUILT)


@pytest.mark.parametrize("model_type", sorted(BUILT))
def test_a_tester_configuration_is_read_as_transformers_builds_it(model_type: str) -> None:
    data = json.loads((TESTERS / f"{model_type}.json").read_text())
    assert data["model_type"] == model_type
    model = library.build(classes.config_of(data))
    assert type(model).__name__ == BUILT[model_type]
    read = built.read(model, 1, SEQUENCE)
    agrees(model, read.given, read.ir)


def test_a_sequence_longer_than_the_model_holds_is_one_line() -> None:
    """Reformer's axial position embeddings hold 4 x 8 positions: 64 tokens are refused in one
    line (M801, transformers' own reason), not a traceback."""
    from modtrans import pipeline

    ir, found = pipeline.extract_checked(TESTERS / "reformer.json", input_shapes={"input_ids": (1, 64)})
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "axial_pos_shape" in found[0].message
    assert "\n" not in found[0].message
