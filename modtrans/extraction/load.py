"""Extraction, step 0b: an ONNX file -> a weight-free ModelProto with inferred shapes.

Reads the file through wire.strip_file (weight bytes are never copied), parses the remaining
kilobytes with onnx, applies `--batch` / `--input-shape` to the graph inputs (and
input values, which make scalar inputs constants), runs onnx's checker on
the structure and its shape inference (data propagation on, so Reshape targets computed from Shape
nodes resolve). External data is never opened; its locations are only checked for escaping the
model's folder.
"""

from __future__ import annotations

import contextlib
import math
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import NamedTuple

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from modtrans import dtypes, limits
from modtrans.diagnostics import Diagnostic, Severity, diagnostic
from modtrans.digest import Digest
from modtrans.extraction import wire
from modtrans.extraction.graph import MAX_BYTES, graphs, tensors
from modtrans.ir.document import Dim


@dataclass
class Loaded:
    model: onnx.ModelProto
    digest: Digest | None
    size: int
    stripped: dict[str, int]
    input_shapes: dict[str, tuple[Dim, ...]] = field(default_factory=dict)

    @property
    def hashes(self) -> tuple[str | None, str | None]:
        """(SHA-256 of the whole file, sampled digest): see modtrans/digest.py."""
        return self.digest.result() if self.digest is not None else (None, None)

    @property
    def architecture_only(self) -> bool:
        """True when the file itself had no weight bytes (a built-in, or already stripped)."""
        return not self.stripped and any(
            e.value == wire.STRIPPED_LOCATION for t in tensors(self.model.graph) for e in t.external_data
        )


def read(
    path: Path, *, file_hash: bool = True, digest: Digest | None = None
) -> tuple[Loaded | None, list[Diagnostic]]:
    """Parse `path` without its weight bytes. F001/F004 when the file is not a readable model."""
    where = str(path)
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block open(); a device has no end
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            return None, [diagnostic("F001", f"cannot read: {kind}", path=where)]
        stripped = wire.strip_file(path)
        size = info.st_size
    except (FileNotFoundError, IsADirectoryError, PermissionError) as error:
        return None, [diagnostic("F001", f"cannot open: {error.strerror or error}", path=where)]
    except OSError as error:
        return None, [diagnostic("F001", f"cannot read: {error}", path=where)]
    except wire.WireError as error:
        return None, [diagnostic("F004", _not_onnx(path, info.st_size, error), path=where)]
    if digest is None and file_hash:
        digest = Digest(path)  # hashes while the rest parses and extracts
    try:
        model = onnx.ModelProto.FromString(stripped.data)
    except (DecodeError, RuntimeError) as error:
        return None, [diagnostic("F004", f"not an ONNX model: {error}", path=where)]
    if not model.HasField("graph") or not model.opset_import:
        return None, [diagnostic("F004", "not an ONNX model: no graph or no opset_import", path=where)]
    try:
        problems = _check_tensors(model, path)
    except Exception as error:  # fields of the wrong kind in a corrupt file
        return None, [diagnostic("F004", f"not a well-formed ONNX model: {type(error).__name__}", path=where)]
    _one_declaration(model)
    _free_unknown_dims(model)
    return Loaded(model, digest, size, stripped.tensors), problems


def _one_declaration(model: onnx.ModelProto) -> None:
    """Drop each value_info entry that declares one of its graph's own inputs or outputs again.
    ONNX keeps value_info for the values that are neither (docs/IR.md, Graphs), but onnxruntime's
    symbolic_shape_infer.py writes the outputs there too, with dims it could not compute
    (`ConvTranspose_459_o0__d0` in rapidocr's PP-OCRv6_det_small.onnx). onnx's inference then
    updates the output and leaves the copy, and a reader meets two shapes for one value; with
    one declaration, --input-shape and inference decide it."""
    for graph in graphs(model.graph):
        own = {v.name for v in (*graph.input, *graph.output)}
        if any(v.name in own for v in graph.value_info):
            kept = [v for v in graph.value_info if v.name not in own]
            del graph.value_info[:]
            graph.value_info.extend(kept)


