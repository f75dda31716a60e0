"""Silero VAD's own ONNX files (silero-vad 6.2.3 on PyPI, silero_vad/data/), not files built to
look like them: the look-alike fixture (torchscript_vad_branches.onnx) has no If that is taken
only after an earlier If is, whose branches give different shapes (LSTMCell's unbatched-input
Unsqueeze / Identity, inside the If on the state's batch), so it passed while the real files lost
the LSTM's shape (X510). The files come from the real-model corpus (tests/realmodels.py: the
pinned wheel fetched into its cache, each file checked against the manifest's SHA-256)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper
from typer.testing import Result

from modtrans.extraction import extract
from modtrans.ir.document import Layer
from tests import realmodels

pytestmark = pytest.mark.real

SHAPES = {"input": (1, 512), "state": (2, 1, 128)}
HIDDEN = 128  # decoder.rnn: LSTMCell(128, 128), weight_ih [4 x 128, 128]


def _real(name: str) -> Path:
    return realmodels.fetched(realmodels.entry("silero-vad==6.2.3", f"silero_vad/data/{name}"))


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
    assert "--input-value sr=V" in (top.hint or "")


def test_an_input_value_that_cannot_be_one_is_refused_in_a_line() -> None:
    path = _real("silero_vad.onnx")
    for values, words in (({"rate": 1}, "names no input"), ({"input": 1}, "not one value")):
        ir, found = extract(path, input_shapes=SHAPES, input_values=values, file_hash=False)
        assert ir is None
        assert [d.code for d in found] == ["X501"]
        assert words in found[0].message


def test_the_command_line_gives_the_sample_rate(run_cli: Callable[..., Result], tmp_path: Path) -> None:
    """--input-value sr=16000 on translate, inspect and extract takes the 16 kHz branch: the 16 kHz
    model's 1,238,532 parameter bytes (the 16 kHz-only export's initializers, read with onnx), not
    both rates' 2,181,128; a value that is not a number is a usage error (2), no traceback."""
    path = _real("silero_vad.onnx")
    shapes = ("--input-shape", "input=1x512", "--input-shape", "state=2x1x128")
    single = onnx.load(_real("silero_vad_16k_op15.onnx")).graph
    both = run_cli("inspect", path, *shapes, "--format", "json")
    assert both.exit_code == 0, both.stderr
    assert "X513" in both.stderr
    assert "--input-value sr=V" in both.stderr
    one = run_cli("inspect", path, *shapes, "--input-value", "sr=16000", "--format", "json")
    assert one.exit_code == 0, one.stderr
    assert "X513" not in one.stderr
    assert json.loads(one.stdout)["totals"]["param_bytes"] == _float_bytes(single) == 1_238_532
    assert json.loads(both.stdout)["totals"]["param_bytes"] == 2_181_128
    written = run_cli("translate", path, *shapes, "--input-value", "sr=16000", "-o", tmp_path / "w.txt")
    assert written.exit_code == 0, written.stderr
    extracted = run_cli("extract", path, *shapes, "--input-value", "sr=16000", "-o", tmp_path / "ir.json")
    assert extracted.exit_code == 0, extracted.stderr
    bad = run_cli("translate", path, *shapes, "--input-value", "sr=fast", "-o", tmp_path / "x.txt")
    assert bad.exit_code == 2
    assert bad.stderr.strip().splitlines() == [
        "modtrans: --input-value 'sr=fast': expected NAME=V with V a number, e.g. sr=16000"
    ]
