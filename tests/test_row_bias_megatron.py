"""A row-parallel layer's bias against Megatron-Core itself: one GPT-style TransformerLayer built on
two CPU ranks of a tensor-parallel group (tests/megatron_shards.py; megatron-core 0.14.0, its local
spec), each parameter's elements on rank 0 against what ModTrans holds of a GPT-2 block of the same
shape at TP 2, and the parameters Megatron marks for the sequence-parallel gradient all-reduce
against those ModTrans all-reduces. Skipped where megatron-core is not importable (CI's hf
environment installs it: .ci/run). Measured on 2026-12-07, torch 2.13 CPU: 25,184 elements a rank,
of which the row-parallel biases 2 x 64 and the norms 4 x 64 whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from modtrans.plan import Collective, Place, Purpose
from tests.test_row_bias import FP32, H, _plan, _weights
from tests.torchrun import free_port

pytestmark = pytest.mark.hf


def test_megatrons_own_layer_holds_what_modtrans_holds_at_tp_2(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("megatron.core")
    out = tmp_path / "shards.json"
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("megatron_shards.py")), str(out), str(free_port())],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(out.read_text(encoding="utf-8"))
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
    assert reduced["transformer.h.0.mlp.c_proj"] == FP32 * layer["mlp.linear_fc2.bias"]
    assert "transformer.h.0.mlp.c_fc" not in reduced