def _free_unknown_dims(model: onnx.ModelProto) -> None:
    """Make each dimension a file declares as a negative dim_value free (neither value nor name),
    in every graph's inputs, outputs and value_info. Old paddle2onnx writes an unknown size as
    dim_value -1 (rapidocr-onnxruntime 1.2.3's PP-OCRv3 files); ONNX's IR says a dim_value is a
    size and an unknown one has none (docs/IR.md, Tensor shapes), so onnx's shape inference then
    refuses the size it infers as contradicting -1 (X503), a guessed input shape reads
    `-1x3x...`, and FLOPs counted on it turn negative."""
    for graph in graphs(model.graph):
        for info in (*graph.input, *graph.output, *graph.value_info):
            _free_in(info.type)


def _free_in(proto: onnx.TypeProto) -> None:
    kind = proto.WhichOneof("value")
    if kind == "tensor_type" or kind == "sparse_tensor_type":
        for d in getattr(proto, kind).shape.dim:
            if d.HasField("dim_value") and d.dim_value < 0:
                d.ClearField("dim_value")
    elif kind in ("sequence_type", "optional_type"):
        _free_in(getattr(proto, kind).elem_type)
    elif kind == "map_type":
        _free_in(proto.map_type.value_type)


def _not_onnx(path: Path, size: int, error: wire.WireError) -> str:
    """Why a file is not an ONNX model, in words: another kind of file, or truncated."""
    from modtrans.fileio import what_is

    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return f"not an ONNX model: {error}"
    kind = what_is(head)
    if kind is not None:
        return f"this is {kind}, not an ONNX model"
    if "past the end" in str(error):
        return f"truncated: the file ends at byte {size} inside a field ({error})"
    return f"not an ONNX model: {error}"


def _check_tensors(model: onnx.ModelProto, path: Path) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    for t in tensors(model.graph):
        if any(d < 0 for d in t.dims) or dtypes.size_bytes(math.prod(t.dims), t.data_type) > MAX_BYTES:
            found.append(diagnostic("X507", f"tensor {t.name!r} has dims {list(t.dims)}", path=str(path)))
        for entry in t.external_data:
            if entry.key == "location" and entry.value != wire.STRIPPED_LOCATION and _escapes(entry.value):
                found.append(
                    diagnostic(
                        "X506",
                        f"tensor {t.name!r} points at external data {entry.value!r}",
                        path=str(path),
                        hint="external data must be a relative path inside the model's folder",
                    )
                )
    return found


def _escapes(location: str | bytes) -> bool:
    if not isinstance(location, str):  # protobuf hands back bytes for a location that is not UTF-8
        return True
    for flavour in (PurePosixPath(location), PureWindowsPath(location)):
        if flavour.is_absolute() or flavour.drive or flavour.anchor:
            return True
    normal = os.path.normpath(location.replace("\\", "/"))
    return normal == ".." or normal.startswith(("../", "/"))


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The graph's real inputs (old exporters also list every initializer as an input)."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


class Inputs(NamedTuple):
    """What a caller says of a graph's inputs: --batch, --input-shape, --input-value, and the sizes
    of named dimensions nothing else sets (a built-in's defaults: zoo.Entry.defaults)."""

    batch: int | None
    shapes: Mapping[str, tuple[int, ...]]
    values: Mapping[str, float]
    defaults: Mapping[str, int]


def apply_inputs(
    loaded: Loaded,
    batch: int | None,
    shapes: Mapping[str, tuple[int, ...]],
    path: str,
    defaults: Mapping[str, int] | None = None,
) -> list[Diagnostic]:
    """Fix the graph inputs' dims, in this order: --input-shape (whole shapes; the names of their
    dims bound to those sizes for every other input: _bind), --batch (the batch axis of each input
    not given, when still symbolic: batch_axis), then `defaults` (a built-in's sizes of the named
    dims left: zoo.Entry.defaults). A batch that a given shape contradicts is refused (X501)."""
    inputs = {i.name: i for i in graph_inputs(loaded.model)}
    too_large = limits.input_error(batch, shapes)
    if too_large:
        return [diagnostic("X501", too_large, path=path)]
    recurrent = _sequence_first(loaded.model)
    clash = _batch_clash(inputs, batch, shapes, recurrent)
    if clash:
        return [diagnostic("X501", clash, path=path)]
    found = _given(inputs, shapes, path)
    for name, info in inputs.items():
        if batch is not None and name not in shapes:
            found += _batched(name, info, batch, name in recurrent, path)
        _bind({name: info}, shapes, defaults or {})
        loaded.input_shapes[name] = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
            for d in info.type.tensor_type.shape.dim
        )
    return found


