"""The decoder families beyond Llama's layout: where each names its modules and puts its norms;
and every family's configuration-class defaults for the keys a file may omit (DEFAULTS).

One description (Style) that every decoder maps onto; build.py builds any of them. Each entry
names the transformers modeling file whose modules it follows (the module names are the
state-dict keys, so a layer's parameters are those of the checkpoint):

    family       blocks               norms                          attention / MLP
    llama ..     model.layers.N       pre: input_layernorm,          q,k,v,o / gate,up,down
                                      post_attention_layernorm
    gemma        model.layers.N       pre (RMSNorm)                  q,k,v,o / gate,up,down (GeGLU)
    gemma2       model.layers.N       sandwich: + pre_ and           the same
                                      post_feedforward_layernorm
    gemma3_text  model.layers.N       sandwich; q_norm, k_norm       the same
                                      per head
    olmo2, 3     model.layers.N       post: after attention and      q,k,v,o / gate,up,down
                                      MLP; q_norm, k_norm over
                                      all heads
    phi3         model.layers.N       pre                            qkv_proj,o_proj /
                                                                     gate_up_proj,down_proj
    starcoder2   model.layers.N       pre (LayerNorm, bias)          q,k,v,o (bias) / c_fc,c_proj
    gpt_neox     gpt_neox.layers.N    parallel: attention and MLP    query_key_value,dense /
                                      each from x, own norm          dense_h_to_4h,dense_4h_to_h
    falcon       transformer.h.N      parallel, one shared norm      query_key_value,dense /
                                      (7B) or two (new_decoder_      dense_h_to_4h,dense_4h_to_h
                                      architecture)
    jamba        model.layers.N       pre: input_, pre_ff_layernorm  attention every
                                                                     attn_layer_period blocks, a
                                                                     Mamba mixer (with dt, B, C
                                                                     norms) in the others /
                                                                     feed_forward: MLP or MoE
    phi          model.layers.N       parallel, one shared           q,k,v (bias), dense (bias) /
                                      input_layernorm (bias);        fc1, fc2 (bias); lm_head
                                      final_layernorm; q_, k_        with a bias
                                      layernorm over head_dim
    olmo         model.layers.N       pre, LayerNorms without        q,k,v,o / gate,up,down
                                      parameters (OlmoLayerNorm)
    stablelm     model.layers.N       pre (LayerNorm, bias), or      q,k,v (use_qkv_bias),o /
                                      parallel with one norm;        gate,up,down
                                      q_, k_layernorm: one
                                      LayerNorm per head (norms.N)
    cohere       model.layers.N       parallel, one input_layernorm  q,k,v,o / gate,up,down
                                      (a LayerNorm, no bias);
                                      q_norm, k_norm: a scale per
                                      head ([heads, head_dim])
    granite      model.layers.N       Llama's (its multipliers       Llama's
                                      scale no parameter)

GPT-BigCode (StarCoder 1, SantaCoder) is GPT-2's layout with nn.Linear weights and one key/value
head under multi_query (build.py, _gpt2).

Mamba (a selective state-space mixer in place of attention and MLP) is its own builder
(build.py, _mamba). Rotary positions, partial rotary (gpt_neox's rotary_pct, phi's and stablelm's
partial_rotary_factor), sliding windows, embedding scaling (gemma), logit soft-capping (gemma2),
logit scaling (cohere's logit_scale), granite's embedding, attention, residual and logits
multipliers and olmo's clip_qkv have no parameters and change no GEMM: they are free here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Style:
    root: str = "model"  # the decoder's module: model, gpt_neox, transformer
    blocks: str = "layers"
    embed: str = "embed_tokens"
    final_norm: str = "norm"
    head: str = "lm_head"  # a module at the top level, beside the root
    attention: str = "self_attn"
    qkv: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")  # one name: a fused projection
    out: str = "o_proj"
    up: tuple[str, ...] = ("gate_proj", "up_proj")  # gated: gate and up (or one fused); plain: up
    down: str = "down_proj"
    mlp: str = "mlp"
    norms: str = "pre"  # pre | sandwich | post | parallel (one norm) | parallel2 (two)
    norm_names: tuple[str, ...] = ("input_layernorm", "post_attention_layernorm")
    qk_norm: str = ""  # "" | head | full | per_head | norms (below)
    qk_norm_names: tuple[str, str] = ("q_norm", "k_norm")
    mixer: str = ""  # a state-space block's mixer module (Jamba's "mamba"; "": every block attends)


QK_NORMS = {
    "head": "one norm over head_dim, shared by every head (Qwen3, Gemma 3: q_norm; Phi: q_layernorm)",
    "full": "one norm over all heads' width (Olmo2Attention: q_norm of heads x head_dim)",
    "per_head": "over head_dim with a scale per head (CohereLayerNorm((heads, head_dim)))",
    "norms": "a LayerNorm module per head, no bias (StableLmLayerNormPerHead: norms.N)",
}
"""The query and key norms' forms (Style.qk_norm), as the modeling files build them."""


