"""The values a forward on meta reads (modtrans/hf/values.py) and the inputs it runs on
(modtrans/hf/inputs.py), held to the real transformers classes that read them.

Each family here stopped on meta before: a value read from the token ids (XLM's and FlauBERT's
`lengths.max().item()`), a CPU scalar (Longformer's chunk count), a router's choice read back
(JetMoE's `expert_size.tolist()`, NLLB-MoE's f"expert_{index}"), an op with a data-dependent
shape (Switch Transformers' nonzero), an audio layout (Parakeet's and Speech2Text's [batch,
frames, mels]; SpeechEncoderDecoderModel's `inputs`, its wav2vec2 encoder's samples).
Each must now give transformers' parameter count and FlopCounterMode's forward FLOPs within 2 %.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import built, classes, inputs, library
from modtrans.ir.document import ModelIR
from tests.hfcheck import GEMMS, agrees

pytestmark = pytest.mark.hf


def traced(config: Any, sequence: int = 64) -> tuple[Any, dict[str, Any], ModelIR]:
    return traced_with(config, None, sequence)


def traced_with(config: Any, cls: Any, sequence: int = 64) -> tuple[Any, dict[str, Any], ModelIR]:
    model = library.build(config, cls)
    read = built.read(model, 1, sequence)
    return model, read.given, read.ir


def small(model_type: str, **values: Any) -> Any:
    config = classes.default_config(model_type)
    for key, value in values.items():
        setattr(config, key, value)
    return config


READERS = {
    "xlm": {"n_layers": 2, "emb_dim": 256, "n_heads": 4},
    "flaubert": {"n_layers": 2, "emb_dim": 256, "n_heads": 4},
    "longformer": {"num_hidden_layers": 2},
    "led": {"encoder_layers": 2, "decoder_layers": 2},
    "jetmoe": {"num_hidden_layers": 2},
    "nllb-moe": {"encoder_layers": 2, "decoder_layers": 2, "num_experts": 4},
    "switch_transformers": {"num_layers": 2, "num_decoder_layers": 2, "num_sparse_encoder_layers": 1},
    "parakeet_ctc": {},
    "speech_to_text": {},
    "speech-encoder-decoder": {},
}
"""A family of each way a forward reads a value (the module docstring), made small to trace fast."""


@pytest.mark.parametrize("model_type", sorted(READERS))
def test_a_forward_that_reads_values_is_the_library_s(model_type: str) -> None:
    model, given, ir = traced(small(model_type, **READERS[model_type]))
    agrees(model, given, ir)


def test_a_top_1_router_sends_each_token_to_one_expert() -> None:
    """Switch Transformers (Fedus et al. 2021, section 2.1): each token runs one expert's wi and wo
    (d_model x d_ff each, 2 FLOPs a multiply-add), whichever expert the balanced choice names:
    the experts' FLOPs are tokens x 4 d_model d_ff per sparse layer, none dropped below capacity."""
    config = small("switch_transformers", num_layers=2, num_decoder_layers=2, num_sparse_encoder_layers=1)
    model, _, ir = traced(config)
    sparse = sum(1 for m in model.modules() if type(m).__name__ == "SwitchTransformersSparseMLP")
    experts = [x for x in ir.layers if ".experts." in x.name and x.kind in GEMMS]
    assert sparse == 2  # one in the encoder, one in the decoder: 64 tokens each
    assert sum(x.flops.forward for x in experts) == sparse * 64 * 4 * config.d_model * config.d_ff
    per_expert = {x.name: x.flops.forward for x in experts if x.name.endswith(".wi")}
    assert len(set(per_expert.values())) == 1  # balanced: 64 / 8 tokens each


def test_a_top_k_router_read_back_gives_each_expert_its_share() -> None:
    """JetMoE reads its router's expert sizes (expert_size.tolist()) and splits the tokens by
    them: with top-2 of 8 experts, 64 tokens make 128 rows through the experts' input_linear
    (weight [experts, out, hidden]: 2 x hidden x out FLOPs a row)."""
    model, _, ir = traced(small("jetmoe", num_hidden_layers=1))
    config = model.config
    assert config.num_experts_per_tok == 2
    assert config.num_local_experts == 8
    weight = model.model.layers[0].mlp.input_linear.weight
    experts, out, hidden = weight.shape
    assert experts == 8
    layer = ir.layer("model.layers.0.mlp.input_linear")
    assert layer.flops.forward == 64 * 2 * 2 * hidden * out