def _given(
    inputs: Mapping[str, onnx.ValueInfoProto], shapes: Mapping[str, tuple[int, ...]], path: str
) -> list[Diagnostic]:
    """Each --input-shape set whole, and the names of its dims bound in the inputs not given."""
    found: list[Diagnostic] = []
    names = ", ".join(inputs) or "(none)"
    bound: dict[str, int] = {}  # a named dimension -> its size in a shape given
    for name, dims in shapes.items():
        info = inputs.get(name)
        if info is None:
            found.append(
                diagnostic("X501", f"--input-shape names {name!r}; the graph's inputs are {names}", path=path)
            )
            continue
        current = info.type.tensor_type.shape.dim
        if current and len(current) != len(dims):
            found.append(
                diagnostic(
                    "X501",
                    f"--input-shape {name} gives {len(dims)} dims; the input has {len(current)}",
                    path=path,
                )
            )
            continue
        for dim, size in zip(current, dims, strict=False):
            if dim.dim_param:
                bound.setdefault(dim.dim_param, size)
        del info.type.tensor_type.shape.dim[:]
        for d in dims:
            info.type.tensor_type.shape.dim.add().dim_value = d
    _bind(inputs, shapes, bound)
    return found


def _batched(
    name: str, info: onnx.ValueInfoProto, batch: int, recurrent: bool, path: str
) -> list[Diagnostic]:
    """--batch on the input's batch axis (batch_axis) when it is still symbolic; X512 says so when
    that axis is not the first."""
    declared = info.type.tensor_type.shape.dim
    axis = batch_axis(_spelled(declared), recurrent)
    if axis is None:
        return []
    spelled = [
        d.dim_param or (f"fixed at {d.dim_value}" if d.HasField("dim_value") else "unnamed") for d in declared
    ]
    declared[axis].dim_value = batch
    if axis == 0:
        return []
    why = "a sequence-first recurrent input" if recurrent else spelled[0]
    message = f"--batch {batch} set input {name!r} dimension {axis} ({spelled[axis]}), not 0 ({why})"
    return [diagnostic("X512", message, path=path)]


def _batch_clash(
    inputs: Mapping[str, onnx.ValueInfoProto],
    batch: int | None,
    shapes: Mapping[str, tuple[int, ...]],
    recurrent: set[str],
) -> str | None:
    """Why the batch and a shape given disagree: the size the shape gives on the axis the batch
    would set (batch_axis), where that axis is symbolic. None: they agree, or one is not given."""
    if batch is None:
        return None
    for name, dims in shapes.items():
        info = inputs.get(name)
        declared = [] if info is None else list(info.type.tensor_type.shape.dim)
        if len(declared) != len(dims):
            continue  # refused below with its own reason
        spelled = _spelled(declared)
        axis = batch_axis(spelled, name in recurrent)
        if axis is not None and dims[axis] != batch:
            shape = "x".join(map(str, dims))
            return (
                f"the batch {batch} (--batch, or --micro-batch under a layout) and --input-shape "
                f"{name}={shape} give dimension {axis} ({spelled[axis] or 'unnamed'}) two sizes: give one"
            )
    return None


def _bind(
    inputs: Mapping[str, onnx.ValueInfoProto], shapes: Mapping[str, tuple[int, ...]], bound: Mapping[str, int]
) -> None:
    """Each input not given a shape takes the size `bound` has for a dimension it names (ONNX's
    dim_param: one symbol, one size, as onnx.shape_inference reads the graph): GPT-2's
    attention_mask [batch, sequence] follows input_ids=1x256, and a built-in's defaults fill what
    is left."""
    for name, info in inputs.items():
        if name in shapes:
            continue
        for d in info.type.tensor_type.shape.dim:
            if d.dim_param in bound:
                d.dim_value = bound[d.dim_param]


