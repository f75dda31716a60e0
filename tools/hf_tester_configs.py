"""The configurations transformers' own test suite builds for the model types whose DEFAULT
configuration transformers cannot build (a field None or absent: tools/hf_families.py's first
group), written as save_pretrained writes them: fixtures/hf/testers/<model_type>.json.

A real artefact of the library: each model type's ModelTester.get_config()
(tests/models/<type>/test_modeling_<type>.py in huggingface/transformers, at the commit named in
SOURCES) builds its configuration class from the tester's attributes; the testers derived from
tests/causal_lm_tester.py's CausalLMModelTester pass every attribute the configuration class's
__init__ names (or names through its attribute_map), starting from that class's defaults (COMMON).
The configuration is then written as `config.to_diff_dict()` (what save_pretrained writes: the
fields that differ from the class's defaults, model_type and transformers_version), so reading
the fixture takes the path a published config.json takes (tests/test_hf_testers.py).

    /work/venv-hf/bin/python tools/hf_tester_configs.py [--check]   # needs the extra `hf`

Rewrites the fixtures from the transcriptions below (nothing downloaded); --check reads each
fixture as tools/hf_families.py reads a default configuration and prints its verdict. Measured
with transformers 5.25.0, torch 2.13.0+cpu, 32 tokens: all 16 pass (parameters equal; GEMM FLOPs
1.000 of FlopCounterMode's but dots1 1.001, LFM2-MoE 1.005). Nemotron's tester is read in a fork
(FORKS). Not held: Qwen4-exp's composite (a VLMModelTester: its
get_text_config and get_vision_config live in tests/vlm_tester.py, which the stored sources hold
at another commit than the test's, 1e45299563d4), Gemma 4 assistant (its test file,
tests/models/gemma4_assistant/test_modeling_gemma4_assistant.py, holds integration tests alone:
no ModelTester, no get_config).
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import transformers

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "testers"

REPO = "huggingface/transformers"

COMMON: dict[str, Any] = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 37,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 16,
    "type_sequence_label_size": 2,
    "initializer_range": 0.02,
    "num_labels": 3,
    "num_choices": 4,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "is_decoder": False,
    "scope": None,
    "expert_interval": 1,
    "moe_layer_start_index": 0,
    "moe_intermediate_size": 12,
    "shared_expert_intermediate_size": 36,
    "shared_expert_gate": True,
    "moe_num_shared_experts": 2,
    "num_experts_per_tok": 2,
    "num_experts": 8,
    "mamba_n_groups": 1,
    "mamba_n_heads": 16,
    "mamba_d_state": 16,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_chunk_size": 16,
}
"""CausalLMModelTester.__init__'s defaults (tests/causal_lm_tester.py @ 2b6c089d5a0b); its
head_dim is hidden_size // num_attention_heads."""
COMMON_SOURCE = ("tests/causal_lm_tester.py", "2b6c089d5a0b18d59a08c36b91404ece60915cf3")

