"""The hand-written families' defaults for keys a file omits, held to transformers' configuration
classes: families.DEFAULTS against each class's own fields, and each family's published file
(fixtures/configs, fixtures/hf) with one key dropped, read offline (llm/config.py) and built by
transformers on the meta device from the same dict: the same key/value heads, head width, MLP
width, context, tying, and parameters. A family with no published file here is read from the dict
transformers itself writes for its class's defaults (PretrainedConfig.to_dict).

Marker hf: needs torch and transformers (the extra `hf`); CI's last stage installs them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import transformers

from modtrans import pipeline
from modtrans.hf import classes, library
from modtrans.llm.config import ALIASES, FAMILIES, TEXT_DEFAULTS, VISION_LANGUAGE, ConfigError, from_hf
from modtrans.llm.families import DEFAULTS, HIDDEN_DROPOUT

pytestmark = pytest.mark.hf

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = {
    "llama": "hf/llama-3.2-1b-instruct", "qwen2": "hf/qwen2.5-0.5b-instruct", "granite":
    "configs/granite-3.1-2b-base", "gpt2": "configs/gpt2", "gpt_bigcode": "configs/gpt_bigcode-santacoder",
    "bert": "hf/all-minilm-l6-v2", "gemma": "configs/gemma-2b", "gemma2": "configs/gemma-2-9b",
    "gemma3_text": "configs/gemma-3-1b-pt", "olmo2": "configs/olmo-2-1124-7b", "phi3":
    "configs/phi-3-mini-4k-instruct", "starcoder2": "configs/starcoder2-3b", "gpt_neox":
    "configs/pythia-160m", "jamba": "configs/jamba-v0.1", "phi": "configs/phi-2", "olmo":
    "configs/olmo-1b-hf", "stablelm": "configs/stablelm-2-1_6b", "cohere": "configs/c4ai-command-r-v01",
    "falcon": "configs/falcon-7b", "mamba": "configs/mamba-130m-hf", "t5": "configs/t5-base",
    "llava": "configs/llava-1.5-7b-hf", "llava_next": "configs/llava-v1.6-mistral-7b-hf",
    "qwen2_vl": "configs/qwen2-vl-7b-instruct", "qwen2_5_vl": "configs/qwen2.5-vl-7b-instruct",
    "gemma3": "configs/gemma-3-4b-it",
}  # fmt: skip
"""Each hand-written family's published file (under fixtures/)."""
OWN_DEFAULTS = (
    "mistral", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "olmo3", "mt5",
    "umt5",
)  # fmt: skip
"""The families with no published file here: read from their class's own defaults' dict
(DeepseekV2Config's names no num_experts_per_tok, None, which the offline reader needs: 6, as
deepseek-ai/DeepSeek-V2's config.json says). deepseek (DeepSeek-MoE) has no transformers class
(its files name their own code)."""
DROPPED = (
    "num_key_value_heads", "num_kv_heads", "head_dim", "intermediate_size", "ffn_hidden_size", "n_inner",
    "max_position_embeddings", "tie_word_embeddings", "attention_bias", "mlp_bias", "use_bias", "bias",
    "multi_query", "use_qkv_bias", "qk_layernorm", "use_qk_norm", "use_parallel_residual",
    "shared_expert_intermediate_size", "n_routed_experts", "n_shared_experts", "first_k_dense_replace",
    "q_lora_rank", "decoder_sparse_step", "type_vocab_size", "state_size", "conv_kernel", "expand",
    "use_conv_bias", "num_decoder_layers", "relative_attention_num_buckets", "feed_forward_proj",
    "mamba_expand", "mamba_d_state", "mamba_d_conv", "attn_layer_period", "attn_layer_offset",
    "expert_layer_period", "expert_layer_offset", "num_experts_per_tok",
)  # fmt: skip
"""The keys the offline reader takes a default for when a file omits them (llm/config.py)."""


