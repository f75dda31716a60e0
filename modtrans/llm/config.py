"""Hugging Face transformer configurations (config.json) -> one normalised architecture.

    arch = from_hf(json.loads(Path("config.json").read_text()))
    arch.layers, arch.hidden, arch.moe      32, 4096, Moe(experts=8, top_k=2, ...)

Families read (their `model_type`): llama, mistral, qwen2, qwen3 (decoders with RMSNorm, SwiGLU,
rotary positions); mixtral, qwen2_moe, qwen3_moe, deepseek, deepseek_v2, deepseek_v3 (the same
with a mixture of experts; DeepSeek-V2/V3 with multi-head latent attention); gpt2 (pre-norm
LayerNorm, GELU, learned positions, tied head); bert (post-norm encoder); gemma, gemma2,
gemma3_text, phi3, falcon (and its first name RefinedWebModel), gpt_neox, olmo2, olmo3, starcoder2,
phi, olmo, stablelm, cohere (their module names and norm placement in families.py); granite
(Llama's layout); gpt_bigcode (GPT-2's, with multi-query attention); mamba (a selective state-space mixer);
jamba (attention and Mamba blocks, experts every second block); llava, llava_next, qwen2_vl,
qwen2_5_vl, gemma3 (vision-language models: a vision tower, its projector or merger, and a Llama /
Mistral / Qwen2 / Gemma 3 language model, read by _vision_language).
Keys follow each family's transformers configuration class: a key the file omits is that class's
default (families.DEFAULTS) or its derived rule (key/value heads as many as the query heads), and
a size the model needs that is missing (hidden_size, vocab_size, the layer and head counts) is a
ConfigError naming it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from modtrans import dtypes, limits
from modtrans.llm.families import HIDDEN_DROPOUT, LLAMA, STYLES, Style, defaulted, synonymous

SEQ2SEQ = ("t5", "mt5", "umt5")
"""The encoder-decoder families (T5Config, MT5Config, UMT5Config: one architecture)."""

DTYPES = {
    torch: (ir, dtypes.width(ir))
    for torch, ir in (("float32", "float"), ("float16", "float16"), ("bfloat16", "bfloat16"))
}
"""torch_dtype -> (the IR's dtype name, bytes per element)."""
FAMILIES = (
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek",
    "deepseek_v2",
    "deepseek_v3",
    "granite",
    "gpt2",
    "gpt_bigcode",
    "bert",
    *STYLES,
    "mamba",
    *SEQ2SEQ,
    "llava",
    "llava_next",
    "qwen2_vl",
    "qwen2_5_vl",
    "gemma3",
)
ALIASES = {"RefinedWebModel": "falcon", "RefinedWeb": "falcon"}
"""Old model_type names of a family (Falcon's first configurations)."""


class ConfigError(ValueError):
    """The configuration cannot be read as a transformer ModTrans knows (one line)."""


@dataclass(frozen=True)
class Ssm:
    """A Mamba (selective state-space) mixer's sizes (transformers' MambaConfig)."""

    inner: int  # expand x hidden
    state: int  # state_size N
    conv: int  # conv_kernel
    dt_rank: int  # time_step_rank ("auto": ceil(hidden / 16))
    bias: bool  # use_bias: in_proj and out_proj
    conv_bias: bool  # use_conv_bias


@dataclass(frozen=True)
class Experts:
    experts: int  # routed experts
    top_k: int
    intermediate: int  # one expert's MLP width
    shared: int = 0  # shared-expert MLP width (0: none), always computed
    shared_gate: bool = False  # Qwen2-MoE's sigmoid gate on the shared expert
    first_dense: int = 0  # the first blocks keep a dense MLP (DeepSeek's first_k_dense_replace)
    every: int = 1  # with `at`: the mixture in the blocks i with i % every == at, a dense MLP elsewhere
    at: int = 0
    dense_blocks: tuple[int, ...] = ()  # blocks with a dense MLP (Qwen's mlp_only_layers)

    def in_block(self, index: int) -> bool:
        """Whether block `index` has the mixture, as the family's decoder layer decides (_experts)."""
        return index >= self.first_dense and index not in self.dense_blocks and index % self.every == self.at


@dataclass(frozen=True)
class Latent:
    """DeepSeek-V2/V3 multi-head latent attention: low-rank query and key/value projections."""

    q_rank: int | None  # None: a full-rank query projection
    kv_rank: int
    rope_dim: int
    nope_dim: int
    v_dim: int


@dataclass(frozen=True)
class Seq2Seq:
    """What an encoder-decoder (T5) adds: a decoder stack of its own depth, and relative position
    biases (T5Attention.relative_attention_bias: a [buckets, heads] table) in its first block of
    each stack, or in every block (umT5)."""

    decoder_layers: int  # num_decoder_layers (T5Config: num_layers when not given)
    buckets: int  # relative_attention_num_buckets
    bias_every_block: bool = False  # UMT5Attention: every block has its own table


@dataclass(frozen=True)
class Arch:
    family: str
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # the dense MLP's width
    mlp: str  # "swiglu" or "gelu"
    norm: str  # "rms" or "layer"
    tied: bool
    qkv_bias: bool
    mlp_bias: bool
    positions: int  # learned position embeddings (0: rotary)
    token_types: int = 0  # BERT's segment embeddings
    experts: Experts | None = None
    latent: Latent | None = None
    dtype: str = "bfloat16"
    context: int = 0  # the longest sequence it was made for (max_position_embeddings; 0: not given)
    qk_norm: bool = False  # an RMSNorm of each head's query and key (Qwen3: q_norm, k_norm over head_dim)
    attention_dropout: float = 0.0  # dropout p of the attention probabilities in training
    hidden_dropout: float = 0.0  # dropout p of the attention's and MLP's outputs (families.HIDDEN_DROPOUT)
    style: Style = LLAMA  # module names and norm placement (families.py)
    ssm: Ssm | None = None  # Mamba: a selective state-space mixer in place of attention and MLP
    grouped_experts: bool = True  # a MoE block's routed experts as one grouped layer per projection
    attention_blocks: tuple[int, ...] | None = None  # a hybrid's attention blocks (None: every block)
    o_bias: bool = False  # the attention output projection has a bias
    norm_bias: bool = True  # a LayerNorm has a bias (RMSNorm never)
    norm_scale: bool = True  # a norm has a learned scale (OLMo 1's OlmoLayerNorm: neither scale nor bias)
    head_bias: bool = False  # the output layer has a bias (PhiForCausalLM's lm_head)
    heads_on_top: tuple[str, ...] = ()  # BERT's: "pooler", "mlm", "nsp", ... (its architectures' class)
    labels: int = 2  # a classifier head's outputs (num_labels: BERT_HEADS)
    seq2seq: Seq2Seq | None = None  # an encoder-decoder (T5): layers is the encoder's depth
    vision: Vision | None = None  # a vision-language model's image encoder (LLaVA, Qwen2-VL)
    windows: tuple[int | None, ...] = ()  # each block's sliding window (None: every key): windows()


@dataclass(frozen=True)
class Vision:
    """A vision-language model's image encoder and what hands its features to the language model.
    `tower` describes the encoder's transformer (its blocks: hidden, heads, MLP, norm), built by
    llm/vision.py. LLaVA: a CLIP ViT (transformers' CLIPVisionModel) and multi_modal_projector;
    Qwen2-VL / Qwen2.5-VL: their ViT (Qwen2VisionTransformerPretrainedModel) and its merger."""

    family: str  # the encoder's model_type: clip_vision_model, qwen2_vl_vision, qwen2_5_vl_vision
    tower: Arch
    patch: int  # patch_size (pixels per side)
    temporal: int = 1  # temporal_patch_size: Qwen's Conv3d spans that many frames (an image repeated)
    channels: int = 3
    image: int = 0  # CLIP's image_size, whose positions it learned (0: any multiple of patch x merge)
    merge: int = 1  # merge x merge patches become one token: Qwen's spatial_merge_size, Gemma 3's avg_pool
    conv_bias: bool = False  # the patch embedding has a bias (SigLIP's nn.Conv2d)
    window: int = 0  # Qwen2.5-VL's window_size in pixels (0: every block attends to the whole image)
    full_blocks: tuple[int, ...] = ()  # fullatt_block_indexes: the blocks that attend to the whole image
    feature_layers: tuple[int, ...] = ()  # LLaVA's vision_feature_layer(s): hidden_states indices
    grid: tuple[tuple[int, int], ...] = ()  # LLaVA-NeXT's image_grid_pinpoints, (height, width) each
    class_token: bool = False  # CLIP's class embedding (the sequence is 1 + patches)
    keep_class: bool = False  # vision_feature_select_strategy "full" (default: the class token dropped)
    projector_bias: bool = True  # LLaVA's multimodal_projector_bias
    out: int = 0  # the language model's hidden size: the projector's or merger's output


def _get(
    config: Mapping[str, Any], *keys: str, default: Any = ..., many: bool = False, least: int = 0
) -> Any:
    """The first of `keys` the configuration sets: an integer of at least `least` (0 or 1; `many`:
    a list of them); `default` when none is set, a ConfigError naming the first key otherwise."""
    for key in keys:
        value = config.get(key)
        if value is None:
            continue
        items = value if isinstance(value, list) and many else [value]
        if (many and not isinstance(value, list)) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= least for v in items
        ):
            sign = "positive" if least else "non-negative"
            kind = f"a list of {sign} integers" if many else f"a {sign} integer"
            raise ConfigError(f"`{key}` must be {kind}, not {value!r:.40}")
        return value
    if default is ...:
        raise ConfigError(f"the configuration has no `{keys[0]}`")
    return default