SOURCES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    # model_type: (test file, commit, how get_config builds it, the tester's attributes or kwargs)
    "dots1": (
        "tests/models/dots1/test_modeling_dots1.py",
        "03eac6f6d2af7e8562113f0b78d3d2d59a7d843d",
        "causal",
        {
            "n_routed_experts": 8,
            "n_shared_experts": 1,
            "n_group": 1,
            "topk_group": 1,
            "num_experts_per_tok": 8,
        },
    ),
    "lfm2_moe": (
        "tests/models/lfm2_moe/test_modeling_lfm2_moe.py",
        "1cc94722797953ac1826437dbd7eff970b13d18e",
        "causal",
        {"num_dense_layers": 1, "num_hidden_layers": 2, "layer_types": ["full_attention", "conv"]},
    ),
    "ministral": (
        "tests/models/ministral/test_modeling_ministral.py",
        "8b5087b34be9ed3a379c491f393008ccf4d0dccd",
        "causal",
        {},
    ),
    "hunyuan_v1_moe": (
        "tests/models/hunyuan_v1_moe/test_modeling_hunyuan_v1_moe.py",
        "02bd79c51e0fea27942b5035e0c7c4b65c3fb819",
        "causal",
        {},
    ),
    "cohere_compass_text": (
        "tests/models/cohere_compass/test_modeling_cohere_compass.py",
        "b07f1fbb29b4885d8698bf75bf946962e8ea49b0",
        "causal",
        {  # CohereCompassTextModelTester's kwargs.setdefault values
            "vocab_size": 64,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 64,
            "layer_types": ["full_attention", "full_attention"],
            "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10_000}},
        },
    ),
    "hunyuan_v1_dense": (
        "tests/models/hunyuan_v1_dense/test_modeling_hunyuan_v1_dense.py",
        "68ec867191709aeab6e520cf5e88a078fd468def",
        "causal",
        {},
    ),
    "deepseek_v2": (
        "tests/models/deepseek_v2/test_modeling_deepseek_v2.py",
        "0e1bc2c88b15071442875839f65555731a96a1ea",
        "causal",
        {
            "n_routed_experts": 8,
            "kv_lora_rank": 32,
            "q_lora_rank": 16,
            "qk_nope_head_dim": 64,
            "qk_rope_head_dim": 64,
        },
    ),
    "qwen4_exp_text": (
        "tests/models/qwen4_exp/test_modeling_qwen4_exp.py",
        "1e45299563d43ac489a6cf77127f7b503731be97",
        "causal",
        {
            "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25},
            "layer_types": ["linear_attention", "qwen_sparse_attention"],
            "linear_conv_kernel_dim": 2,
            "linear_key_head_dim": 16,
            "linear_value_head_dim": 16,
            "linear_num_key_heads": 4,
            "linear_num_value_heads": 8,
            "hc_count": 2,
            "hc_lowrank": 8,
            "ple_layer_ids": [],
            "ple_embed_dim": 16,
            "ple_conv_kernel_size": 2,
            "ngram_size": 3,
            "heads_per_ngram": 2,
            "ngram_vocab_size_base": 31,
            "make_ngram_vocab_size_divisible_by": 8,
            "split_ngram_parts": 4,
            "indexer_n_heads": 2,
            "indexer_kv_heads": 1,
            "indexer_head_dim": 8,
            "indexer_budget": 4,
            "indexer_compress_ratio": 2,
            "moe_intermediate_size": 8,
            "shared_expert_intermediate_size": 8,
            "num_experts": 4,
        },
    ),
    "nemotron": (  # read in FORKS' copy: huggingface's stored test derives from Gemma's old tester
        "tests/models/nemotron/test_modeling_nemotron.py",
        "746e0e9151c668ca6e19f9432b8b2a1e1c6cb4e8",
        "causal",
        {},  # NemotronModelTester(CausalLMModelTester) sets its model classes alone
    ),
    "esm": (
        "tests/models/esm/test_modeling_esm.py",
        "79f1fc71ad1e0220e2b05723f5fd2e14bc270de5",
        "direct",
        {
            "vocab_size": 33,
            "hidden_size": 32,
            "pad_token_id": 1,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 37,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 512,
            "type_vocab_size": 16,
            "initializer_range": 0.02,
        },
    ),
    "dbrx": (
        "tests/models/dbrx/test_modeling_dbrx.py",
        "79f1fc71ad1e0220e2b05723f5fd2e14bc270de5",
        "direct",
        {
            "vocab_size": 99,
            "hidden_size": 32,
            "num_hidden_layers": 5,
            "num_attention_heads": 4,
            "max_position_embeddings": 512,
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 4, "model_type": "", "rope_theta": 500000},
            "ffn_config": {
                "ffn_hidden_size": 32,
                "moe_jitter_eps": 0,
                "moe_loss_weight": 0.05,
                "moe_num_experts": 16,
                "moe_top_k": 4,
                "model_type": "",
                "ffn_act_fn": {"name": "gelu"},
            },
            "resid_pdrop": 0.0,
            "emb_pdrop": 0.0,
            "use_cache": True,
            "initializer_range": 0.02,
            "output_router_logits": False,
            "is_decoder": True,
            "pad_token_id": 0,
        },
    ),
    "xmod": (
        "tests/models/xmod/test_modeling_xmod.py",
        "e8abf74e6570f04bce41b180ec64ca91bb5ee778",
        "direct",
        {
            "vocab_size": 99,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 37,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1,
            "max_position_embeddings": 512,
            "type_vocab_size": 16,
            "initializer_range": 0.02,
            "default_language": "en_XX",
        },
    ),
    "wav2vec2-conformer": (
        "tests/models/wav2vec2_conformer/test_modeling_wav2vec2_conformer.py",
        "2b6c089d5a0b18d59a08c36b91404ece60915cf3",
        "direct",
        {
            "hidden_size": 16,
            "feat_extract_norm": "group",
            "feat_extract_dropout": 0.0,
            "feat_extract_activation": "gelu",
            "conv_dim": (32, 32, 32),
            "conv_stride": (4, 4, 4),
            "conv_kernel": (8, 8, 8),
            "conv_bias": False,
            "mask_time_prob": 0.5,
            "mask_time_length": 2,
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 2,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "hidden_dropout_prob": 0.1,
            "intermediate_size": 20,
            "layer_norm_eps": 1e-5,
            "do_stable_layer_norm": False,
            "hidden_act": "gelu",
            "initializer_range": 0.02,
            "vocab_size": 32,
            "num_adapter_layers": 1,
            "adapter_stride": 2,
            "tdnn_dim": (32, 32),
            "tdnn_kernel": (5, 3),
            "tdnn_dilation": (1, 2),
            "xvector_output_dim": 32,
            "position_embeddings_type": "relative",
        },
    ),
    "reformer": (
        "tests/models/reformer/test_modeling_reformer.py",
        "d3fce704f227cb7231e0f6ae60072416bc0a3505",
        "direct",
        {
            "vocab_size": 32,
            "hidden_size": 32,
            "num_hidden_layers": 4,  # len(attn_layers)
            "num_attention_heads": 2,
            "feed_forward_size": 32,
            "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1,
            "local_attention_probs_dropout_prob": 0.1,
            "lsh_attention_probs_dropout_prob": None,
            "max_position_embeddings": 512,
            "is_decoder": True,
            "axial_pos_embds": True,
            "axial_pos_shape": (4, 8),
            "axial_pos_embds_dim": (16, 16),
            "local_attn_chunk_length": 4,
            "local_num_chunks_after": 0,
            "local_num_chunks_before": 1,
            "num_hashes": 1,
            "num_buckets": None,
            "lsh_attn_chunk_length": None,
            "lsh_num_chunks_after": None,
            "lsh_num_chunks_before": None,
            "attn_layers": ["local", "local", "local", "local"],
            "pad_token_id": 0,
            "hash_seed": 0,
        },
    ),
    "wav2vec2-bert": (
        "tests/models/wav2vec2_bert/test_modeling_wav2vec2_bert.py",
        "1d2fe0d87b712f479707c7518c7a31a0b9b62443",
        "direct",
        {
            "hidden_size": 16,
            "feature_projection_input_dim": 16,
            "mask_time_prob": 0.5,
            "mask_time_length": 2,
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 2,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "hidden_dropout_prob": 0.1,
            "intermediate_size": 20,
            "layer_norm_eps": 1e-5,
            "do_stable_layer_norm": False,
            "hidden_act": "gelu",
            "initializer_range": 0.02,
            "vocab_size": 32,
            "num_adapter_layers": 2,
            "adapter_stride": 2,
            "tdnn_dim": (32, 32),
            "tdnn_kernel": (5, 3),
            "tdnn_dilation": (1, 2),
            "xvector_output_dim": 32,
            "position_embeddings_type": "relative",
        },
    ),
    "moonshine_streaming": (
        "tests/models/moonshine_streaming/test_modeling_moonshine_streaming.py",
        "3ba301fb305951c77dcbc5dd5eafaf36636ac32a",
        "direct",
        {
            "encoder_config": {  # its MoonshineStreamingEncoderConfig(...)
                "hidden_size": 8,
                "intermediate_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 2,
                "head_dim": 4,
            },
            "vocab_size": 147,
            "hidden_size": 8,
            "intermediate_size": 32,
            "head_dim": 4,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "decoder_start_token_id": 85,
            "bos_token_id": 98,
            "eos_token_id": 98,
            "pad_token_id": 0,
        },
    ),
}


