"""What a layer is to the model, from the configuration and the module path: the heads, dropouts,
dtype and experts the configuration says (Shape), the block a module sits in (numbered on through
the block lists: an encoder's then a decoder's, as llm/encoder_decoder.py numbers them), its part
there (a mixture's routers and experts: mixture.py, document.Moe).

A multimodal model's towers (towers.py: its vision and audio encoders) are no blocks of the model:
the block lists numbered are those outside them, and a tower's layers take block index None and
the heads of the tower's own configuration (block, `towered`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from modtrans import dtypes
from modtrans.hf.configs import text_of
from modtrans.ir.document import Block, Heads, Kind, Moe, Part

EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
"""The configuration keys that count a mixture's routed experts (MixtralConfig, OlmoeConfig,
DeepseekV3Config, ...)."""
TOP_K_KEYS = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "moe_topk",
    "moe_top_k",
    "top_k_experts",
    "top_k",
    "router_top_k",
)
"""... and the experts each token is routed to (DbrxFFNConfig's moe_top_k, Gemma4TextConfig's
top_k_experts). A configuration of neither, or that holds them in a sub-configuration (DbrxConfig's
ffn_config), is read through its sub-configurations and its router's class (with_router)."""
ROUTER_CLASS = re.compile(r"Top(\d+)Router$")
"""A router whose class names its k: SwitchTransformersTop1Router, NllbMoeTop2Router (their
configurations name no top-k: modeling_switch_transformers.py, modeling_nllb_moe.py)."""


@dataclass(frozen=True)
class Mask:
    """An attention mask a model's forward built: `sliding` where by masking_utils'
    create_sliding_window_causal_mask (a query sees the last `window` keys, its configuration's
    sliding_window), else create_causal_mask; `model_type`: the configuration it was built for."""

    sliding: bool
    window: int | None
    model_type: str


@dataclass(frozen=True)
class Shape:
    """What the layers need of the configuration: the dtype parameters and activations are held
    in, the attention's heads and dropouts, the mixture's experts."""

    dtype: str  # the IR's name ("float", "bfloat16", "float16")
    width: int
    heads: int | None
    kv_heads: int | None
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    experts: int | None = None
    top_k: int | None = None
    layered: tuple[tuple[int | None, int | None], ...] = ()  # per text layer (heads, kv): _layered
    windows: tuple[int | None, ...] = ()  # per text layer, its sliding window (None: full): _windows
    zero_experts: int = 1  # the router's scores beyond E (scores): LongCat-Flash's zero_expert_num
    eager: bool = False  # the model's class offers no fused attention kernel (eager_only)

    def heads_of(self, index: int | None) -> tuple[int | None, int | None]:
        """Block `index`'s query and key/value heads: its layer's where the configuration gives
        them per layer, else the model's."""
        if index is not None and 0 <= index < len(self.layered) and self.layered[index][0]:
            return self.layered[index]
        return self.heads, self.kv_heads

    def window_of(self, index: int | None) -> int | None:
        """Block `index`'s sliding window (None: it attends to every key)."""
        if index is not None and 0 <= index < len(self.windows):
            return self.windows[index]
        return None


def shape_of(config: Any, within: Any = None, masks: Sequence[Mask] = ()) -> Shape:
    """The Shape of a transformers configuration (its text configuration's, for a multimodal one);
    `within`: the model's configuration whose dtype it is held in (a tower's: towers.py); `masks`:
    those the model's forward built (library.record), which say the windows of a model that
    names no sliding layer (_windows)."""
    text = text_of(config) if within is None else config
    held = config if within is None else within
    torch_dtype = str(getattr(held, "dtype", None) or getattr(held, "torch_dtype", None) or "float32")
    name = {"float32": "float", "float16": "float16", "bfloat16": "bfloat16"}.get(
        torch_dtype.removeprefix("torch."), "float"
    )
    layered = _layered(text)
    heads = _first_int(text, HEAD_KEYS) or (layered[0][0] if layered else None)
    kv = _first_int(text, KV_KEYS) or (layered[0][1] if layered else None) or heads
    return Shape(
        name,
        dtypes.width(name),
        heads,
        kv,
        _probability(text, ("attention_dropout", "attention_probs_dropout_prob", "attn_pdrop")),
        _probability(text, ("hidden_dropout", "hidden_dropout_prob", "resid_pdrop", "dropout_rate")),
        _first_int(text, EXPERT_KEYS) or _nested(text, EXPERT_KEYS),
        _first_int(text, TOP_K_KEYS) or _nested(text, TOP_K_KEYS),
        layered,
        _windows(text, masks),
        _first_int(text, ("zero_expert_num",)) or 1,
    )


