"""Extraction on small graphs built here with onnx.helper: which layers, which parameters, FLOPs.

Every expected number is worked out in a comment from the op's definition (ONNX operator docs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modtrans.extraction import extract
from modtrans.ir.document import Kind, ModelIR, Role


def _init(name: str, shape: tuple[int, ...], dtype: type = np.float32) -> TensorProto:
    return numpy_helper.from_array(np.ones(shape, dtype=dtype), name)


def _model(
    tmp_path: Path,
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    inits: list[TensorProto],
    *,
    opset: int = 17,
    name: str = "m.onnx",
    check: bool = True,
) -> Path:
    """Save a model whose output type is what shape inference says (the checker wants one)."""
    last = nodes[-1].output[0]
    graph = helper.make_graph(nodes, "g", inputs, [onnx.ValueInfoProto(name=last)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(model)
    typed = [
        v
        for v in (*inferred.graph.value_info, *inferred.graph.output)
        if v.name == last and v.type.ByteSize()
    ]
    model.graph.output[0].CopyFrom(
        typed[0] if typed else helper.make_tensor_value_info(last, TensorProto.FLOAT, [])
    )
    if check:
        onnx.checker.check_model(model)
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _x(name: str, *dims: int | str, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, list(dims))


def _ok(path: Path, **kwargs: Any) -> ModelIR:
    ir, found = extract(path, **kwargs)
    assert ir is not None, found
    assert not [d for d in found if d.severity == 1], found
    return ir


def test_grouped_conv_flops_and_gemm(tmp_path: Path) -> None:
    # x 2x8x10x10, W 16x(8/4)x3x3, group 4, pads 1 -> y 2x16x10x10.
    # MACs = N*Cout*H*W*(Cin/g)*kh*kw = 2*16*100*2*9 = 57,600; bias adds 2*16*100 = 3,200.
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["y"], name="conv", group=4, pads=[1, 1, 1, 1])]
    path = _model(tmp_path, nodes, [_x("x", 2, 8, 10, 10)], [_init("W", (16, 2, 3, 3)), _init("B", (16,))])
    (layer,) = _ok(path).layers
    assert layer.kind is Kind.CONV
    assert layer.flops.forward == 2 * 57_600 + 3_200
    assert layer.flops.input_grad == 2 * 57_600
    assert layer.flops.weight_grad == 2 * 57_600 + 3_200
    assert layer.gemm is not None
    assert (layer.gemm.m, layer.gemm.k, layer.gemm.n, layer.gemm.groups) == (200, 18, 4, 4)
    assert [(p.name, p.role, p.elements, p.bytes) for p in layer.params] == [
        ("W", Role.WEIGHT, 288, 1152),
        ("B", Role.BIAS, 16, 64),
    ]


def test_conv_transpose(tmp_path: Path) -> None:
    # x 1x4x5x5, W 4x6x2x2 (Cin x Cout/g x kh x kw), stride 2 -> y 1x6x10x10.
    # MACs = N*Cin*Hin*Win*(Cout/g)*kh*kw = 1*4*25*6*4 = 2,400.
    nodes = [helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="up", strides=[2, 2])]
    path = _model(tmp_path, nodes, [_x("x", 1, 4, 5, 5)], [_init("W", (4, 6, 2, 2))])
    (layer,) = _ok(path).layers
    assert layer.kind is Kind.CONV_TRANSPOSE
    assert layer.flops.forward == 4_800
    assert layer.outputs[0].shape == (1, 6, 10, 10)


def test_gemm_with_transposed_weight(tmp_path: Path) -> None:
    # x 3x20, W 10x20 with transB -> y 3x10: MACs 3*20*10 = 600; bias adds 30.
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="fc", transB=1)]
    path = _model(tmp_path, nodes, [_x("x", 3, 20)], [_init("W", (10, 20)), _init("b", (10,))])
    (layer,) = _ok(path).layers
    assert layer.kind is Kind.LINEAR
    assert layer.flops.forward == 1_230
    assert layer.gemm is not None
    assert (layer.gemm.m, layer.gemm.k, layer.gemm.n) == (3, 20, 10)


def test_matmul_bias_add_is_folded_into_the_linear_layer(tmp_path: Path) -> None:
    # x 2x5x8 @ W 8x4 + b: 10 rows x 8 x 4 = 320 MACs; the Add is the bias (40 adds), not a layer.
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="proj/MatMul"),
        helper.make_node("Add", ["h", "b"], ["y"], name="proj/Add"),
        helper.make_node("Relu", ["y"], ["z"], name="act"),
    ]
    path = _model(tmp_path, nodes, [_x("x", 2, 5, 8)], [_init("W", (8, 4)), _init("b", (4,))])
    ir = _ok(path)
    assert [x.op_type for x in ir.layers] == ["MatMul", "Relu"]
    linear = ir.layers[0]
    assert [(p.name, p.role) for p in linear.params] == [("W", Role.WEIGHT), ("b", Role.BIAS)]
    assert linear.fused == ("proj/Add",)
    assert linear.flops.forward == 640 + 40
    assert linear.gemm is not None
    assert (linear.gemm.m, linear.gemm.k, linear.gemm.n) == (10, 8, 4)


def test_attention_matmul_of_two_activations(tmp_path: Path) -> None:
    # q 2x3x4x8 @ kT 2x3x8x4: 6 batched 4x8x4 GEMMs = 768 MACs; both operands need gradients.
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"], name="scores")]
    path = _model(tmp_path, nodes, [_x("q", 2, 3, 4, 8), _x("k", 2, 3, 8, 4)], [])
    (layer,) = _ok(path).layers
    assert layer.kind is Kind.MATMUL
    assert not layer.params
    assert (layer.flops.forward, layer.flops.input_grad, layer.flops.weight_grad) == (1_536, 3_072, 0)


def test_batchnorm_statistics_are_not_trainable(tmp_path: Path) -> None:
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], name="bn")]
    inits = [_init("s", (6,)), _init("b", (6,)), _init("m", (6,)), _init("v", (6,))]
    path = _model(tmp_path, nodes, [_x("x", 1, 6, 4, 4)], inits)
    ir = _ok(path)
    (layer,) = ir.layers
    assert [(p.role, p.trainable) for p in layer.params] == [
        (Role.SCALE, True),
        (Role.SHIFT, True),
        (Role.STATISTIC, False),
        (Role.STATISTIC, False),
    ]
    assert (ir.totals.params, ir.totals.trainable_params) == (24, 12)


def test_layernorm_and_embedding(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
        helper.make_node("LayerNormalization", ["e", "g", "beta"], ["y"], name="ln", axis=-1),
    ]
    inputs = [_x("ids", 2, 7, dtype=TensorProto.INT64)]
    path = _model(
        tmp_path, nodes, inputs, [_init("table", (100, 16)), _init("g", (16,)), _init("beta", (16,))]
    )
    embed, norm = _ok(path).layers
    assert embed.kind is Kind.EMBEDDING
    assert embed.params[0].elements == 1_600
    assert embed.flops.weight_grad == 2 * 7 * 16  # scatter-add of every looked-up row
    assert norm.kind is Kind.NORM
    assert [p.role for p in norm.params] == [Role.SCALE, Role.SHIFT]


def test_lstm(tmp_path: Path) -> None:
    # seq 5, batch 2, input 3, hidden 4: W 1x16x3, R 1x16x4, B 1x32.
    # MACs = T*B*dirs*4H*(I+H) = 5*2*1*16*7 = 1,120.
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"], name="lstm", hidden_size=4)]
    inits = [_init("W", (1, 16, 3)), _init("R", (1, 16, 4)), _init("B", (1, 32))]
    path = _model(tmp_path, nodes, [_x("x", 5, 2, 3)], inits)
    (layer,) = _ok(path).layers
    assert layer.kind is Kind.RNN
    assert [p.role for p in layer.params] == [Role.WEIGHT, Role.WEIGHT, Role.BIAS]
    assert layer.flops.input_grad == 2 * 1_120


def test_weights_reached_through_chains_and_constants(tmp_path: Path) -> None:
    # W0 -> Identity -> Cast(fp16->fp32) -> conv; W1 from a Constant node -> Transpose -> MatMul.
    w0 = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float16), "W0")
    w1 = numpy_helper.from_array(np.ones((4, 4), np.float32), "W1value")
    nodes = [
        helper.make_node("Identity", ["W0"], ["W0i"], name="id"),
        helper.make_node("Cast", ["W0i"], ["W0f"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Conv", ["x", "W0f"], ["c"], name="conv"),
        helper.make_node("Constant", [], ["W1"], name="const", value=w1),
        helper.make_node("Transpose", ["W1"], ["W1t"], name="t"),
        helper.make_node("ReduceMean", ["c"], ["r"], name="pool", axes=[2, 3], keepdims=0),
        helper.make_node("MatMul", ["r", "W1t"], ["y"], name="fc"),
    ]
    path = _model(tmp_path, nodes, [_x("x", 1, 3, 2, 2)], [w0], opset=17)
    ir = _ok(path)
    assert [x.name for x in ir.layers] == ["conv", "pool", "fc"]
    conv, _, fc = ir.layers
    assert (conv.params[0].name, conv.params[0].dtype, conv.params[0].bytes) == ("W0", "float16", 24)
    assert (fc.params[0].name, fc.params[0].bytes) == ("W1", 64)


def test_quantized_weights_sized_by_their_dtype(tmp_path: Path) -> None:
    # int8 weight 8x4x3x3 = 288 bytes through DequantizeLinear with per-channel fp32 scales (8).
    wq = numpy_helper.from_array(np.ones((8, 4, 3, 3), np.int8), "Wq")
    scale = numpy_helper.from_array(np.ones(8, np.float32), "scale")
    zero = numpy_helper.from_array(np.zeros(8, np.int8), "zero")
    nodes = [
        helper.make_node("DequantizeLinear", ["Wq", "scale", "zero"], ["W"], name="dq", axis=0),
        helper.make_node("Conv", ["x", "W"], ["y"], name="conv"),
    ]
    path = _model(tmp_path, nodes, [_x("x", 1, 4, 5, 5)], [wq, scale, zero])
    (layer,) = _ok(path).layers
    weight, *quant = layer.params
    # a quantized model's stored weights are its parameters, sized as stored and treated as trained
    # (extraction/ops/quantized.py): a workload for the model as it is
    assert (weight.name, weight.dtype, weight.bytes, weight.trainable) == ("Wq", "int8", 288, True)
    assert [(q.name, q.role) for q in quant] == [("scale", Role.QUANT), ("zero", Role.QUANT)]


def test_bfloat16_and_int4_sizes(tmp_path: Path) -> None:
    w = helper.make_tensor("W", TensorProto.BFLOAT16, [6, 10], np.zeros(60, np.uint16).tolist())
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    path = _model(tmp_path, nodes, [_x("x", 2, 6, dtype=TensorProto.BFLOAT16)], [w], check=False)
    (layer,) = _ok(path).layers
    assert (layer.params[0].dtype, layer.params[0].bytes) == ("bfloat16", 120)


def test_tied_weight_counted_once(tmp_path: Path) -> None:
    nodes = [
        helper.make_node("Gather", ["E", "ids"], ["h"], name="embed"),
        helper.make_node("Transpose", ["E"], ["Et"], name="tie"),
        helper.make_node("MatMul", ["h", "Et"], ["logits"], name="head"),
    ]
    path = _model(tmp_path, nodes, [_x("ids", 1, 3, dtype=TensorProto.INT64)], [_init("E", (50, 8))])
    ir = _ok(path)
    embed, head = ir.layers
    assert head.params[0].shared_with == "embed"
    assert embed.params[0].shared_with is None
    assert ir.totals.params == 400


def test_parameters_inside_if_branches(tmp_path: Path) -> None:
    then_graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "Wt"], ["o"], name="then_mm")],
        "then",
        [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 2])],
        [_init("Wt", (3, 2))],
    )
    else_graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "We"], ["o2"], name="else_mm")],
        "else",
        [],
        [helper.make_tensor_value_info("o2", TensorProto.FLOAT, [1, 2])],
        [_init("We", (3, 2))],
    )
    nodes = [
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_graph, else_branch=else_graph)
    ]
    inputs = [_x("x", 1, 3), _x("cond", dtype=TensorProto.BOOL)]
    path = _model(tmp_path, nodes, inputs, [])
    ir = _ok(path)
    assert sorted(x.name for x in ir.layers) == ["branch/else_branch/else_mm", "branch/then_branch/then_mm"]
    assert ir.totals.params == 12


def test_custom_op_warns_and_keeps_the_layer(tmp_path: Path) -> None:
    nodes = [helper.make_node("FancyOp", ["x", "W"], ["y"], name="fancy", domain="com.example")]
    graph = helper.make_graph(nodes, "g", [_x("x", 1, 4)], [_x("y", 1, 4)], [_init("W", (4, 4))])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    )
    path = tmp_path / "custom.onnx"
    onnx.save(model, path)
    ir, found = extract(path)
    assert ir is not None
    assert sorted(d.code for d in found) == ["X505", "X510"]  # the op has no model; the layer's FLOPs unknown
    assert "com.example::FancyOp" in next(d.message for d in found if d.code == "X505")
    (layer,) = ir.layers
    assert layer.kind is Kind.OTHER
    assert layer.params[0].elements == 16


def test_unknown_batch_is_named_and_resolved_by_batch(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="r")]
    path = _model(tmp_path, nodes, [_x("x", "N", 4)], [])
    ir, found = extract(path)
    codes = sorted((d.code, "'x'" in d.message and "'N'" in d.message) for d in found)
    assert codes == [("X504", True), ("X510", True)]
    assert any("layer r (Relu): FLOPs unknown" in d.message for d in found)  # never a silent zero
    assert ir is not None
    assert ir.layers[0].flops.forward == 0
    fixed = _ok(path, batch=3)
    assert fixed.layers[0].flops.forward == 12
    assert fixed.provenance.input_shapes == {"x": (3, 4)}


def test_input_shape_errors(tmp_path: Path) -> None:
    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="r")], [_x("x", "N", 4)], [])
    _, found = extract(path, input_shapes={"nope": (1, 4)})
    assert [d.code for d in found] == ["X501"]
    assert "the graph's inputs are x" in found[0].message
    _, found = extract(path, input_shapes={"x": (1, 4, 4)})
    assert [d.code for d in found] == ["X501"]


def test_embedded_weights_are_never_copied(tmp_path: Path) -> None:
    # A 64 MB initializer: the stripped bytes onnx parses are a few hundred bytes.
    from modtrans.extraction import wire

    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    path = _model(tmp_path, nodes, [_x("x", 1, 4096)], [_init("W", (4096, 4096))], check=False)
    stripped = wire.strip_file(path)
    assert len(stripped.data) < 1_000
    assert stripped.tensors == {"W": 4096 * 4096 * 4}
    ir = _ok(path)
    assert ir.layers[0].params[0].bytes == 64 * 2**20
    assert not ir.provenance.architecture_only


def test_external_data_is_not_needed_and_may_be_missing(tmp_path: Path) -> None:
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "g", [_x("x", 1, 256)], [_x("y", 1, 256)], [_init("W", (256, 256))])
    model = helper.make_model(graph)
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.data", size_threshold=0)
    (tmp_path / "ext.data").unlink()  # translation needs dims and dtypes only
    ir = _ok(path)
    assert ir.layers[0].params[0].bytes == 256 * 256 * 4


@pytest.mark.parametrize("location", ["../escape.data", "/etc/passwd", "sub/../../x.data", "C:\\\\w.data"])
def test_external_data_outside_the_folder_is_refused(tmp_path: Path, location: str) -> None:
    w = _init("W", (2, 2))
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value=location)
    ir, found = extract(_raw_matmul(tmp_path, w))
    assert ir is None
    assert [d.code for d in found] == ["X506"]


def test_absurd_dims_are_refused(tmp_path: Path) -> None:
    w = TensorProto(name="W", data_type=TensorProto.FLOAT, dims=[2**40, 2**40])  # 2^82 floats
    ir, found = extract(_raw_matmul(tmp_path, w))
    assert ir is None
    assert [d.code for d in found] == ["X507"]


def _raw_matmul(tmp_path: Path, weight: TensorProto) -> Path:
    """x[1x2] @ weight, saved as is (no checker: the weight is deliberately broken)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
    graph = helper.make_graph(nodes, "g", [_x("x", 1, 2)], [_x("y", 1, 2)], [weight])
    path = tmp_path / "raw.onnx"
    path.write_bytes(helper.make_model(graph).SerializeToString())
    return path