def _file(family: str) -> dict[str, Any]:
    if family in PUBLISHED:
        data = json.loads((ROOT / "fixtures" / f"{PUBLISHED[family]}.json").read_text())
    else:
        data = classes.default_config(family).to_dict()
        if data.get("num_experts_per_tok", 0) is None:
            data["num_experts_per_tok"] = 6
    data["model_type"] = ALIASES.get(data["model_type"], data["model_type"])
    return dict(data)


def _cases() -> list[Any]:
    found = []
    for family in [*PUBLISHED, *OWN_DEFAULTS]:
        data = _file(family)
        text = (
            "text_config" if family in VISION_LANGUAGE and isinstance(data.get("text_config"), dict) else ""
        )
        keys = data[text] if text else data
        for key in ["", *(k for k in DROPPED if k in keys)]:  # "": the file as published
            dotted = f"{text}.{key}" if text and key else key
            found.append((family, dotted))  # on the meta device: every case of every family in 15 s
    return found


def test_every_hand_written_family_transformers_defines_is_checked() -> None:
    assert sorted(set(PUBLISHED) | set(OWN_DEFAULTS)) == sorted(
        f for f in FAMILIES if f in transformers.CONFIG_MAPPING
    )


@pytest.mark.parametrize("family", sorted(DEFAULTS))
def test_each_default_is_its_class_s_own_field(family: str) -> None:
    """families.DEFAULTS[family][key] is the default of the class's field (transformers 5's
    configuration classes are dataclasses: Qwen2Config.num_key_value_heads: int | None = 32)."""
    fields = {f.name: f.default for f in dataclasses.fields(transformers.CONFIG_MAPPING[family])}
    assert DEFAULTS[family] == {key: fields[key] for key in DEFAULTS[family]}


def _dropped(family: str, dotted: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(_file(family)))
    *outer, key = dotted.split(".")
    if key:
        (data[outer[0]] if outer else data).pop(key)
    return data


