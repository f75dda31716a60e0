"""A row-parallel layer's bias against Megatron-Core itself: one GPT-style TransformerLayer built on
two CPU ranks of a tensor-parallel group (tests/megatron_shards.py; megatron-core 0.14.0, its local
spec), each parameter's elements on rank 0 against what ModTrans holds of a GPT-2 block of the same
shape at TP 2, and the parameters Megatron marks for the sequence-parallel gradient all-reduce
against those ModTrans all-reduces. Skipped where megatron-core is not importable (CI's hf
environment installs it: .ci/run). Measured on 2026-12-07, torch 2.13 CPU: 25,184 elements a rank,
of which the row-parallel biases 2 x 64 and the norms 4 x 64 whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from modtrans.plan import Collective, Place, Purpose
from tests.test_row_bias import FP32, H, _plan, _weights
from tests.torchrun import run_megatron

pytestmark = pytest.mark.hf


def test_megatrons_own_layer_holds_what_modtrans_holds_at_tp_2(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    out = tmp_path / "shards.json"
    measured = run_megatron("megatron_shards.py", out)
    layer = measured["layer"]
    assert layer["self_attention.linear_proj.bias"] == layer["mlp.linear_fc2.bias"] == H  # whole
    one, two = (_weights(_plan(tmp_path, n, tp=2, global_batch=2)) for n in (1, 2))
    assert two - one == FP32 * sum(layer.values())
    # under SP Megatron all-reduces the row-parallel bias's gradient, not the column-parallel one's
    marked = measured["sequence_parallel"]
    assert marked == {"row.weight": False, "row.bias": True, "column.weight": False, "column.bias": False}
    plan = _plan(tmp_path, 1, tp=2, sp=True, global_batch=2)
    reduced = {
        plan.layers[c.layer].name: c.bytes
        for c in plan.program(0)
        if isinstance(c, Collective) and c.place is Place.TAIL and c.over == frozenset({Purpose.TENSOR})
    }
    # every one in one all-reduce with the first unit's tails (tensor.finalized_grads): the block's
    # two LayerNorms (weight and bias, h each), the two row-parallel biases Megatron marks and the
    # final LayerNorm; no column bias
    both = layer["self_attention.linear_proj.bias"] + layer["mlp.linear_fc2.bias"]
    assert reduced == {"transformer.wte": FP32 * (2 * 2 * H + both + 2 * H)}
