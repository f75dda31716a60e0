"""A vision tower block's activation terms against the bytes torch's autograd saves when the real
block runs: transformers' CLIPEncoderLayer at LLaVA-1.5's vision configuration
(fixtures/configs/llava-1.5-7b-hf.json), eager attention, fp32 on the CPU, counted with
torch.autograd.graph.saved_tensors_hooks (each storage once, the parameters left out).

The terms model Megatron's kernels (Korthikanti et al. 2022, section 4.1: a fused bias-GeLU keeps
its input, the second linear keeps the GeLU's output, 2 f a token). torch's eager path saves
exactly those, and two things more, each stated: CLIP's quick_gelu, x * sigmoid(1.702 x), keeps
the sigmoid's output too (f a token), and each LayerNorm its fp32 mean and rstd (8 bytes a token,
the norms' statistics activations.py does not count).

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import CLIPVisionConfig  # noqa: E402
from transformers.models.clip.modeling_clip import CLIPEncoderLayer  # noqa: E402

from modtrans import pipeline  # noqa: E402
from modtrans.plan.model import Recompute  # noqa: E402
from modtrans.strategy.llm import activations  # noqa: E402

pytestmark = pytest.mark.hf
CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "llava-1.5-7b-hf.json"


def _saved_bytes(layer: Any, x: Any) -> int:
    """Bytes of the tensors autograd keeps for the backward of one forward, each storage once."""
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    seen: dict[int, int] = {}

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(x, None)
    return sum(seen.values())


def test_a_clip_tower_block_stores_the_terms_torch_saves() -> None:
    vision = json.loads(CONFIG.read_text())["vision_config"]
    config = CLIPVisionConfig(**vision)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    block = CLIPEncoderLayer(config).train()
    s = (config.image_size // config.patch_size) ** 2 + 1  # 576 patches and the class token
    saved = _saved_bytes(block, torch.randn(1, s, config.hidden_size, requires_grad=True))

    ir, found = pipeline.extract_checked(CONFIG, input_shapes={"input_ids": (1, 1024)})
    assert ir is not None, [d.message for d in found]
    d = activations.dims(ir, 1)
    assert d is not None
    ((tower, count),) = d.tower
    assert count == config.num_hidden_layers
    assert (tower.s, tower.b, tower.h, tower.a) == (s, 1, config.hidden_size, config.num_attention_heads)
    fp32 = dataclasses.replace(tower, width=4)
    modelled = activations.layer(fp32, 0, 1, False, Recompute.NONE, activations.EAGER, 1)
    sigmoid = 4 * s * config.intermediate_size  # quick_gelu's: not in Megatron's fused bias-GeLU
    statistics = 2 * 2 * 4 * s  # two LayerNorms' fp32 mean and rstd
    assert saved == modelled + sigmoid + statistics