def _windows(text: Any, masks: Sequence[Mask] = ()) -> tuple[int | None, ...]:
    """Each layer's sliding window as transformers decides it (a query sees the last
    `sliding_window` keys: masking_utils.sliding_window_overlay, kv_idx > q_idx - sliding_window).
    Where its configuration's layer_types (computed by each configuration class from its own keys:
    Gemma 2's every other layer, Gemma 3's sliding_window_pattern, Qwen 2's use_sliding_window and
    max_window_layers, gpt-oss's alternation) name "sliding_attention" layers, those; else, where
    the forward built sliding masks alone for this configuration (`masks`: Mistral's
    configuration names no layer_types, its model masks every layer by sliding_window), every
    layer; () where no layer slides."""
    try:
        kinds = getattr(text, "layer_types", None)
        window = getattr(text, "sliding_window", None)
        layers = getattr(text, "num_hidden_layers", None)
    except Exception:  # a per-layer attribute transformers refuses globally (integrations/heterogeneity)
        return ()
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        return ()
    if isinstance(kinds, (list, tuple)) and "sliding_attention" in kinds:
        return tuple(window if k == "sliding_attention" else None for k in kinds)
    own = {m.sliding for m in masks if m.model_type == getattr(text, "model_type", None)}
    if own == {True} and isinstance(layers, int) and layers > 0:
        return (window,) * layers
    return ()


HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads")
KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv")


def _layered(text: Any) -> tuple[tuple[int | None, int | None], ...]:
    """Each layer's (heads, key/value heads) where the configuration holds them per layer and
    refuses the global value (transformers' integrations/heterogeneity: Dots3NoteTextConfig's
    per_layer_config, 128 heads in its first two layers, 64 after); () otherwise."""
    if _first_int(text, HEAD_KEYS) is not None:
        return ()
    try:
        layers = list(getattr(text, "per_layer_config", None) or ())
    except Exception:  # transformers' own refusal, whatever its class
        return ()
    found = []
    for each in layers:
        heads = _first_int(each, HEAD_KEYS)
        found.append((heads, _first_int(each, KV_KEYS) or heads))
    return tuple(found) if any(h for h, _ in found) else ()


def with_router(shape: Shape, modules: Sequence[Any]) -> Shape:
    """`shape` with the top-k its configuration does not name taken from the router's class
    (ROUTER_CLASS) among the recorded `modules` (library.Module: path and class)."""
    if not shape.experts or shape.top_k:
        return shape
    for m in modules:
        named = ROUTER_CLASS.search(m.cls)
        if named:
            return replace(shape, top_k=int(named.group(1)))
    return shape


def _nested(config: Any, keys: Sequence[str]) -> int | None:
    """The first of `keys` in a sub-configuration the configuration holds (DbrxConfig's
    ffn_config: a DbrxFFNConfig, or its dict)."""
    for value in vars(config).values():
        if isinstance(value, dict):
            found = next((v for k in keys if isinstance(v := value.get(k), int) and v > 0), None)
        elif hasattr(value, "to_dict") and not isinstance(value, type):
            found = _first_int(value, keys)
        else:
            continue
        if found and not isinstance(found, bool):
            return found
    return None


def tower_of(module: str, towers: Mapping[str, Shape]) -> str | None:
    """The tower a module path sits in (None: outside every tower)."""
    return next((p for p in towers if module == p or module.startswith(f"{p}.")), None)


def _value(config: Any, key: str) -> Any:
    """A configuration's value, None where it has none or no one value (a heterogeneous model's
    per-layer attribute raises on global access: transformers' integrations/heterogeneity)."""
    try:
        return getattr(config, key, None)
    except Exception:  # transformers' own refusal, whatever its class
        return None


