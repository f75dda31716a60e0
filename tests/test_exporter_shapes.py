"""Shapes through what real exporters write, held to onnxruntime: each fixture's NAME.shapes.json
is the shape of every tensor when onnxruntime ran the exported file (weights and all) on the
inputs recorded there (tools/fixture_manifest.py onnxruntime_shapes), and every activation
ModTrans infers must equal it. The three classes of issue 26's real files:

- paddle2onnx's PP-OCR detector: float Resize scales computed by a Concat (a Paddle scale_factor
  tensor), and the same file after onnxruntime's symbolic_shape_infer.py, whose declared dims
  (`ConvTranspose_141_o0__d0`) and a wrong rank-0 Resize shape must yield to the computed ones;
- paddle2onnx's PP-OCRv4 recogniser: a reshape to sizes read from Shape, then a Concat along
  channels;
- a TorchScript VAD in Silero's shape: an If on the sample rate around each rate's model, with an
  If on the input's length and pads computed from it inside each branch.

And the ONNX spec's closed forms for the ops those chains end in (ConvTranspose, Resize), on
graphs whose values are declared with exporter-named symbolic dims."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from modtrans.extraction import extract
from modtrans.ir.document import ModelIR
from tests.conftest import ROOT

FOLDER = ROOT / "fixtures" / "onnx"
MANIFEST = json.loads((FOLDER / "MANIFEST.json").read_text())["files"]
SHAPED = sorted(name for name, entry in MANIFEST.items() if "true_shapes" in entry)


def _truths(name: str) -> list[tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]]:
    """(input shapes, onnxruntime's tensor shapes) per distinct input shapes. Runs that differ
    only in the value of a scalar input (a sample rate) ran different branches: their tensors
    are merged, and one both runs made with different shapes (downstream of an If whose
    branches disagree) is expected with the larger, as the README says ModTrans costs it."""
    document = json.loads((FOLDER / MANIFEST[name]["true_shapes"]).read_text())
    grouped: dict[tuple[tuple[str, tuple[int, ...]], ...], dict[str, tuple[int, ...]]] = {}
    for run in document["runs"]:
        inputs = tuple(sorted((k, tuple(v["shape"])) for k, v in run["inputs"].items()))
        merged = grouped.setdefault(inputs, {})
        for tensor, dims in run["tensors"].items():
            dims = tuple(dims)
            if tensor not in merged or math.prod(dims) > math.prod(merged[tensor]):
                merged[tensor] = dims
    return [(dict(inputs), tensors) for inputs, tensors in grouped.items()]


def _activations(ir: ModelIR) -> dict[str, tuple[Any, ...] | None]:
    return {a.name: a.shape for layer in ir.layers for a in (*layer.inputs, *layer.outputs)}


@pytest.mark.parametrize("name", SHAPED)
def test_every_inferred_shape_is_the_one_onnxruntime_computes(name: str) -> None:
    allowed = set(MANIFEST[name].get("expected_diagnostics", ()))
    for inputs, truth in _truths(name):
        ir, found = extract(FOLDER / name, input_shapes=inputs, file_hash=False)
        assert ir is not None, [str(d) for d in found]
        assert {d.code for d in found} <= allowed, [str(d) for d in found]  # no X504 / X510
        assert all(layer.flops_known for layer in ir.layers)
        seen = _activations(ir)
        compared = {t: seen[t] for t in truth if t in seen}
        assert compared == {t: truth[t] for t in compared}, (name, inputs)
        assert len(compared) > 20  # the layers' activations, not a handful


@pytest.mark.parametrize("name", ["paddle_ocr_det_tiny.onnx", "paddle_ocr_det_tiny_symbolic.onnx"])
def test_pp_ocr_detector_output_is_concrete_and_its_parameters_are_paddles(name: str) -> None:
    """The DB head's last ConvTranspose (2x2, stride 2) makes the 1/4-scale map full size: ONNX
    ConvTranspose, out = stride (in - 1) + ((k - 1) dilation + 1) - pads = 2 (80 - 1) + 2 = 160,
    then 320 (onnx/defs/nn/defs.cc convTransposeShapeInference; onnxruntime agrees, .shapes.json).
    Before, the FPN's Resize whose scales paddle2onnx computes (Concat of [1, 1] and the scale
    tensor) stayed unshaped, and so did everything after it: the symbolic file's output kept its
    declared `ConvTranspose_141_o0__d0` dims."""
    entry = MANIFEST[name]
    ir, found = extract(FOLDER / name, input_shapes={"x": (1, 3, 320, 320)}, file_hash=False)
    assert ir is not None
    last = [x for x in ir.layers if x.op_type == "ConvTranspose"][-1]
    assert last.inputs[0].shape == (1, 4, 160, 160)
    assert last.outputs[0].shape == (1, 1, 320, 320)
    assert ir.layers[-1].outputs[0].shape == (1, 1, 320, 320)  # the Sigmoid, fetch_name_0
    assert ir.totals.params == entry["paddle_parameters"]
    assert ir.totals.trainable_params == entry["paddle_trainable_parameters"]
    # symbolic_shape_infer.py declared a rank-0 shape for the Resize with computed sizes, which
    # onnx refuses to contradict: set aside, with a warning that says so
    declared = [d for d in found if d.code == "X503"]
    assert len(declared) == (1 if name.endswith("_symbolic.onnx") else 0)
    assert all(d.severity.label == "warning" and "declares" in d.message for d in declared)


def test_pp_ocr_v4_recogniser_concat_along_channels_feeds_the_convs() -> None:
    """EncoderWithSVTR concatenates the backbone feature (32 channels) with conv3's output (32)
    along channels, then conv4 (3x3 -> 4): [1, 64, 1, 160] from a 48x320 line (the backbone
    halves the width once, avg_pool2d [3, 2] once more: 320 / 2 / 1 / 2 = 80... measured:
    onnxruntime's shapes, .shapes.json). Paddle's own parameter count."""
    entry = MANIFEST["paddle_ocr_rec_tiny.onnx"]
    ir, _ = extract(FOLDER / "paddle_ocr_rec_tiny.onnx", input_shapes={"x": (1, 3, 48, 320)}, file_hash=False)
    assert ir is not None
    (_, truth), *_ = (t for t in _truths("paddle_ocr_rec_tiny.onnx") if t[0]["x"] == (1, 3, 48, 320))
    concat = next(x for x in ir.layers if x.op_type == "Concat" and len(x.inputs) == 2)
    assert concat.outputs[0].shape == truth[concat.outputs[0].name]
    assert concat.outputs[0].shape[1] == 64  # 32 + 32 channels
    assert ir.totals.params == entry["paddle_parameters"]
    assert ir.totals.trainable_params == entry["paddle_trainable_parameters"]


def test_a_recogniser_given_a_height_it_was_not_exported_for_is_refused_where_onnxruntime_refuses() -> None:
    """PP-OCRv4's CTC head squeezes the height the backbone leaves, 1 for a 48-pixel line. At 96
    it leaves 2, and onnxruntime 1.32.0 refuses this file (zero weights in place of the stripped
    ones): "Squeeze node. Name:'Squeeze.8' ... Dimension of input 2 must be 1 instead of 2.
    shape={1,16,2,80}". Before, X510 at the Transpose after it: FLOPs unknown, as if a shape
    were missing. X511 is a usage error (exit 2), the first misfit named."""
    _, found = extract(
        FOLDER / "paddle_ocr_rec_tiny.onnx", input_shapes={"x": (1, 3, 96, 320)}, file_hash=False
    )
    refused = [d for d in found if d.code == "X511"]
    assert [d.message for d in refused] == [
        "node 'Squeeze.8' (Squeeze): axis 2 of its input [1, 16, 2, 80] is 2, not 1"
    ]
    assert refused[0].severity.label == "error"


def test_a_reshape_to_a_size_the_model_fixes_is_refused_when_the_input_does_not_fit(tmp_path: Path) -> None:
    """paddle2onnx writes SVTR's reshape([0, H, W, C]) with H traced as the constant 1: target =
    Concat(0, 1, Shape[3:4], 120), as in rapidocr's ch_PP-OCRv4_rec_infer.onnx (p2o.Reshape.79).
    onnx's inference writes [N, 1, W, 120] whatever the input; ONNX Reshape keeps the element
    count (Operators.md), so [2, 120, 3, 10] (7,200) cannot become [2, 1, 10, 120] (2,400). At
    height 1 it can."""

    def ints(name: str, values: list[int]) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64))
        )

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        ints("three", [3]),
        ints("four", [4]),
        helper.make_node("Slice", ["shape", "three", "four"], ["w"]),
        ints("zero", [0]),
        ints("one", [1]),
        ints("channels", [120]),
        helper.make_node("Concat", ["zero", "one", "w", "channels"], ["target"], axis=0),
        helper.make_node("Conv", ["x", "w_conv"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Reshape", ["c", "target"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    path = _save(tmp_path, nodes, [_weights("w_conv", (120, 4, 1, 1))], {"r": 4})
    _, found = extract(path, input_shapes={"x": (2, 4, 3, 10)}, file_hash=False)
    refused = [d.message for d in found if d.code == "X511"]
    assert refused == [
        "node 'Reshape_9' (Reshape): its input [2, 120, 3, 10] holds 7,200 elements, "
        "its target [2, 1, 10, 120] 2,400"
    ]
    ir, found = extract(path, input_shapes={"x": (2, 4, 1, 10)}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]
    assert ir.layers[-1].outputs[0].shape == (2, 1, 10, 120)


def test_vad_branches_are_costed_with_the_shapes_each_sees() -> None:
    """Silero VAD's shape: `if sr == 16000` (values decide: X513) around each rate's model. Each
    branch's If on the input's length is taken (512 samples: kept whole at 16 kHz, the last 256
    at 8), its reflect pads fold (hop - len % hop + hop / 2: 32 - 0 + 16 = 48 -> 560; 8 - 0 + 4 =
    12 -> 268, as onnxruntime pads), and the frames the two rates make differ ([1, 32, 8] and
    [1, 32, 15]): X517, and the Tanh after the If is costed with the larger."""
    entry = MANIFEST["torchscript_vad_branches.onnx"]
    shapes = {"input": (1, 512), "state": (2, 1, 32), "sr": ()}
    ir, found = extract(FOLDER / "torchscript_vad_branches.onnx", input_shapes=shapes, file_hash=False)
    assert ir is not None
    assert {d.code for d in found} == set(entry["expected_diagnostics"]) == {"X513", "X517"}
    pads = {x.name.split(".")[1]: x.outputs[0].shape for x in ir.layers if x.op_type == "Pad"}
    assert pads == {"then_branch": (1, 1, 560), "else_branch": (1, 1, 268)}
    assert sum(x.op_type == "If" for x in ir.layers) == 0  # the If is not a layer; its branches are
    assert len([x for x in ir.layers if x.op_type == "LSTM"]) == 2  # each rate's LSTMCell
    # PyTorch's parameters and the STFT bases, buffers in PyTorch (as Silero's
    # forward_basis_buffer) but a Conv's weight in the file, stored like any other
    assert ir.totals.params == entry["torch_parameters"] + entry["torch_buffer_elements"]
    assert next(x for x in ir.layers if x.op_type == "Tanh").outputs[0].shape == (1, 32, 15)
    (warning,) = (d for d in found if d.code == "X517")
    assert "[1, 32, 8] in then_branch and [1, 32, 15] in else_branch" in warning.message


# ---- the ops those chains end in, by the ONNX spec's closed forms ---------------------------


def _symbolic(name: str, rank: int, element: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    """A value declared as onnxruntime's symbolic_shape_infer.py declares one it cannot compute."""
    return helper.make_tensor_value_info(name, element, [f"{name}_o0__d{i}" for i in range(rank)])


def _weights(name: str, dims: tuple[int, ...]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(dims, np.float32), name)


def _save(
    tmp_path: Path, nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], declared: dict[str, int]
) -> Path:
    """x [N, 4, H, W] -> nodes -> y, each value in `declared` (name: rank) with exporter-named
    symbolic dims."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "H", "W"])],
        [_symbolic("y", 4)],
        inits,
        value_info=[_symbolic(n, rank) for n, rank in declared.items()],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _conv_transpose_out(size: int, k: int, s: int, d: int, pad: int, out_pad: int) -> int:
    """ONNX ConvTranspose (Operators.md): output_shape[i] = stride[i] * (input_size[i] - 1) +
    output_padding[i] + ((kernel_shape[i] - 1) * dilations[i] + 1) - pads[start_i] - pads[end_i]."""
    return s * (size - 1) + out_pad + ((k - 1) * d + 1) - pad


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": [2, 2]},
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
        {"strides": [2, 2], "dilations": [2, 2], "pads": [0, 1, 2, 0]},
        {"strides": [3, 2], "group": 2},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"strides": [3, 2], "auto_pad": "SAME_LOWER"},
        {"strides": [2, 2], "output_shape": [19, 21]},
    ],
)
def test_conv_transpose_after_computed_scales_wins_over_declared_dims(
    tmp_path: Path, attrs: dict[str, Any]
) -> None:
    """A Resize by scales computed as paddle2onnx computes them, Concat([1, 1], Identity([2, 2])),
    then ConvTranspose 3x3, every value declared with symbolic dims: the spec's sizes win.
    Resize: out = floor(in * scale) (Operators.md, Resize), 9x10 -> 18x20. ConvTranspose: the
    formula above; auto_pad SAME_*: out = in * stride; output_shape given: that."""
    group = attrs.get("group", 1)
    nodes = [
        helper.make_node("Constant", [], ["ones"], value=numpy_helper.from_array(np.ones(2, np.float32))),
        helper.make_node("Constant", [], ["scale"], value=numpy_helper.from_array(np.full(2, 2, np.float32))),
        helper.make_node("Identity", ["scale"], ["scale_cast"]),
        helper.make_node("Concat", ["ones", "scale_cast"], ["scales"], axis=0),
        helper.make_node("Constant", [], ["roi"], value=numpy_helper.from_array(np.zeros(0, np.float32))),
        helper.make_node("Resize", ["x", "roi", "scales"], ["up"], mode="nearest"),
        helper.make_node(
            "ConvTranspose", ["up", "w"], ["y"], name="ConvTranspose_459", kernel_shape=[3, 3], **attrs
        ),
    ]
    path = _save(tmp_path, nodes, [_weights("w", (4, 6 // group, 3, 3))], {"up": 4, "scales": 1})
    ir, found = extract(path, input_shapes={"x": (2, 4, 9, 10)}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]  # declarations of the right rank: no X503 either
    layer = next(x for x in ir.layers if x.op_type == "ConvTranspose")
    assert layer.inputs[0].shape == (2, 4, 18, 20)
    strides = attrs["strides"]
    if "output_shape" in attrs:
        spatial = tuple(attrs["output_shape"])
    elif "auto_pad" in attrs:
        spatial = (18 * strides[0], 20 * strides[1])
    else:
        pads = attrs.get("pads", [0, 0, 0, 0])
        dilations = attrs.get("dilations", [1, 1])
        extra = attrs.get("output_padding", [0, 0])
        spatial = tuple(
            _conv_transpose_out(n, 3, strides[i], dilations[i], pads[i] + pads[i + 2], extra[i])
            for i, n in enumerate((18, 20))
        )
    assert layer.outputs[0].shape == (2, 6, *spatial)


def test_a_graph_output_declared_again_in_value_info_takes_the_computed_shape(tmp_path: Path) -> None:
    """symbolic_shape_infer.py lists the graph output in value_info too, with the dims it could
    not compute (rapidocr's PP-OCRv6_det_small.onnx: `fetch_name_0` as ConvTranspose_459_o0__d0
    ..d3 in both). onnx's inference updates the output and leaves the copy; in a graph with
    nothing to fold the copy stayed and the last Sigmoid kept the named dims (X510). ONNX keeps
    value_info for values that are neither input nor output (docs/IR.md, Graphs). Here the DB
    head's end: 1x1 Conv, ConvTranspose 2x2 stride 2, Sigmoid; out = 2 (9 - 1) + 2 = 18,
    2 (10 - 1) + 2 = 20 (Operators.md, ConvTranspose)."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"], kernel_shape=[1, 1]),
        helper.make_node("ConvTranspose", ["a", "w2"], ["up"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Sigmoid", ["up"], ["y"]),
    ]
    weights = [_weights("w1", (4, 4, 1, 1)), _weights("w2", (4, 1, 2, 2))]
    path = _save(tmp_path, nodes, weights, {"a": 4, "up": 4, "y": 4})
    ir, found = extract(path, input_shapes={"x": (2, 4, 9, 10)}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]
    spatial = (_conv_transpose_out(9, 2, 2, 1, 0, 0), _conv_transpose_out(10, 2, 2, 1, 0, 0))
    assert [x.outputs[0].shape for x in ir.layers] == [(2, 4, 9, 10), (2, 1, *spatial), (2, 1, *spatial)]
    assert all(layer.flops_known for layer in ir.layers)


def test_resize_sizes_from_shape_arithmetic_and_scales_from_a_division(tmp_path: Path) -> None:
    """Two ways exporters compute a Resize's operands from Shape: `sizes` = Concat(Slice(Shape,
    0, 2), Shape[2:] * 2) (paddle2onnx's size=[h * 2, w * 2]); `scales` = Div(Cast(target, float),
    Cast(Shape, float)) (PyTorch's older interpolate). ONNX Resize: sizes as given; scales:
    floor(in * scale), here 9x10 * [1, 1, 2, 2] -> 18x20."""

    def const(name: str, values: list[int]) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=numpy_helper.from_array(np.array(values, np.int64))
        )

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        const("zero", [0]),
        const("two", [2]),
        const("four", [4]),
        helper.make_node("Slice", ["shape", "zero", "two"], ["nc"]),
        helper.make_node("Slice", ["shape", "two", "four"], ["hw"]),
        helper.make_node("Mul", ["hw", "two"], ["hw2"]),
        helper.make_node("Concat", ["nc", "hw2"], ["sizes"], axis=0),
        helper.make_node("Constant", [], ["roi"], value=numpy_helper.from_array(np.zeros(0, np.float32))),
        helper.make_node("Constant", [], ["none"], value=numpy_helper.from_array(np.zeros(0, np.float32))),
        helper.make_node("Resize", ["x", "roi", "none", "sizes"], ["a"], mode="nearest"),
        helper.make_node("Cast", ["sizes"], ["target"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["shape"], ["source"], to=TensorProto.FLOAT),
        helper.make_node("Div", ["target", "source"], ["scales"]),
        helper.make_node("Resize", ["x", "roi", "scales"], ["b"], mode="nearest"),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    path = _save(tmp_path, nodes, [], {"a": 4, "b": 4, "scales": 1})
    ir, found = extract(path, input_shapes={"x": (2, 4, 9, 10)}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]
    assert [x.outputs[0].shape for x in ir.layers if x.op_type == "Resize"] == [(2, 4, 18, 20)] * 2
    assert ir.layers[-1].outputs[0].shape == (2, 4, 18, 20)


def test_a_reshape_and_concat_through_every_op_of_paddle2onnx_shape_chains(tmp_path: Path) -> None:
    """paddle2onnx builds sizes as Concat of Constant / Shape -> Slice pieces through Cast,
    Unsqueeze, Squeeze, Gather, Mul, Div, Equal / Where, Range, ConstantOfShape, Expand and Tile
    (its mappers for shape, slice, reshape2, full_like, arange, expand, tile, where). x [2, 8, 3,
    10]: H * W = 30 and C = 8 read from Shape make the sequence [2, 30, 8] and back [2, 8, 3,
    10] (reshape([0, H, W, C]).transpose, as SVTR does); a ConstantOfShape of x's shape and a
    Range(0, W) expanded and tiled over [2, 8, 3, W] are added; Concat with x along channels
    makes [2, 16, 3, 10], which a 1x1 Conv to 4 channels keeps spatially (ONNX Concat, Conv)."""

    def ints(name: str, values: list[int] | int) -> onnx.NodeProto:
        value = numpy_helper.from_array(np.array(values, np.int64))
        return helper.make_node("Constant", [], [name], value=value)

    half = numpy_helper.from_array(np.array([0.5], np.float32))

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Cast", ["shape"], ["shape32"], to=TensorProto.INT32),
        helper.make_node("Cast", ["shape32"], ["shape64"], to=TensorProto.INT64),
        ints("i1", [1]),
        ints("i2", 2),
        ints("i3", [3]),
        ints("zero", [0]),
        ints("axes0", [0]),
        helper.make_node("Slice", ["shape64", "i1", "i3"], ["ch"]),  # [C, H]
        helper.make_node("Gather", ["shape64", "i2"], ["h"], axis=0),  # scalar H
        helper.make_node("Squeeze", ["i3", "axes0"], ["three"]),
        helper.make_node("Gather", ["shape64", "three"], ["w"], axis=0),  # scalar W
        helper.make_node("Mul", ["h", "w"], ["hw"]),
        helper.make_node("Div", ["hw", "w"], ["h_again"]),
        helper.make_node("Equal", ["h_again", "h"], ["same"]),
        helper.make_node("Where", ["same", "hw", "w"], ["seq"]),
        helper.make_node("Unsqueeze", ["seq", "axes0"], ["seq1"]),
        helper.make_node("Gather", ["ch", "zero"], ["c1"], axis=0),
        helper.make_node("Concat", ["zero", "seq1", "c1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["tokens"]),  # [2, 30, 8] (0: copied)
        helper.make_node("Softmax", ["tokens"], ["mixed"], axis=-1),
        helper.make_node("Unsqueeze", ["h", "axes0"], ["h1"]),
        helper.make_node("Unsqueeze", ["w", "axes0"], ["w1"]),
        helper.make_node("Concat", ["zero", "h1", "w1", "c1"], ["back"], axis=0),
        helper.make_node("Reshape", ["mixed", "back"], ["grid"]),
        helper.make_node("Transpose", ["grid"], ["z"], perm=[0, 3, 1, 2]),  # [2, 8, 3, 10]
        helper.make_node("ConstantOfShape", ["shape64"], ["half"], value=half),
        helper.make_node("Add", ["z", "half"], ["z2"]),
        ints("start", 0),
        ints("step", 1),
        helper.make_node("Range", ["start", "w", "step"], ["positions"]),
        helper.make_node("Slice", ["shape64", "zero", "i3"], ["nch"]),  # [N, C, H]
        helper.make_node("Concat", ["nch", "i1"], ["grid1"], axis=0),  # [N, C, H, 1]
        helper.make_node("Expand", ["positions", "grid1"], ["spread"]),  # [N, C, H, W]
        helper.make_node("Cast", ["spread"], ["spread_f"], to=TensorProto.FLOAT),
        ints("once", [1, 1, 1, 1]),
        helper.make_node("Tile", ["spread_f", "once"], ["tiled"]),
        helper.make_node("Add", ["z2", "tiled"], ["z3"]),
        helper.make_node("Concat", ["x", "z3"], ["both"], axis=1),  # [2, 16, 3, 10]
        helper.make_node("Conv", ["both", "w_conv"], ["y"], kernel_shape=[1, 1]),
    ]
    declared = {"tokens": 3, "mixed": 3, "grid": 4, "half": 4, "tiled": 4}
    declared |= dict.fromkeys(("z", "z2", "z3", "both"), 4)
    path = _save(tmp_path, nodes, [_weights("w_conv", (4, 16, 1, 1))], declared)
    ir, found = extract(path, input_shapes={"x": (2, 8, 3, 10)}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]
    seen = _activations(ir)
    assert seen["tokens"] == (2, 30, 8)
    assert seen["z3"] == (2, 8, 3, 10)
    assert seen["both"] == (2, 16, 3, 10)
    assert seen["y"] == (2, 4, 3, 10)
    assert all(layer.flops_known for layer in ir.layers)
