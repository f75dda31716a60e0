"""rapidocr's published PP-OCR files, the ones issue 34 met, from the real-model corpus
(tests/realmodels.py fetches the pinned wheels and checks each file's SHA-256):

- rapidocr 3.10.0 (`pip download --no-deps rapidocr==3.10.0`): rapidocr/models/PP-OCRv6_det_small.onnx,
  a paddle2onnx export after onnxruntime's symbolic_shape_infer.py, its output `fetch_name_0`
  declared in value_info too as [ConvTranspose_459_o0__d0, ..d3];
- rapidocr-onnxruntime 1.4.4: rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx, whose SVTR
  neck reshapes to [0, 1, W, 120] (a height of 1, traced as a constant).

What each must give is independent of ModTrans: the output shapes onnxruntime 1.32.0 computed
(CPU, every graph optimisation off), the parameter bytes onnx's numpy_helper sums over the file
(the floats of more than one element: PP-OCRv6_det_small's 9,813,504 B of initializers less the six
Resize scales of 4 floats, 96 B, plus the 4 B one-element bias after its one-channel
ConvTranspose; ch_PP-OCRv4_rec_infer's 10,760,436 B of Constant values), the first Conv's FLOPs
by hand. Layer counts and total FLOPs are recorded from ModTrans at the commit that fixed them,
reviewed against those checks, so that a change shows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from modtrans.extraction import extract
from tests import realmodels

pytestmark = pytest.mark.real

FILES = {
    "PP-OCRv6_det_small.onnx": ("rapidocr==3.10.0", "rapidocr/models/"),
    "ch_PP-OCRv4_rec_infer.onnx": ("rapidocr-onnxruntime==1.4.4", "rapidocr_onnxruntime/models/"),
}


def _real(name: str) -> Path:
    """The file `name` of its pinned wheel, fetched and checked (or the test skipped offline)."""
    package, folder = FILES[name]
    return realmodels.fetched(realmodels.entry(package, folder + name))


def _conv_flops(c_in: int, c_out: int, k: int, out: tuple[int, int]) -> int:
    """2 multiply-adds' worth a weight per output position: 2 Cout Cin k k Hout Wout."""
    return 2 * c_out * c_in * k * k * math.prod(out)


@pytest.mark.parametrize(
    ("name", "shape", "layers", "param_bytes", "forward", "output", "first_conv"),
    [
        # DB head: ConvTranspose 2x2 stride 2 twice, 320 -> 1/4 -> 1/2 -> 1, a one-channel map
        (
            "PP-OCRv6_det_small.onnx",
            (1, 3, 320, 320),
            317,
            9_813_412,
            2_203_754_552,
            (1, 1, 320, 320),
            (3, 24),
        ),
        # CTC: W / 8 = 40 time steps by 6,625 classes (onnxruntime)
        (
            "ch_PP-OCRv4_rec_infer.onnx",
            (1, 3, 48, 320),
            381,
            10_760_436,
            1_456_677_960,
            (1, 40, 6625),
            (3, 16),
        ),
    ],
)
def test_rapidocr_files_translate_with_onnxruntimes_shapes(
    name: str,
    shape: tuple[int, ...],
    layers: int,
    param_bytes: int,
    forward: int,
    output: tuple[int, ...],
    first_conv: tuple[int, int],
) -> None:
    ir, found = extract(_real(name), input_shapes={"x": shape}, file_hash=False)
    assert ir is not None
    assert not found, [str(d) for d in found]  # no X504 / X510
    assert all(layer.flops_known for layer in ir.layers)
    assert ir.layers[-1].outputs[0].shape == output
    assert sum(p.bytes for layer in ir.layers for p in layer.params) == param_bytes
    conv = next(x for x in ir.layers if x.op_type == "Conv")  # 3x3 stride 2 pad 1: half the size
    c_in, c_out = first_conv
    assert conv.outputs[0].shape == (1, c_out, shape[2] // 2, shape[3] // 2)
    assert conv.flops.forward == _conv_flops(c_in, c_out, 3, (shape[2] // 2, shape[3] // 2))
    assert (len(ir.layers), ir.totals.flops.forward) == (layers, forward)


def test_the_recogniser_at_a_height_it_cannot_take_is_refused_where_onnxruntime_refuses() -> None:
    """At 1x3x320x320 the backbone leaves a height of 20, pooled to 6 (avg_pool [3, 2]); the
    neck's Reshape to [0, 1, W, 120] cannot hold [1, 240, 120]. onnxruntime 1.32.0, optimisations
    off: "Name:'p2o.Reshape.79' ... The input tensor cannot be reshaped to the requested shape.
    Input shape:{1,240,120}, requested shape:{1,1,40,120}" (on: at p2o.Concat.7, heights 1 and
    6). Issue 34 met it as 'p2o.Concat.7 FLOPs unknown' (X510)."""
    _, found = extract(
        _real("ch_PP-OCRv4_rec_infer.onnx"), input_shapes={"x": (1, 3, 320, 320)}, file_hash=False
    )
    (refused,) = (d for d in found if d.code == "X511")
    assert refused.message == (
        "node 'p2o.Reshape.79' (Reshape): its input [1, 240, 120] holds 28,800 elements, "
        "its target [1, 1, 40, 120] 4,800"
    )
