"""ONNX -> IR. Named `extract` so it does not read like the `onnx` package it wraps.

    ir, diagnostics = extract(Path("resnet50.onnx"), batch=8)

Steps: wire.py (file -> bytes without weights), load.py (onnx parse, inputs, checker, shape
inference within a memory budget), fold.py, scopes.py, arith.py and shapes.py (the shapes
inference cannot see by itself), graph.py (graph -> layers), buffers.py (the initializers a torch.export
file marks as buffers or constants: not trained), structure.py (each layer's block
from its module path), loops.py (Loop / Scan trip counts), whiles.py (a while loop driven by
counters, run to its trip count), ops/ (op -> FLOPs, GEMM, parameter
roles, by family), moe.py (mixtures of experts).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from modtrans._version import __version__
from modtrans.diagnostics import Diagnostic, diagnostic, has_errors
from modtrans.digest import Digest
from modtrans.extraction import buffers, fold, load, moe, shapes, structure
from modtrans.extraction.graph import Walker
from modtrans.ir.document import ModelIR, Provenance


def extract(
    path: Path,
    *,
    batch: int | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    input_values: Mapping[str, float] | None = None,
    display_name: str | None = None,
    file_hash: bool = True,
    digest: Digest | None = None,
    full_hash: bool = False,
    defaults: Mapping[str, int] | None = None,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """The IR of the ONNX model at `path`, or None when the model cannot be read (see diagnostics).
    The provenance identifies the file by its SHA-256, or above 64 MiB by a sampled digest unless
    `full_hash` (modtrans/digest.py); `digest`: one already running. `input_values`: scalar
    inputs taken as constants (load.apply_values), so that an If on their value folds;
    `defaults`: sizes of the inputs' named dimensions that nothing else sets (a built-in's)."""
    if digest is None and file_hash:
        digest = Digest(path, full=full_hash)
    inputs = load.Inputs(batch, input_shapes or {}, input_values or {}, defaults or {})
    ir, found = _extract_file(path, inputs, display_name, digest)
    if display_name is None:
        return ir, found
    # A built-in or fetched model is named by its name, never by the packaged file's path.
    inside = str(path)
    return ir, [dataclasses.replace(d, path=display_name) if d.path == inside else d for d in found]


def _extract_file(
    path: Path, inputs: load.Inputs, display_name: str | None, digest: Digest | None
) -> tuple[ModelIR | None, list[Diagnostic]]:
    where = str(path)
    loaded, found = load.read(path, file_hash=False, digest=digest)
    if loaded is None or has_errors(found):
        return None, found
    try:
        return _extract(loaded, found, path, inputs, display_name)
    except Exception as error:  # a corrupt file whose fields are not what the ONNX spec says
        detail = " ".join(str(error).split())[:200]
        message = f"not a well-formed ONNX model: {type(error).__name__}: {detail}"
        return None, [*found, diagnostic("F004", message, path=where)]


def _with_input_hint(found: list[Diagnostic], inputs: Mapping[str, tuple[object, ...]]) -> list[Diagnostic]:
    """X504 says which model inputs are symbolic and gives an --input-shape to paste."""
    symbolic = {name: dims for name, dims in inputs.items() if any(isinstance(d, str) for d in dims)}
    if symbolic:
        named = "; ".join(f"{name} [{', '.join(map(str, dims))}]" for name, dims in symbolic.items())
        paste = " ".join(f"--input-shape {name}=" + _guess(dims) for name, dims in symbolic.items())
        hint = f"symbolic model inputs: {named}; for example {paste}"
    else:
        fixed = " ".join(f"{n}=" + "x".join(map(str, dims)) for n, dims in inputs.items())
        hint = f"every model input is fixed ({fixed}): an operator's output shape is beyond shape inference"
    return [dataclasses.replace(d, hint=hint) if d.code == "X504" else d for d in found]


def _guess(dims: tuple[object, ...]) -> str:
    """A shape to paste for an input: 1 on the axis --batch would set (load.batch_axis), 128 on
    every other symbolic dim (a height of 1 would make an image model's pooling meaningless)."""
    spelled = [d if isinstance(d, int) else str(d) for d in dims]
    batch = load.batch_axis(spelled)
    sizes = (d if isinstance(d, int) else 1 if i == batch else 128 for i, d in enumerate(spelled))
    return "x".join(map(str, sizes))


def _extract(
    loaded: load.Loaded,
    found: list[Diagnostic],
    path: Path,
    inputs: load.Inputs,
    display_name: str | None,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    where = str(path)
    found = found + load.apply_inputs(loaded, inputs.batch, inputs.shapes, where, inputs.defaults)
    found += load.apply_values(loaded, inputs.values, where)
    if has_errors(found):
        return None, found
    found += load.check_structure(loaded.model, where)
    inference = load.Inference()
    with shapes.contrib_rules(loaded.model):  # onnx's inference, knowing onnxruntime's fused ops
        inferred, problems = load.infer_shapes(loaded.model, where, inference)
        found += problems
        inferred, unsettled = fold.fold(inferred, inference, where)
        found += unsettled + inference.problems(where)
    walker = Walker(where)
    walker.opsets = {
        ("" if o.domain == "ai.onnx" else o.domain): o.version for o in loaded.model.opset_import
    }
    walker.untrained = buffers.untrained(loaded.model)
    walker.walk(inferred.graph)
    layers, diagnostics = moe.mark(walker.layers, walker.top_k, walker.diagnostics, where)
    layers = structure.mark(layers)
    found += _with_input_hint(diagnostics, loaded.input_shapes)
    m = loaded.model
    whole, samples = loaded.hashes
    provenance = Provenance(
        file=display_name or path.name,
        sha256=whole,
        size=loaded.size,
        producer=m.producer_name,
        producer_version=m.producer_version,
        ir_version=m.ir_version,
        opset={o.domain: o.version for o in m.opset_import},
        graph=m.graph.name,
        batch=inputs.batch,
        input_shapes=loaded.input_shapes,
        tool=f"modtrans {__version__}",
        architecture_only=loaded.architecture_only,
        sampled_sha256=samples,
    )
    return ModelIR(provenance, tuple(layers)), found
