"""fold.py runs its rounds until nothing changes: a chain of shape arithmetic as long as a model
makes is folded whole, however many rounds that takes.

The graph is the pattern tf2onnx writes for a Keras Dense on a 3-d input (tf.tensordot), as in
magika 0.5.1's standard_v1 model: Reshape to [-1, K], MatMul, and a Reshape back to
Concat(Gather(Cast(Shape(x)), [0, 1]), [N]) through int32 Casts. onnx's data propagation does
not see through those Casts, so each Dense's output is shaped only after the fold of its own
Shape, and the next Dense's Shape waits for that: one round per Dense. magika's chain took 5
rounds and a bound of 4 left its last LayerNormalization unshaped (X510)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modtrans.extraction import extract, fold

DENSE = 12
WIDTH = 8


def _tensordot_chain(path: Path) -> Path:
    """DENSE tf2onnx Dense layers, each [batch, length, WIDTH] -> [batch, length, WIDTH], then Relu."""

    def ints(name: str, values: list[int], dtype: type = np.int64) -> TensorProto:
        return numpy_helper.from_array(np.array(values, dtype), name)

    inits = [ints("flat", [-1, WIDTH]), ints("free", [0, 1]), ints("n", [WIDTH], np.int32)]
    nodes: list[onnx.NodeProto] = []
    x = "x"
    for i in range(DENSE):
        inits.append(numpy_helper.from_array(np.full((WIDTH, WIDTH), 0.01, np.float32), f"w{i}"))
        nodes += [
            helper.make_node("Reshape", [x, "flat"], [f"flat{i}"]),
            helper.make_node("MatMul", [f"flat{i}", f"w{i}"], [f"mm{i}"]),
            helper.make_node("Shape", [x], [f"shape{i}"]),
            helper.make_node("Cast", [f"shape{i}"], [f"shape32_{i}"], to=TensorProto.INT32),
            helper.make_node("Gather", [f"shape32_{i}", "free"], [f"free{i}"], axis=0),
            helper.make_node("Concat", [f"free{i}", "n"], [f"target32_{i}"], axis=0),
            helper.make_node("Cast", [f"target32_{i}"], [f"target{i}"], to=TensorProto.INT64),
            helper.make_node("Reshape", [f"mm{i}", f"target{i}"], [f"dense{i}"]),
            helper.make_node("Relu", [f"dense{i}"], [f"act{i}"]),
        ]
        x = f"act{i}"
    graph = helper.make_graph(
        nodes,
        "tensordot",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", WIDTH])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", "length", WIDTH])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path / "chain.onnx")
    return path / "chain.onnx"


def test_a_chain_of_shape_arithmetic_longer_than_any_round_count_is_folded_whole(tmp_path: Path) -> None:
    """onnxruntime 1.32.0 runs this graph on a [2, 5, 8] input (tools/fixture_manifest.py
    onnxruntime_shapes) with every mm{i} [10, 8] and every dense{i} and act{i} [2, 5, 8]."""
    ir, found = extract(_tensordot_chain(tmp_path), input_shapes={"x": (2, 5, 8)}, file_hash=False)
    assert ir is not None
    assert not [str(d) for d in found if d.code in {"X504", "X510", "X518"}]
    shapes = {a.name: a.shape for layer in ir.layers for a in layer.outputs}
    expected = {f"mm{i}": (10, 8) for i in range(DENSE)} | {f"act{i}": (2, 5, 8) for i in range(DENSE)}
    assert {name: shapes.get(name) for name in expected} == expected
    assert all(layer.flops_known for layer in ir.layers)
    # each MatMul: 2 x 10 x 8 x 8 FLOPs (ONNX MatMul, [10, 8] @ [8, 8]); each Relu: 80 elements
    assert ir.totals.flops.forward == DENSE * (2 * 10 * 8 * 8 + 80)


def test_folding_that_does_not_settle_is_said_and_extraction_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bound below what the chain needs: X518 names the step still changing the graph, the
    shapes found so far are kept and the rest are X510, never a traceback."""
    monkeypatch.setattr(fold, "_ROUNDS", 3)
    ir, found = extract(_tensordot_chain(tmp_path), input_shapes={"x": (2, 5, 8)}, file_hash=False)
    assert ir is not None
    unsettled = [d for d in found if d.code == "X518"]
    message = "shape folding still changed the graph after 3 rounds (fold_once)"
    assert [d.message for d in unsettled] == [message]
    assert unsettled[0].severity.label == "warning"
    shapes = {a.name: a.shape for layer in ir.layers for a in layer.outputs}
    assert shapes["act0"] == (2, 5, 8)
    assert shapes[f"act{DENSE - 1}"] == ("batch", "length", WIDTH)  # as the file declares it
    assert any(d.code == "X510" for d in found)