def _first_int(config: Any, keys: Sequence[str]) -> int | None:
    for key in keys:
        value = _value(config, key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _probability(config: Any, keys: Sequence[str]) -> float:
    for key in keys:
        value = _value(config, key)
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1:
            return float(value)
    return 0.0


def block_index(recorded: Any, towered: bool = False) -> dict[str, int]:
    """Each block's path -> its index, numbered on through the block lists outside the towers
    (library.Recorded.towers); `towered`: through the towers' block lists instead."""
    found: dict[str, int] = {}
    towers = getattr(recorded, "towers", {})
    for path in recorded.blocks:
        if (tower_of(path, towers) is not None) != towered:
            continue
        count = sum(1 for m in recorded.modules if re.fullmatch(re.escape(path) + r"\.\d+", m.path))
        for i in range(count):
            found[f"{path}.{i}"] = len(found)
    return found


def block_of(module: str, blocks: Mapping[str, int]) -> int | None:
    """The index of the block a module path sits in (None: outside every block)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        index = blocks.get(".".join(parts[:n]))
        if index is not None:
            return index
    return None


def block(
    module: str,
    kind: Kind,
    shape: Shape,
    modules: Mapping[str, Any],
    blocks: Mapping[str, int],
    routed: Moe | None,
    outside: Part,
    towered: bool = False,
) -> Block:
    """A layer's block: its index (block_of), and its part: router or expert, norm, attention
    (under a module whose class is an attention's, with `shape`'s heads and the module's
    is_causal), else the MLP; outside the blocks `outside` (towers.where_outside: the embedding
    before them, the head after), an embedding's table the embedding. A tower's layer (`towered`,
    index None) has its attention's heads (`shape`: the tower's) and `outside` for the rest."""
    index = block_of(module, blocks)
    if routed is not None:
        return Block(index, Part.ROUTER if routed.expert is None else Part.EXPERT)
    if kind is Kind.NORM:
        return Block(index, Part.NORM)
    if index is None and not towered:
        return Block(None, Part.EMBEDDING if kind is Kind.EMBEDDING else outside)
    if in_attention(module, modules):
        heads = None
        query, kv = shape.heads_of(index)
        if query:
            causal = _causal(module, modules)
            heads = Heads(
                query,
                kv or query,
                causal,
                shape.attention_dropout,
                shape.hidden_dropout,
                shape.window_of(index),
                shape.eager,
            )
        return Block(index, Part.ATTENTION, heads)
    return Block(index, Part.MLP if index is not None else outside)


def eager_only(cls: type) -> bool:
    """Whether a transformers model class, built without an attn_implementation (as Trainer and
    accelerate build it), runs its attention op by op: transformers' default is SDPA, and a class
    without it falls back to eager (modeling_utils.PreTrainedModel.get_correct_attn_implementation
    in transformers 5.25: "Sdpa is the default, so we try it and fallback to eager otherwise";
    FlashAttention and flex attention only when asked for). So `_supports_sdpa` false: BLOOM's
    baddbmm with its ALiBi bias, MPT's, XGLM's, OpenAI GPT's, DeBERTa's, Switch Transformers',
    Gemma 2's (which supports FlashAttention and flex attention, not SDPA)."""
    return not getattr(cls, "_supports_sdpa", False)


ATTENTION_CLASS = re.compile(r"Attention|MLA$")
"""An attention module's class: ...Attention, or multi-head latent attention's named for it alone
(LongcatFlashMLA, modeling_longcat_flash.py); not a decoder layer's (...AttentionLayer)."""


def in_attention(path: str, modules: Mapping[str, Any]) -> bool:
    """Whether a module path sits in an attention module. A mixture of attention heads there
    (JetMoE's JetMoeMoA, modeling_jetmoe.py: each of E experts a query and an output projection of
    its own heads over the shared key and value projection, k of them a token; MoA, Zhang et al.
    2022, arXiv 2210.05144) is the attention's, not a routed MLP's: its layers are the attention's
    (no Moe: replicated over the expert ranks, no all-to-all), each GEMM an expert's on its
    balanced share (layers._gemm). JetMoE's report (Shen et al. 2024, arXiv 2404.07413, training
    infrastructure: Megatron with MegaBlocks) trained with pipeline, not expert, parallelism;
    Megatron-Core has no attention experts."""
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        module = modules.get(".".join(parts[:n]))
        if module is not None and ATTENTION_CLASS.search(module.cls) and "Layer" not in module.cls:
            return True
    return False


def _causal(path: str, modules: Mapping[str, Any]) -> bool | None:
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        module = modules.get(".".join(parts[:n]))
        if module is not None and module.causal is not None:
            return bool(module.causal)
    return None
