"""Dimensions real files leave unknown: old paddle2onnx's declared dim_value -1 and unnamed `?`
dims (rapidocr-onnxruntime's PP-OCR files, fetched by tests/realmodels.py). An unknown dim makes
a layer's FLOPs unknown, never negative; the shape the X504 hint suggests runs in onnxruntime;
--batch sets dimension 0 when no dim is named like a batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from typer.testing import Result

from modtrans.extraction import extract, load
from modtrans.extraction.graph import graphs
from tests import realmodels

pytestmark = pytest.mark.real


def _entry(name: str) -> dict[str, Any]:
    return next(e for e in realmodels.manifest()["models"] if e["path"].endswith(name))


def _file(name: str) -> Path:
    return realmodels.fetched(_entry(name))


def _declared(model: onnx.ModelProto) -> list[int]:
    return [
        d.dim_value
        for g in graphs(model.graph)
        for info in (*g.input, *g.output, *g.value_info)
        for d in info.type.tensor_type.shape.dim
        if d.HasField("dim_value")
    ]


@pytest.mark.parametrize("name", ["ch_PP-OCRv3_det_infer.onnx", "ch_PP-OCRv3_rec_infer.onnx"])
def test_a_declared_minus_one_is_read_as_unknown(name: str) -> None:
    path = _file(name)
    assert -1 in _declared(onnx.load(path, load_external_data=False))  # what the file says
    loaded, found = load.read(path, file_hash=False)
    assert loaded is not None
    assert not found
    assert all(d >= 0 for d in _declared(loaded.model))
    shapes = {k: tuple(v) for k, v in _entry(name)["input_shapes"].items()}
    _, problems = extract(path, input_shapes=shapes, file_hash=False)
    assert "X503" not in {d.code for d in problems}


def test_unknown_dims_make_flops_unknown_not_negative_and_the_hint_runs(
    run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    """The cls model as shipped: x is [-1, 3, ?, ?]. Its layers are unknown (X510), none negative;
    the hint's shape is one onnxruntime runs the model on, and modtrans translates it."""
    path = _file("ch_ppocr_mobile_v2.0_cls_infer.onnx")
    ir, found = extract(path, file_hash=False)
    assert ir is not None
    assert all(x.flops.forward >= 0 and x.flops.input_grad >= 0 for x in ir.layers)
    assert "X510" in {d.code for d in found}
    hint = next(d.hint for d in found if d.code == "X504" and d.hint)
    shape = hint.rsplit("--input-shape x=", 1)[1].split()[0]
    dims = tuple(int(v) for v in shape.split("x"))
    assert dims[0] == 1  # a batch of one
    assert min(dims[2:]) > 1  # an image of some size
    import onnxruntime  # type: ignore[import-untyped,import-not-found,unused-ignore]

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.zeros(dims, np.float32)})
    done = run_cli("translate", path, "--input-shape", f"x={shape}", "-o", tmp_path / "w.txt")
    assert done.exit_code == 0, done.stderr


def test_batch_sets_dimension_zero_when_no_dim_is_named_like_a_batch() -> None:
    """ch_PP-OCRv4_rec_infer's x is [p2o.DynamicDimension.0, 3, ?, p2o.DynamicDimension.1]: an
    unnamed `?` is no batch name, so --batch sets dimension 0 (no X512)."""
    path = _file("ch_PP-OCRv4_rec_infer.onnx")
    loaded, _ = load.read(path, file_hash=False)
    assert loaded is not None
    found = load.apply_inputs(loaded, 1, {}, str(path))
    assert "X512" not in {d.code for d in found}
    declared: Any = loaded.input_shapes["x"]
    assert declared[0] == 1
    assert declared[2] == "?"
