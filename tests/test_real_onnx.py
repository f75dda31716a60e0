"""What real ONNX files bring: quantized operators, fused attention, ops of other domains, inputs
that contradict the weights, batch dimensions that are not the first, shapes nobody can know."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import Result

from modtrans import pipeline
from modtrans.ir.document import ModelIR

Run = Callable[..., Result]
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "onnx"


def _save(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    weights: list[onnx.TensorProto],
    opsets: dict[str, int] | None = None,
) -> Path:
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, weights)
    imports = [helper.make_opsetid(d, v) for d, v in (opsets or {"": 17}).items()]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=imports), path)
    return path


def _ir(path: Path, **options: Any) -> tuple[ModelIR, list[str]]:
    ir, found = pipeline.extract_checked(path, **options)
    assert ir is not None, [str(d) for d in found]
    return ir, [d.code for d in found]


def test_a_dynamically_quantized_model_has_its_float_models_parameters() -> None:
    """fixtures/onnx/mlp_lstm_quantized.onnx is onnxruntime's quantize_dynamic of a float MLP +
    LSTM (tools/build_quantized_fixture.py); the float model's count is in MANIFEST.json."""
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text())["files"]["mlp_lstm_quantized.onnx"]
    ir, codes = _ir(FIXTURES / "mlp_lstm_quantized.onnx", batch=2, input_shapes={"s": (5, 2, 16)})
    assert ir.totals.params == manifest["float_parameters"] == 16_320
    fc1 = next(x for x in ir.layers if x.op_type == "MatMulInteger" and x.name.startswith("fc1"))
    (weight,) = fc1.params
    assert (weight.dtype, weight.elements, weight.bytes, weight.trainable) == (
        "int8",
        64 * 128,
        64 * 128,
        True,
    )
    assert fc1.flops.forward == 2 * 2 * 64 * 128  # as the float MatMul: batch 2 x 64 x 128 MACs
    lstm = next(x for x in ir.layers if x.op_type == "DynamicQuantizeLSTM")
    # ORT stores W as [1, input 16, 4H 96]: the same MACs as ONNX's LSTM over 5 steps, batch 2, hidden 24
    assert lstm.flops.forward == 2 * 5 * 2 * 96 * (16 + 24) + 5 * 2 * 96
    assert "X510" not in codes