def _probability(config: Mapping[str, Any], key: str, default: float) -> float:
    """A dropout probability the configuration sets (`default`: the transformers class's own)."""
    value = config.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ConfigError(f"`{key}` must be a probability in [0, 1), not {value!r:.40}")
    return float(value)


def from_hf(config: Mapping[str, Any]) -> Arch:
    """The architecture a transformers configuration describes."""
    if not isinstance(config, Mapping):
        raise ConfigError("a configuration is a JSON object")
    family = config.get("model_type")
    if family is None:
        family = _family_of(config.get("architectures"), config)
    family = ALIASES.get(family, family) if isinstance(family, str) else family
    if family not in FAMILIES:
        known = ", ".join(FAMILIES)
        raise ConfigError(f"model_type {family!r} is not a family modtrans reads ({known})")
    given = synonymous(config, family)
    config = defaulted(given, family)
    dtype = checkpoint_dtype(config)
    if family in ("gpt2", "gpt_bigcode"):
        arch = _gpt2(config, family, dtype)
    elif family == "bert":
        arch = _bert(config, dtype)
    elif family == "jamba":
        arch = _jamba(config, dtype)
    elif family in STYLES:
        arch = _styled(config, family, dtype)
    elif family == "mamba":
        arch = _mamba(config, dtype)
    elif family in SEQ2SEQ:
        arch = _t5(config, family, dtype)
    elif family in VISION_LANGUAGE:
        arch = _vision_language(config, family, dtype)
    else:
        arch = _decoder(config, family, dtype)
    if family in HIDDEN_DROPOUT:
        arch = dataclasses.replace(arch, hidden_dropout=_probability(config, *HIDDEN_DROPOUT[family]))
    arch = dataclasses.replace(arch, windows=windows(config, family, arch.layers))
    # Qwen2Config's 32 for a file of 14 heads: transformers builds it, and its forward fails
    # (repeat_kv's num_attention_heads // num_key_value_heads copies is 0)
    if given.get("num_key_value_heads") is None and arch.heads % arch.kv_heads:
        raise ConfigError(
            f"the file gives no `num_key_value_heads`, and its class's default of {arch.kv_heads} does "
            f"not split its {arch.heads} attention heads: give it (a model that cannot run)"
        )
    _check(arch)
    return arch


def _every(i: int, c: Mapping[str, Any]) -> bool:
    return True


def _odd(i: int, c: Mapping[str, Any]) -> bool:
    return (i + 1) % 2 != 0


def _olmo3(i: int, c: Mapping[str, Any]) -> bool:
    return (i + 1) % 4 != 0


def _gemma3(i: int, c: Mapping[str, Any]) -> bool:
    return (i + 1) % int(_get(c, "sliding_window_pattern", default=6, least=1)) != 0


def _from_max(i: int, c: Mapping[str, Any]) -> bool:
    return i >= int(_get(c, "max_window_layers", default=28))


def _odd_before_max(i: int, c: Mapping[str, Any]) -> bool:
    return (i + 1) % 2 != 0 and i < int(_get(c, "max_window_layers", default=28))


@dataclass(frozen=True)
class Sliding:
    """How a family's configuration class places its sliding windows when the file names no
    layer_types: its default window, whether use_sliding_window must turn it on, and which layers."""

    default: int | None
    switched: bool
    layer: Callable[[int, Mapping[str, Any]], bool]


SLIDING = {
    "gemma2": Sliding(4096, False, _odd),
    "gemma3_text": Sliding(4096, False, _gemma3),
    "olmo3": Sliding(4096, False, _olmo3),
    "qwen2": Sliding(4096, True, _from_max),
    "qwen3": Sliding(4096, True, _from_max),
    "qwen2_moe": Sliding(4096, True, _odd_before_max),
    "mistral": Sliding(4096, False, _every),
    "mixtral": Sliding(None, False, _every),
    "phi3": Sliding(None, False, _every),
    "starcoder2": Sliding(None, False, _every),
}
"""transformers' rules (each class's __post_init__ and forward): Gemma2Config every other layer;
Gemma3TextConfig all but every sliding_window_pattern-th (6 by default); Olmo3Config all but every
fourth; Qwen2Config and Qwen3Config from max_window_layers on (28 by default) under
use_sliding_window; Qwen2MoeConfig the odd ones before it; Mistral, Mixtral, Phi-3 and Starcoder2
every layer wherever sliding_window is set (their models' mask: create_sliding_window_causal_mask
when config.sliding_window is not None; Mistral's class sets 4,096). tests/test_windows.py holds
each to transformers' own models."""