def apply_values(loaded: Loaded, values: Mapping[str, float], path: str) -> list[Diagnostic]:
    """Make each input in `values` a constant of that value: an If whose
    condition reads it (Silero VAD's `sr == 16000`) then folds to the branch that value takes,
    where otherwise both are costed (X513). Scalar inputs only (one element): a value is what a
    user knows of a sample rate or a flag, not of a tensor."""
    inputs = {i.name: i for i in graph_inputs(loaded.model)}
    found: list[Diagnostic] = []
    for name, value in values.items():
        info = inputs.get(name)
        if info is None or not info.type.HasField("tensor_type"):
            names = ", ".join(inputs) or "(none)"
            found.append(
                diagnostic(
                    "X501", f"input value {name!r} names no input; the graph's inputs are {names}", path=path
                )
            )
            continue
        tensor = info.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim]
        if any(d.HasField("dim_value") and d.dim_value != 1 for d in tensor.shape.dim):
            shape = "x".join(str(d.dim_value or d.dim_param or "?") for d in tensor.shape.dim)
            found.append(
                diagnostic("X501", f"input value {name}: the input is {shape}, not one value", path=path)
            )
            continue
        element = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if element.kind in "iub" and value != int(value):
            found.append(
                diagnostic("X501", f"input value {name}={value:g}: the input holds integers", path=path)
            )
            continue
        constant = numpy_helper.from_array(np.full(dims, value, dtype=element), name)
        kept = [i for i in loaded.model.graph.input if i.name != name]
        del loaded.model.graph.input[:]
        loaded.model.graph.input.extend(kept)
        loaded.model.graph.initializer.append(constant)
        loaded.input_shapes[name] = tuple(dims)
    return found


_BATCH = ("batch", "bs", "n", "b")  # "?" (a dim with no name) names nothing
_SEQUENCE = ("seq", "time", "len", "step", "frame", "token")


def _spelled(dims: Sequence[onnx.TensorShapeProto.Dimension]) -> list[int | str]:
    """Declared dims as batch_axis reads them: a size, else the dimension's name ("" unnamed)."""
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in dims]


def batch_axis(dims: list[int | str], sequence_first: bool = False) -> int | None:
    """Which dimension --batch sets: a symbolic dim named like a batch; else dimension 1 when
    dimension 0 is a sequence (named like one, or the input of a sequence-first LSTM / GRU /
    RNN); else dimension 0. None when that dimension is already fixed."""
    symbolic = [i for i, d in enumerate(dims) if isinstance(d, str) or d == 0]
    if not symbolic:
        return None
    named = [
        i
        for i in symbolic
        if isinstance(dims[i], str) and str(dims[i]).lower().replace("_size", "") in _BATCH
    ]
    if named:
        return named[0]
    first = str(dims[0]).lower() if dims else ""
    if len(dims) > 1 and 1 in symbolic and (sequence_first or any(word in first for word in _SEQUENCE)):
        return 1
    return 0 if 0 in symbolic else None


def _sequence_first(model: onnx.ModelProto) -> set[str]:
    """Graph inputs read directly as a recurrent op's sequence-first X (layout 0, ONNX's default)."""
    found = set()
    for node in model.graph.node:
        if node.op_type in ("LSTM", "GRU", "RNN", "DynamicQuantizeLSTM") and node.input:
            layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
            if layout == 0:
                found.add(node.input[0])
    return found


def check_structure(model: onnx.ModelProto, path: str) -> list[Diagnostic]:
    """onnx's checker on the graph's structure; stripped tensors are presented as graph inputs."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    kept = []
    for t in probe.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            probe.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            kept.append(t)
    del probe.graph.initializer[:]
    probe.graph.initializer.extend(kept)
    for t in tensors(probe.graph):  # the checker would stat their locations (relative to the cwd)
        if t.data_location == onnx.TensorProto.EXTERNAL:
            _inline_placeholder(t)
    try:
        onnx.checker.check_model(probe)
    except Exception as error:  # the C++ checker raises ValidationError, UnicodeDecodeError, ...
        first = " ".join(str(error).split())[:300] or type(error).__name__
        return [diagnostic("X502", first, path=path)]
    return []


def _inline_placeholder(tensor: onnx.TensorProto) -> None:
    """Make an external tensor a one-element inline one, for the checker's eyes only: nothing
    outside the model's folder (or inside it) is opened or even looked up."""
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    del tensor.dims[:]
    if tensor.data_type == onnx.TensorProto.STRING:
        tensor.string_data.append(b"")
        return
    known = dtypes.BY_CODE.get(tensor.data_type)
    tensor.raw_data = bytes(known.bytes if known is not None else 1)  # sub-byte types: one byte