def test_four_bit_weights_count_their_values_and_their_packed_bytes(tmp_path: Path) -> None:
    n, k, block = 32, 64, 32
    packed = numpy_helper.from_array(np.zeros((n, k // block, block * 4 // 8), np.uint8), "B")
    scales = numpy_helper.from_array(np.ones(n * (k // block), np.float32), "scales")
    node = helper.make_node(
        "MatMulNBits", ["a", "B", "scales"], ["y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=block
    )
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, k])]
    ir, _ = _ir(_save(tmp_path, [node], inputs, [packed, scales], {"": 17, "com.microsoft": 1}))
    (layer,) = ir.layers
    weight = next(p for p in layer.params if p.name == "B")
    assert (weight.elements, weight.bytes) == (n * k, n * k // 2)  # 4 bits a value
    assert layer.flops.forward == 2 * 2 * k * n


def test_an_input_shape_that_contradicts_the_weights_names_the_first_layer(run_cli: Run) -> None:
    result = run_cli("translate", "resnet50", "--input-shape", "input=1x224x224x3")
    assert result.exit_code == 2  # a usage error: the shape given does not fit the model
    assert (
        "error X511 layer conv1 (Conv): its input has 224 channels, its weight [64, 3, 7, 7] takes 3"
        in result.stderr
    )


def _custom_then_conv(tmp_path: Path) -> Path:
    w = numpy_helper.from_array(np.zeros((8, 4, 3, 3), np.float32), "W")
    nodes = [
        helper.make_node("Denoise", ["x"], ["d"], name="denoise", domain="vendor.ops"),
        helper.make_node("Conv", ["d", "W"], ["y"], name="conv"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])]
    return _save(tmp_path, nodes, inputs, [w], {"": 17, "vendor.ops": 1})


def test_a_conv_after_a_custom_op_is_never_a_silent_zero(run_cli: Run, tmp_path: Path) -> None:
    path = _custom_then_conv(tmp_path)
    _, found = pipeline.extract_checked(path)
    messages = {d.code: d.message for d in found}
    assert "vendor.ops::Denoise" in messages["X505"]
    assert "layer conv (Conv): FLOPs unknown, tensor 'd'" in messages["X510"]
    refused = run_cli("translate", path)
    assert refused.exit_code == 1
    assert "error X510" in refused.stderr
    kept = run_cli("translate", path, "--allow-unknown", "-o", tmp_path / "w.txt")
    assert kept.exit_code == 0, kept.stderr
    assert json.loads((tmp_path / "w.txt.meta.json").read_text())["unknown_flops"] == ["denoise", "conv"]


def test_batch_takes_the_batch_dimension_of_a_sequence_first_input() -> None:
    # fixtures/onnx/lstm_legacy.onnx: torch's LSTM export, input [sequence, batch, 16]
    ir, found = pipeline.extract_checked(FIXTURES / "lstm_legacy.onnx", batch=4)
    assert ir is not None
    assert ir.provenance.input_shapes["input"] == ("sequence", 4, 16)
    note = next(d for d in found if d.code == "X512")
    assert "dimension 1 (batch)" in note.message


def test_fused_attention_costs_what_the_unfused_graph_costs(tmp_path: Path) -> None:
    batch, seq, hidden, heads = 2, 8, 32, 4
    d = hidden // heads
    w = numpy_helper.from_array(np.zeros((hidden, 3 * hidden), np.float32), "qkv.weight")
    b = numpy_helper.from_array(np.zeros(3 * hidden, np.float32), "qkv.bias")
    node = helper.make_node(
        "Attention", ["x", "qkv.weight", "qkv.bias"], ["y"], domain="com.microsoft", num_heads=heads
    )
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])]
    ir, _ = _ir(_save(tmp_path, [node], inputs, [w, b], {"": 17, "com.microsoft": 1}))
    (layer,) = ir.layers
    tokens = batch * seq
    projection = 2 * tokens * hidden * 3 * hidden + tokens * 3 * hidden  # the QKV linear and its bias
    scores = context = 2 * batch * heads * seq * seq * d  # Q.K^T and P.V
    softmax = 5 * batch * heads * seq * seq
    assert layer.flops.forward == projection + scores + context + softmax
    assert {p.name for p in layer.params} == {"qkv.weight", "qkv.bias"}


def test_onnx_attention_and_einsum_have_flop_models(tmp_path: Path) -> None:
    batch, heads, seq, d = 1, 2, 4, 8
    shape = [batch, heads, seq, d]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in ("q", "k", "v")]
    attention = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn")
    ir, codes = _ir(_save(tmp_path, [attention], inputs, [], {"": 23}))
    assert (
        ir.layers[0].flops.forward == 2 * (2 * batch * heads * seq * seq * d) + 5 * batch * heads * seq * seq
    )
    assert "X505" not in codes
    einsum = helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")
    pair = [
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4, 5]),
        helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 5, 6]),
    ]
    ir, _ = _ir(_save(tmp_path, [einsum], pair, []))
    assert ir.layers[0].flops.forward == 2 * 3 * 4 * 5 * 6  # a batched matmul's MACs


def test_resize_and_pad_are_costed(tmp_path: Path) -> None:
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    ir, _ = _ir(_save(tmp_path, nodes, inputs, [scales]))
    assert ir.layers[0].flops.forward == 1 * 3 * 16 * 16 * 4  # bilinear: 4 taps per output element


