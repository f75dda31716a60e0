"""--recompute-modules against Megatron-Core itself: one TransformerLayer run on CPU
(tests/megatron_saved.py; megatron-core 0.14.0, its local spec), the bytes it stops storing per
module measured with torch's saved-tensor hooks, against what ModTrans's memory model says of the
same layer (tests/torchrun.py's LLAMA, fp32, 32 tokens, eager attention without dropout, T = 1).
Skipped where megatron-core is not importable: it is no dependency of ModTrans; CI's hf
environment installs it for this test (.ci/run: `pip install --no-deps megatron-core==0.14.0`).
Measured on 2026-12-07, torch 2.13 CPU: core_attn frees 16,380 bytes, mlp 49,152."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.torchrun import LLAMA, run_megatron

pytestmark = pytest.mark.hf

SEQ = 32  # tests/megatron_saved.py's


def _activations(config: Path, **layout: Any) -> int:
    from modtrans.api import run
    from modtrans.request import Request, prepare

    request = Request(model=str(config), seq_len=SEQ, attention="eager", **layout)
    plan = run(prepare(request)).plan
    assert plan is not None
    return plan.memory[0].activations


def test_megatrons_own_layer_stops_storing_what_the_model_says(tmp_path: Path) -> None:
    """core_attn frees the eager attention's softmax output (a s^2 b elements without attention
    dropout), within a scalar. mlp: the local spec's checkpoint keeps its input, the pre-MLP
    norm's output, which Transformer Engine's spec fuses into linear_fc1 and so frees too (modules.py,
    the model's): the measured layer frees the fused SwiGLU's inner tensors alone, the model's
    saving less w sbh."""
    pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    out = tmp_path / "saved.json"
    measured = run_megatron("megatron_saved.py", out)
    config = tmp_path / "llama.json"
    config.write_text(json.dumps({"model_type": "llama", "torch_dtype": "float32", **LLAMA}))
    plain = _activations(config, recompute="none")
    core = _activations(config, recompute="selective", recompute_modules=("core_attn",))
    mlp = _activations(config, recompute="selective", recompute_modules=("core_attn", "mlp"))
    layers, w, h = LLAMA["num_hidden_layers"], 4, LLAMA["hidden_size"]
    assert measured["none"] - measured["core_attn"] == pytest.approx((plain - core) / layers, abs=8)
    assert measured["none"] - measured["mlp"] == (core - mlp) / layers - w * SEQ * h
