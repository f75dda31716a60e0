"""The attention core (ir/core.py): the layers between an attention's score and context products,
which a fused kernel runs inside itself (FlashAttention, Dao et al. 2022, arXiv 2205.14135,
Algorithm 1: the scale, the mask, the softmax and its dropout on tiles in SRAM; the s x s scores
never written). Read on real exports and real configurations, not on look-alikes: the tiny ONNX
exports of transformers' GPT-2, BERT and Llama (fixtures/onnx, MANIFEST.json: torch.onnx.export of
eager attention) and openai/gpt-oss-20b's configuration (fixtures/hf), whose sinks are a parameter
inside the core.

Before the core was marked, only the softmax was free under a fused kernel: the scale, the mask and
gpt-oss's sinks were charged as kernels of their own over the s x s scores (gpt-oss-120b on 64
H100s: 3.2 s of an 8.3 s stage's compute)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modtrans import cost
from modtrans.cost.gpu import Gpu
from modtrans.ir.document import Kind, ModelIR
from modtrans.pipeline import extract_checked

FIXTURES = Path(__file__).parent.parent / "fixtures"

# What each export runs between its two attention products, read from the exported graphs'
# first block (the ONNX nodes between the MatMul of q and k and the MatMul with v), as the
# eager attention of transformers writes it: BERT's BertSelfAttention (matmul, `/ sqrt(d)`
# exported as Mul, `+ attention_mask`, softmax, dropout: off in eval), Llama's
# eager_attention_forward (matmul, `* scaling`, `+ causal_mask`, softmax, the cast folded),
# GPT-2's (its scale folded into q and k before the product; `+` the mask, softmax, the padded
# rows' Where, dropout); transformers 5.24.0 (MANIFEST.json, built_with). An export names no
# heads, so the GPU model runs its core as eager whatever --attention says (gpu.attention_seconds).
EXPORTS = {
    "bert_tiny_legacy.onnx": ["Mul", "Add", "Softmax"],
    "llama_tiny_legacy.onnx": ["Mul", "Add", "Softmax"],
    "gpt2_tiny_legacy.onnx": ["Add", "Softmax", "Where", "Dropout"],
}

INPUTS = {
    "bert_tiny_legacy.onnx": ["input_ids", "attention_mask", "token_type_ids"],
    "llama_tiny_legacy.onnx": ["input_ids", "attention_mask"],
    "gpt2_tiny_legacy.onnx": ["input_ids", "attention_mask"],
}


def _ir(spec: Path) -> ModelIR:
    """The IR at batch 1 and 64 tokens (an export's every input: its MANIFEST.json names them)."""
    names = ["input_ids"] if spec.suffix == ".json" else INPUTS[spec.name]
    ir, found = extract_checked(spec, input_shapes=dict.fromkeys(names, (1, 64)))
    assert ir is not None, [d.message for d in found]
    return ir


def _gpu(attention: str) -> Gpu:
    model = cost.get("gpu", cost.Settings(device="a100", attention=attention))
    assert isinstance(model, Gpu)
    return model


@pytest.mark.parametrize(("export", "ops"), EXPORTS.items())
def test_an_exports_core_is_what_its_attention_runs_between_the_products(export: str, ops: list[str]) -> None:
    ir = _ir(FIXTURES / "onnx" / export)
    blocks = {x.block.index for x in ir.layers if x.block is not None and x.block.index is not None}
    for index in blocks:
        core = [x.op_type for x in ir.layers if x.block and x.block.index == index and x.block.core]
        assert sorted(core) == sorted(ops), (export, index)
    # nothing outside the blocks' attention, no projection and no product is ever in a core
    for x in ir.layers:
        if x.block is not None and x.block.core:
            assert x.kind not in (Kind.MATMUL, Kind.LINEAR, Kind.NORM)
            assert x.block.part is not None


@pytest.mark.hf
def test_gpt_oss_sinks_are_inside_the_core() -> None:
    """gpt-oss's eager attention (transformers/models/gpt_oss/modeling_gpt_oss.py,
    eager_attention_forward): matmul, `* scaling`, the sink logits concatenated and the row's max
    subtracted, softmax, the sink column dropped, matmul. Its core: the scale, the max (which reads
    the sinks, a parameter of the attention), the subtraction and the softmax; a fused kernel with
    sinks (FlashAttention-3's, cuDNN's) runs them inside. The sinks' gradient is still an update."""
    ir = _ir(FIXTURES / "hf" / "gpt-oss-20b-echocog.json")
    core = [x for x in ir.layers if x.block is not None and x.block.index == 0 and x.block.core]
    assert sorted(x.op_type for x in core) == sorted(["mul", "max", "sub", "_softmax"])
    sinks = [x for x in core if x.params]
    assert [p.name.rsplit(".", 1)[-1] for x in sinks for p in x.params] == ["sinks"]
    flash, eager = _gpu("flash2"), _gpu("eager")
    for x in core:
        assert flash.times(x).forward == 0, x.name
        assert flash.times(x).input_grad == 0, x.name
        assert eager.times(x).forward > 0, x.name  # without the kernel: one over the scores each
    assert flash.times(sinks[0]).update > 0