@pytest.mark.parametrize(("domain", "expected"), [("com.microsoft", "linear"), ("vendor.ops", "other")])
def test_the_registry_is_keyed_by_domain(domain: str, expected: str, tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.zeros((16, 48), np.float32), "w")
    node = helper.make_node("Attention", ["x", "w"], ["y"], domain=domain, num_heads=2)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])]
    ir, _ = _ir(_save(tmp_path, [node], inputs, [w], {"": 17, domain: 1}))
    assert ir.layers[0].kind.value == expected


def _if_model(tmp_path: Path, condition_from_shape: bool) -> Path:
    """An If choosing between two convolutions: on `x`'s batch (a shape: folded once --batch fixes
    it) or on a flag input's value (nothing fixes it)."""
    conv = {n: numpy_helper.from_array(np.zeros((8, 4, 3, 3), np.float32), n) for n in ("W1", "W2")}

    def branch(weight: str, name: str) -> onnx.GraphProto:
        node = helper.make_node("Conv", ["x", weight], [f"{name}_y"], name=f"{name}/conv", pads=[1, 1, 1, 1])
        return helper.make_graph(
            [node], name, [], [helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)]
        )

    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4, 8, 8])]
    if condition_from_shape:
        one = numpy_helper.from_array(np.array([1], np.int64), "one")
        zero = numpy_helper.from_array(np.array([0], np.int64), "zero")
        nodes = [
            helper.make_node("Shape", ["x"], ["shape"]),
            helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
            helper.make_node("Equal", ["batch", "one"], ["single"]),
            helper.make_node("Squeeze", ["single"], ["cond"]),
        ]
        extra = [one, zero]
    else:
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
        nodes, extra = [], []
    nodes.append(
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            name="pick",
            then_branch=branch("W1", "then"),
            else_branch=branch("W2", "other"),
        )
    )
    graph = helper.make_graph(
        nodes,
        "g",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [*conv.values(), *extra],
    )
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_an_if_on_a_shape_takes_its_branch(tmp_path: Path) -> None:
    ir, codes = _ir(_if_model(tmp_path, condition_from_shape=True), batch=1)
    assert [x.name for x in ir.layers] == ["then/conv"]  # batch 1: the then branch, alone
    assert ir.layers[0].flops.forward == 2 * 1 * 8 * 8 * (4 * 9) * 8
    assert "X513" not in codes
    ir, _ = _ir(_if_model(tmp_path, condition_from_shape=True), batch=2)
    assert [x.name for x in ir.layers] == ["other/conv"]


def test_an_if_on_a_value_costs_both_branches_and_says_so(tmp_path: Path) -> None:
    ir, codes = _ir(_if_model(tmp_path, condition_from_shape=False), batch=1)
    assert len(ir.layers) == 2
    assert "X513" in codes


def test_conv_transpose_output_by_its_formula_when_inference_cannot(tmp_path: Path) -> None:
    from modtrans.extraction.ops.gemm import transposed_output
    from modtrans.extraction.ops.registry import NodeView

    # PyTorch's ConvTranspose2d(4, 8, 3, stride=2, padding=1, output_padding=1) doubles 8x8 to 16x16
    view = NodeView(
        "ConvTranspose", {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}, (), (), (), ()
    )
    assert transposed_output(view, (1, 4, 8, 8), (4, 8, 3, 3)) == (1, 8, 16, 16)


_MS = {"": 17, "com.microsoft": 1}


