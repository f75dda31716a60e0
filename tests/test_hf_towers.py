"""A multimodal model read through transformers keeps its towers (vision and audio encoders, built
from their own sub-configurations) outside the language model's blocks, as llm/vision.py builds a
hand-written VLM's image encoder: block index None, the tower configuration's own heads. So a
pipeline cuts the language model's blocks alone (the tower on the first stage with the
embedding, Megatron-LM's LLaVAModel: "the encoder will live on only the first stage"), and a
model whose encoder is built from its own configuration (T5, BART, Whisper) keeps its encoder's
blocks. Each count is held to the configuration file's own numbers and to transformers' model.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from typer.testing import CliRunner

from modtrans import hf, pipeline
from modtrans.cli import app
from modtrans.hf import built, classes, library, towers
from modtrans.ir.document import Layer, ModelIR, Part
from modtrans.strategy.llm import stages
from tests.hfcheck import agrees

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"

SEQUENCE = 2048
"""Tokens a sample: room for one image's or one second of audio's tokens beside the text."""

# model_type, the class a published file names, the attribute transformers builds its tower as
HF_ONLY = [
    ("internvl", "InternVLForConditionalGeneration", "vision_tower"),  # InternViT, Qwen2
    ("llava_onevision", "LlavaOnevisionForConditionalGeneration", "vision_tower"),  # SigLIP, Qwen2
    ("audioflamingo3", "AudioFlamingo3ForConditionalGeneration", "audio_tower"),  # Whisper's encoder, Qwen2
]
LAYERS, TOWER_LAYERS = 4, 2
"""The text model's and the tower's layers in the default configurations below: a fast read."""


def _indices(ir: ModelIR) -> set[int]:
    return {x.block.index for x in ir.layers if x.block is not None and x.block.index is not None}


def _under(ir: ModelIR, prefix: str) -> list[Layer]:
    return [x for x in ir.layers if x.name.startswith(prefix)]


def _heads(members: list[Layer]) -> set[int]:
    return {x.block.heads.query for x in members if x.block is not None and x.block.heads is not None}


def _shrunk(model_type: str, cls: str) -> Any:
    """transformers' default configuration of `model_type` with LAYERS text layers and
    TOWER_LAYERS tower layers, naming `cls` as a published file does."""
    config = classes.default_config(model_type)
    text = config.get_text_config()
    text.num_hidden_layers = LAYERS
    if isinstance(getattr(text, "layer_types", None), list):
        text.layer_types = text.layer_types[:LAYERS]
    tower = getattr(config, "vision_config", None) or config.audio_config
    for key in ("num_hidden_layers", "encoder_layers"):
        if hasattr(tower, key):
            setattr(tower, key, TOWER_LAYERS)
    config.architectures = [cls]
    return config


def test_qwen2_5_vl_has_the_same_blocks_by_hand_and_through_transformers() -> None:
    """Qwen2.5-VL-3B's published file, read by the hand-written path and forced through
    transformers: both number the text model's 36 layers (num_hidden_layers) as the blocks,
    and keep the vision tower's 32 (vision_config.depth) outside them with its 16 heads
    (vision_config.num_heads), where the language model has 16 too but 2 key/value heads."""
    path = FIXTURES / "qwen2.5-vl-3b-instruct.json"
    data = path.read_bytes()
    config = json.loads(data)
    hand, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 1024)})
    assert hand is not None, found
    read, found = hf.extract(config, data, name=path.name, batch=1, sequence=1024)
    assert read is not None, found
    assert read.provenance.producer == built.PRODUCER
    for ir in (hand, read):
        assert _indices(ir) == set(range(config["num_hidden_layers"]))
        tower = _under(ir, "model.visual.")
        assert {x.block.index for x in tower if x.block is not None} == {None}
        assert _heads(tower) == {config["vision_config"]["num_heads"]}
        kv = {x.block.heads.key_value for x in tower if x.block is not None and x.block.heads is not None}
        assert kv == {config["vision_config"]["num_heads"]}
        numbered = {x.name.split(".blocks.")[1].split(".")[0] for x in tower if ".blocks." in x.name}
        assert len(numbered) == config["vision_config"]["depth"]
    assert hand.totals.params == read.totals.params


@pytest.mark.parametrize(("model_type", "cls", "attribute"), HF_ONLY)
def test_an_hf_only_multimodal_model_s_blocks_are_its_text_model_s(
    model_type: str, cls: str, attribute: str, tmp_path: Path
) -> None:
    """A family only transformers reads: its blocks are the text configuration's
    num_hidden_layers, its tower (the module transformers builds as model.<attribute> from the
    vision or audio configuration) outside them with that configuration's heads, parameters and
    FLOPs still transformers' own; `--pp 2` cuts the text model's blocks in half, the tower whole
    in the first stage before them."""
    config = _shrunk(model_type, cls)
    data = json.dumps(config.to_dict()).encode()
    ir, found = hf.extract(json.loads(data), data, name=model_type, batch=1, sequence=SEQUENCE)
    assert ir is not None, found
    assert _indices(ir) == set(range(config.get_text_config().num_hidden_layers))
    model = library.build(classes.config_of(json.loads(data)))
    assert type(model).__name__ == cls
    tower = getattr(model.model, attribute)
    assert towers.towers(model).keys() == {f"model.{attribute}"}
    own = getattr(model.config, "vision_config", None) or model.config.audio_config
    assert tower.config is own
    members = _under(ir, f"model.{attribute}.")
    assert members
    assert all(x.block is not None and x.block.index is None for x in members)
    heads = getattr(tower.config, "num_attention_heads", None) or tower.config.encoder_attention_heads
    assert _heads(members) == {heads}
    read = built.read(model, 1, SEQUENCE)
    agrees(model, read.given, read.ir)
    (tmp_path / "config.json").write_bytes(data)
    args = ["translate", str(tmp_path / "config.json"), "--pp", "2", "--seq-len", str(SEQUENCE)]
    done = CliRunner().invoke(app, [*args, "--format", "chakra-et", "-o", str(tmp_path / "t")])
    assert done.exit_code == 0, done.output
    chunks = json.loads((tmp_path / "t.et-meta.json").read_text())["parallel"]["llm"]["chunks"]
    assert len(chunks) == 2
    names = [x.name for x in ir.layers]
    first, last = names.index(chunks[0]["first"]), names.index(chunks[0]["last"])
    assert all(names.index(x.name) <= last for x in members)  # the tower in the first stage
    ending = ir.layers[last].block
    assert ending is not None
    assert ending.index == LAYERS // 2 - 1
    assert first == 0
    after = ir.layers[names.index(chunks[1]["first"])]
    assert after.block is not None
    assert after.block.index == LAYERS // 2


@pytest.mark.parametrize(
    ("fixture", "keys"),
    [
        ("whisper-base.json", ("encoder_layers", "decoder_layers")),
        ("bart-large.json", ("encoder_layers", "decoder_layers")),
        ("flan-t5-base.json", ("num_layers", "num_decoder_layers")),
    ],
)
def test_an_encoder_decoder_s_encoder_stays_blocks(fixture: str, keys: tuple[str, str]) -> None:
    """Whisper, BART and T5 build their encoder from the model's own configuration: no tower;
    the encoder's and the decoder's layers are the blocks, numbered on (llm/encoder_decoder.py),
    through transformers as by hand."""
    path = FIXTURES / fixture
    data = path.read_bytes()
    config = json.loads(data)
    model = library.build(classes.config_of(config))
    assert towers.towers(model) == {}
    ir, found = hf.extract(config, data, name=fixture, batch=1, sequence=64, targets=64)
    assert ir is not None, found
    assert _indices(ir) == set(range(config[keys[0]] + config[keys[1]]))


@pytest.mark.parametrize(
    ("model_type", "expected"),
    [
        ("blip-2", {"vision_model", "qformer"}),  # the Q-Former: a connector of its own configuration
        ("granite_speech", {"model.encoder", "model.projector.qformer"}),
        ("t5gemma2", {"model.encoder.vision_tower"}),  # its encoder holds a text configuration
        ("speech-encoder-decoder", set()),  # the encoder its decoder cross-attends to (get_encoder)
        ("canary", set()),  # as Whisper's: a speech encoder and a text decoder, is_encoder_decoder
        ("encoder-decoder", set()),  # BERT to BERT: text alone
        ("t5gemma", set()),
        ("clip", set()),  # CLIPForImageClassification: no text model built
    ],
)
def test_a_tower_is_a_sub_configuration_s_module_beside_a_text_model(
    model_type: str, expected: set[str]
) -> None:
    """The towers are the modules transformers builds from a sub-configuration that is no text
    configuration (each one's `config` is that sub-configuration), in a model that reads more
    than text (input_modalities) and builds its text model; not an encoder-decoder's encoder
    (get_encoder), whose blocks are the model's."""
    model = library.build(classes.default_config(model_type))
    found = towers.towers(model)
    assert set(found) == expected
    subs = [c for c in vars(model.config).values() if hasattr(c, "to_dict")]
    for path in found:
        own = model.get_submodule(path).config
        assert any(own is c for c in subs) or any(own is x for c in subs for x in vars(c).values())
        assert own is not model.config.get_text_config()


def test_a_tower_s_part_is_the_hand_written_one() -> None:
    """PaliGemma through transformers: the SigLIP tower's patch and position embeddings the
    embedding part, its layers' attention (SigLIP's 16 heads) and MLP, the projector that hands
    its features to Gemma the MLP, as llm/vision.py gives them; Gemma's own 8 heads in its 18
    blocks, its embedding before and its head after."""
    path = FIXTURES / "paligemma-3b-pt-224.json"
    data = path.read_bytes()
    config = json.loads(data)
    ir, found = hf.extract(config, data, name=path.name, batch=1, sequence=1024)
    assert ir is not None, found
    part = {x.name: x.block.part for x in ir.layers if x.block is not None}
    root = "model.vision_tower."
    assert part[f"{root}embeddings.patch_embedding"] is Part.EMBEDDING
    assert part[f"{root}embeddings.position_embedding"] is Part.EMBEDDING
    assert part[f"{root}encoder.layers.0.self_attn.q_proj"] is Part.ATTENTION
    assert part[f"{root}encoder.layers.0.mlp.fc1"] is Part.MLP
    assert part["model.multi_modal_projector.linear"] is Part.MLP
    assert part["model.language_model.embed_tokens"] is Part.EMBEDDING
    assert part["lm_head"] is Part.HEAD
    assert _heads(_under(ir, root)) == {config["vision_config"]["num_attention_heads"]}
    assert _heads(_under(ir, "model.language_model.")) == {config["text_config"]["num_attention_heads"]}
    assert _indices(ir) == set(range(config["text_config"]["num_hidden_layers"]))


def test_a_tower_the_forward_did_not_run_is_held_on_the_first_stage() -> None:
    """Idefics3 read on token ids alone (its image path needs pixel values the meta read does not
    give it: M804): the vision model's modules run nothing, yet hold their parameters; they sit
    with the tower before the first block, so `--pp 2`'s first stage holds every one of the vision
    model's parameters (sum(p.numel()) of transformers' model.vision_model) and the last none."""
    config = _shrunk("idefics3", "Idefics3ForConditionalGeneration")
    data = json.dumps(config.to_dict()).encode()
    ir, found = hf.extract(json.loads(data), data, name="idefics3", batch=1, sequence=SEQUENCE)
    assert ir is not None
    assert [d.code for d in found] == ["M804"]
    model = library.build(classes.config_of(json.loads(data)))
    vision = sum(p.numel() for p in model.model.vision_model.parameters())
    keys = [stages.block_of(x) for x in ir.layers]
    grouped = stages.blocks(keys)
    chunks = stages.partition([1] * len(grouped), 2, even=True)
    held = [[ir.layers[i] for b in chunk for i in grouped[b]] for chunk in chunks]

    def counted(members: list[Layer]) -> int:
        return sum(p.elements for x in members for p in x.params if p.counted and p.shared_with is None)

    tower = [x for x in ir.layers if x.name.startswith("model.vision_model.")]
    assert counted(tower) == vision
    assert counted([x for x in held[0] if x.name.startswith("model.vision_model.")]) == vision
    assert not [x for x in held[1] if x.name.startswith("model.vision_model.")]


def test_a_tower_read_through_transformers_stores_what_the_hand_written_one_does() -> None:
    """The activation model reads a tower transformers built (activations._towers): PaliGemma's
    SigLIP at its configuration's own numbers (27 layers of width 1152, 16 heads, MLP 4304, 256
    image tokens: num_image_tokens); Qwen2.5-VL's, read both ways, the same blocks (28 window blocks
    whose queries see 64 keys, 4 full ones, gated MLP 3 x 3420), so the same bytes a patch under
    FlashAttention, where the tower held no block before its read gave its layers to the blocks."""
    from modtrans.plan.model import Recompute
    from modtrans.strategy.llm import activations

    path = FIXTURES / "paligemma-3b-pt-224.json"
    data = path.read_bytes()
    vision = json.loads(data)["vision_config"]
    read, found = hf.extract(json.loads(data), data, name=path.name, batch=1, sequence=1024)
    assert read is not None, found
    d = activations.dims(read, 1)
    assert d is not None
    patches = vision["num_image_tokens"]
    assert [(x.s, x.h, x.a, x.mlps[0].inner, n) for x, n in d.tower] == [
        (patches, vision["hidden_size"], vision["num_attention_heads"], 2 * vision["intermediate_size"],
         vision["num_hidden_layers"])
    ]  # fmt: skip

    path = FIXTURES / "qwen2.5-vl-3b-instruct.json"
    data = path.read_bytes()
    hand, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 1024)})
    read, found = hf.extract(json.loads(data), data, name=path.name, batch=1, sequence=1024)
    assert hand is not None
    assert read is not None, found
    per_patch = []
    for ir in (hand, read):
        d = activations.dims(ir, 1)
        assert d is not None
        assert sorted((x.h, x.a, x.keys, x.mlps[0].inner, n) for x, n in d.tower) == [
            (1280, 16, 0.0, 3 * 3420, 4), (1280, 16, 64.0, 3 * 3420, 28)
        ]  # fmt: skip
        tokens = {x.s for x, _ in d.tower}
        assert len(tokens) == 1
        per_patch.append(activations.tower(d, 1, False, Recompute.NONE, "flash", 1) / tokens.pop())
    assert per_patch[0] == per_patch[1]