def test_token_ids_are_no_special_token() -> None:
    """XLM pads with id 2 (pad_index) and marks with 5: the ids the forward reads are neither, so
    its lengths are the whole sequence (no padding)."""
    config = classes.default_config("xlm")
    assert config.pad_index == 2
    assert config.pad_token_id == 2
    value = inputs.plain_token(config)
    assert value not in {config.pad_index, config.bos_index, config.eos_index, config.unk_index}
    assert value not in {config.mask_token_id, config.bos_token_id}


def test_audio_inputs_are_the_feature_extractor_s_layout() -> None:
    """Parakeet's extractor (NeMo's: 10 ms hop at 16 kHz) makes 101 frames of 80 mels from one
    second, frames before mels; Whisper's pads to 30 s: 80 mels x 3000 frames."""
    model = library.build(classes.default_config("parakeet_ctc"))
    given = library.inputs(model, 2, 64)
    assert tuple(given["input_features"].shape) == (2, 16000 // 160 + 1, 80)
    cls = classes.named_class("WhisperForConditionalGeneration")
    whisper = library.build(classes.default_config("whisper"), cls)
    assert tuple(library.inputs(whisper, 1, 64)["input_features"].shape) == (1, 80, 3000)
    composite = library.build(classes.default_config("speech-encoder-decoder"))
    assert tuple(library.inputs(composite, 1, 64)["inputs"].shape) == (1, 16000)  # wav2vec2's samples


@pytest.mark.parametrize(
    ("model_type", "tower", "tokens"),
    [
        ("llava", "model.vision_tower", (336 // 14) ** 2),  # LLaVA-1.5: CLIP ViT-L/14 at 336 px, 576 tokens
        ("paligemma", "model.vision_tower", (224 // 14) ** 2),  # PaliGemma at 224 px: 256 tokens
    ],
)
def test_a_vision_language_model_runs_its_tower_on_an_image(model_type: str, tower: str, tokens: int) -> None:
    """One image a sample of the vision configuration's size: the image tokens in the sequence are
    the published count (Liu et al. 2023, LLaVA-1.5; Beyer et al. 2024, PaliGemma), and the
    tower's and projector's FLOPs are FlopCounterMode's count of those modules (its own module
    tracker), not a tower counted by its parameters alone."""
    config = classes.default_config(model_type)
    config.text_config.num_hidden_layers = 2
    names = {"llava": "LlavaForConditionalGeneration", "paligemma": "PaliGemmaForConditionalGeneration"}
    cls = classes.named_class(names[model_type])
    model, given, ir = traced_with(config, cls, tokens + 64)  # the image's tokens and 64 of text
    assert tuple(given["pixel_values"].shape[1:]) == (3, *[config.vision_config.image_size] * 2)
    assert tuple(given["input_ids"].shape) == (1, tokens + 64)
    assert not [x.name for x in ir.layers if x.name.endswith("unused")]
    counted = library.count_modules(model, given)
    for module in (tower, "model.multi_modal_projector"):
        theirs = counted[f"{type(model).__name__}.{module}"]
        ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS and x.name.startswith(module + "."))
        assert theirs > 0
        assert abs(ours - theirs) <= 0.02 * theirs, (module, ours, theirs)


@pytest.mark.parametrize(
    ("model_type", "name"),
    [pytest.param("llama4", "Llama4ForCausalLM", marks=pytest.mark.slow), ("emu3", "Emu3ForCausalLM")],
)
def test_a_composite_configuration_s_causal_lm_is_built_from_its_text_configuration(
    model_type: str, name: str
) -> None:
    """Llama 4's and Emu3's configurations hold a text one; their causal-LM classes take that
    (config_class), as from_pretrained hands it over: built from the composite, they stopped on
    a field only the text configuration has (pad_token_id)."""
    cls = classes.named_class(name)
    config = classes.default_config(model_type)
    assert not isinstance(config, cls.config_class)
    model, given, ir = traced_with(config, cls)
    assert isinstance(model.config, cls.config_class)
    agrees(model, given, ir)


LEGACY = {
    "imagegpt": {"n_layer": 2},  # ImageGPTLayerNorm: nn.Parameter(torch.Tensor(hidden_size))
    "xlnet": {"n_layer": 2},  # XLNet attention: nn.Parameter(torch.FloatTensor(d_model, n_head, d_head))
    "sew-d": {"num_hidden_layers": 2},  # masked_spec_embed, and XSoftmax's torch.tensor(finfo.min)
}
"""Families whose own code makes CPU tensors under torch.device("meta"): legacy constructors for
parameters, torch.tensor for a scalar the forward mixes with meta activations."""


@pytest.mark.parametrize(
    "model_type", [m if m != "xlnet" else pytest.param(m, marks=pytest.mark.slow) for m in sorted(LEGACY)]
)
def test_a_cpu_tensor_the_model_makes_goes_to_meta(model_type: str) -> None:
    model, given, ir = traced(small(model_type, **LEGACY[model_type]))
    assert all(p.is_meta for p in model.parameters())  # no weight allocated
    agrees(model, given, ir)


CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def _real(name: str) -> Any:
    """A published config.json (fixtures/configs) with two text and two vision layers (a fast trace)."""
    config = classes.config_of(json.loads((CONFIGS / f"{name}.json").read_text()))
    config.get_text_config().num_hidden_layers = 2
    config.vision_config.depth = 2
    return config


def _idefics3() -> Any:
    """Idefics3-8B's vision tower and connector (Laurençon et al. 2024: SigLIP at 364 px, patch 14,
    pixel shuffle 2) on the default configuration's text model, two layers each."""
    config = classes.default_config("idefics3")
    config.vision_config.image_size, config.vision_config.patch_size = 364, 14
    config.vision_config.num_hidden_layers = config.text_config.num_hidden_layers = 2
    config.scale_factor = 2
    return config


@pytest.mark.parametrize(
    ("made", "cls", "tower", "tokens"),
    [
        # Qwen2-VL (Wang et al. 2024, section 2.1): 224 x 224 at patch 14 is 16 x 16 patches, merged
        # 2 x 2 into 64 tokens (66 with the vision start and end tokens).
        (lambda: _real("qwen2-vl-7b-instruct"), "Qwen2VLForConditionalGeneration", "model.visual", 64),
        pytest.param(
            lambda: _real("qwen2.5-vl-7b-instruct"),
            "Qwen2_5_VLForConditionalGeneration",
            "model.visual",
            64,
            marks=pytest.mark.slow,
        ),
        # Idefics3: its processor resizes to 1456 px (4 x 364) and splits 4 x 4 tiles plus the whole
        # image, 169 tokens each (26 x 26 patches, 13 x 13 after its 2 x 2 pixel shuffle).
        pytest.param(
            _idefics3,
            "Idefics3ForConditionalGeneration",
            "model.vision_model",
            17 * 169,
            marks=pytest.mark.slow,
        ),
    ],
    ids=["qwen2-vl", "qwen2.5-vl", "idefics3"],
)
def test_a_vision_language_model_with_a_patch_grid_runs_its_tower(
    made: Any, cls: str, tower: str, tokens: int
) -> None:
    """The image processor's layout of one image (Qwen2-VL's patches and image_grid_thw, Idefics3's
    tiles and pixel_attention_mask) runs the tower: its image tokens are the published count and
    its FLOPs FlopCounterMode's count of the tower; where it ran on token ids alone (M804)."""
    model, given, ir = traced_with(made(), classes.named_class(cls), tokens + 64)
    ids = given["input_ids"].modtrans_value
    assert int((ids == model.config.image_token_id).sum()) == tokens
    assert not [x.name for x in ir.layers if x.name.endswith("unused")]
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    counted = library.count_modules(model, given)
    theirs = counted[f"{type(model).__name__}.{tower}"]
    ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS and x.name.startswith(tower + "."))
    assert theirs > 0
    assert abs(ours - theirs) <= 0.02 * theirs, (ours, theirs)
    total = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS)
    assert abs(total - counted["Global"]) <= 0.02 * counted["Global"]


def test_a_vision_encoder_with_a_patch_sequence_takes_its_processor_s_layout() -> None:
    """SigLIP 2's NaFlex encoder (Tschannen et al. 2025) reads patches, not an image: its
    processor resizes the image to at most max_num_patches (256 by default) patches of 16 px,
    a square one to 16 x 16, with their mask and spatial shapes. Square pixels stopped it."""
    cls = classes.named_class("Siglip2ForImageClassification")
    config = classes.default_config("siglip2")
    config.vision_config.num_hidden_layers = 2
    model, given, ir = traced_with(config, cls)
    assert tuple(given["pixel_values"].shape) == (1, 256, 3 * 16 * 16)
    assert given["spatial_shapes"].modtrans_value.tolist() == [[16, 16]]
    assert int(given["pixel_attention_mask"].modtrans_value.sum()) == 256
    agrees(model, given, ir)


def _dia() -> Any:
    config = classes.default_config("dia")
    config.encoder_config.num_hidden_layers = config.decoder_config.num_hidden_layers = 2
    return config


@pytest.mark.parametrize(
    ("made", "cls", "name", "size"),
    [
        # MusicGen (Copet et al. 2023): 4 EnCodec codebooks, the decoder's ids a row per codebook.
        (lambda: small("musicgen", num_hidden_layers=2), "MusicgenForCausalLM", "input_ids", (4, 64)),
        # Dia: 9 channels of DAC codes, (batch, frames, channels) as its decoder reads them.
        (_dia, "DiaForConditionalGeneration", "decoder_input_ids", (1, 64, 9)),
    ],
    ids=["musicgen", "dia"],
)
def test_audio_codes_take_the_layout_the_forward_documents(made: Any, cls: str, name: str, size: Any) -> None:
    """Ids a row per codebook, or a codebook axis, as the model's forward documents its input
    (transformers' own docstring); the (batch, sequence) ids of text stopped both."""
    model, given, ir = traced_with(made(), classes.named_class(cls))
    assert tuple(given[name].shape) == size
    agrees(model, given, ir)
    if cls == "MusicgenForCausalLM":  # one head per codebook, each over every token of the sample
        config = model.config
        heads = sum(x.flops.forward for x in ir.layers if x.name.startswith("lm_heads."))
        assert heads == config.num_codebooks * 2 * 64 * config.hidden_size * config.vocab_size


def test_a_composite_s_experts_run_as_batched_matrix_products() -> None:
    """Nemotron 3.5 Transcribe (a speech encoder beside a NemotronH decoder) names no experts in
    its own class, so transformers left its decoder's on grouped_mm, a kernel that takes bf16 alone
    and has no FLOP formula: each sub-configuration is given batched_mm. Its decoder's MoE layers
    then run top-6 of 128 experts a token, and the count is FlopCounterMode's."""
    config = classes.default_config("nemo_speechlm")
    config.text_config.layers_block_type = ["linear_attention", "moe", "full_attention", "moe"]
    config.text_config.num_hidden_layers = 4
    model, given, ir = traced(config)
    agrees(model, given, ir)


@pytest.mark.parametrize(
    ("model_type", "cls", "tokens"),
    [
        ("glmasr", "GlmAsrForConditionalGeneration", (50 - 4) // 4 + 1),  # four frames merged a token
        pytest.param(  # Audio Flamingo 3: the encoder's frames average-pooled two a token
            "audioflamingo3", "AudioFlamingo3ForConditionalGeneration", 50 // 2, marks=pytest.mark.slow
        ),
        pytest.param(  # Qwen3-ASR: three stride-2 convolutions, 100 frames -> 50 -> 25 -> 13
            "qwen3_asr", "Qwen3ASRForConditionalGeneration", 13, marks=pytest.mark.slow
        ),
    ],
)
def test_an_audio_language_model_runs_its_audio_tower(model_type: str, cls: str, tokens: int) -> None:
    """One second of silence through the model type's Whisper extractor: 100 frames of 10 ms
    (its 3000-frame window's attention mask), a Whisper encoder's two convolutions (the second
    of stride 2: Radford et al. 2022) make 50 frames, the projector's merge the audio tokens at
    the sequence's start; the audio tower runs (its FLOPs FlopCounterMode's) where it sat unrun."""
    config = classes.default_config(model_type)
    config.text_config.num_hidden_layers = 2
    for key in ("num_hidden_layers", "encoder_layers"):
        if hasattr(config.audio_config, key):
            setattr(config.audio_config, key, 2)
    if model_type == "qwen3_asr":  # its defaults project audio to 3584 beside 2048-wide text
        config.audio_config.output_dim = config.text_config.hidden_size
    model, given, ir = traced_with(config, classes.named_class(cls))
    assert int(given["input_features_mask"].modtrans_value.sum()) == 100
    ids = given["input_ids"].modtrans_value
    assert int((ids == config.audio_token_id).sum()) == tokens
    assert not [x.name for x in ir.layers if x.name.endswith("unused")]
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    counted = library.count_modules(model, given)
    theirs = counted[f"{type(model).__name__}.model.audio_tower"]
    ours = sum(
        x.flops.forward for x in ir.layers if x.kind in GEMMS and x.name.startswith("model.audio_tower.")
    )
    assert theirs > 0
    assert abs(ours - theirs) <= 0.02 * theirs, (ours, theirs)