def windows(config: Mapping[str, Any], family: str, layers: int) -> tuple[int | None, ...]:
    """Each block's sliding window (a query sees the last `window` keys, transformers'
    masking_utils.sliding_window_overlay), as its configuration class decides: the file's
    layer_types where it names them (its sliding_attention layers), else SLIDING's rule; a
    vision-language model's from its text_config. () where no layer slides."""
    if family in VISION_LANGUAGE:
        text = config.get("text_config")
        if not isinstance(text, Mapping):
            return ()
        return windows(text, str(text.get("model_type") or LANGUAGES.get(family, ("",))[0]), layers)
    rule = SLIDING.get(family)
    window = config.get("sliding_window", rule.default if rule else None)
    if rule is not None and rule.switched and not config.get("use_sliding_window"):
        window = None
    if isinstance(window, int) and config.get("use_bidirectional_attention") and family == "gemma3_text":
        window = window // 2 + 1  # Gemma3TextConfig.__post_init__: "due to fa we set exclusive bounds"
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        return ()
    kinds = config.get("layer_types")
    if isinstance(kinds, list) and len(kinds) == layers:
        found = tuple(window if k == "sliding_attention" else None for k in kinds)
    elif rule is not None:
        found = tuple(window if rule.layer(i, config) else None for i in range(layers))
    else:
        return ()
    return found if any(found) else ()


CLASS_FAMILIES = {"Gemma3ForCausalLM": "gemma3_text"}
"""Classes whose name's prefix is another family's (transformers builds Gemma3ForCausalLM from a
Gemma3TextConfig, the text model alone; Gemma3ForConditionalGeneration is gemma3, with its tower)."""


LAYER_KEYS = ("n_layer", "num_hidden_layers", "num_layers")
"""How transformers' configuration classes name the layer count (GPT2Config, LlamaConfig, T5Config):
with `vocab_size`, the keys that make a JSON object a configuration without model_type."""

SIGNATURES = (
    (
        "gpt2",
        ("n_embd", "n_head", "n_layer"),
        "GPT-2's (GPT2Config; OpenAI GPT, CTRL and GPT-J name theirs so too)",
    ),
    (
        "layoutlm",
        ("hidden_size", "num_attention_heads", "num_hidden_layers", "max_2d_position_embeddings"),
        "LayoutLM's (LayoutLMConfig: BERT's with the 2-D positions of its boxes; LayoutLMv2's too)",
    ),
    (
        "bert",
        ("hidden_size", "num_attention_heads", "num_hidden_layers", "type_vocab_size"),
        "BERT's (BertConfig; RoBERTa and ELECTRA name theirs so too)",
    ),
)
"""The family a configuration's keys suggest, with the others that share them: suggested, never
read, since the keys alone do not tell GPT-2 from GPT-J or BERT from RoBERTa."""


def checkpoint_dtype(config: Mapping[str, Any]) -> str:
    """The dtype the file says its checkpoint holds, as a DTYPES key: `dtype` (transformers 4.56
    on) or else `torch_dtype`, in torch's spelling too ("torch.bfloat16"); float32 where it names
    none or one no training step updates ("auto", float8: hf.configs.warnings says so, M805), as
    the generic path builds it (hf/classes.buildable)."""
    stated = config.get("dtype") if config.get("dtype") is not None else config.get("torch_dtype")
    name = str(stated or "float32").removeprefix("torch.")
    return name if name in DTYPES else "float32"


def by_keys(config: Mapping[str, Any]) -> bool:
    """Whether a JSON object's keys are a transformers configuration's (a vocabulary and a layer
    count), whether or not it names its model_type (configurations older than that key lack it)."""
    return "vocab_size" in config and any(key in config for key in LAYER_KEYS)


def _suggested(config: Mapping[str, Any]) -> str:
    """What to add to a configuration that names neither model_type nor architectures."""
    for family, keys, whose in SIGNATURES:
        if all(key in config for key in keys):
            return f'its keys ({", ".join(keys)}) are {whose}: add "model_type": "{family}" if it is one'
    return f'add its "model_type" (one of {", ".join(FAMILIES)})'


def _family_of(architectures: object, config: Mapping[str, Any]) -> str:
    """An older configuration without model_type (GPT-2 XL's): the family its architectures'
    class name starts with (GPT2LMHeadModel: gpt2, Qwen2MoeForCausalLM: qwen2_moe), the longest.
    Without architectures either, refused in one line naming model_type and the family its keys
    suggest (SIGNATURES)."""
    if architectures is None:
        raise ConfigError(
            f"the configuration gives neither model_type nor architectures; {_suggested(config)}"
        )
    names = architectures if isinstance(architectures, list) else []
    for name in (n for n in names if isinstance(n, str)):
        if name in CLASS_FAMILIES:
            return CLASS_FAMILIES[name]
        plain = name.lower().replace("_", "")  # Qwen2_5_VLForConditionalGeneration: qwen2_5_vl
        found = [f for f in FAMILIES if plain.startswith(f.replace("_", ""))]
        if found:
            return max(found, key=len)
    said = f"architectures {names!r:.60}" if names else "no architectures"
    raise ConfigError(f"the configuration has no model_type, and {said} names no family modtrans reads")


BERT_HEADS = {
    "BertModel": ("pooler",),
    "BertForMaskedLM": ("mlm",),
    "BertLMHeadModel": ("mlm",),
    "BertForPreTraining": ("pooler", "mlm", "nsp"),
    "BertForNextSentencePrediction": ("pooler", "nsp"),
    "BertForSequenceClassification": ("pooler", "classifier"),
    "BertForMultipleChoice": ("pooler", "choice"),
    "BertForTokenClassification": ("tokens",),
    "BertForQuestionAnswering": ("qa",),
}
"""What transformers' BERT classes put on the encoder (modeling_bert.py): BertModel its pooler (a
dense layer on the first token); BertForMaskedLM and BertLMHeadModel the masked-LM head
(BertLMPredictionHead: a dense transform, GELU, LayerNorm, and a decoder tied to the word
embeddings with a bias of its own) and no pooler (add_pooling_layer=False); BertForPreTraining both
and the next-sentence classifier. The task heads, each one linear layer: BertForSequenceClassification
`classifier` of num_labels on the pooler's output, BertForMultipleChoice one of 1 on it (a score a
choice), BertForTokenClassification `classifier` of num_labels and BertForQuestionAnswering
`qa_outputs` of num_labels (start and end: 2) on every token, those two without a pooler."""


LANGUAGE_MODELS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")
"""How the classes a hand-written decoder, encoder-decoder or vision-language family describes end:
the language model with its head (LlamaForCausalLM, GPT2LMHeadModel, T5WithLMHeadModel,
T5ForConditionalGeneration, LlavaForConditionalGeneration); BERT's are BERT_HEADS."""


def undescribed(config: Mapping[str, Any]) -> str | None:
    """The class a configuration's `architectures` names where the hand-written families describe
    none of those it lists: a score head in place of the LM head (LlamaForSequenceClassification, a
    reward model), an encoder alone (T5EncoderModel, FLUX's text encoder: no decoder), a model with
    no head. None where it names none or one they describe."""
    names = config.get("architectures")
    listed = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if not listed or any(n.endswith(LANGUAGE_MODELS) or n in BERT_HEADS for n in listed):
        return None
    return listed[0]


