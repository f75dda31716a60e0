"""What every fixture build script does with the file its exporter wrote: strip the weight payloads
(names, dtypes and dims are kept, so parameter counts and shapes survive), write it to
fixtures/onnx/ and record in MANIFEST.json how it was made and what the framework itself says
about the model, which the tests compare against.

Each build script runs in the environment of its own exporter (they cannot share one: tf2onnx pins
protobuf 3, paddle2onnx wants protobuf 6); modtrans's stripper (extraction/wire.py) needs nothing
but the standard library, so it is loaded from this checkout by path, with no install.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "onnx"
MANIFEST = OUT / "MANIFEST.json"


def torch_built_with(script: str, **extra: str) -> dict[str, str]:
    """The `built_with` record of a build run in the torch environment (build_onnx_fixtures.py,
    build_zoo.py): the versions of everything that shaped its files, `extra` and the script."""
    import onnx
    import torch
    import torchvision  # type: ignore[import-untyped]
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        **extra,
        "script": script,
    }


def record(name: str, data: bytes, entry: dict[str, Any]) -> None:
    """Write `data` (a serialized ModelProto) stripped as fixtures/onnx/NAME and merge `entry`
    into MANIFEST.json's files, with its byte size, the Python that built it and its inputs' dims
    as the file declares them (a name for each symbolic one)."""
    import onnx  # every exporter's environment has it, each its own version

    model = onnx.load_from_string(data)
    initializers = {t.name for t in model.graph.initializer}
    entry.setdefault(
        "inputs",
        {
            i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input
            if i.name not in initializers
        },
    )
    spec = importlib.util.spec_from_file_location("wire", ROOT / "modtrans" / "extraction" / "wire.py")
    assert spec is not None
    assert spec.loader is not None
    wire = sys.modules["wire"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(wire)
    stripped = wire.strip_bytes(data, keep_bytes=64).data
    (OUT / name).write_bytes(stripped)
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {"files": {}}
    manifest["files"][name] = {**entry, "bytes": len(stripped), "python": platform.python_version()}
    MANIFEST.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"{name}: {len(data):,} -> {len(stripped):,} bytes", flush=True)
