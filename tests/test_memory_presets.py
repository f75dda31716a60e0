"""Memory for every translation: with no layout option (DATA on one rank) and under the keyword
presets, one rank's memory by strategy/llm/memory.py at the preset's tensor shards, X516 where it
does not fit, and the .meta.json's `parallel.memory` (null where a saved tensor's size is unknown).

The expected values are counted by hand from Llama-3-8B's configuration (meta-llama/Meta-Llama-3-8B
config.json: hidden 4,096, 32 layers, 32 query and 8 key/value heads, MLP 14,336, vocabulary
128,256, untied, bf16) and Megatron-LM's 18 B per parameter (theoretical_memory_usage.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans import resources
from modtrans.api import run
from modtrans.plan.model import StageMemory
from modtrans.request import Request, prepare
from modtrans.schema import check

H, F, A, KV, V, LAYERS, S = 4096, 14336, 32, 8, 128256, 32, 2048
HKV = H * KV // A
NORMS = LAYERS * 2 * H + H  # two RMSNorms per block and the final one: never split
SPLIT = LAYERS * (2 * H * H + 2 * H * HKV + 3 * H * F) + 2 * V * H  # linears, embedding, LM head


def _activations(t: int, b: int = 1) -> float:
    """Korthikanti's terms for Llama's blocks (no dropout, SwiGLU's 3 f, FlashAttention's fp32
    statistics) at T = t without SP, the embedding's ids and output, and the output layer's
    4 sbh (1 + v / h) / t, with the bf16 logits Megatron's loss holds beside its fp32 copy, 2 sbv / t
    (megatron/core/tensor_parallel/cross_entropy.py at core_r0.8.0, calculate_logits_max's
    `.float()`; tests/test_loss_memory_measured.py measures it)."""
    sb = S * b
    block = 8 * sb * H + (2 * sb * (H + 2 * HKV) + 2 * sb * H + 6 * sb * F + 4 * A * sb) / t
    return LAYERS * block + 8 * sb + sb * H + (4 * sb * H * (1 + V / H) + 2 * sb * V) / t


def _memory(**request: object) -> tuple[tuple[StageMemory, ...], list[str]]:
    result = run(prepare(Request(model="llama-3-8b", **request)))  # type: ignore[arg-type]
    assert result.plan is not None, result.diagnostics
    assert result.plan.preset is not None  # a keyword preset built it, not a layout
    return result.plan.memory, [d.code for d in result.diagnostics]


@pytest.mark.parametrize(
    ("request_", "t"),
    [
        ({}, 1),  # no option: DATA on one rank
        ({"parallel": "DATA", "npus": 4}, 1),  # each rank the whole model, no ZeRO
        ({"parallel": "HYBRID_TRANSFORMER", "npus": 4, "model_parallel_group": 2}, 2),
        ({"parallel": "HYBRID_TRANSFORMER", "npus": 8, "model_parallel_group": 8}, 8),
    ],
)
def test_keyword_presets_memory_by_hand(request_: dict[str, object], t: int) -> None:
    """Each rank holds 1 / t of the linears, the embedding and the LM head and every norm, at 2 B
    (bf16) + 4 B (fp32 main gradient) + 12 B (fp32 master and two moments) each; its activations are
    Korthikanti's at T = t."""
    (stage,), codes = _memory(**request_)
    elements = SPLIT // t + NORMS
    assert stage.parameters == elements
    assert (stage.weights, stage.gradients, stage.optimizer) == (2 * elements, 4 * elements, 12 * elements)
    assert stage.activations == pytest.approx(_activations(t), rel=1e-9)
    # the default device, an A100 SXM4 80GB: 81,158 MiB that CUDA gives the allocator (deviceQuery's
    # totalGlobalMem, thamada/nvidia-smi b09ef13 gls/A100SXMx4_deviceQuery.py)
    fits = stage.total <= 81_158 * 2**20
    assert ("X516" in codes) is not fits
    assert fits is (t > 1)  # 8.03 B x 18 B = 135 GiB on one rank, 67.3 GiB of it at T = 2


def test_no_option_gets_the_one_rank_layouts_memory() -> None:
    """Translated without layout options, the model gets what `--tp 1` (T = P = D = 1) gets."""
    preset, _ = _memory()
    result = run(prepare(Request(model="llama-3-8b", tp=1)))
    assert result.plan is not None
    assert result.plan.layout is not None
    assert preset == result.plan.layout.memory


def test_the_metadata_says_each_presets_memory_or_null(tmp_path: Path) -> None:
    """The .meta.json holds the preset's memory per stage (schemas/translation.schema.json): a
    transformer's by the block formulas, a CNN's (ResNet-50) by what autograd saves
    (strategy/saved.py); null where a saved tensor's size is unknown (an ONNX file's symbolic
    batch, translated with --allow-unknown)."""
    resnet18 = str(Path(__file__).resolve().parent.parent / "fixtures" / "onnx" / "resnet18_legacy.onnx")
    cases = (("llama-3-8b", False, True), ("resnet50", False, True), (resnet18, True, False))
    for model, unknown, modelled in cases:
        output = tmp_path / f"{Path(model).stem}.txt"
        result = run(prepare(Request(model=model, output=str(output), allow_unknown=unknown)))
        meta = next(
            json.loads(c) for p, c in result.files if p.name.endswith(".meta.json") and isinstance(c, str)
        )
        assert check(meta, "translation") == [], resources.schema("translation")["$id"]
        memory = meta["parallel"]["memory"]
        assert (memory is not None) is modelled
        if modelled:
            parts = ("weights", "gradients", "optimizer", "activations")
            assert memory[0]["total_bytes"] == sum(memory[0][f"{p}_bytes"] for p in parts)
            assert memory[0]["total_bytes"] == result.plan.memory[0].total  # type: ignore[union-attr]
            assert memory[0]["activations_bytes"] > 0
        assert "X516" not in {d.code for d in result.diagnostics} or modelled