@pytest.mark.parametrize(
    ("op", "inputs", "weights", "attrs", "expected"),
    [
        # onnxruntime's contrib op schemas (bert_defs.cc, contrib_defs.cc, quantization_defs.cc)
        ("SkipLayerNormalization", [("x", [2, 8, 32]), ("skip", [2, 8, 32])], [("g", [32])], {}, (2, 8, 32)),
        ("BiasGelu", [("x", [2, 8, 32])], [("b", [32])], {}, (2, 8, 32)),
        ("FastGelu", [("x", [2, 8, 32])], [], {}, (2, 8, 32)),
        ("Attention", [("x", [2, 8, 32])], [("w", [32, 96])], {"num_heads": 4}, (2, 8, 32)),
        (
            "MultiHeadAttention",
            [("q", [2, 8, 32]), ("k", [2, 5, 32]), ("v", [2, 5, 48])],
            [],
            {"num_heads": 4},
            (2, 8, 48),
        ),
        # packed QKV: 32 query heads and 2 x 8 key/value heads of 64 in a [2, 8, 3072] query
        (
            "GroupQueryAttention",
            [("qkv", [2, 8, 3072])],
            [],
            {"num_heads": 32, "kv_num_heads": 8},
            (2, 8, 2048),
        ),
        (
            "MatMulNBits",
            [("a", [2, 8, 64])],
            [("B", [32, 2, 16])],
            {"K": 64, "N": 32, "bits": 4, "block_size": 32},
            (2, 8, 32),
        ),
        (
            "EmbedLayerNormalization",
            [("ids", [2, 8]), ("seg", [2, 8])],
            [("word", [100, 32])],
            {},
            (2, 8, 32),
        ),
    ],
)
def test_onnxruntime_fused_ops_pass_their_shapes_on(
    op: str,
    inputs: list[tuple[str, list[int]]],
    weights: list[tuple[str, list[int]]],
    attrs: dict[str, Any],
    expected: tuple[int, ...],
    tmp_path: Path,
) -> None:
    """onnx has no shape rules for com.microsoft ops: the Relu after each must still be costed."""
    values = [
        helper.make_tensor_value_info(
            n, TensorProto.INT32 if n in ("ids", "seg") else TensorProto.FLOAT, dims
        )
        for n, dims in inputs
    ]
    dtype = {"B": np.uint8}
    stored = [numpy_helper.from_array(np.ones(dims, dtype.get(n, np.float32)), n) for n, dims in weights]
    names = [n for n, _ in inputs] + [n for n, _ in weights]
    if op == "EmbedLayerNormalization":  # input_ids, segment_ids, word, position, segment, gamma, beta
        stored += [
            numpy_helper.from_array(np.ones(d, np.float32), n)
            for n, d in (("pos", (16, 32)), ("segw", (2, 32)), ("gamma", (32,)), ("beta", (32,)))
        ]
        names = ["ids", "seg", "word", "pos", "segw", "gamma", "beta"]
    nodes = [
        helper.make_node(op, names, ["y"], domain="com.microsoft", **attrs),
        helper.make_node("Relu", ["y"], ["z"], name="after"),
    ]
    ir, codes = _ir(_save(tmp_path, nodes, values, stored, _MS))
    after = ir.layer("after")
    assert after.outputs[0].shape == expected
    assert after.flops_known
    assert not {"X510", "X504"} & set(codes)


def test_the_fused_op_rules_do_not_outlive_the_extraction(tmp_path: Path) -> None:
    """The rules are onnx schemas registered for the inference only: onnx's checker would judge a
    node's attributes by them, and onnx.reference refuses two ops of one name across domains."""
    node = helper.make_node("FastGelu", ["x"], ["y"], domain="com.microsoft")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    _ir(_save(tmp_path, [node], inputs, [], _MS))
    with pytest.raises(onnx.defs.SchemaError):
        onnx.defs.get_schema("FastGelu", 1, "com.microsoft")


