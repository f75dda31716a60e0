"""Build fixtures/onnx/llama_tiny_dynamo.onnx and llama_tiny_legacy.onnx: transformers' Llama at its
test suite's configuration, exported by both of PyTorch's exporters, to hold what each writes
about a buffer. The model registers RoPE's `inv_freq` as a buffer (LlamaRotaryEmbedding,
persistent=False), not a parameter. And buffers_dynamo.onnx: a linear layer beside a persistent
buffer, a non-persistent one and a constant tensor, the three kinds that are not parameters.

torch.onnx.export(dynamo=True) writes each initializer's torch.export input kind in the
metadata_props of its graph value_info ("pkg.torch.export.graph_signature.InputSpec.kind":
PARAMETER, BUFFER or CONSTANT_TENSOR, from torch/onnx/_internal/exporter/_core.py); the
TorchScript exporter (dynamo=False) writes none. MANIFEST.json records torch's own parameter
count (`sum(p.numel() for p in model.parameters())`) and its buffers' elements, and the kinds
the dynamo file carries, which tests/test_exports.py holds extraction to.

The configuration is CausalLMModelTester's (transformers tests/causal_lm_tester.py, __init__'s
defaults, which LlamaModelTester keeps): vocab 99, hidden 32, 2 layers, 2 heads and 2 key/value
heads, MLP 37, gelu, 512 positions, untied embeddings.

Run in an environment with PyTorch, transformers and onnxscript (torch 2.13.0 CPU, transformers
5.25.0, onnxscript 0.7.2 were used), the checkout on PYTHONPATH:
    PYTHONPATH=. /work/venv-hf/bin/python tools/build_buffer_fixture.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import onnx
import onnxscript  # type: ignore[import-not-found]
import torch
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"
NAMES = ("input_ids", "attention_mask")
DIMS: dict[str, list[int | str]] = {name: ["batch", "sequence"] for name in NAMES}


class Logits(torch.nn.Module):
    """The causal LM's logits from token ids and a mask: no cache (a training step's forward)."""

    def __init__(self) -> None:
        super().__init__()
        config = transformers.LlamaConfig(
            vocab_size=99,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            intermediate_size=37,
            hidden_act="gelu",
            max_position_embeddings=512,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            tie_word_embeddings=False,
        )
        self.model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="eager")

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, attention_mask=mask, use_cache=False).logits  # type: ignore[no-any-return]


class Held(torch.nn.Module):
    """A linear layer whose output is scaled by a persistent buffer, shifted by a non-persistent
    one and by a plain tensor attribute (torch.export lifts it as a CONSTANT_TENSOR)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 24)
        self.register_buffer("scale", torch.rand(24) + 0.5)
        self.register_buffer("shift", torch.rand(24), persistent=False)
        self.offset = torch.rand(24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + self.shift + self.offset  # type: ignore[no-any-return]


def _dynamo(
    model: torch.nn.Module, args: tuple[torch.Tensor, ...], names: tuple[str, ...], folder: Path
) -> bytes:
    """The file torch.onnx.export(dynamo=True) writes, its first two axes dynamic, weights inside."""
    path = folder / "dynamo.onnx"
    shapes = tuple({0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO} for _ in names)
    program = torch.onnx.export(model, args, dynamo=True, input_names=list(names), dynamic_shapes=shapes)
    assert program is not None
    program.save(str(path))
    return onnx.load(str(path)).SerializeToString()  # weights written beside it folded back in


def _kinds(data: bytes) -> dict[str, list[str]]:
    """The initializers of each export kind, as the file carries them."""
    model = onnx.load_from_string(data)
    initializers = {t.name for t in model.graph.initializer}
    kinds: dict[str, list[str]] = {}
    for v in model.graph.value_info:
        for p in v.metadata_props:
            if p.key == KIND and v.name in initializers:
                kinds.setdefault(p.value, []).append(v.name)
    return {kind: sorted(names) for kind, names in kinds.items()}


def main() -> None:
    torch.manual_seed(2026)
    model = Logits().eval()
    with torch.no_grad():  # distinct values, so the exporter does not merge equal initializers
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.02 + 1.0)
    parameters = sum(p.numel() for p in model.parameters())
    buffers = {name: p.numel() for name, p in model.named_buffers()}
    args = (torch.randint(3, 99, (1, 16)), torch.ones(1, 16, dtype=torch.int64))
    common = {"torch_parameters": parameters, "torch_buffer_elements": buffers, "inputs": DIMS}
    with tempfile.TemporaryDirectory() as tmp:
        data = _dynamo(model, args, NAMES, Path(tmp))
        record(
            "llama_tiny_dynamo.onnx",
            data,
            {
                **common,
                "exporter": f"torch.onnx.export(dynamo=True), torch {torch.__version__}, "
                f"onnxscript {onnxscript.__version__}, transformers {transformers.__version__}",
                "export_kinds": _kinds(data),
                "note": "RoPE's inv_freq a BUFFER; the optimizer's folded weights unmarked",
            },
        )
        legacy = Path(tmp) / "legacy.onnx"
        torch.onnx.export(
            model,
            args,
            str(legacy),
            dynamo=False,
            opset_version=17,
            input_names=list(NAMES),
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in NAMES},
        )
        record(
            "llama_tiny_legacy.onnx",
            legacy.read_bytes(),
            {
                **common,
                "exporter": f"torch.onnx.export(dynamo=False, opset 17), torch {torch.__version__}, "
                f"transformers {transformers.__version__}",
                "note": "no export kinds: RoPE's inv_freq an initializer like any weight",
            },
        )
        held = Held().eval()
        data = _dynamo(held, (torch.randn(2, 8, 16),), ("input",), Path(tmp))
        record(
            "buffers_dynamo.onnx",
            data,
            {
                "exporter": f"torch.onnx.export(dynamo=True), torch {torch.__version__}, "
                f"onnxscript {onnxscript.__version__}",
                "export_kinds": _kinds(data),
                "inputs": {"input": ["batch", "sequence", 16]},
                "note": "a persistent and a non-persistent buffer, a constant tensor",
                "torch_buffer_elements": {name: p.numel() for name, p in held.named_buffers()},
                "torch_constant_elements": {"offset": held.offset.numel()},
                "torch_parameters": sum(p.numel() for p in held.parameters()),
            },
        )


if __name__ == "__main__":
    main()
