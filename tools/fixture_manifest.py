"""What every fixture build script does with the file its exporter wrote: strip the weight payloads
(names, dtypes and dims are kept, so parameter counts and shapes survive), write it to
fixtures/onnx/ and record in MANIFEST.json how it was made and what the framework itself says
about the model, which the tests compare against.

Each build script runs in the environment of its own exporter (they cannot share one: tf2onnx pins
protobuf 3, paddle2onnx wants protobuf 6); modtrans's stripper (extraction/wire.py) needs nothing
but the standard library and modtrans/dtypes.py, so it is loaded from this checkout by path, with
no install (run the script with the checkout on PYTHONPATH).

`onnxruntime_shapes` and `record_shapes` write the shape of every tensor when onnxruntime runs
the exported file, next to the fixture (NAME.shapes.json): what the tests compare ModTrans's
inferred shapes with.
"""

from __future__ import annotations

import importlib.util
import json
import platform
import re
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


def onnxruntime_shapes(data: bytes, feeds: dict[str, Any]) -> dict[str, list[int]]:
    """The shape of every tensor of the model `data` (a serialized ModelProto, weights and all)
    when onnxruntime runs it on `feeds` (input name -> numpy array): the independent truth the
    tests hold ModTrans's inferred shapes to. An If is first replaced by the branch these feeds
    take (onnxruntime evaluates its condition), again and again, so that the tensors inside the
    branch that runs are graph values too; the branch not taken has no shapes in this run."""
    import onnx

    model = onnx.load_from_string(data)
    while True:
        node = next((n for n in model.graph.node if n.op_type == "If"), None)
        if node is None:
            break
        (condition,) = _run(model, feeds, [node.input[0]]).values()
        branch = next(
            a.g for a in node.attribute if a.name == ("then_branch" if bool(condition) else "else_branch")
        )
        nodes = []
        for n in model.graph.node:
            if n is not node:
                nodes.append(n)
                continue
            nodes.extend(branch.node)
            model.graph.initializer.extend(branch.initializer)
            nodes.extend(
                onnx.helper.make_node("Identity", [inner.name], [outer])
                for inner, outer in zip(branch.output, node.output, strict=True)
            )
        del model.graph.node[:]
        model.graph.node.extend(nodes)
    names = [o for n in model.graph.node for o in n.output if o]
    values = _run(model, feeds, names)
    return {name: [int(d) for d in value.shape] for name, value in values.items()}


def _run(model: Any, feeds: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """`names` computed by onnxruntime from `feeds`, each made a graph output."""
    import onnx
    import onnxruntime  # type: ignore[import-not-found]

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    declared = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=n) for n in dict.fromkeys(names) if n not in declared)
    session = onnxruntime.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    wanted = list(dict.fromkeys(names))
    return dict(zip(wanted, session.run(wanted, feeds), strict=True))


def record_shapes(name: str, runs: list[tuple[dict[str, Any], dict[str, list[int]]]]) -> str:
    """Write fixtures/onnx/NAME.shapes.json: for each run, its inputs' shapes (and the values of
    scalar inputs) and every tensor's shape from onnxruntime_shapes. Returns the file's name,
    for the MANIFEST entry."""
    import onnxruntime

    out = OUT / (Path(name).stem + ".shapes.json")
    document = {
        "tool": f"onnxruntime {onnxruntime.__version__}",
        "runs": [
            {
                "inputs": {
                    k: {"shape": list(v.shape), **({"value": v.tolist()} if v.ndim == 0 else {})}
                    for k, v in feeds.items()
                },
                "tensors": dict(sorted(shapes.items())),
            }
            for feeds, shapes in runs
        ],
    }
    text = json.dumps(document, indent=1, sort_keys=True)
    # one line per tensor: each innermost list on one line
    out.write_text(re.sub(r"\[[^\[\]{}]*\]", lambda m: json.dumps(json.loads(m.group(0))), text) + "\n")
    return out.name