def _labels(config: Mapping[str, Any]) -> int:
    """A classifier's outputs: PretrainedConfig.num_labels, the length of id2label (2 where the
    file gives neither it nor num_labels: PretrainedConfig's default id2label)."""
    named = config.get("id2label")
    if isinstance(named, dict) and named:
        return len(named)
    given = config.get("num_labels")
    return given if isinstance(given, int) and not isinstance(given, bool) and given > 0 else 2


def _bert_heads(architectures: object) -> tuple[str, ...]:
    """The heads of the first BERT class the configuration names; none when it names none (the
    encoder alone, as an export of its hidden states: the built-in bert-base's ONNX)."""
    names = architectures if isinstance(architectures, list) else []
    return next((BERT_HEADS[n] for n in names if isinstance(n, str) and n in BERT_HEADS), ())


def _gpt2(config: Mapping[str, Any], family: str, dtype: str) -> Arch:
    """GPT-2 (GPT2Config) and GPT-BigCode (GPTBigCodeConfig: GPT-2's keys, and multi_query, by
    default true: one key/value head, GPTBigCodeAttention's kv_heads = 1 if multi_query)."""
    hidden = _get(config, "n_embd", "hidden_size")
    heads = _get(config, "n_head", "num_attention_heads")
    _whole_heads(hidden, heads, "n_embd" if "n_embd" in config else "hidden_size", None)
    positions = _get(config, "n_positions", "max_position_embeddings")
    multi_query = family == "gpt_bigcode" and bool(config.get("multi_query", True))
    if family == "gpt_bigcode" and config.get("add_cross_attention"):
        raise ConfigError("a GPT-BigCode with add_cross_attention is not modelled (a causal decoder only)")
    return Arch(
        family=family,
        vocab=_get(config, "vocab_size"),
        hidden=hidden,
        layers=_get(config, "n_layer", "num_hidden_layers"),
        heads=heads,
        kv_heads=1 if multi_query else heads,
        head_dim=hidden // heads if heads else 0,
        intermediate=_get(config, "n_inner", default=4 * hidden),
        mlp="gelu",
        norm="layer",
        tied=bool(config.get("tie_word_embeddings", True)),
        qkv_bias=True,
        mlp_bias=True,
        positions=positions,
        dtype=dtype,
        context=positions,
        attention_dropout=_probability(config, "attn_pdrop", 0.1),  # GPT2Config's, GPTBigCodeConfig's
    )


def _bert(config: Mapping[str, Any], dtype: str) -> Arch:
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    _whole_heads(hidden, heads, "hidden_size", None)
    positions = _get(config, "max_position_embeddings")
    return Arch(
        family="bert",
        vocab=_get(config, "vocab_size"),
        hidden=hidden,
        layers=_get(config, "num_hidden_layers"),
        heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads if heads else 0,
        intermediate=_get(config, "intermediate_size"),
        mlp="gelu",
        norm="layer",
        tied=False,
        qkv_bias=True,
        mlp_bias=True,
        positions=positions,
        token_types=_get(config, "type_vocab_size", default=2),
        heads_on_top=_bert_heads(config.get("architectures")),
        labels=_labels(config),
        dtype=dtype,
        context=positions,
        attention_dropout=_probability(config, "attention_probs_dropout_prob", 0.1),  # BertConfig's
    )


