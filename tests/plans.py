"""Plans of a transformer under an LLM layout, for tests: one definition of the toy Llama whose
sizes the tests count by hand, and of translating a configuration under `--tp`/`--pp`/...
for Chakra, so that each test states only its layout and its token shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from modtrans import pipeline
from modtrans.comm import Policy
from modtrans.plan import Plan
from modtrans.strategy import Parallelism
from modtrans.strategy.llm import Layout
from modtrans.strategy.llm.activations import Dims, dims

# DeepSeek-V2 as its paper sets it (arXiv 2405.04434, section 3.1.2): hidden 5,120, 128 heads of
# d_h 128, KV compression d_c 512, query compression d_c' 1,536, decoupled RoPE d_h^R 64; MoE of 2
# shared and 160 routed experts of 1,536, top-6, the first layer dense (12,288); its 102,400-token
# vocabulary. Two layers (block 0 dense: first_k_dense_replace; block 1 MoE), as transformers'
# DeepseekV2Config names the keys.
DEEPSEEK_V2: dict[str, Any] = {
    "model_type": "deepseek_v2", "hidden_size": 5120, "num_hidden_layers": 2, "num_attention_heads": 128,
    "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
    "n_shared_experts": 2, "n_routed_experts": 160, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
    "vocab_size": 102400, "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
}  # fmt: skip

# a two-block Llama in bf16: hidden 64, 4 heads in 2 key/value groups, MLP 128, vocabulary 96
TOY: dict[str, Any] = {
    "model_type": "llama",
    "vocab_size": 96,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "torch_dtype": "bfloat16",
}


def config(folder: Path, values: dict[str, Any]) -> Path:
    """`values` written as folder/config.json, the file a Hugging Face model ships."""
    path = folder / "config.json"
    path.write_text(json.dumps(values))
    return path


def translated(model: str | Path, layout: Layout, tokens: tuple[int, int]) -> pipeline.Translation:
    """`model` under `layout` for Chakra, its input_ids of `tokens` (micro-batch, sequence)."""
    options = pipeline.Options(
        parallel=Parallelism(Policy.HYBRID_TRANSFORMER, layout.npus, layout=layout),
        input_shapes={"input_ids": tokens},
        format="chakra-et",
    )
    return pipeline.translate_checked(model, options)


def plan(model: str | Path, layout: Layout, tokens: tuple[int, int]) -> Plan:
    """The plan of `translated`, which must have no error (the diagnostics say why otherwise)."""
    result = translated(model, layout, tokens)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan


def dims_of(folder: Path, values: dict[str, Any], tokens: tuple[int, int]) -> Dims:
    """The activation model's dimensions of the configuration `values` for input_ids of `tokens`
    (micro-batch, sequence), read as translate reads it; it must have no error."""
    ir, found = pipeline.extract_checked(config(folder, values), input_shapes={"input_ids": tokens})
    assert ir is not None, [d.message for d in found]
    got = dims(ir, tokens[0])
    assert got is not None
    return got
