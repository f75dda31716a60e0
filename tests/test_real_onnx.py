"""What real ONNX files bring: quantized operators, fused attention, ops of other domains, inputs
that contradict the weights, batch dimensions that are not the first, shapes nobody can know."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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
    tmp_path: Path, nodes: list, inputs: list, weights: list, opsets: dict[str, int] | None = None
) -> Path:  # type: ignore[type-arg]
    outputs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "g", inputs, outputs, weights)
    imports = [helper.make_opsetid(d, v) for d, v in (opsets or {"": 17}).items()]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=imports), path)
    return path


def _ir(path: Path, **options: object) -> tuple[ModelIR, list[str]]:
    ir, found = pipeline.extract_checked(path, **options)  # type: ignore[arg-type]
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
    assert result.exit_code == 1
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