def _decoder(config: Mapping[str, Any], family: str, dtype: str) -> Arch:
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads")
    head_dim = _get(config, "head_dim", default=hidden // heads if heads else 0)
    experts = _experts(config, family)
    latent = None
    if family not in ("deepseek_v2", "deepseek_v3"):  # latent attention has its own head sizes
        _whole_heads(hidden, heads, "hidden_size", config.get("head_dim"))
    else:
        latent = Latent(
            q_rank=config.get("q_lora_rank"),
            kv_rank=_get(config, "kv_lora_rank"),
            rope_dim=_get(config, "qk_rope_head_dim"),
            nope_dim=_get(config, "qk_nope_head_dim"),
            v_dim=_get(config, "v_head_dim"),
        )
    qkv_bias, o_bias = _attention_biases(config, family)
    return Arch(
        family=family,
        vocab=_get(config, "vocab_size"),
        hidden=hidden,
        layers=_get(config, "num_hidden_layers"),
        heads=heads,
        kv_heads=_get(config, "num_key_value_heads", default=heads),
        head_dim=head_dim,
        intermediate=_get(config, "intermediate_size"),
        mlp="swiglu",
        norm="rms",
        tied=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=qkv_bias,
        mlp_bias=bool(config.get("mlp_bias", False)) and family in MLP_BIAS,
        positions=0,
        experts=experts,
        latent=latent,
        dtype=dtype,
        context=_get(config, "max_position_embeddings", default=0),
        qk_norm=family in ("qwen3", "qwen3_moe"),  # Qwen3Attention: q_norm, k_norm (Qwen3RMSNorm(head_dim))
        attention_dropout=_probability(config, "attention_dropout", 0.0),  # LlamaConfig's default
        o_bias=o_bias,
    )


MLP_BIAS = frozenset({"llama", "granite"})
"""The Llama-layout families whose MLP reads mlp_bias (LlamaMLP, GraniteMLP); Mistral's, Mixtral's,
Qwen's and DeepSeek-V3's projections have no bias whatever the file says. DeepSeek-V2's dense and
shared-expert MLPs read it in transformers 5 (DeepseekV2MLP), its routed experts not: no published
DeepSeek-V2 file sets it, and it is not read here."""


def _attention_biases(config: Mapping[str, Any], family: str) -> tuple[bool, bool]:
    """(query/key/value, output projection) biases as each transformers attention class builds
    them: Qwen2Attention (and Qwen2-MoE's) always q, k, v, never o; MistralAttention and
    MixtralAttention none; LlamaAttention, Qwen3Attention, GraniteAttention all four by
    attention_bias; DeepseekV2/V3Attention q_a_proj, kv_a_proj_with_mqa and o_proj by it (build.py)."""
    if family in ("qwen2", "qwen2_moe"):
        return True, False
    if family in ("mistral", "mixtral"):
        return False, False
    bias = bool(config.get("attention_bias", False))
    return bias, bias


def _styled(config: Mapping[str, Any], family: str, dtype: str) -> Arch:
    """The families of families.py: their keys as their transformers configuration classes read
    them (GPTNeoXConfig, FalconConfig, Phi3Config, GemmaConfig, Gemma2Config, Gemma3TextConfig,
    Olmo2Config, Olmo3Config, Starcoder2Config, PhiConfig, OlmoConfig, StableLmConfig,
    CohereConfig), with those classes' defaults."""
    hidden = _get(config, "hidden_size")
    heads = _get(config, "num_attention_heads", "n_head")
    head_dim = _get(config, "head_dim", default=hidden // heads if heads else 0)
    _whole_heads(hidden, heads, "hidden_size", config.get("head_dim"))
    style = STYLES[family]
    kv_heads = _get(config, "num_key_value_heads", default=heads)
    bias = bool(config.get("attention_bias", False))  # q, k, v and o (GemmaAttention, Olmo2's, Phi3's)
    mlp_bias, o_bias, norm, mlp = False, bias, "rms", "swiglu"  # their MLPs never (bias=False)
    tied = bool(config.get("tie_word_embeddings", False))  # families.DEFAULTS: True where the class's is
    # families.DEFAULTS: each class's own; FalconConfig's ffn_hidden_size is None: 4 x hidden_size
    wide = ("ffn_hidden_size", 4 * hidden) if family == "falcon" else ("intermediate_size", ...)
    intermediate = _get(config, wide[0], default=wide[1])
    if family.startswith("gemma"):
        mlp = "geglu"  # GemmaMLP: act(gate) * up, gelu_pytorch_tanh
    elif family == "starcoder2":
        bias = mlp_bias = o_bias = bool(config.get("use_bias", True))
        norm, mlp = "layer", "gelu"
    elif family == "gpt_neox":
        bias = mlp_bias = o_bias = bool(config.get("attention_bias", True))
        norm, mlp = "layer", "gelu"
        if not config.get("use_parallel_residual", True):
            style = dataclasses.replace(style, norms="pre")
    elif family == "phi3":
        bias = o_bias = False  # Phi3Attention's qkv_proj and o_proj: bias=False, attention_bias unread
    elif family == "falcon":
        bias = mlp_bias = o_bias = bool(config.get("bias", False))
        norm, mlp = "layer", "gelu"
        style, kv_heads = _falcon(config, style, heads)
    arch = Arch(
        family=family,
        vocab=_get(config, "vocab_size"),
        hidden=hidden,
        layers=_get(config, "num_hidden_layers", "n_layer"),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        mlp=mlp,
        norm=norm,
        tied=tied,
        qkv_bias=bias,
        mlp_bias=mlp_bias,
        positions=0,
        dtype=dtype,
        context=_get(config, "max_position_embeddings", default=0),
        attention_dropout=_probability(config, "attention_dropout", 0.0),
        style=style,
        o_bias=o_bias,
    )
    return _layernorm_family(config, arch) if family in LAYERNORM_FAMILIES else arch


LAYERNORM_FAMILIES = ("phi", "olmo", "stablelm", "cohere")


def _layernorm_family(config: Mapping[str, Any], arch: Arch) -> Arch:
    """Phi, OLMo 1, StableLM and Cohere: LayerNorms (OLMo's without parameters, Cohere's without a
    bias) and the biases and query/key norms their transformers classes build from their keys."""
    family, style = arch.family, arch.style
    gated: dict[str, Any] = {"mlp": "swiglu", "mlp_bias": False, "head_bias": False}
    if family == "phi":  # PhiAttention: q, k, v, dense with bias; PhiMLP fc1, fc2; lm_head bias
        biases: dict[str, Any] = {"qkv_bias": True, "o_bias": True, "mlp_bias": True, "head_bias": True}
        biases["mlp"] = "gelu"
        on = bool(config.get("qk_layernorm", False))
    elif family == "olmo":  # OlmoAttention: attention_bias on q, k, v, o; OlmoLayerNorm: no params
        biases = {**gated, "norm_bias": False, "norm_scale": False}
        on = False
    elif family == "stablelm":  # StableLmAttention: use_qkv_bias on q, k, v; o_proj never
        biases = {**gated, "qkv_bias": bool(config.get("use_qkv_bias", False)), "o_bias": False}
        on = bool(config.get("qk_layernorm", False))
        if config.get("use_parallel_residual", False):
            style = dataclasses.replace(style, norms="parallel", norm_names=("input_layernorm",))
        if arch.heads and arch.hidden % arch.heads:  # StableLmAttention refuses it; no head_dim
            raise ConfigError(f"`hidden_size` {arch.hidden:,} does not split into {arch.heads} heads")
        biases["head_dim"] = arch.hidden // arch.heads if arch.heads else 0
    else:  # CohereLayerNorm: a weight, no bias; use_qk_norm
        biases = {**gated, "norm_bias": False}
        on = bool(config.get("use_qk_norm", False))
    style = style if on else dataclasses.replace(style, qk_norm="")
    return dataclasses.replace(arch, norm="layer", style=style, **biases)


def _mamba(config: Mapping[str, Any], dtype: str) -> Arch:
    """Mamba (Gu and Dao 2023) as transformers' MambaConfig reads it: expand x hidden inner
    channels, state_size, conv_kernel, time_step_rank ("auto": ceil(hidden / 16)), a tied head."""
    hidden = _get(config, "hidden_size")
    expand = config.get("expand", 2)
    if not isinstance(expand, int) or isinstance(expand, bool) or expand < 1:
        raise ConfigError(f"`expand` must be a positive integer, not {expand!r:.40}")
    rank = config.get("time_step_rank", "auto")
    dt_rank = -(-hidden // 16) if rank == "auto" else _get(config, "time_step_rank")
    inner = _get(config, "intermediate_size", default=expand * hidden)
    ssm = Ssm(
        inner=inner,
        state=_get(config, "state_size", default=16),
        conv=_get(config, "conv_kernel", default=4),
        dt_rank=dt_rank,
        bias=bool(config.get("use_bias", False)),
        conv_bias=bool(config.get("use_conv_bias", True)),
    )
    return Arch(
        family="mamba", vocab=_get(config, "vocab_size"), hidden=hidden,
        layers=_get(config, "num_hidden_layers"), heads=1, kv_heads=1, head_dim=hidden,
        intermediate=inner, mlp="none", norm="rms", tied=bool(config.get("tie_word_embeddings", True)),
        qkv_bias=False, mlp_bias=False, positions=0, dtype=dtype, ssm=ssm,
    )  # fmt: skip


T5_DEFAULTS = {"t5": ("relu", True), "mt5": ("gated-gelu", True), "umt5": ("gated-gelu", True)}
"""Each encoder-decoder configuration class's feed_forward_proj and tie_word_embeddings defaults
(transformers 5.25 configuration_t5.py T5Config, configuration_mt5.py MT5Config: True, where 4.x's
was False, configuration_umt5.py UMT5Config). transformers 5 forces T5's head tied whatever the
file says; a T5 v1.1 checkpoint has its own lm_head.weight, so `tie_word_embeddings: false` is
followed."""


def _t5(config: Mapping[str, Any], family: str, dtype: str) -> Arch:
    """T5 (Raffel et al. 2020) and its descendants as transformers' T5Config reads them: d_model,
    d_kv per head (heads x d_kv need not be d_model: t5-3b has 32 x 128 on 1,024), d_ff,
    num_layers and num_decoder_layers, feed_forward_proj "ACT" (T5DenseActDense: wi, wo) or
    "gated-ACT" (T5DenseGatedActDense: wi_0, wi_1, wo; T5Config.__init__ refuses any other form),
    T5LayerNorm (RMS, no bias), no biases anywhere."""
    proj, tied = T5_DEFAULTS[family]
    proj = config.get("feed_forward_proj", proj)
    parts = proj.split("-") if isinstance(proj, str) else []
    if not 1 <= len(parts) <= 2 or (len(parts) == 2 and parts[0] != "gated") or not parts[-1]:
        raise ConfigError(
            f"`feed_forward_proj` {proj!r:.40} is not ACT or gated-ACT (T5Config: relu, gated-gelu, ...)"
        )
    layers = _get(config, "num_layers")
    heads = _get(config, "num_heads")
    seq2seq = Seq2Seq(
        decoder_layers=_get(config, "num_decoder_layers", default=layers),
        buckets=_get(config, "relative_attention_num_buckets", default=32),
        bias_every_block=family == "umt5",
    )
    if (
        not 1
        <= min(seq2seq.decoder_layers, seq2seq.buckets)
        <= max(seq2seq.decoder_layers, seq2seq.buckets)
        <= 10**7
    ):
        raise ConfigError("num_decoder_layers and relative_attention_num_buckets must be 1 to 10,000,000")
    return Arch(
        family=family, vocab=_get(config, "vocab_size"), hidden=_get(config, "d_model"), layers=layers,
        heads=heads, kv_heads=heads, head_dim=_get(config, "d_kv"), intermediate=_get(config, "d_ff"),
        mlp=proj, norm="rms", tied=bool(config.get("tie_word_embeddings", tied)), qkv_bias=False,
        mlp_bias=False, positions=0, dtype=dtype, attention_dropout=_probability(config, "dropout_rate", 0.1),
        norm_bias=False, seq2seq=seq2seq,
    )  # fmt: skip


def _jamba(config: Mapping[str, Any], dtype: str) -> Arch:
    """Jamba (Lieber et al. 2024) as transformers' JambaConfig reads it: attention in the blocks i
    with i % attn_layer_period == attn_layer_offset, a Mamba mixer in the others (mamba_d_state,
    mamba_d_conv, mamba_expand, mamba_dt_rank "auto": ceil(hidden / 16)); a mixture of
    num_experts (top num_experts_per_tok) where i % expert_layer_period == expert_layer_offset,
    a SwiGLU MLP elsewhere."""
    layers = _get(config, "num_hidden_layers")
    hidden = _get(config, "hidden_size")
    period, offset = (
        _get(config, "attn_layer_period", default=8),
        _get(config, "attn_layer_offset", default=4),
    )
    every, at = _get(config, "expert_layer_period", default=2), _get(config, "expert_layer_offset", default=1)
    if not period or not every:
        raise ConfigError("attn_layer_period and expert_layer_period must be at least 1")
    rank = config.get("mamba_dt_rank", "auto")
    ssm = Ssm(
        inner=_get(config, "mamba_expand", default=2) * hidden,
        state=_get(config, "mamba_d_state", default=16),
        conv=_get(config, "mamba_d_conv", default=4),
        dt_rank=-(-hidden // 16) if rank == "auto" else _get(config, "mamba_dt_rank"),
        bias=bool(config.get("mamba_proj_bias", False)),
        conv_bias=bool(config.get("mamba_conv_bias", True)),
    )
    routed = _get(config, "num_experts", default=16)
    experts = None
    if routed > 1:
        experts = Experts(
            experts=routed,
            top_k=_get(config, "num_experts_per_tok", default=2),
            intermediate=_get(config, "intermediate_size"),
            every=every,
            at=at,
        )
    arch = _decoder(config, "jamba", dtype)
    return dataclasses.replace(
        arch,
        experts=experts,
        ssm=ssm,
        style=STYLES["jamba"],
        attention_blocks=tuple(i for i in range(layers) if i % period == offset),
    )


VISION_LANGUAGE = ("llava", "llava_next", "qwen2_vl", "qwen2_5_vl", "gemma3")
LLAVAS = ("llava", "llava_next")
"""The families whose vision tower is CLIP and whose projector is LlavaMultiModalProjector."""
TEXT_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "max_position_embeddings": 4096 * 32},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
              "max_position_embeddings": 32768},
    "qwen2_vl": {"vocab_size": 152064, "hidden_size": 8192, "intermediate_size": 29568,
                 "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
                 "max_position_embeddings": 32768},
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "head_dim": 256, "max_position_embeddings": 131072},
}  # fmt: skip
"""The defaults of the configuration classes a vision-language model's language model is read
with, for the keys its text_config leaves out (llava-1.5-7b-hf's names only vocab_size and
max_position_embeddings): LlamaConfig, MistralConfig, Qwen2Config (transformers' configuration_
llama.py, _mistral.py, _qwen2.py), Qwen2VLTextConfig / Qwen2_5_VLTextConfig (the same values), and
Gemma3TextConfig (configuration_gemma3.py: Gemma 3's text_config names only a few keys)."""
LANGUAGES = {"llava": ("llama", "mistral", "qwen2"), "qwen2_vl": ("qwen2_vl",), "gemma3": ("gemma3_text",)}
"""The language models each vision-language family is read with (its text_config's model_type)."""