def _loop_model(tmp_path: Path, trip_count: object, condition_in_body: bool = False) -> Path:
    """h = tanh(h W) repeated by a Loop over [batch, 16], W an outer initializer."""
    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "W")
    body_nodes = [
        helper.make_node("MatMul", ["h_in", "W"], ["hw"], name="cell/MatMul"),
        helper.make_node("Tanh", ["hw"], ["h_out"], name="cell/Tanh"),
        helper.make_node("Identity", ["h_out"], ["h_row"]),  # a scan output: one row per iteration
    ]
    if condition_in_body:
        body_nodes.append(helper.make_node("ReduceSum", ["h_out"], ["total"], keepdims=0))
        body_nodes.append(helper.make_node("Less", ["total", "limit"], ["keep_going"]))
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["keep_going"]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_in", TensorProto.FLOAT, ["h_dim_0", 16]),
        ],
        [
            helper.make_tensor_value_info("keep_going", TensorProto.BOOL, []),
            helper.make_tensor_value_info("h_out", TensorProto.FLOAT, ["h_dim_0", 16]),
            helper.make_tensor_value_info("h_row", TensorProto.FLOAT, ["h_dim_0", 16]),
        ],
    )
    extra = [
        numpy_helper.from_array(np.array(True), "true"),
        numpy_helper.from_array(np.array(0.5, np.float32), "limit"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])]
    count = ""
    if isinstance(trip_count, int):
        extra.append(numpy_helper.from_array(np.array(trip_count, np.int64), "M"))
        count = "M"
    elif trip_count == "input":
        inputs.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
        count = "M"
    loop = helper.make_node("Loop", [count, "true", "x"], ["h", "rows"], name="steps", body=body)
    graph = helper.make_graph(
        [
            loop,
            helper.make_node("Relu", ["h"], ["y"], name="after"),
            helper.make_node("Relu", ["rows"], ["z"], name="after_rows"),
        ],
        "g",
        inputs,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")],
        [w, *extra],
    )
    path = tmp_path / "loop.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_loop_of_constant_trip_count_costs_every_iteration(tmp_path: Path) -> None:
    ir, codes = _ir(_loop_model(tmp_path, 5), batch=3)
    cell = ir.layer("steps/body/cell/MatMul")
    assert (cell.repeats, cell.flops.forward) == (5, 5 * 2 * 3 * 16 * 16)
    assert cell.gemm is not None
    assert cell.gemm.groups == 5
    assert cell.params[0].name == "W"
    assert ir.totals.params == 16 * 16  # counted once, not five times
    assert ir.layer("after").outputs[0].shape == (3, 16)  # the final state keeps its shape
    assert ir.layer("after_rows").inputs[0].shape == (5, 3, 16)  # a row per iteration
    assert "X514" not in codes


@pytest.mark.parametrize(
    ("trip_count", "condition_in_body", "why"),
    [
        (None, False, "no trip count"),
        ("input", False, "is not a constant"),
        (5, True, "its body computes the condition"),
    ],
)
def test_a_loop_nobody_can_count_is_said_to_be_costed_once(
    trip_count: object, condition_in_body: bool, why: str, tmp_path: Path
) -> None:
    ir, found = pipeline.extract_checked(_loop_model(tmp_path, trip_count, condition_in_body), batch=3)
    assert ir is not None
    (x514,) = [d for d in found if d.code == "X514"]
    assert why in x514.message
    assert "'steps'" in x514.message
    cell = ir.layer("steps/body/cell/MatMul")
    assert (cell.repeats, cell.flops_known) == (1, False)
    rows = ir.layer("after_rows").inputs[0].shape
    assert rows is None or rows[0] != 5  # a while loop may stop before M: its rows are not M


def test_a_loop_body_moves_its_memory_traffic_every_iteration(tmp_path: Path) -> None:
    from modtrans.cost.gemm import traffic

    once, _ = _ir(_loop_model(tmp_path, 1), batch=3)
    five, _ = _ir(_loop_model(tmp_path, 5), batch=3)
    tanh = "steps/body/cell/Tanh"
    assert traffic(five.layer(tanh)) == tuple(5 * t for t in traffic(once.layer(tanh)))


