"""Build fixtures/onnx/bert_tiny_legacy.onnx and bert_tiny_ort_fused.onnx: a two-layer BERT
exported by PyTorch, then fused by onnxruntime's transformer optimizer, which is what optimum's
ORTOptimizer runs and what the "optimized" ONNX models on model hubs are: com.microsoft
EmbedLayerNormalization, Attention (one QKV weight), SkipLayerNormalization and BiasGelu.
onnx's shape inference has no rules for those ops. MANIFEST.json records PyTorch's own count.

Run in an environment with PyTorch, transformers and onnxruntime (torch 2.13.0 CPU,
transformers 5.24.0, onnxruntime 1.32.0 were used):
    pip install torch==2.13.0 transformers onnxruntime onnx && python tools/build_fused_attention_fixture.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import onnxruntime  # type: ignore[import-untyped]
import torch
import transformers
from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

HEADS, HIDDEN = 2, 64
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class Bert(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        config = transformers.BertConfig(
            hidden_size=HIDDEN,
            num_hidden_layers=2,
            num_attention_heads=HEADS,
            intermediate_size=4 * HIDDEN,
            vocab_size=1000,
            max_position_embeddings=128,
            attn_implementation="eager",  # the graph the optimizer's attention fusion matches
        )
        self.bert = transformers.BertModel(config, add_pooling_layer=False)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)[0]  # type: ignore[no-any-return]


def main() -> None:
    torch.manual_seed(2026)
    model = Bert().eval()
    with torch.no_grad():  # distinct values, so the exporter does not merge equal initializers
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.02 + 1.0)
    parameters = sum(p.numel() for p in model.parameters())
    args = (
        torch.randint(0, 1000, (1, 32)),
        torch.ones(1, 32, dtype=torch.int64),
        torch.zeros(1, 32, dtype=torch.int64),
    )
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "bert.onnx"
        torch.onnx.export(
            model,
            args,
            str(plain),
            dynamo=False,
            opset_version=17,
            input_names=list(INPUTS),
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in INPUTS},
        )
        fused = Path(tmp) / "fused.onnx"
        optimizer = optimize_model(str(plain), model_type="bert", num_heads=HEADS, hidden_size=HIDDEN)
        optimizer.save_model_to_file(str(fused))
        counts = {k: v for k, v in optimizer.get_fused_operator_statistics().items() if v}
        common = {"torch_parameters": parameters}
        record(
            "bert_tiny_legacy.onnx",
            plain.read_bytes(),
            {
                **common,
                "exporter": f"torch.onnx.export(dynamo=False, opset 17), torch {torch.__version__}",
                "note": "eager attention; the graph the fused file is made from",
            },
        )
        record(
            "bert_tiny_ort_fused.onnx",
            fused.read_bytes(),
            {
                **common,
                "exporter": f"onnxruntime {onnxruntime.__version__} transformers optimizer (model_type bert)",
                "fused_operators": counts,
                "note": "bert_tiny_legacy.onnx fused as optimum's ORTOptimizer does",
            },
        )


if __name__ == "__main__":
    main()
