"""Activation memory of Mamba-2 blocks and a hybrid's blocks by kind, for models read through
transformers (modtrans/hf/): transformers' own configuration classes' defaults, built on the meta
device, against the tensors mamba_ssm's fused kernel saves, by hand from the configuration
(mamba_ssm/ops/triton/ssd_combined.py, MambaSplitConv1dScanCombinedFn.forward:
ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias, out_x, ...): the in_proj's output
zxbcdt, 2 d_inner + 2 G N + H a token, and the scan's output before the gated norm, d_inner)
and, for attention, Korthikanti et al. 2022's terms with FlashAttention's fp32 statistics.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import classes, extract
from modtrans.plan.model import Recompute
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import activations, memory
from modtrans.strategy.llm.mixers import Mixer
from modtrans.strategy.llm.options import Layout

pytestmark = pytest.mark.hf
SEQ = 512


def _read(model_type: str, **sizes: Any) -> tuple[Any, activations.Dims]:
    config = classes.default_config(model_type)
    for key, value in sizes.items():
        setattr(config, key, value)
    data = config.to_dict() | {"model_type": model_type}
    ir, found = extract(data, json.dumps(data).encode(), name="config.json", batch=1, sequence=SEQ)
    assert ir is not None, [d.message for d in found]
    d = activations.dims(ir, 1)
    assert d is not None
    return config, d


def _mamba2(inner: int, groups: int, state: int, heads: int, h: int, w: int) -> int:
    """The norm's and in_proj's inputs (h each), zxbcdt and out_x, a micro-batch of one sequence."""
    return w * SEQ * (h + h + (2 * inner + 2 * groups * state + heads) + inner)


def test_a_mamba2_block_stores_what_mamba_split_conv1d_scan_combined_saves() -> None:
    """transformers' Mamba2Config defaults (hidden 4,096, expand 2, 128 heads of 64, 8 groups,
    state 128; no dtype: fp32, 4 bytes an element), two layers."""
    c, d = _read("mamba2", num_hidden_layers=2)
    inner = c.expand * c.hidden_size
    assert inner == c.num_heads * c.head_dim
    projected = 2 * inner + 2 * c.n_groups * c.state_size + c.num_heads
    assert d.mixers == {0: Mixer(inner, projected), 1: Mixer(inner, projected)}
    want = _mamba2(inner, c.n_groups, c.state_size, c.num_heads, c.hidden_size, 4)
    for attention in (activations.FLASH, activations.EAGER):
        assert activations.layer(d, 1, 1, False, Recompute.NONE, attention, 1) == want


@pytest.mark.parametrize("framework", [Framework.DEEPSPEED, Framework.FSDP, Framework.MEGATRON])
def test_megatron_cores_mamba2_mixer_stores_its_norm_and_out_proj_inputs(framework: Framework) -> None:
    """Megatron-Core's MambaMixer (megatron/core/ssm/mamba_mixer.py d98e8a6, _ssm_training) runs
    the kernel without its gated norm and out_proj: `self.norm(y)` keeps y (mamba_ssm's
    layernorm_gated.py, LayerNormFn.forward: save_for_backward(x, ...)) and the row-parallel
    out_proj its input, d_inner each a token more than the fused module DeepSpeed and FSDP run."""
    c, d = _read("mamba2", num_hidden_layers=2)
    inner = c.expand * c.hidden_size
    fused = _mamba2(inner, c.n_groups, c.state_size, c.num_heads, c.hidden_size, 4)
    extra = 4 * SEQ * 2 * inner if framework is Framework.MEGATRON else 0
    layout = Layout(npus=1, framework=framework)
    assert memory.activation_bytes(layout, d, 0, [0, 1], (False, False)) == 2 * (fused + extra)


def test_nemotron_h_counts_mamba_attention_and_mlp_blocks_each_as_stored() -> None:
    """NemotronHConfig's defaults: four blocks, a Mamba-2 mixer alone, a mixture of experts alone,
    attention alone (32 query heads, 8 key/value heads of 128), an MLP alone (relu2: up and down
    projections, 2 f); one norm each, no dropout; fp32."""
    c, d = _read("nemotron_h")
    h, w = c.hidden_size, 4
    inner = c.mamba_num_heads * c.mamba_head_dim
    assert d.attending == frozenset({2})
    assert set(d.mixers) == {0}

    def block(i: int) -> float:
        return activations.layer(d, i, 1, False, Recompute.NONE, activations.FLASH, 1)

    assert block(0) == _mamba2(inner, c.n_groups, c.ssm_state_size, c.mamba_num_heads, h, w)
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    assert block(2) == w * SEQ * (h + h + q + 2 * kv + q) + 4 * c.num_attention_heads * SEQ
    assert block(3) == w * SEQ * (h + h + 2 * c.intermediate_size)


def test_falcon_h1_s_parallel_block_counts_attention_mamba_and_mlp() -> None:
    """FalconH1Config's defaults: each block's attention (32 heads, 8 key/value heads of 4,096 /
    32) and Mamba-2 mixer (mamba_d_ssm 1,024, 128 heads, 1 group of state 256, no gated norm:
    mamba_rms_norm False) read one norm's output, the attention a scaled copy of it
    (FalconH1DecoderLayer.forward: `hidden_states * self.attention_in_multiplier`), then a SwiGLU
    MLP of 14,336; fp32. Under Megatron the mixer's out_proj input, d_inner, more."""
    c, d = _read("falcon_h1", num_hidden_layers=2)
    h, w, f = c.hidden_size, 4, c.intermediate_size
    inner, groups, state, heads = c.mamba_d_ssm, c.mamba_n_groups, c.mamba_d_state, c.mamba_n_heads
    q, kv = h, c.num_key_value_heads * (h // c.num_attention_heads)
    mixer = (2 * inner + 2 * groups * state + heads) + inner
    attention = q + 2 * kv + q
    want = w * SEQ * (h + h + h + mixer + attention + h + h + 3 * f) + 4 * c.num_attention_heads * SEQ
    assert activations.layer(d, 0, 1, False, Recompute.NONE, activations.FLASH, 1) == want
    megatron = activations.layer(d, 0, 1, False, Recompute.NONE, activations.FLASH, 1, megatron=True)
    assert megatron == want + w * SEQ * inner
