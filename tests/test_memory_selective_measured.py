"""torchtitan's 'op' selective recomputation (strategy/llm/selective.py, activations.layer with
`ops`) held to what PyTorch keeps: a transformers Llama block in bf16 under torch's selective
checkpoint with torchtitan's policy (torchtitan 9dec370, torchtitan/parallelisms/
parallelize_llama.py, _apply_ac_to_transformer_block: the outputs of the ops in _save_list, every
second aten.mm left out, the rest recomputed), the bytes alive after its forward
(tests/livebytes.py) against the model's for the same configuration. On the CPU SDPA's flash
kernel is aten._scaled_dot_product_flash_attention_for_cpu, saved where torchtitan's list names
the CUDA one.

Marker hf: needs torch and transformers (the extra `hf`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch.utils.checkpoint import (  # noqa: E402
    checkpoint,
)
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding  # noqa: E402

from modtrans.plan.model import Recompute  # noqa: E402
from modtrans.strategy.llm import activations  # noqa: E402
from tests import plans  # noqa: E402
from tests.livebytes import Live  # noqa: E402
from tests.titan_policy import torchtitans_policy  # noqa: E402

pytestmark = pytest.mark.hf

# a Llama block with grouped-query attention (8 query heads, 2 key/value heads) and SwiGLU
LLAMA = {
    "hidden_size": 256, "intermediate_size": 896, "num_attention_heads": 8, "num_key_value_heads": 2,
    "vocab_size": 128, "num_hidden_layers": 2, "max_position_embeddings": 1024, "rms_norm_eps": 1e-5,
}  # fmt: skip


def test_op_policy_keeps_what_torchtitans_checkpoint_keeps(tmp_path: Path) -> None:
    """After one block's forward PyTorch holds its output (the next block's input), the q, v, gate
    and down projections' outputs, SDPA's output and its fp32 logsumexp: the model's bytes."""
    batch, seq = 2, 512
    config = transformers.LlamaConfig(**LLAMA)
    config._attn_implementation = "sdpa"
    block = LlamaDecoderLayer(config, 0).to(torch.bfloat16)
    x = torch.randn(batch, seq, LLAMA["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    positions = torch.arange(seq).unsqueeze(0).expand(batch, seq)
    cos, sin = LlamaRotaryEmbedding(config)(x, positions)

    def forward(h: Any) -> Any:
        out = block(h, position_embeddings=(cos, sin), attention_mask=None, position_ids=positions)
        return out[0] if isinstance(out, tuple) else out

    live = Live([*block.parameters(), x, cos, sin, positions])
    with live:
        y = checkpoint(forward, x, use_reentrant=False, context_fn=torchtitans_policy)
    assert y.shape == x.shape

    d = plans.dims_of(tmp_path, {"model_type": "llama", "torch_dtype": "bfloat16", **LLAMA}, (batch, seq))
    ours = activations.layer(d, 0, 1, False, Recompute.SELECTIVE, "flash2", 1, True)
    assert ours == live.live