def _one_gemm(tmp_path: Path) -> Path:
    """x[2x64] through one Gemm by W[64x64], saved as the checker accepts it: a valid model most
    of whose bytes are W's payload, for the tests that cut or corrupt it."""
    nodes = [helper.make_node("Gemm", ["x", "W"], ["y"], name="fc")]
    return _model(tmp_path, nodes, [_x("x", 2, 64)], [_init("W", (64, 64))])


@pytest.mark.parametrize("cut", [1, 100, 1000, -1])
def test_truncated_model_is_a_one_line_error(tmp_path: Path, cut: int) -> None:
    source = _one_gemm(tmp_path)
    data = source.read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:cut])
    ir, found = extract(path)
    assert ir is None
    assert [d.code for d in found] == ["F004"]
    assert "\n" not in found[0].message


def test_other_files_are_not_onnx(tmp_path: Path) -> None:
    for name, data in [
        ("text.onnx", b"DATA\n1\nconv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 4 1\n"),
        ("empty.onnx", b""),
        ("zip.onnx", b"PK\x03\x04" + bytes(100)),
    ]:
        path = tmp_path / name
        path.write_bytes(data)
        ir, found = extract(path)
        assert ir is None, name
        assert [d.code for d in found] == ["F004"], name
    ir, found = extract(tmp_path / "missing.onnx")
    assert ir is None
    assert [d.code for d in found] == ["F001"]


