"""Silero VAD's own ONNX files (silero-vad 6.2.3 on PyPI, silero_vad/data/), not files built to
look like them: the look-alike fixture (torchscript_vad_branches.onnx) has no If that is taken
only after an earlier If is, whose branches give different shapes (LSTMCell's unbatched-input
Unsqueeze / Identity, inside the If on the state's batch), so it passed while the real files lost
the LSTM's shape (X510). The files are found under $MODTRANS_REAL_CACHE by name and SHA-256
(`pip download --no-deps silero-vad==6.2.3` unpacked there); without them the tests skip."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper

from modtrans.extraction import extract
from modtrans.ir.document import Layer

SHA256 = {
    "silero_vad.onnx": "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
    "silero_vad_16k_op15.onnx": "7ed98ddbad84ccac4cd0aeb3099049280713df825c610a8ed34543318f1b2c49",
    "silero_vad_half.onnx": "1e0b195ad4806595ef4466f419d16fca7e4afcfc6669b8c0b5f76ea87547c769",
}
SHAPES = {"input": (1, 512), "state": (2, 1, 128)}
HIDDEN = 128  # decoder.rnn: LSTMCell(128, 128), weight_ih [4 x 128, 128]


def _real(name: str) -> Path:
    cache = os.environ.get("MODTRANS_REAL_CACHE")
    if not cache:
        pytest.skip("MODTRANS_REAL_CACHE is not set (a folder holding silero-vad 6.2.3's files)")
    for path in sorted(Path(cache).rglob(name)):
        if hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[name]:
            return path
    pytest.skip(f"no {name} of silero-vad 6.2.3 (sha256 {SHA256[name][:12]}...) under {cache}")


def _float_bytes(graph: onnx.GraphProto) -> int:
    """The bytes of a graph's floating-point initializers, read with onnx alone."""
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    return sum(numpy_helper.to_array(t).nbytes for t in graph.initializer if t.data_type in floats)


def _constant_bytes(graph: onnx.GraphProto, names: list[str]) -> int:
    """The bytes of the Constant nodes of `graph` whose output name ends with one of `names` (spox,
    which wrote silero_vad.onnx, keeps the weights as Constants named after PyTorch's)."""
    found = {
        n.output[0]: numpy_helper.to_array(n.attribute[0].t).nbytes
        for n in graph.node
        if n.op_type == "Constant"
    }
    picked = {out for out in found for name in names if out.endswith("__" + name)}
    assert len(picked) == len(names)
    return sum(found[out] for out in picked)


@pytest.mark.parametrize("name", ["silero_vad_16k_op15.onnx", "silero_vad_half.onnx"])
def test_the_16k_exports_are_costed_whole(name: str) -> None:
    path = _real(name)
    ir, found = extract(path, input_shapes=SHAPES, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]  # every If folds: no X510, X513, X504
    assert all(layer.flops_known for layer in ir.layers)
    assert ir.totals.param_bytes == _float_bytes(onnx.load(path).graph) == 1_238_532
    (lstm,) = (x for x in ir.layers if x.op_type == "LSTM")
    # one step of one sample: the four gates' GEMMs over [x, h] (128 + 128), 2 FLOPs a
    # multiply-add, and one add of the gates' bias
    assert lstm.inputs[0].shape == (1, 1, HIDDEN)
    assert lstm.flops.forward == 2 * 4 * HIDDEN * (HIDDEN + HIDDEN) + 4 * HIDDEN


def test_the_sample_rate_if_takes_the_branch_of_the_given_value() -> None:
    """silero_vad.onnx holds both rates' models in an If on `sr == 16000`, whose branches read
    values of the input `sr`: given sr, one model is costed, the 16 kHz one equal layer for layer
    (op type, FLOPs, parameters) to the 16 kHz-only export; not given, X513 names `sr`."""
    path = _real("silero_vad.onnx")
    ir, found = extract(path, input_shapes=SHAPES, input_values={"sr": 16000}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]
    model = onnx.load(path)
    (branch,) = (
        a.g for n in model.graph.node if n.op_type == "If" for a in n.attribute if a.name == "then_branch"
    )
    single = _real("silero_vad_16k_op15.onnx")
    weights = [t.name.removeprefix("model.") for t in onnx.load(single).graph.initializer]
    assert ir.totals.param_bytes == _constant_bytes(branch, weights) == 1_238_532
    alone, _ = extract(single, input_shapes=SHAPES, file_hash=False)
    assert alone is not None

    def costed(layers: Sequence[Layer]) -> list[tuple[str, int, int]]:
        return [(x.op_type, x.flops.forward, sum(p.elements for p in x.params)) for x in layers if x.params]

    assert costed(ir.layers) == costed(alone.layers)
    _, found = extract(path, input_shapes=SHAPES, file_hash=False)
    (top, *_) = (d for d in found if d.code == "X513")
    assert "(sr)" in top.message
    assert "'sr'" in (top.hint or "")


def test_an_input_value_that_cannot_be_one_is_refused_in_a_line() -> None:
    path = _real("silero_vad.onnx")
    for values, words in (({"rate": 1}, "names no input"), ({"input": 1}, "not one value")):
        ir, found = extract(path, input_shapes=SHAPES, input_values=values, file_hash=False)
        assert ir is None
        assert [d.code for d in found] == ["X501"]
        assert words in found[0].message
