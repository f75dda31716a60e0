"""Build the architecture-only ONNX files shipped in modtrans/zoo/ (run by hand, not at install).

Each model is built from its canonical public definition (torchvision, transformers) with random
weights, exported with PyTorch's TorchScript-based ONNX exporter (the one behind most ONNX files in
the wild: node names like /layer1/layer1.0/conv1/Conv, BatchNormalization kept), and then stripped
of weight bytes by modtrans's own reader (modtrans/extraction/wire.py): every initializer keeps its
name, dtype and dims. The result is a few kilobytes per model. modtrans/zoo/manifest.json records the
versions of everything involved and each file's SHA-256.

Needs torch, torchvision, transformers and onnx in the running environment (not modtrans
dependencies). On these machines:

    python -m venv /work/export-venv
    /work/export-venv/bin/pip install torch==2.14.1 torchvision==0.29.1 onnx onnxscript transformers
    /work/export-venv/bin/pip install -e .
    /work/export-venv/bin/python tools/build_zoo.py

Parameters and buffers are refilled with random values before export: the exporter deduplicates
initializers with equal contents, so a freshly initialised network (every BatchNorm weight 1, bias
0) would come out with BatchNorm tensors replaced by Identity nodes of each other, which a trained
model never shows.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import torch
import torchvision  # type: ignore[import-untyped]
import transformers
from fixture_manifest import torch_built_with

from modtrans.extraction.wire import strip_bytes

ZOO = Path(__file__).resolve().parent.parent / "modtrans" / "zoo"
OPSET = 17
KEEP_BYTES = 64  # shape operands (int64 x 8) keep their values; every parameter is stripped


@dataclass(frozen=True)
class Entry:
    name: str
    source: str
    description: str
    build: Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]
    inputs: dict[str, list[int | str]]  # exported input names and their dims (str = dynamic)
    defaults: dict[str, int]  # default sizes of the dynamic dims
    outputs: list[str]


def _vision(factory: str) -> Callable[[], tuple[torch.nn.Module, tuple[torch.Tensor, ...]]]:
    def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
        model = getattr(torchvision.models, factory)(weights=None)
        return model, (torch.randn(1, 3, 224, 224),)

    return build


def _bert() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    config = transformers.BertConfig()  # the defaults are bert-base-uncased: 12 layers, 768 hidden
    model = transformers.BertModel(config, add_pooling_layer=True)
    ids = torch.randint(0, config.vocab_size, (1, 128))
    return _first_output(model), (ids, torch.ones(1, 128, dtype=torch.int64))


def _gpt2() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    config = transformers.GPT2Config()  # the defaults are gpt2 (124M): 12 layers, 768 hidden
    config.use_cache = False
    model = transformers.GPT2LMHeadModel(config)  # lm_head is tied to the token embedding
    ids = torch.randint(0, config.vocab_size, (1, 128))
    return _first_output(model), (ids, torch.ones(1, 128, dtype=torch.int64))


def _first_output(model: torch.nn.Module) -> torch.nn.Module:
    """Make forward(ids, mask) return a plain tensor, without a wrapper module (whose attribute
    name would prefix every node and initializer name)."""
    plain = type(model).forward

    def forward(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return plain(model, input_ids=ids, attention_mask=mask)[0]  # type: ignore[no-any-return]

    model.forward = forward  # type: ignore[method-assign]
    return model


_IMAGE: dict[str, list[int | str]] = {"input": ["batch", 3, 224, 224]}
_TOKENS: dict[str, list[int | str]] = {
    "input_ids": ["batch", "sequence"],
    "attention_mask": ["batch", "sequence"],
}

ENTRIES = [
    Entry(
        "resnet50",
        "torchvision.models.resnet50",
        "ResNet-50 v1.5 (stride on the 3x3 conv), ImageNet",
        _vision("resnet50"),
        _IMAGE,
        {"batch": 1},
        ["logits"],
    ),
    Entry(
        "vgg16",
        "torchvision.models.vgg16",
        "VGG-16 (configuration D), ImageNet",
        _vision("vgg16"),
        _IMAGE,
        {"batch": 1},
        ["logits"],
    ),
    Entry(
        "vgg19",
        "torchvision.models.vgg19",
        "VGG-19 (configuration E), ImageNet",
        _vision("vgg19"),
        _IMAGE,
        {"batch": 1},
        ["logits"],
    ),
    Entry(
        "mobilenet_v2",
        "torchvision.models.mobilenet_v2",
        "MobileNetV2 (depthwise convolutions), ImageNet",
        _vision("mobilenet_v2"),
        _IMAGE,
        {"batch": 1},
        ["logits"],
    ),
    Entry(
        "bert-base",
        "transformers.BertModel(BertConfig())",
        "BERT-base encoder, uncased vocab (last hidden state; pooler unused, not exported)",
        _bert,
        _TOKENS,
        {"batch": 1, "sequence": 128},
        ["hidden"],
    ),
    Entry(
        "gpt2",
        "transformers.GPT2LMHeadModel(GPT2Config())",
        "GPT-2 small (124M) with tied LM head",
        _gpt2,
        _TOKENS,
        {"batch": 1, "sequence": 128},
        ["logits"],
    ),
]


def _randomise(model: torch.nn.Module) -> None:
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.is_floating_point():
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.02 + 1.0)


def export(entry: Entry, folder: Path) -> Path:
    model, args = entry.build()
    _randomise(model)
    model.train()  # keeps BatchNormalization as its own node (eval mode fuses it into the conv)
    names = list(entry.inputs)
    dynamic = {
        name: {i: dim for i, dim in enumerate(dims) if isinstance(dim, str)}
        for name, dims in {**entry.inputs, **{o: ["batch"] for o in entry.outputs}}.items()
    }
    target = folder / f"{entry.name}.full.onnx"
    torch.onnx.export(
        model,
        args,
        str(target),
        dynamo=False,
        opset_version=OPSET,
        training=torch.onnx.TrainingMode.PRESERVE,
        do_constant_folding=False,
        input_names=names,
        output_names=entry.outputs,
        dynamic_axes=dynamic,
    )
    return target


def strip(full: Path, entry: Entry) -> tuple[bytes, int]:
    stripped = strip_bytes(full.read_bytes(), keep_bytes=KEEP_BYTES)
    model = onnx.ModelProto.FromString(stripped.data)
    for key, value in {
        "modtrans.architecture_only": "true",
        "modtrans.source": entry.source,
    }.items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))
    return model.SerializeToString(), stripped.skipped_bytes


def main() -> None:
    only = set(sys.argv[1:])
    ZOO.mkdir(parents=True, exist_ok=True)
    manifest_path = ZOO / "manifest.json"
    manifest: dict[str, Any] = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    models = manifest.setdefault("models", {})
    manifest["built_with"] = torch_built_with(
        "tools/build_zoo.py",
        exporter=f"torch.onnx.export(dynamo=False, opset_version={OPSET}, training=PRESERVE, train mode)",
    )
    with tempfile.TemporaryDirectory() as tmp:
        for entry in ENTRIES:
            if only and entry.name not in only:
                continue
            full = export(entry, Path(tmp))
            data, skipped = strip(full, entry)
            (ZOO / f"{entry.name}.onnx").write_bytes(data)
            models[entry.name] = {
                "file": f"{entry.name}.onnx",
                "source": entry.source,
                "description": entry.description,
                "inputs": entry.inputs,
                "defaults": entry.defaults,
                "sha256": hashlib.sha256(data).hexdigest(),
                "bytes": len(data),
                "weight_bytes_stripped": skipped,
            }
            print(f"{entry.name}: {full.stat().st_size:,} -> {len(data):,} bytes", flush=True)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