@pytest.mark.fuzz
def test_mutated_real_models_never_raise(tmp_path: Path) -> None:
    """300 corruptions of a real export (flipped, dropped and inserted bytes): extraction returns a
    model or one-line diagnostics, never an exception."""
    import random

    from modtrans import zoo

    entry = zoo.get("vgg16")
    assert entry is not None
    original = entry.path.read_bytes()
    rng = random.Random(7)
    outcomes: set[str] = set()
    for case in range(300):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(data))
            action = rng.choice(("flip", "drop", "insert"))
            if action == "flip":
                data[at] ^= 1 << rng.randrange(8)
            elif action == "drop":
                del data[at : at + rng.randint(1, 64)]
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        path = tmp_path / f"m{case}.onnx"
        path.write_bytes(bytes(data))
        ir, found = extract(path, batch=1)
        assert all("\n" not in d.message for d in found)
        outcomes.add("ir" if ir is not None else found[0].code)
        path.unlink()
    assert "F004" in outcomes  # most corruptions break the protobuf framing


@pytest.mark.fuzz
def test_mutated_models_through_the_whole_translation(tmp_path: Path) -> None:
    """Corrupted exports of a larger graph go through translation (strategy, cost, writer) without
    an exception: either a workload or diagnostics."""
    import random

    from modtrans import zoo
    from modtrans.pipeline import Options, translate_checked
    from modtrans.workload.write import write

    entry = zoo.get("mobilenet_v2")
    assert entry is not None
    original = entry.path.read_bytes()
    rng = random.Random(11)
    for case in range(40):
        data = bytearray(original)
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(data))
            data[at] ^= 1 << rng.randrange(8)
        path = tmp_path / f"m{case}.onnx"
        path.write_bytes(bytes(data))
        result = translate_checked(path, Options(batch=1))
        if result.workload is not None:
            write(result.workload, "astra-sim")
        else:
            assert result.diagnostics


def test_every_cut_of_a_model_is_refused_where_protobuf_refuses_it(tmp_path: Path) -> None:
    """The stripper's reading of the wire bytes (extraction/wire.py over integers.decoded) at
    every length of a real model: a prefix protobuf itself cannot parse is a WireError (never an
    IndexError or a bare ValueError from the varint reader), and one it parses strips to bytes
    protobuf parses too."""
    from google.protobuf.message import DecodeError

    from modtrans.extraction.wire import WireError, strip_bytes

    source = _one_gemm(tmp_path)
    data = source.read_bytes()
    refused = 0
    for cut in range(len(data) - 64 * 64 * 4 + 64):  # all but most of W's payload
        try:
            onnx.ModelProto.FromString(data[:cut])
        except DecodeError:
            with pytest.raises(WireError, match=r" at byte [0-9]+$"):
                strip_bytes(data[:cut])
            refused += 1
            continue
        onnx.ModelProto.FromString(strip_bytes(data[:cut]).data)
    assert refused > 0