def _vision_language(config: Mapping[str, Any], family: str, dtype: str) -> Arch:
    """LLaVA (LlavaConfig: text_config, a Llama / Mistral / Qwen2 decoder; vision_config, a CLIP
    vision model) and Qwen2-VL / Qwen2.5-VL (Qwen2VLConfig, Qwen2_5_VLConfig: the language model's
    keys in text_config, or at the top level in the first published files, which the class reads
    as its text_config; vision_config, the ViT and merger). The language model is the decoder
    family it names (Qwen2-VL's: Qwen2's attention with q/k/v bias); its modules sit under
    model.language_model, as transformers 5 names them."""
    text = config.get("text_config")
    if text is None and family == "gemma3":
        raise ConfigError("model_type gemma3 without a text_config: its language model is not given")
    if text is None and family not in LLAVAS:
        text = {k: v for k, v in config.items() if k not in ("vision_config", "model_type", "architectures")}
    if text is not None and not isinstance(text, Mapping):
        raise ConfigError("`text_config` must be a JSON object")
    text = dict(text or {})
    kind = "llava" if family in LLAVAS else "qwen2_vl" if family.startswith("qwen") else family
    known = LANGUAGES[kind]
    language = str(text.get("model_type") or known[0]) if kind != "qwen2_vl" else "qwen2_vl"
    if language not in known:
        raise ConfigError(
            f"a {family} language model of model_type {language!r} is not modelled ({', '.join(known)})"
        )
    values = defaulted({**TEXT_DEFAULTS[language], **text}, language)
    if language in STYLES:
        arch = _styled(values, language, dtype)
    else:
        arch = _decoder(values, "qwen2" if language == "qwen2_vl" else language, dtype)
    vision = config.get("vision_config") or {}
    if not isinstance(vision, Mapping):
        raise ConfigError("`vision_config` must be a JSON object")
    reader = _clip if family in LLAVAS else _siglip if family == "gemma3" else _qwen_vision
    style = dataclasses.replace(arch.style, root="model.language_model")
    vision_arch = reader(config, vision, family, arch.hidden, dtype)
    return dataclasses.replace(arch, family=family, style=style, vision=vision_arch)


LLAVA_CLIP = {"hidden_size": 1024, "intermediate_size": 4096, "patch_size": 14, "image_size": 336,
              "num_hidden_layers": 24, "num_attention_heads": 16}  # fmt: skip
"""LlavaConfig's vision_config when the file gives none (configuration_llava.py, sub_configs_defaults);
CLIPVisionConfig's own defaults (ViT-B/32 at 224 px) fill the keys a given vision_config leaves out."""


