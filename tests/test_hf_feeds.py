"""Inputs for models whose first input alone does not run them (modtrans/hf/feeds.py), held to
the transformers classes that read them. Each of these types stopped on meta before: Kyutai's ids
had no codebook axis, Voxtral realtime had no audio to add to its ids, Granite Speech 5 got
Whisper's layout where its extractor needs torchaudio, and the Gemma 4 unified assistant had no
drafted model's states. Each must now give transformers' parameter count and FlopCounterMode's
forward FLOPs within 2 %, from its default configuration, as tools/hf_families.py counts it.
BLT's entropy patching is refused in one line.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import built, classes, library
from modtrans.ir.document import ModelIR
from tests.hfcheck import agrees

pytestmark = pytest.mark.hf

FED = ("kyutai_speech_to_text", "voxtral_realtime", "granite_speech5_ctc", "gemma4_unified_assistant")
"""The model types feeds.py's rules make read, each at its default configuration."""


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))


def traced(config: Any, sequence: int = 32) -> tuple[Any, dict[str, Any], ModelIR]:
    model = library.build(config)
    read = built.read(model, 2, sequence)
    return model, read.given, read.ir


@pytest.mark.parametrize("model_type", FED)
def test_a_model_fed_by_its_own_caller_s_rule_is_the_library_s(model_type: str) -> None:
    model, given, ir = traced(classes.default_config(model_type))
    agrees(model, given, ir)


def test_kyutai_ids_carry_the_text_token_and_one_code_a_codebook() -> None:
    """The embedding adds one offset per column of the ids (audio_tokens_offsets: the text's 0,
    then one per codebook) and sums the columns; the ids have that many columns."""
    model = library.build(classes.default_config("kyutai_speech_to_text"))
    ids = library.inputs(model, 2, 16)["input_ids"]
    offsets = model.model.embed_tokens.audio_tokens_offsets
    assert tuple(ids.shape) == (2, 16, offsets.numel())
    assert offsets.numel() == 1 + 32  # the default configuration's 32 codebooks


def test_voxtral_realtime_gets_one_audio_embedding_a_token() -> None:
    """The model's own audio path on the features turns them into as many embeddings as there are
    ids (the tester's seq_length == num_audio_embeds), each as wide as a token embedding."""
    import torch

    model = library.build(classes.default_config("voxtral_realtime"))
    given = library.inputs(model, 2, 24)
    with torch.no_grad():
        audio = model.model.get_audio_features(input_features=given["input_features"]).pooler_output
    assert tuple(audio.shape) == (2, 24, model.config.text_config.hidden_size)
    assert tuple(given["input_ids"].shape) == (2, 24)


def test_granite_speech_5_features_are_its_extractor_s_layout_without_torchaudio() -> None:
    """One second at 16 kHz, a 160-sample (10 ms) hop: 100 mel frames, stacked in pairs to 50; each
    80 mels and their deltas, two frames: 320 features, the width of the encoder's input_linear."""
    model = library.build(classes.default_config("granite_speech5_ctc"))
    given = library.inputs(model, 2, 64)
    assert tuple(given["input_features"].shape) == (2, 50, 320)
    assert model.encoder.input_linear.in_features == 320
    assert tuple(given["attention_mask"].shape) == (2, 50)


def test_a_drafter_reads_states_of_its_own_heads_and_widths() -> None:
    """Each attention type's keys and values as the drafter's text configuration states that type's
    layers: its key/value heads and head_dim (per_layer_config), the context as long as the drafted
    positions; its input twice the drafted model's width (backbone_hidden_size)."""
    config = classes.default_config("gemma4_unified_assistant")
    model = library.build(config)
    given = library.inputs(model, 2, 16)
    text = config.text_config
    for kind, (keys, values) in given["shared_kv_states"].items():
        layer = text.per_layer_config[text.layer_types.index(kind)]
        assert tuple(keys.shape) == (2, layer.num_key_value_heads, 16, layer.head_dim)
        assert keys.shape == values.shape
    assert set(given["shared_kv_states"]) == set(text.layer_types)
    assert tuple(given["inputs_embeds"].shape) == (2, 16, 2 * config.backbone_hidden_size)


def test_blt_s_entropy_patching_is_refused_in_one_line(tmp_path: Path) -> None:
    """Its default configuration patches by entropy: one M801 line that says why, exit 2 (an input
    modtrans cannot read). With patch_in_forward false (the configuration transformers'
    BltModelTester builds), each byte is a patch and the model reads."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    config = classes.default_config("blt")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    result = CliRunner().invoke(app, ["translate", str(path), "--npus", "2", "-o", str(tmp_path / "a.txt")])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if " error " in line]
    assert len(errors) == 1, result.output
    assert "M801" in errors[0]
    assert "entropy patching" in errors[0]
    config.patch_in_forward = False
    model, given, ir = traced(config)
    agrees(model, given, ir)
