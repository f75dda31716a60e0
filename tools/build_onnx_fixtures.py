"""Build fixtures/onnx/: small real PyTorch exports, stripped of weights, with PyTorch's own counts.

Where tests/test_extract.py builds graphs by hand, these files come out of the real exporters, both
of them: the TorchScript-based one (`dynamo=False`, behind most ONNX files in the wild) and the
torch.export-based one (`dynamo=True`, PyTorch's default since 2.9), so extraction is tested on what
exporters really write (Identity chains, Shape arithmetic, folded BatchNorm, LSTM weight packing,
fp16 tensors). MANIFEST.json records, per file, the exporter, the versions and what PyTorch itself
says about the model (parameter count), which the tests compare against.

Run with the same environment as tools/build_zoo.py:
    /work/export-venv/bin/python tools/build_onnx_fixtures.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx
import torch
import torchvision  # type: ignore[import-untyped]
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import MANIFEST, record, torch_built_with


class _Lstm(torch.nn.Module):
    """A two-layer bidirectional LSTM over 16-dim inputs, hidden 32, and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(16, 32, num_layers=2, bidirectional=True)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out)  # type: ignore[no-any-return]


def _tiny_gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=64, vocab_size=1000, n_positions=128, bos_token_id=0, eos_token_id=0
    )
    config.use_cache = False
    model = transformers.GPT2LMHeadModel(config)
    plain = type(model).forward

    def forward(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return plain(model, input_ids=ids, attention_mask=mask)[0]  # type: ignore[no-any-return]

    model.forward = forward  # type: ignore[method-assign]
    return model


_TOKENS = (torch.randint(0, 1000, (1, 32)), torch.ones(1, 32, dtype=torch.int64))
_TOKEN_DIMS: dict[str, list[int | str]] = {
    "input_ids": ["batch", "sequence"],
    "attention_mask": ["batch", "sequence"],
}

Case = tuple[
    str, Callable[[], torch.nn.Module], tuple[torch.Tensor, ...], dict[str, list[int | str]], bool, str
]

CASES: list[Case] = [
    # name, model, example inputs, input dims (str = dynamic), dynamo, note
    (
        "resnet18_legacy",
        lambda: torchvision.models.resnet18(),
        (torch.randn(1, 3, 224, 224),),
        {"input": ["batch", 3, 224, 224]},
        False,
        "train mode: BatchNormalization kept",
    ),
    (
        "resnet18_dynamo",
        lambda: torchvision.models.resnet18(),
        (torch.randn(1, 3, 224, 224),),
        {"input": ["batch", 3, 224, 224]},
        True,
        "eval mode: the exporter's optimizer folds BatchNorm into the convs",
    ),
    (
        "gpt2_tiny_legacy",
        _tiny_gpt2,
        _TOKENS,
        _TOKEN_DIMS,
        False,
        "tied LM head; Shape arithmetic for dynamic axes",
    ),
    ("gpt2_tiny_dynamo", _tiny_gpt2, _TOKENS, _TOKEN_DIMS, True, "tied LM head; torch.export graph"),
    (
        "lstm_legacy",
        _Lstm,
        (torch.randn(12, 2, 16),),
        {"input": ["sequence", "batch", 16]},
        False,
        "2-layer bidirectional LSTM",
    ),
    (
        "mobilenet_v3_small_fp16_legacy",
        lambda: torchvision.models.mobilenet_v3_small().half(),
        (torch.randn(1, 3, 224, 224).half(),),
        {"input": ["batch", 3, 224, 224]},
        False,
        "fp16 weights and activations",
    ),
]


def _export(
    name: str,
    model: torch.nn.Module,
    args: tuple[torch.Tensor, ...],
    dims: dict[str, list[int | str]],
    dynamo: bool,
    folder: Path,
) -> Path:
    path = folder / f"{name}.onnx"
    names = list(dims)
    if dynamo:
        model.eval()
        shapes = {
            f"arg{i}": {j: torch.export.Dim.AUTO for j, d in enumerate(dims[n]) if isinstance(d, str)}
            for i, n in enumerate(names)
        }
        program = torch.onnx.export(
            model, args, dynamo=True, input_names=names, dynamic_shapes=tuple(shapes.values()), optimize=True
        )
        assert program is not None
        program.save(str(path))
    else:
        model.train()
        axes = {n: {j: d for j, d in enumerate(dims[n]) if isinstance(d, str)} for n in names}
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=names,
            dynamic_axes=axes,
            training=torch.onnx.TrainingMode.PRESERVE,
            do_constant_folding=False,
        )
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, build, args, dims, dynamo, note in CASES:
            torch.manual_seed(0)
            model = build()
            with torch.no_grad():  # distinct values, so the exporter does not merge equal initializers
                for p in [*model.parameters(), *model.buffers()]:
                    if p.is_floating_point():
                        p.copy_(torch.randn_like(p) * 0.02 + 1.0)
            params = sum(p.numel() for p in model.parameters())
            full = _export(name, model, args, dims, dynamo, Path(tmp))
            data = full.read_bytes()
            external = sorted(Path(tmp).glob(f"{name}.onnx.data"))
            if external:  # the dynamo exporter may write weights beside the model: fold them back in
                data = onnx.load(str(full)).SerializeToString()
            record(
                f"{name}.onnx",
                data,
                {
                    "exporter": "torch.onnx.export(dynamo=True)"
                    if dynamo
                    else "torch.onnx.export(dynamo=False, opset 17)",
                    "inputs": dims,
                    "torch_parameters": params,
                    "note": note,
                },
            )
            print(f"{name}: torch says {params:,} parameters", flush=True)
    manifest = json.loads(MANIFEST.read_text())
    manifest["built_with"] = torch_built_with("tools/build_onnx_fixtures.py")
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