FORKS = {"nemotron": "PerforatedAI/PerforatedAI-Transformers"}
"""The model types whose test file is read in a fork of REPO at the commit SOURCES names: the
copy of huggingface/transformers this project's sources store there holds an older
NemotronModelTester, derived from a GemmaModelTester that is not stored at that commit."""


def causal_kwargs(config_class: Any, attributes: dict[str, Any]) -> dict[str, Any]:
    """CausalLMModelTester.get_config's rule: every tester attribute the configuration class's
    __init__ names, or names through its attribute_map, plus pad_token_id (forced_config_args)."""
    held = {**COMMON, **attributes}
    held["head_dim"] = held["hidden_size"] // held["num_attention_heads"]
    common = {v: k for k, v in getattr(config_class, "attribute_map", {}).items()}
    kwargs = {}
    for key in [*inspect.signature(config_class.__init__).parameters, "pad_token_id"]:
        if key in held and key != "self":
            kwargs[key] = held[key]
        elif key in common and common[key] in held:
            kwargs[key] = held[common[key]]
    return kwargs


def config_of(model_type: str) -> Any:
    """The configuration the tester's get_config builds for `model_type`."""
    _, _, how, given = SOURCES[model_type]
    config_class = transformers.CONFIG_MAPPING[model_type]
    return config_class(**(causal_kwargs(config_class, given) if how == "causal" else given))


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for model_type in SOURCES:
        written = config_of(model_type).to_diff_dict()
        (OUT / f"{model_type}.json").write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
        print(model_type, len(written), "fields")
    if "--check" in sys.argv[1:]:
        from hf_families import check  # tools/ is the script's own folder

        from modtrans.hf import classes

        for model_type in sorted(SOURCES):
            data = json.loads((OUT / f"{model_type}.json").read_text())
            print(f"{model_type:24} {check(classes.config_of(data), None, 32)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