def _text(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _theirs(config: Any) -> dict[str, Any]:
    """What the class's __post_init__ and attention make of the dict: key/value heads (None: as
    many as the query heads), head width (absent: hidden // heads, LlamaAttention), MLP width."""
    text = _text(config)

    def first(*names: str) -> Any:
        return next((getattr(text, n) for n in names if getattr(text, n, None) is not None), None)

    heads = first("num_attention_heads", "n_head", "num_heads") or 1  # Mamba's: none
    hidden = first("hidden_size", "n_embd", "d_model")
    return {
        "kv_heads": first("num_key_value_heads", "num_kv_heads") or heads,
        "head_dim": first("head_dim", "d_kv") or hidden // heads,
        "intermediate": first("intermediate_size", "n_inner", "ffn_hidden_size", "d_ff") or 4 * hidden,
        "tied": bool(getattr(text, "tie_word_embeddings", getattr(config, "tie_word_embeddings", False))),
        "context": first("max_position_embeddings", "n_positions") or 0,
    }


@pytest.mark.parametrize(("family", "dotted"), _cases())
def test_a_key_a_file_omits_reads_as_transformers_builds_it(family: str, dotted: str, tmp_path: Path) -> None:
    data = _dropped(family, dotted)
    config = classes.config_of(data)
    theirs = _theirs(config)
    key = dotted.rsplit(".", 1)[-1]
    if getattr(_text(config), "num_attention_heads", 0) % theirs["kv_heads"]:
        # the class's default does not split the file's heads: a model no forward can run, refused
        with pytest.raises(ConfigError, match="gives no `num_key_value_heads`"):
            from_hf(data)
        return
    try:
        arch = from_hf(data)
    except ConfigError as error:  # a size the reader needs, refused by name: never a wrong default
        refused = str(error)
    else:
        refused = ""
    assert refused in ("", f"the configuration has no `{key}`")
    if refused:
        return
    ours = {  # a vision-language model's: its language model's
        "kv_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
        "intermediate": arch.intermediate,
        "tied": arch.tied,
        "context": arch.context,
    }
    if family in ("deepseek_v2", "deepseek_v3"):  # latent attention: head_dim is qk_rope_head_dim there
        ours.pop("head_dim"), theirs.pop("head_dim")
    if family in ("bert", "t5", "mt5", "umt5"):  # BERT's tying is its MLM head's (heads_on_top); T5's
        ours.pop("context"), theirs.pop("context")  # relative positions have no context (n_positions)
        ours.pop("tied"), theirs.pop("tied")
    if family == "mamba":  # no attention: its Arch carries the hidden size as one head
        ours = {"tied": ours["tied"]}
        theirs = {"tied": theirs["tied"]}
    assert ours == theirs
    if arch.vision is not None:
        return  # a vision-language model's image inputs: tests/test_vision.py counts its parameters
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    model = library.build(config)
    assert ir.totals.params == sum(p.numel() for p in model.parameters())


def _fields(cls: Any) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("family", sorted(HIDDEN_DROPOUT))
def test_each_hidden_dropout_default_is_its_class_s_own_field(family: str) -> None:
    key, default = HIDDEN_DROPOUT[family]
    assert _fields(transformers.CONFIG_MAPPING[family])[key] == default


@pytest.mark.parametrize("language", sorted(TEXT_DEFAULTS))
def test_a_vision_language_model_s_text_defaults_are_its_language_class_s(language: str) -> None:
    """TEXT_DEFAULTS: what LlamaConfig, MistralConfig, Qwen2Config, Qwen2VLTextConfig and
    Gemma3TextConfig give the keys a text_config leaves out."""
    cls = transformers.Qwen2VLTextConfig if language == "qwen2_vl" else transformers.CONFIG_MAPPING[language]
    fields = _fields(cls)
    assert TEXT_DEFAULTS[language] == {key: fields[key] for key in TEXT_DEFAULTS[language]}


VISION = ("llava", "llava_next", "qwen2_vl", "qwen2_5_vl", "gemma3")
TOWER = {  # Vision's and its tower's fields: the vision configuration classes' names
    "hidden": ("embed_dim", "hidden_size"), "layers": ("num_hidden_layers", "depth"),
    "heads": ("num_attention_heads", "num_heads"), "patch": ("patch_size",),
    "channels": ("num_channels", "in_channels"), "temporal": ("temporal_patch_size",),
    "merge": ("spatial_merge_size",), "window": ("window_size",), "image": ("image_size",),
}  # fmt: skip


@pytest.mark.parametrize(
    ("family", "key"),
    [
        (f, k)
        for f in VISION
        for k in _file(f).get("vision_config", {})
        if k not in ("model_type", "architectures")
    ],
)
def test_a_key_a_vision_config_omits_reads_as_transformers_builds_it(family: str, key: str) -> None:
    """Each vision tower's size its file gives, dropped: the tower read offline (llm/config.py _vit,
    _qwen_vision) is what the composite class's vision_config holds (CLIPVisionConfig's,
    SiglipVisionConfig's, Qwen2VLVisionConfig's, Qwen2_5_VLVisionConfig's defaults)."""
    data = _dropped(family, f"vision_config.{key}")
    try:
        vision = classes.config_of(data).vision_config
    except (
        Exception
    ):  # transformers refuses the tower (heads that do not split its width), whatever its class
        with pytest.raises(ConfigError):
            from_hf(data)
        return
    try:
        arch = from_hf(data)
    except ConfigError as error:  # a default the file's other sizes do not fit: one line, never a guess
        assert "\n" not in str(error)  # noqa: PT017
        return
    assert arch.vision is not None
    ours = {"hidden": arch.vision.tower.hidden, "layers": arch.vision.tower.layers,
            "heads": arch.vision.tower.heads, **{k: getattr(arch.vision, k) for k in TOWER if k in (
                "patch", "channels", "temporal", "merge", "window", "image")}}  # fmt: skip
    for field, names in TOWER.items():
        value = next((getattr(vision, n) for n in names if getattr(vision, n, None) is not None), None)
        if value is not None and (field != "hidden" or family != "qwen2_vl" or names[0] == "embed_dim"):
            assert ours[field] == value, (field, ours[field], value)