LLAMA = Style()
SANDWICH = (
    "input_layernorm",
    "post_attention_layernorm",
    "pre_feedforward_layernorm",
    "post_feedforward_layernorm",
)
OLMO = Style(
    norms="post", norm_names=("post_attention_layernorm", "post_feedforward_layernorm"), qk_norm="full"
)
# GPT-NeoX's and Falcon's modules: a fused query-key-value projection, dense layers of 4h
NEOX = Style(qkv=("query_key_value",), out="dense", up=("dense_h_to_4h",), down="dense_4h_to_h")
STYLES = {
    "gemma": LLAMA,
    "gemma2": Style(norms="sandwich", norm_names=SANDWICH),
    "gemma3_text": Style(norms="sandwich", norm_names=SANDWICH, qk_norm="head"),
    "olmo2": OLMO,
    "olmo3": OLMO,  # OLMo 2's layout; its sliding windows change no parameter
    "phi3": Style(qkv=("qkv_proj",), up=("gate_up_proj",)),
    "starcoder2": Style(up=("c_fc",), down="c_proj"),
    "gpt_neox": dataclasses.replace(
        NEOX,
        root="gpt_neox",
        embed="embed_in",
        final_norm="final_layer_norm",
        head="embed_out",
        attention="attention",
        norms="parallel2",
    ),
    "jamba": Style(
        mlp="feed_forward",
        norm_names=("input_layernorm", "pre_ff_layernorm"),
        final_norm="final_layernorm",
        mixer="mamba",
    ),
    # PhiDecoderLayer: attention and MLP both read input_layernorm's output (one residual add)
    "phi": Style(
        out="dense",
        up=("fc1",),
        down="fc2",
        norms="parallel",
        norm_names=("input_layernorm",),
        final_norm="final_layernorm",
        qk_norm="head",
        qk_norm_names=("q_layernorm", "k_layernorm"),
    ),
    "olmo": LLAMA,  # its norms have no parameters: config.py, Arch.norm_scale
    "stablelm": Style(qk_norm="norms", qk_norm_names=("q_layernorm", "k_layernorm")),
    "cohere": Style(norms="parallel", norm_names=("input_layernorm",), qk_norm="per_head"),
    "falcon": dataclasses.replace(
        NEOX,
        root="transformer",
        blocks="h",
        embed="word_embeddings",
        final_norm="ln_f",
        attention="self_attention",
        norms="parallel",
        norm_names=("input_layernorm",),
    ),
}
"""The families whose layout is not Llama's (Llama, Mistral, Qwen: STYLES.get(family, LLAMA))."""

DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"max_position_embeddings": 2048},
    "mistral": {"num_key_value_heads": 8, "max_position_embeddings": 131072},
    "qwen2": {"num_key_value_heads": 32, "max_position_embeddings": 32768},
    "qwen3": {"num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768},
    "mixtral": {"num_key_value_heads": 8, "max_position_embeddings": 131072},
    "qwen2_moe": {"num_key_value_heads": 16, "max_position_embeddings": 32768,
                  "shared_expert_intermediate_size": 5632},
    "qwen3_moe": {"num_key_value_heads": 4, "max_position_embeddings": 32768},
    "deepseek_v2": {"max_position_embeddings": 2048, "n_routed_experts": 64, "n_shared_experts": 2,
                    "q_lora_rank": 1536},
    "deepseek_v3": {"num_key_value_heads": 128, "max_position_embeddings": 4096, "n_routed_experts": 256,
                    "n_shared_experts": 1, "first_k_dense_replace": 3, "q_lora_rank": 1536},
    "granite": {"max_position_embeddings": 2048},
    "gemma": {"num_key_value_heads": 16, "head_dim": 256, "intermediate_size": 24576,
              "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "gemma2": {"num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
               "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "gemma3_text": {"num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
                    "max_position_embeddings": 131072, "tie_word_embeddings": True},
    "olmo2": {"intermediate_size": 11008, "max_position_embeddings": 2048},
    "olmo3": {"intermediate_size": 11008, "max_position_embeddings": 2048},
    "phi3": {"intermediate_size": 8192, "max_position_embeddings": 4096},
    "starcoder2": {"num_key_value_heads": 2, "intermediate_size": 12288, "max_position_embeddings": 4096,
                   "tie_word_embeddings": True},
    "gpt_neox": {"intermediate_size": 24576, "max_position_embeddings": 2048},
    "jamba": {"num_key_value_heads": 8, "max_position_embeddings": 262144},
    "phi": {"intermediate_size": 8192, "max_position_embeddings": 2048},
    "olmo": {"intermediate_size": 11008, "max_position_embeddings": 2048},
    "stablelm": {"num_key_value_heads": 32, "intermediate_size": 6912, "max_position_embeddings": 4096},
    "cohere": {"intermediate_size": 22528, "max_position_embeddings": 8192, "tie_word_embeddings": True},
    "falcon": {"max_position_embeddings": 2048, "tie_word_embeddings": True},
}  # fmt: skip
"""Each family's configuration class's default (transformers 5.25: the class's field, e.g.
Qwen2Config.num_key_value_heads = 32) of each key the offline reader takes a value for when a
file omits it and the class's default is a number of its own, not a rule: a class whose field
is None derives it in __post_init__ (LlamaConfig: num_key_value_heads = num_attention_heads;
head_dim = hidden_size // num_attention_heads in the attention), as config.py does without an
entry here. A key the reader needs and a family's class defaults (vocab_size, hidden_size, the
layer and head counts, Llama's intermediate_size) is refused when missing, not defaulted: a file
without its model's size describes no published model. tests/test_hf_defaults.py holds this
table to each class's fields and to its build of a published file with each key dropped."""