def test_the_numpy_arithmetic_computes_what_onnxs_reference_evaluator_computes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fold evaluates shape arithmetic with numpy (extraction/arith.py) for speed; every node it
    evaluates on every fixture and built-in must give the reference evaluator's value, dtype and
    shape (onnx.reference: the ONNX project's own executable semantics)."""
    from modtrans.extraction import arith, fold, load

    checked: list[str] = []
    evaluate = arith.evaluate

    def compare(
        nodes: Sequence[onnx.NodeProto],
        known: Mapping[str, Callable[[], arith.Value]],
        opset: int,
        opsets: Iterable[onnx.OperatorSetIdProto],
        limit: int,
    ) -> dict[str, arith.Value]:
        values = evaluate(nodes, known, opset, opsets, limit)
        for node in nodes:
            if node.op_type == "Constant" or not all(not i or i in values for i in node.input):
                continue
            reference = arith._reference(node, [values.get(i) for i in node.input], opsets)
            for name, expected in zip(node.output, reference, strict=False):
                expected = np.asarray(expected)
                if expected.size > limit:
                    continue
                mine = values[name]
                assert (mine.dtype, mine.shape) == (expected.dtype, expected.shape), node
                assert np.array_equal(mine, expected), node
                checked.append(node.op_type)
        return values

    monkeypatch.setattr(arith, "evaluate", compare)
    root = FIXTURES.parent.parent
    for path in sorted([*FIXTURES.glob("*.onnx"), *(root / "modtrans" / "zoo").glob("*.onnx")]):
        loaded, _ = load.read(path, file_hash=False)
        assert loaded is not None
        shapes = {
            i.name: tuple(
                d.dim_value or (2 if k == 0 else 16) for k, d in enumerate(i.type.tensor_type.shape.dim)
            )
            for i in load.graph_inputs(loaded.model)
        }
        load.apply_inputs(loaded, None, shapes, str(path))
        fold.fold(load.infer_shapes(loaded.model, str(path))[0], path=str(path))
    assert len(checked) > 2_000  # 2,193 on 2026-12-01
    assert {"Gather", "Slice", "Concat", "Unsqueeze", "Reshape", "Where", "Range", "Split"} <= set(checked)


def test_a_node_that_cannot_be_evaluated_stops_only_what_needs_it() -> None:
    """fold used to evaluate all its nodes at once: one failure (an op the evaluator could not
    run) left every shape unfolded. Now only the failed node's dependents are skipped."""
    from modtrans.extraction import arith

    values = {
        "shape": np.array([2, 32], np.int64),
        "far": np.array([7], np.int64),
        "one": np.array([1], np.int64),
        "zero": np.array([0], np.int64),
    }
    nodes = [
        helper.make_node("Gather", ["shape", "far"], ["broken"], axis=0),  # index 7 of 2: fails
        helper.make_node("Unsqueeze", ["broken", "zero"], ["after_broken"]),
        helper.make_node("Concat", ["shape", "one"], ["fine"], axis=0),
    ]
    known = {name: (lambda v=v: v) for name, v in values.items()}
    out = arith.evaluate(nodes, known, 17, [helper.make_opsetid("", 17)], 1 << 16)
    assert "broken" not in out
    assert "after_broken" not in out
    assert out["fine"].tolist() == [2, 32, 1]


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "opset"),
    [
        ("Flatten", [np.arange(24, dtype=np.int64).reshape(2, 3, 4)], {"axis": -1}, 17),
        ("Flatten", [np.arange(24, dtype=np.int64).reshape(2, 3, 4)], {"axis": 0}, 17),
        ("ReduceSum", [np.arange(6, dtype=np.int64).reshape(2, 3), None], {"noop_with_empty_axes": 1}, 18),
        ("ReduceProd", [np.arange(1, 7, dtype=np.int64).reshape(2, 3)], {"keepdims": 0}, 18),
        ("Clip", [np.array([-5, 3, 9], np.int64)], {}, 17),
        (
            "Slice",
            [
                np.arange(10, dtype=np.int64),
                np.array([-1]),
                np.array([-(2**63)]),
                np.array([0]),
                np.array([-2]),
            ],
            {},
            17,
        ),
        ("Squeeze", [np.zeros((1, 3, 1), np.int64)], {}, 17),
        ("Unsqueeze", [np.arange(3, dtype=np.int64), np.array([-1, 0])], {}, 17),
        ("Split", [np.arange(7, dtype=np.int64)], {"axis": 0, "num_outputs": 3}, 18),
        ("Div", [np.array([-7, 7], np.int64), np.array([2, -2], np.int64)], {}, 17),
        ("Mod", [np.array([-7, 7], np.int64), np.array([3, -3], np.int64)], {}, 17),
    ],
)
def test_edge_cases_of_the_arithmetic_agree_with_the_reference(
    op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any], opset: int
) -> None:
    """Where numpy and ONNX part ways (negative axes, empty axes, truncating division, clamped
    slices, uneven splits), the table must still give onnx.reference's answer."""
    from modtrans.extraction import arith

    names = [f"i{k}" if x is not None else "" for k, x in enumerate(inputs)]
    outputs = ["a", "b", "c"] if op == "Split" else ["y"]
    node = helper.make_node(op, names, outputs, **attrs)
    opsets = [helper.make_opsetid("", opset)]
    known = {n: (lambda x=x: x) for n, x in zip(names, inputs, strict=True) if n}
    mine = arith.evaluate([node], known, opset, opsets, 1 << 16)
    reference = arith._reference(node, inputs, opsets)
    for name, expected in zip(outputs, reference, strict=True):
        assert mine[name].dtype == np.asarray(expected).dtype
        assert mine[name].tolist() == np.asarray(expected).tolist()