def _clip(config: Mapping[str, Any], vision: Mapping[str, Any], family: str, out: int, dtype: str) -> Vision:
    """LLaVA's CLIP vision tower (CLIPVisionConfig: hidden_size 768, intermediate_size 3072, 12
    layers of 12 heads, image_size 224, patch_size 32, quick_gelu by default) and what LlavaModel
    takes from it (vision_feature_layer -2, vision_feature_select_strategy "default")."""
    values = {**(LLAVA_CLIP if not vision else {}), **vision}
    tower, image, patch, channels = _vit(values, "clip_vision_model", "LLaVA", 32, dtype)
    layers = config.get("vision_feature_layer", -2)
    layers = tuple(layers) if isinstance(layers, list) else (layers,)
    depth = tower.layers
    if not layers or not all(isinstance(i, int) and -depth - 1 <= i <= depth for i in layers):
        raise ConfigError(
            f"vision_feature_layer {config.get('vision_feature_layer')!r}: hidden_states indices"
        )
    strategy = config.get("vision_feature_select_strategy", "default")
    if strategy not in ("default", "full"):
        raise ConfigError(f"vision_feature_select_strategy {strategy!r}: default or full")
    if image % patch:
        raise ConfigError(f"image_size {image} does not split into patches of {patch}")
    grid = _pinpoints(config, image, strategy) if family == "llava_next" else ()
    return Vision(
        family="clip_vision_model", tower=tower, patch=patch, channels=channels, image=image,
        feature_layers=tuple(i % (depth + 1) for i in layers), grid=grid, class_token=True,
        keep_class=strategy == "full",
        projector_bias=bool(config.get("multimodal_projector_bias", True)), out=out,
    )  # fmt: skip


ANYRES = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]
"""LlavaNextConfig's image_grid_pinpoints when the file gives none (configuration_llava_next.py,
__post_init__): the resolutions, (height, width), an image is resized and padded to before it is cut
into tiles of image_size."""


def _pinpoints(config: Mapping[str, Any], image: int, strategy: str) -> tuple[tuple[int, int], ...]:
    """LLaVA-NeXT's image_grid_pinpoints: (height, width) pairs, each a whole number of image_size
    tiles (LlavaNextModel.pack_image_features views the tiles' features as that grid)."""
    points = config.get("image_grid_pinpoints")
    points = ANYRES if points is None else points
    if (
        not isinstance(points, list)
        or not points
        or not all(
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(d, int) and not isinstance(d, bool) for d in p)
            for p in points
        )
    ):
        raise ConfigError(
            f"`image_grid_pinpoints` must be a list of [height, width] pairs, not {points!r:.40}"
        )
    if any(d < image or d % image for p in points for d in p):
        raise ConfigError(f"image_grid_pinpoints {points!r:.60}: each side a multiple of image_size {image}")
    if strategy == "full":
        raise ConfigError(
            "vision_feature_select_strategy full with LLaVA-NeXT's tiles is not modelled "
            "(pack_image_features views each tile's features as a grid without the class token)"
        )
    return tuple((p[0], p[1]) for p in points)


def _siglip(
    config: Mapping[str, Any], vision: Mapping[str, Any], family: str, out: int, dtype: str
) -> Vision:
    """Gemma 3's SigLIP vision tower (SiglipVisionConfig: hidden_size 768, intermediate_size 3072,
    12 layers of 12 heads, image_size 224, patch_size 16, gelu_pytorch_tanh, LayerNorms, a patch
    convolution with bias, no class token; no attention-pooling head under vision_use_head false,
    as Gemma3Model reads last_hidden_state) and the projector's average pooling of the
    (image_size / patch_size)^2 patches to mm_tokens_per_image (Gemma3MultiModalProjector: a
    square of sqrt(tokens) a side, kernel = patches a side / that)."""
    tower, image, patch, channels = _vit(vision, "siglip_vision_model", "Gemma 3", 16, dtype)
    if vision.get("vision_use_head", True) is not False:
        raise ConfigError("a SigLIP tower with its attention-pooling head (vision_use_head) is not modelled")
    tokens = _size(config, "mm_tokens_per_image", 256)
    side, per_side = math.isqrt(tokens), image // patch
    if image % patch or side * side != tokens or per_side % side:
        raise ConfigError(
            f"mm_tokens_per_image {tokens} is not a square that pools the {per_side} x {per_side} "
            f"patches of image_size {image} / patch_size {patch} evenly"
        )
    return Vision(
        family="siglip_vision_model", tower=tower, patch=patch, channels=channels, image=image,
        merge=per_side // side, conv_bias=True, out=out,
    )  # fmt: skip


def _qwen_vision(
    config: Mapping[str, Any], vision: Mapping[str, Any], family: str, out: int, dtype: str
) -> Vision:
    """Qwen2-VL's ViT (Qwen2VLVisionConfig: embed_dim 1280, depth 32, num_heads 16, mlp_ratio 4,
    quick_gelu fc1/fc2, LayerNorm) or Qwen2.5-VL's (Qwen2_5_VLVisionConfig: hidden_size, depth,
    num_heads, intermediate_size 3420 of a gated SiLU MLP, RMSNorm, window_size 112 px but in
    fullatt_block_indexes 7, 15, 23, 31); patch_size 14, temporal_patch_size 2, spatial_merge_size 2,
    in_channels 3 (the files' in_chans is not a key the classes read); the merger's output is the
    language model's width (out_hidden_size, Qwen2-VL's vision hidden_size)."""
    depth = _size(vision, "depth", 32)
    heads = _size(vision, "num_heads", 16)
    if family == "qwen2_vl":
        hidden = _size(vision, "embed_dim", 1280)
        ratio = vision.get("mlp_ratio", 4)
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or ratio <= 0:
            raise ConfigError(f"`mlp_ratio` must be a positive number, not {ratio!r:.40}")
        tower = _tower("qwen2_vl_vision", hidden, depth, heads, int(hidden * ratio), "gelu", "layer", dtype)
        merged = _size(vision, "hidden_size", 3584)
    else:
        hidden = _size(vision, "hidden_size", 3584)
        width = _size(vision, "intermediate_size", 3420)
        tower = _tower("qwen2_5_vl_vision", hidden, depth, heads, width, "swiglu", "rms", dtype)
        merged = _size(vision, "out_hidden_size", 3584)
    if merged != out:
        raise ConfigError(
            f"the vision merger's output of {merged:,} is not the language model's width {out:,}"
        )
    full = (
        _get(vision, "fullatt_block_indexes", default=[7, 15, 23, 31], many=True)
        if family == "qwen2_5_vl"
        else []
    )
    return Vision(
        family=tower.family, tower=tower, patch=_size(vision, "patch_size", 14),
        temporal=_size(vision, "temporal_patch_size", 2),
        channels=_size(vision, "in_channels", 3),
        merge=_size(vision, "spatial_merge_size", 2),
        window=_size(vision, "window_size", 112) if family == "qwen2_5_vl" else 0,
        full_blocks=tuple(full), out=out,
    )  # fmt: skip


