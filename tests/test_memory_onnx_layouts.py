"""An ONNX graph under a layout option holds the activations autograd saves. Its IR has blocks but
no attention heads, so the block formulas (strategy/llm/activations.py) do not apply; the layout's
memory said 0 bytes of activations for GPT-2, BERT and ResNet-50 alike (`modtrans inspect resnet50
--dp 4 -b 32`: 0.38 GiB a rank). It now counts op by op what autograd saves (strategy/saved.py,
which tests/test_saved_torch.py holds to torch's saved_tensors_hooks on the exported models), as
one rank of the keyword preset does at the same batch: here that preset is the independent count,
each pipeline stage's share times the micro-batches it holds in flight (1F1B: P - s)."""

from __future__ import annotations

from typing import Any

import pytest

from modtrans.api import run
from modtrans.plan.model import StageMemory
from modtrans.request import prepare, request_of

MODELS = [("gpt2", {"seq_len": 128}), ("bert-base", {"seq_len": 128}), ("resnet50", {})]


def _memory(model: str, options: dict[str, Any]) -> tuple[StageMemory, ...]:
    result = run(prepare(request_of(model, {**options, "dialect": "simai", "output": "unused.txt"})))
    assert result.plan is not None, result.diagnostics
    return result.plan.memory


@pytest.mark.parametrize(("model", "shape"), MODELS, ids=[m for m, _ in MODELS])
def test_a_data_parallel_rank_holds_one_micro_batch(model: str, shape: dict[str, Any]) -> None:
    (preset,) = _memory(model, {**shape, "batch": 4})
    (laid,) = _memory(model, {**shape, "dp": 2, "micro_batch": 4, "global_batch": 16})
    assert preset.activations > 0
    assert laid.activations == preset.activations


def test_each_pipeline_stage_holds_its_share_per_micro_batch_in_flight() -> None:
    (preset,) = _memory("gpt2", {"seq_len": 128, "batch": 2})
    first, last = _memory("gpt2", {"seq_len": 128, "pp": 2, "micro_batch": 2, "global_batch": 8})
    assert first.activations > 0
    assert last.activations > 0
    # 1F1B: stage 0 holds P - 0 = 2 micro-batches in flight, stage 1 one
    assert first.activations / 2 + last.activations == pytest.approx(preset.activations, abs=2)