def infer_shapes(
    model: onnx.ModelProto, path: str, inference: Inference | None = None
) -> tuple[onnx.ModelProto, list[Diagnostic]]:
    """Shapes from onnx's inference: strict first, so a failure is reported (X503); if it fails,
    strict again without the shapes the file declares inside the graph (a warning when that succeeds:
    the exporter's guesses were wrong), else lenient, keeping what it could infer; the model
    unchanged if even that fails."""
    inference = inference or Inference()
    try:
        return inference(model, strict=True), inference.problems(path)
    except Exception as error:  # InferenceError, ValidationError, RuntimeError, UnicodeDecodeError ...
        why = " ".join(str(error).split())[:300] or type(error).__name__
        problem = [diagnostic("X503", why, path=path)]
    undeclared = without_declared(model)
    if undeclared is not None:  # the file's own declarations may be what contradicts inference
        try:
            inferred = inference(undeclared, strict=True)
        except Exception:  # something else is wrong: lenient inference on the file as it is
            pass
        else:
            note = f"{why}; without the shapes the file declares inside the graph, inference succeeds"
            return inferred, [
                diagnostic("X503", note, path=path, severity=Severity.WARNING),
                *inference.problems(path),
            ]
    try:
        return inference(model, strict=False), problem + inference.problems(path)
    except Exception:
        return model, problem


def without_declared(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """`model` without the shapes its file declares for the values inside the graph (value_info;
    a graph output whose shape is not fully known keeps its element type only), or None when it
    declares none. Such declarations are a tool's guesses, and some are wrong: onnxruntime's
    symbolic_shape_infer.py, run over many published files (its dims are named like
    `ConvTranspose_459_o0__d0`), declares a rank-0 shape for a Resize whose sizes are computed,
    which onnx's inference then refuses to contradict (X503)."""
    loose = [o for o in model.graph.output if o.type.HasField("tensor_type") and not _fully_known(o.type)]
    if not model.graph.value_info and not loose:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    for o in out.graph.output:
        if o.type.HasField("tensor_type") and not _fully_known(o.type):
            o.type.tensor_type.ClearField("shape")
    return out


def _fully_known(proto: onnx.TypeProto) -> bool:
    t = proto.tensor_type
    return t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim)


INFERENCE_BUDGET = 1 << 30
"""Bytes of address space onnx's shape inference may take beyond what the process has. Its data
propagation materialises the sizes it computes: a model whose pads are computed with a constant of
2**30 (a fuzzed VAD) made it allocate until the kernel killed the process (24 GB). Real graphs,
weights stripped, need a few MB."""


class Inference:
    """onnx's shape inference for one extraction: with data propagation (sizes computed from
    shapes: what dynamic-axis exports need), within INFERENCE_BUDGET. Past the budget it runs
    again without, and so does every later round of the same extraction."""

    def __init__(self) -> None:
        self.data_prop = True
        self.exhausted = False

    def __call__(self, model: onnx.ModelProto, *, strict: bool) -> onnx.ModelProto:
        with _address_space(INFERENCE_BUDGET):
            if self.data_prop:
                try:
                    return onnx.shape_inference.infer_shapes(model, strict_mode=strict, data_prop=True)
                except MemoryError:
                    self.data_prop, self.exhausted = False, True
            return onnx.shape_inference.infer_shapes(model, strict_mode=strict, data_prop=False)

    def problems(self, path: str) -> list[Diagnostic]:
        if not self.exhausted:
            return []
        self.exhausted = False  # said once
        return [
            diagnostic(
                "X503",
                f"shape inference needed more than {INFERENCE_BUDGET >> 30} GiB to propagate the "
                "values of shapes (a size computed from a huge constant?); it ran without",
                path=path,
                severity=Severity.WARNING,  # the shapes that do not need those values are all there
            )
        ]


@contextlib.contextmanager
def _address_space(extra: int) -> Iterator[None]:
    """Within: the process may grow its address space by `extra` bytes at most (an allocation past
    that fails, and onnx raises MemoryError). Where the size cannot be read (not Linux), no limit."""
    try:
        import resource

        pages = int(Path("/proc/self/statm").read_text().split()[0])
        size = pages * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError, IndexError):
        yield
        return
    limit = size + extra if hard == resource.RLIM_INFINITY else min(size + extra, hard)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield  # already limited as tightly
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