def _vit(
    vision: Mapping[str, Any], kind: str, model: str, patch: int, dtype: str
) -> tuple[Arch, int, int, int]:
    """A ViT tower as CLIP and SigLIP configure it, its model_type checked (`kind`; `model` the
    multimodal model, for the error): the tower (GELU MLP, LayerNorms), image_size, patch_size and
    num_channels, each key at its configuration class's default where the file gives none
    (CLIPVisionConfig and SiglipVisionConfig: hidden_size 768, intermediate_size 3072, 12 layers
    of 12 heads, image_size 224, 3 channels; patch_size `patch`: CLIP's 32, SigLIP's 16)."""
    found = vision.get("model_type", kind)
    if found != kind:
        raise ConfigError(f"a {model} vision tower of model_type {found!r} is not modelled ({kind})")
    get = {k: _size(vision, k, d) for k, d in (
        ("hidden_size", 768), ("intermediate_size", 3072), ("num_hidden_layers", 12),
        ("num_attention_heads", 12), ("image_size", 224), ("patch_size", patch),
        ("num_channels", 3))}  # fmt: skip
    tower = _tower(kind, get["hidden_size"], get["num_hidden_layers"], get["num_attention_heads"],
                   get["intermediate_size"], "gelu", "layer", dtype)  # fmt: skip
    return tower, get["image_size"], get["patch_size"], get["num_channels"]


def _size(config: Mapping[str, Any], key: str, default: int) -> int:
    """A vision tower's size: a positive integer (an image side, a patch, a width; `default`: the
    configuration class's), a ConfigError naming the key otherwise."""
    return int(_get(config, key, default=default, least=1))


def _tower(
    family: str, hidden: int, layers: int, heads: int, width: int, mlp: str, norm: str, dtype: str
) -> Arch:
    """A vision encoder's transformer: bidirectional attention over one image, biases on every
    projection (CLIPAttention's q/k/v/out_proj, Qwen's qkv and proj, their MLPs)."""
    if not heads or hidden % heads:
        raise ConfigError(f"the vision tower's width {hidden:,} does not split into {heads} attention heads")
    return Arch(
        family=family, vocab=0, hidden=hidden, layers=layers, heads=heads, kv_heads=heads,
        head_dim=hidden // heads, intermediate=width, mlp=mlp, norm=norm, tied=False, qkv_bias=True,
        mlp_bias=True, positions=0, dtype=dtype, o_bias=True,
    )  # fmt: skip


def _falcon(config: Mapping[str, Any], style: Style, heads: int) -> tuple[Style, int]:
    """FalconDecoderLayer: with new_decoder_architecture, grouped key/values (num_kv_heads) and
    two norms in parallel (ln_attn, ln_mlp) unless num_ln_in_parallel_attn is 1; else one key/value
    head under multi_query (Falcon-7B), one shared norm when parallel_attn, two in sequence when not."""
    if config.get("new_decoder_architecture", False):
        kv = _get(config, "num_kv_heads", default=heads)
        if config.get("num_ln_in_parallel_attn") == 1:
            return style, kv
        return dataclasses.replace(style, norms="parallel2", norm_names=("ln_attn", "ln_mlp")), kv
    kv = 1 if config.get("multi_query", True) else heads
    if not config.get("parallel_attn", True):
        return dataclasses.replace(style, norms="pre", norm_names=LLAMA.norm_names), kv
    return style, kv


def _whole_heads(hidden: int, heads: int, key: str, head_dim: object) -> None:
    """A ConfigError when the heads do not split the hidden size and no head_dim says how wide
    they are: a model that cannot exist (transformers refuses it, or floors the width)."""
    if head_dim is None and heads and hidden % heads:
        raise ConfigError(
            f"`{key}` {hidden:,} does not split into {heads} attention heads (a head of "
            f"{hidden / heads:.4g} dimensions): give `head_dim`, or a head count that divides it"
        )


def _experts(config: Mapping[str, Any], family: str) -> Experts | None:
    """The family's mixture of experts and the blocks that have it, as its decoder layer decides:
    Mixtral every block (MixtralDecoderLayer); Qwen2/3-MoE the blocks i not in mlp_only_layers with
    (i + 1) % decoder_sparse_step == 0, none where num_experts is 0 (Qwen2MoeDecoderLayer,
    Qwen3MoeDecoderLayer); DeepSeek-V2/V3 the blocks i >= first_k_dense_replace, whatever
    moe_layer_freq says (transformers 5.25 DeepseekV2DecoderLayer, DeepseekV3DecoderLayer: the key
    read by none); DeepSeek-MoE's own code (deepseek-ai/deepseek-moe-16b-base modeling_deepseek.py
    DeepseekDecoderLayer, as vLLM's models/deepseek.py) those with i % moe_layer_freq == 0 too."""
    if family == "mixtral":
        return Experts(
            experts=_get(config, "num_local_experts"),
            top_k=_get(config, "num_experts_per_tok"),
            intermediate=_get(config, "intermediate_size"),
        )
    if family in ("qwen2_moe", "qwen3_moe"):
        routed = _get(config, "num_experts")
        if not routed:
            return None
        step = _get(config, "decoder_sparse_step", default=1, least=1)
        return Experts(
            experts=routed,
            top_k=_get(config, "num_experts_per_tok"),
            intermediate=_get(config, "moe_intermediate_size"),
            # Qwen2-MoE's shared expert; Qwen3-MoE has none (Qwen3MoeSparseMoeBlock), whatever the file says
            shared=_get(config, "shared_expert_intermediate_size", default=0) if family == "qwen2_moe" else 0,
            shared_gate=family == "qwen2_moe",
            every=step,
            at=step - 1,
            dense_blocks=tuple(_get(config, "mlp_only_layers", default=[], many=True)),
        )
    if family in ("deepseek", "deepseek_v2", "deepseek_v3"):
        routed = _get(config, "n_routed_experts", default=0)
        if not routed:
            return None
        moe_width = _get(config, "moe_intermediate_size")
        return Experts(
            experts=routed,
            top_k=_get(config, "num_experts_per_tok"),
            intermediate=moe_width,
            shared=moe_width * _get(config, "n_shared_experts", default=0),
            first_dense=_get(config, "first_k_dense_replace", default=0),
            every=_get(config, "moe_layer_freq", default=1, least=1) if family == "deepseek" else 1,
        )
    return None


def _check(arch: Arch) -> None:
    for name in ("vocab", "hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate"):
        value = getattr(arch, name)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    if arch.heads % arch.kv_heads:
        raise ConfigError(f"{arch.heads} attention heads do not split into {arch.kv_heads} key/value groups")
    if arch.experts is not None and not 1 <= arch.experts.top_k <= arch.experts.experts:
        raise ConfigError(f"top-{arch.experts.top_k} of {arch.experts.experts} experts")
    if max(arch.hidden, arch.intermediate, arch.vocab, arch.layers) > 10**7:
        raise ConfigError("a dimension over 10,000,000: not a configuration modtrans can cost")
    depth = max(
        arch.layers,
        arch.seq2seq.decoder_layers if arch.seq2seq is not None else 0,
        arch.vision.tower.layers if arch.vision is not None else 0,
    )
    if depth > limits.BLOCKS:
        raise ConfigError(
            f"{depth:,} blocks in a stack: more than the {limits.BLOCKS:,} modtrans plans for (the deepest "
            "published models have about 130)"
        )
    if arch.experts is not None and arch.experts.experts > limits.EXPERTS:
        raise ConfigError(
            f"{arch.experts.experts:,} experts: more than the {limits.EXPERTS:,} modtrans plans for"
        )