def defaulted(config: Mapping[str, Any], family: str) -> Mapping[str, Any]:
    """`config` with its family's class defaults (DEFAULTS) under the keys it omits; a key it sets,
    to null too, kept (a null is the class's derived rule, as transformers reads it)."""
    found = DEFAULTS.get(family)
    return {**found, **config} if found else config


HIDDEN_DROPOUT = {
    "gpt2": ("resid_pdrop", 0.1),  # GPT2Attention.resid_dropout, GPT2MLP.dropout
    "gpt_bigcode": ("resid_pdrop", 0.1),  # GPTBigCodeAttention.resid_dropout, GPTBigCodeMLP.dropout
    "bert": ("hidden_dropout_prob", 0.1),  # BertSelfOutput.dropout, BertOutput.dropout
    "phi": ("resid_pdrop", 0.0),  # PhiDecoderLayer.resid_dropout on the attention's and MLP's outputs
    "phi3": ("resid_pdrop", 0.0),  # Phi3DecoderLayer.resid_attn_dropout, resid_mlp_dropout
    "gpt_neox": ("hidden_dropout", 0.0),  # GPTNeoXLayer.post_attention_dropout, post_mlp_dropout
    "falcon": ("hidden_dropout", 0.0),  # FalconDecoderLayer: dropout_add(mlp_output, ...)
    "stablelm": ("hidden_dropout", 0.0),  # StableLmDecoderLayer.dropout after the MLP
    "starcoder2": ("residual_dropout", 0.0),  # Starcoder2Attention's and Starcoder2MLP's
    "t5": ("dropout_rate", 0.1),  # T5LayerSelfAttention.dropout, T5LayerFF.dropout
    "mt5": ("dropout_rate", 0.1),
    "umt5": ("dropout_rate", 0.1),
}
"""The key and default (its transformers configuration class's) of each family's dropout of the
hidden state, applied to the attention's and the MLP's outputs before their residual adds; a
family absent here has none (LlamaDecoderLayer and the decoders after it)."""

SYNONYMS = {
    "mixtral": {"num_experts": "num_local_experts"},
    "qwen3_moe": {"num_experts": "num_local_experts"},
    "deepseek_v2": {"num_experts": "n_routed_experts"},
    "deepseek_v3": {"num_local_experts": "n_routed_experts", "num_mtp_layers": "num_nextn_predict_layers"},
    "jamba": {"num_local_experts": "num_experts"},
    "gpt2": {
        "hidden_size": "n_embd",
        "max_position_embeddings": "n_positions",
        "num_attention_heads": "n_head",
        "num_hidden_layers": "n_layer",
    },
    "gpt_bigcode": {
        "hidden_size": "n_embd",
        "max_position_embeddings": "n_positions",
        "num_attention_heads": "n_head",
        "num_hidden_layers": "n_layer",
    },
    **{
        family: {
            "hidden_size": "d_model",
            "num_attention_heads": "num_heads",
            "num_hidden_layers": "num_layers",
        }
        | {"head_dim": "d_kv"}
        for family in ("t5", "mt5", "umt5")
    },
    "llava": {"image_token_id": "image_token_index"},
    "llava_next": {"image_token_id": "image_token_index"},
    "gemma3": {
        "image_token_id": "image_token_index",
        "boi_token_id": "boi_token_index",
        "eoi_token_id": "eoi_token_index",
    },
}
"""Each family's configuration class's attribute_map (transformers 5.25: PretrainedConfig's
__setattr__ and __getattribute__ read a key under either name): a config.json may spell a field
either way (transformers 5 saves Qwen3-MoE's experts as num_local_experts, its published files say
num_experts). tests/test_hf_synonyms.py holds this table to transformers' own."""


def synonymous(config: Mapping[str, Any], family: str) -> Mapping[str, Any]:
    """`config` with each of the family's synonymous keys set under both names where the file
    sets one of them (the file's own key kept where it sets both)."""
    pairs = SYNONYMS.get(family, {})
    missing = {}
    for alias, key in pairs.items():
        if alias in config and key not in config:
            missing[key] = config[alias]
        elif key in config and alias not in config:
            missing[alias] = config[key]
    return {**config, **missing} if missing else config