@pytest.mark.parametrize("exported_as", ["Gemm", "MatMul+Add"])
def test_a_one_output_layers_bias_is_a_parameter(exported_as: str, tmp_path: Path) -> None:
    """Linear(24, 1) has a 1-element bias, trained like any other: a scalar constant is not a
    parameter (an epsilon, a scale), but a layer's bias is, whatever its size."""
    w = numpy_helper.from_array(np.ones((24, 1), np.float32), "head.weight")
    b = numpy_helper.from_array(np.ones(1, np.float32), "head.bias")
    if exported_as == "Gemm":
        nodes = [helper.make_node("Gemm", ["x", "head.weight", "head.bias"], ["y"], name="head")]
    else:
        nodes = [
            helper.make_node("MatMul", ["x", "head.weight"], ["m"], name="head/MatMul"),
            helper.make_node("Add", ["m", "head.bias"], ["y"], name="head/Add"),
        ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 24])]
    ir, _ = _ir(_save(tmp_path, nodes, inputs, [w, b]))
    (layer,) = ir.layers
    assert {p.name for p in layer.params} == {"head.weight", "head.bias"}
    assert ir.totals.params == 24 + 1


@pytest.mark.parametrize(
    ("op", "inputs"),
    [
        ("ConstantOfShape", [np.array([10**6, 10**6], np.int64)]),
        ("Expand", [np.ones(1, np.int64), np.array([10**6, 10**6], np.int64)]),
        ("Tile", [np.ones(4, np.int64), np.array([10**9], np.int64)]),
        ("Range", [np.array(0, np.int64), np.array(10**12, np.int64), np.array(1, np.int64)]),
        ("Mul", [np.ones((60000, 1), np.int64), np.ones((1, 60000), np.int64)]),
        ("Gather", [np.ones((60000, 1000), np.int64)[:60, :], np.zeros(60000, np.int64)]),
    ],
)
def test_a_huge_result_is_never_made(op: str, inputs: list[np.ndarray]) -> None:
    """A fuzzed or hostile shape must not make fold allocate it: over 65,536 elements no value is
    kept, so none is computed (a 10**12-element ConstantOfShape would exhaust the machine)."""
    from modtrans.extraction import arith

    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"])
    known = {n: (lambda x=x: x) for n, x in zip(names, inputs, strict=True)}
    values = arith.evaluate([node], known, 17, [helper.make_opsetid("", 17)], 1 << 16)
    assert "y" not in values
    assert set(values) == set(names)  # only the inputs it read
