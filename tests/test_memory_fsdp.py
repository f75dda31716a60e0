"""FSDP's state per rank (strategy/llm/memory.py: _fsdp_mixed, gathered) held to PyTorch FSDP2
itself: a transformers Llama sharded over two CPU ranks as torchtitan shards it
(tests/fsdp_state.py), its bytes after one step against the memory model's for the same
configuration at --framework torchtitan --zero 3 --dp 2.

Marker hf: needs torch and transformers (the extra `hf`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.torchrun import LLAMA, run_script

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.hf


def test_fsdp_state_is_what_fsdp2_holds(tmp_path: Path) -> None:
    """Rank 0 holds fp32 shards of the parameters, their fp32 gradients and Adam's two fp32
    moments (16 B a parameter / D), and after the forward the bf16 root (embedding, final norm,
    output layer) and last block, which neither reshards: the model's weights are the fp32 shard
    plus those, its gradients and optimizer the rest, to the byte."""
    from modtrans.api import run
    from modtrans.request import Request, prepare

    out = tmp_path / "held.json"
    held = run_script("fsdp_state.py", out)
    assert held["weights"] == held["gradients"] == 4 * held["elements"] // 2  # the fp32 shard
    assert held["optimizer"] == 8 * held["elements"] // 2

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16", **LLAMA}))
    request = Request(
        model=str(config), npus=2, micro_batch=2, global_batch=4, seq_len=16, framework="torchtitan", zero=3
    )
    plan = run(prepare(request)).plan
    assert plan is not None
    memory = plan.memory[0]
    assert memory.parameters == held["elements"]
    assert memory.weights == held["weights"] + held["gathered"]
    assert (memory.gradients, memory.optimizer) == (held["gradients"], held["optimizer"])
