"""Which blocks of a mixture-of-experts family have the mixture, read offline (llm/config.py) as
transformers builds them: every key a family's decoder layer reads to choose between its sparse
block and a dense MLP (first_k_dense_replace, moe_layer_freq, decoder_sparse_step, mlp_only_layers,
num_experts, expert_layer_period and _offset), set away from its default, gives the same blocks
and the same parameters as the model transformers builds on the meta device from the same dict.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans import pipeline
from modtrans.hf import classes, library
from modtrans.llm.config import from_hf

pytestmark = pytest.mark.hf

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "vocab_size": 128,
    "num_hidden_layers": 6,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
}
BASES: dict[str, dict[str, Any]] = {
    "deepseek_v2": {"num_hidden_layers": 6},  # transformers' own tester's (fixtures/hf/testers)
    "deepseek_v3": {**SMALL, "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                    "intermediate_size": 48, "q_lora_rank": 16, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
                    "qk_nope_head_dim": 8, "v_head_dim": 8, "n_group": 1, "topk_group": 1},
    "qwen2_moe": {**SMALL, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                  "shared_expert_intermediate_size": 32, "intermediate_size": 48},
    "qwen3_moe": {**SMALL, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                  "intermediate_size": 48, "head_dim": 16},
    "mixtral": {**SMALL, "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 48},
    "jamba": {**SMALL, "num_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 48,
              "attn_layer_period": 3, "attn_layer_offset": 1},
}  # fmt: skip
"""Each family cut to six small blocks (vocabulary and the rest: its class's defaults)."""
CASES = [
    ("deepseek_v2", {}),
    ("deepseek_v2", {"moe_layer_freq": 2}),  # read by no DeepseekV2DecoderLayer: every block sparse
    ("deepseek_v2", {"first_k_dense_replace": 2, "moe_layer_freq": 3}),
    ("deepseek_v3", {"first_k_dense_replace": 1, "moe_layer_freq": 2}),
    ("deepseek_v3", {"first_k_dense_replace": 0}),
    ("qwen2_moe", {"decoder_sparse_step": 2}),
    ("qwen2_moe", {"decoder_sparse_step": 3, "mlp_only_layers": [2, 4]}),
    ("qwen2_moe", {"num_experts": 0}),
    ("qwen3_moe", {"decoder_sparse_step": 2, "mlp_only_layers": [0, 1]}),
    ("qwen3_moe", {"mlp_only_layers": [5]}),
    ("mixtral", {}),
    ("jamba", {"expert_layer_period": 3, "expert_layer_offset": 2}),
    ("jamba", {"expert_layer_period": 1, "expert_layer_offset": 0}),
]


def _config(family: str, keys: dict[str, Any]) -> dict[str, Any]:
    if family == "deepseek_v2":
        base = json.loads((ROOT / "fixtures" / "hf" / "testers" / "deepseek_v2.json").read_text())
    else:
        base = {"model_type": family}
    return {**base, **BASES[family], **keys}


def _sparse(model: Any) -> list[int]:
    """The decoder layers transformers built with routed experts (a module named `experts`; a
    shared expert's, shared_expert(s), is not one)."""
    return [
        i
        for i, layer in enumerate(model.model.layers)
        if any(name.rsplit(".", 1)[-1] == "experts" for name, _ in layer.named_modules())
    ]


@pytest.mark.parametrize(("family", "keys"), CASES, ids=[f"{f}-{json.dumps(k)}" for f, k in CASES])
def test_the_blocks_with_the_mixture_are_transformers(
    family: str, keys: dict[str, Any], tmp_path: Path
) -> None:
    data = _config(family, keys)
    model = library.build(classes.config_of(data))
    arch = from_hf(data)
    ours = [i for i in range(arch.layers) if arch.experts is not None and arch.experts.in_block(i)]
    assert ours == _sparse(model)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 16)})
    assert ir is not None, [d.message for d in found]
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
