"""Build fixtures/onnx/paddle_ocr_tiny.onnx: a tiny text recogniser in PaddleOCR's shape, exported
by paddle2onnx, the exporter behind the Paddle-derived OCR models shipped in PyPI packages; and
two more in the shapes of PP-OCR's detector and its PP-OCRv4 recogniser (below).

What paddle2onnx writes that other exporters do not: every weight is a `Constant` node (no
initializers), inputs are named `DynamicDimension.N`, and sizes computed from `paddle.shape` are
subgraphs of Shape / Slice / Concat / arithmetic feeding Reshape and Pad (here the width is padded
to a multiple of 8, as recognisers pad their input). The model: Conv + BatchNorm + ReLU, MaxPool,
Conv2DTranspose, the computed Pad, a reshape of [B, C, H, W] to the sequence [B, W, C*H], a
bidirectional LSTM and a CTC-style Linear + Softmax head. MANIFEST.json records Paddle's own
parameter count (all parameters, and those not stop_gradient).

paddle_ocr_det_tiny.onnx: PP-OCR's DB text detector in small: a strided conv backbone, DBFPN
(1x1 lateral convs; top-down Resize(nearest) + Add, where one upsampling takes its size from the
lateral's Shape -> Slice and one a `scale_factor` tensor, which paddle2onnx writes as the float
scales Concat(Constant [1, 1], Identity(scale)); four 3x3 convs each upsampled to 1/4 and
Concat along channels) and the DB head (Conv + BN + ReLU, two ConvTranspose 2x2 stride 2, Sigmoid).
paddle_ocr_det_tiny_symbolic.onnx is the same file after onnxruntime's symbolic_shape_infer.py
(as many published PP-OCR files went through): every value declared with a shape, the dims it
could not compute named like `ConvTranspose_141_o0__d0`, and a rank-0 shape for the Resize whose
sizes are computed.

paddle_ocr_rec_tiny.onnx: PP-OCRv4's recogniser (SVTR-LCNet) in small: LCNet depthwise-separable
blocks with squeeze-excitation and height-only strides, avg_pool2d [3, 2], then the SVTR neck
(EncoderWithSVTR: conv, global-attention blocks on `z.flatten(2)`, `z.reshape([0, H, W, C])` with
H, W, C read from `z.shape`, conv, Concat with the backbone feature along channels, two convs)
and a CTC Linear + Softmax, exported with the height and width dynamic.

Each file's `.shapes.json` holds the shape of every tensor when onnxruntime runs the exported
file (weights and all) on the input shapes the tests give.

Run in an environment of its own (paddle2onnx 2.1.0 with paddlepaddle 3.3.1, onnxruntime 1.32.0
and sympy were used), optionally naming the files to build (det, rec, tiny; all by default):
    pip install paddlepaddle paddle2onnx packaging onnxruntime sympy
    PYTHONPATH=. python tools/build_paddle_fixture.py [det] [rec] [tiny]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import paddle  # type: ignore[import-not-found]
import paddle2onnx  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import onnxruntime_shapes, record, record_shapes

NAME = "paddle_ocr_tiny.onnx"


class Recogniser(paddle.nn.Layer):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 16, 3, padding=1)
        self.bn = paddle.nn.BatchNorm2D(16)
        self.pool = paddle.nn.MaxPool2D(2, 2)
        self.up = paddle.nn.Conv2DTranspose(16, 8, 2, stride=2)
        self.lstm = paddle.nn.LSTM(8 * 8, 24, direction="bidirect")
        self.fc = paddle.nn.Linear(48, 37)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        y = self.up(self.pool(paddle.nn.functional.relu(self.bn(self.conv(x)))))  # [B, 8, 8, W]
        width = paddle.shape(y)[3]
        y = paddle.nn.functional.pad(y, [0, (8 - width % 8) % 8, 0, 0])  # pads computed from the shape
        b, c, h, w = (paddle.shape(y)[i] for i in range(4))
        y = paddle.reshape(paddle.transpose(y, [0, 3, 1, 2]), [b, w, c * h])
        y, _ = self.lstm(y)
        return paddle.nn.functional.softmax(self.fc(y), axis=2)


def tiny() -> None:
    paddle.seed(0)
    net = Recogniser()
    net.eval()
    parameters = sum(int(p.numel()) for p in net.parameters())
    trainable = sum(int(p.numel()) for p in net.parameters() if not p.stop_gradient and p.trainable)
    with tempfile.TemporaryDirectory() as tmp:
        spec = [paddle.static.InputSpec([None, 3, 8, None], "float32", "x")]
        paddle.jit.save(net, f"{tmp}/net", input_spec=spec)
        model_file = next(p.name for p in Path(tmp).iterdir() if p.suffix in (".json", ".pdmodel"))
        out = Path(tmp) / NAME
        subprocess.run(
            [sys.executable, "-m", "paddle2onnx.command", "-m", tmp, "-mf", model_file,
             "-pf", "net.pdiparams", "-s", str(out), "--optimize_tool", "None"],
            check=True,
        )  # fmt: skip
        record(
            NAME,
            out.read_bytes(),
            {
                "exporter": f"paddle2onnx {paddle2onnx.__version__} (paddlepaddle {paddle.__version__})",
                "paddle_parameters": parameters,
                "paddle_trainable_parameters": trainable,
                "note": "weights in Constant nodes; Pad's pads computed from the width; dynamic reshape",
            },
        )


F = paddle.nn.functional


class ConvBN(paddle.nn.Layer):  # type: ignore[misc]
    """Conv + BatchNorm + an activation, PaddleOCR's ConvBNLayer."""

    def __init__(
        self, i: int, o: int, k: int | list[int], stride: Any = 1, groups: int = 1, act: str = "relu"
    ):
        super().__init__()
        pad = [k[0] // 2, k[1] // 2] if isinstance(k, list) else k // 2
        self.conv = paddle.nn.Conv2D(i, o, k, stride=stride, padding=pad, groups=groups, bias_attr=False)
        self.bn = paddle.nn.BatchNorm2D(o)
        self.act = act

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.bn(self.conv(x))
        return getattr(F, self.act)(x)


class Detector(paddle.nn.Layer):  # type: ignore[misc]
    """PP-OCR's DB detector (ppocr/modeling/necks/db_fpn.py DBFPN, heads/det_db_head.py Head) in small."""

    def __init__(self) -> None:
        super().__init__()
        self.c2 = paddle.nn.Sequential(ConvBN(3, 8, 3, 2), ConvBN(8, 8, 3, 2))  # 1/4
        self.c3, self.c4, self.c5 = ConvBN(8, 16, 3, 2), ConvBN(16, 16, 3, 2), ConvBN(16, 32, 3, 2)
        self.ins = paddle.nn.LayerList([paddle.nn.Conv2D(c, 16, 1, bias_attr=False) for c in (8, 16, 16, 32)])
        self.ps = paddle.nn.LayerList(
            [paddle.nn.Conv2D(16, 4, 3, padding=1, bias_attr=False) for _ in range(4)]
        )
        self.head = ConvBN(16, 4, 3)
        self.up1 = paddle.nn.Conv2DTranspose(4, 4, 2, stride=2)
        self.bn = paddle.nn.BatchNorm2D(4)
        self.up2 = paddle.nn.Conv2DTranspose(4, 1, 2, stride=2)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        c2 = self.c2(x)
        c3 = self.c3(c2)
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        in2, in3, in4, in5 = self.ins[0](c2), self.ins[1](c3), self.ins[2](c4), self.ins[3](c5)
        out4 = in4 + F.upsample(in5, size=paddle.shape(in4)[2:], mode="nearest")  # sizes from a Shape
        scales = paddle.to_tensor([2.0, 2.0])
        out3 = in3 + F.upsample(out4, scale_factor=scales, mode="nearest")  # float scales
        out2 = in2 + F.upsample(out3, scale_factor=2.0, mode="nearest")
        p5 = F.upsample(self.ps[3](in5), scale_factor=8.0, mode="nearest")
        p4 = F.upsample(self.ps[2](out4), scale_factor=4.0, mode="nearest")
        p3 = F.upsample(self.ps[1](out3), scale_factor=2.0, mode="nearest")
        fuse = paddle.concat([p5, p4, p3, self.ps[0](out2)], axis=1)
        y = F.relu(self.bn(self.up1(self.head(fuse))))
        return F.sigmoid(self.up2(y))


class Separable(paddle.nn.Layer):  # type: ignore[misc]
    """LCNet's depthwise-separable block (ppocr/modeling/backbones/rec_lcnetv3.py), SE optional."""

    def __init__(self, i: int, o: int, stride: Any, se: bool = False) -> None:
        super().__init__()
        self.dw = ConvBN(i, i, 3, stride, groups=i, act="hardswish")
        self.se = (
            paddle.nn.Sequential(
                paddle.nn.AdaptiveAvgPool2D(1),
                paddle.nn.Conv2D(i, i // 4, 1),
                paddle.nn.ReLU(),
                paddle.nn.Conv2D(i // 4, i, 1),
                paddle.nn.Hardsigmoid(),
            )
            if se
            else None
        )
        self.pw = ConvBN(i, o, 1, act="hardswish")

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.dw(x)
        if self.se is not None:
            x = x * self.se(x)
        return self.pw(x)


class Mixer(paddle.nn.Layer):  # type: ignore[misc]
    """SVTR's global block (ppocr/modeling/backbones/rec_svtrnet.py Block with Attention)."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.dim = heads, dim
        self.n1, self.n2 = paddle.nn.LayerNorm(dim, epsilon=1e-6), paddle.nn.LayerNorm(dim, epsilon=1e-6)
        self.qkv, self.proj = paddle.nn.Linear(dim, dim * 3), paddle.nn.Linear(dim, dim)
        self.fc1, self.fc2 = paddle.nn.Linear(dim, dim * 2), paddle.nn.Linear(dim * 2, dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        y = self.n1(x)
        qkv = self.qkv(y).reshape((0, -1, 3, self.heads, self.dim // self.heads)).transpose((2, 0, 3, 1, 4))
        q, k, v = qkv[0] * (self.dim // self.heads) ** -0.5, qkv[1], qkv[2]
        attn = F.softmax(q.matmul(k.transpose((0, 1, 3, 2))), axis=-1)
        x = x + self.proj(attn.matmul(v).transpose((0, 2, 1, 3)).reshape((0, -1, self.dim)))
        return x + self.fc2(F.swish(self.fc1(self.n2(x))))


class Recogniser4(paddle.nn.Layer):  # type: ignore[misc]
    """PP-OCRv4's SVTR-LCNet recogniser in small (necks/rnn.py EncoderWithSVTR, heads/rec_ctc_head.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = paddle.nn.Sequential(
            ConvBN(3, 8, 3, 2, act="hardswish"),
            Separable(8, 16, 1),
            Separable(16, 32, (2, 1)),
            Separable(32, 32, (2, 1), se=True),
            Separable(32, 32, (2, 1), se=True),
        )
        self.conv1, self.conv2 = ConvBN(32, 4, [1, 3], act="swish"), ConvBN(4, 24, 1, act="swish")
        self.blocks = paddle.nn.LayerList([Mixer(24, 2) for _ in range(2)])
        self.norm = paddle.nn.LayerNorm(24, epsilon=1e-6)
        self.conv3, self.conv4 = ConvBN(24, 32, 1, act="swish"), ConvBN(64, 4, [1, 3], act="swish")
        self.conv1x1 = ConvBN(4, 16, 1, act="swish")
        self.fc = paddle.nn.Linear(16, 37)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        h = F.avg_pool2d(self.backbone(x), [3, 2])
        z = self.conv2(self.conv1(h))
        _, c, height, width = z.shape  # sizes the exporter computes from Shape
        z = z.flatten(2).transpose([0, 2, 1])
        for block in self.blocks:
            z = block(z)
        z = self.norm(z).reshape([0, height, width, c]).transpose([0, 3, 1, 2])
        z = paddle.concat((h, self.conv3(z)), axis=1)
        z = self.conv1x1(self.conv4(z)).squeeze(axis=2).transpose([0, 2, 1])
        return F.softmax(self.fc(z), axis=2)


def _export(net: paddle.nn.Layer, spec: list[int], tmp: str) -> bytes:
    """`net` saved by paddle.jit and converted by paddle2onnx. Paddle 3.3 writes the `scale` of
    an interpolation as float64 attributes, which paddle2onnx 2.1.0 refuses ("the 0th elementwise
    MUST be ir::FloatAttribute"); as earlier Paddle releases did, they are written float32 first."""
    paddle.jit.save(net, f"{tmp}/net", input_spec=[paddle.static.InputSpec(spec, "float32", "x")])
    program = Path(tmp) / "net.json"
    text = program.read_text()
    document = json.loads(text)

    def float32(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("N") == "scale" and isinstance(node.get("AT"), dict):
                for item in node["AT"].get("D", []):
                    if isinstance(item, dict) and item.get("#") == "0.a_f64":
                        item["#"] = "0.a_f32"
            for value in node.values():
                float32(value)
        elif isinstance(node, list):
            for value in node:
                float32(value)

    float32(document)
    program.write_text(json.dumps(document))
    out = Path(tmp) / "model.onnx"
    subprocess.run(
        [sys.executable, "-m", "paddle2onnx.command", "-m", tmp, "-mf", "net.json",
         "-pf", "net.pdiparams", "-s", str(out), "--optimize_tool", "None"],
        check=True,
    )  # fmt: skip
    return out.read_bytes()


def _counts(net: paddle.nn.Layer) -> dict[str, int]:
    return {
        "paddle_parameters": sum(int(p.numel()) for p in net.parameters()),
        "paddle_trainable_parameters": sum(
            int(p.numel()) for p in net.parameters() if not p.stop_gradient and p.trainable
        ),
    }


def _truths(data: bytes, shapes: list[tuple[int, ...]]) -> list[tuple[dict[str, Any], dict[str, list[int]]]]:
    runs = []
    for shape in shapes:
        feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
        runs.append((feeds, onnxruntime_shapes(data, feeds)))
    return runs


def det() -> None:
    import onnx
    import onnxruntime  # type: ignore[import-not-found]
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference  # type: ignore[import-not-found]

    paddle.seed(0)
    net = Detector()
    net.eval()
    exporter = f"paddle2onnx {paddle2onnx.__version__} (paddlepaddle {paddle.__version__})"
    with tempfile.TemporaryDirectory() as tmp:
        data = _export(net, [None, 3, None, None], tmp)
    symbolic = SymbolicShapeInference.infer_shapes(
        onnx.load_from_string(data), auto_merge=True
    ).SerializeToString()
    # one graph, one set of shapes: onnxruntime runs the plain file
    truths = record_shapes("paddle_ocr_det_tiny.onnx", _truths(data, [(1, 3, 320, 320), (2, 3, 256, 160)]))
    for name, made, note, expected in (
        ("paddle_ocr_det_tiny.onnx", data, "as paddle2onnx writes it", []),
        (
            "paddle_ocr_det_tiny_symbolic.onnx",
            symbolic,
            f"then onnxruntime {onnxruntime.__version__} tools/symbolic_shape_infer.py (auto_merge)",
            ["X503"],  # its rank-0 Resize declaration, set aside
        ),
    ):
        record(
            name,
            made,
            {
                "exporter": exporter,
                **_counts(net),
                "note": f"PP-OCR DB detector: FPN Resize (sizes from Shape, float scales tensor), "
                f"ConvTranspose head; {note}; Paddle's float64 interpolation scales written float32",
                "true_shapes": truths,
                **({"expected_diagnostics": expected} if expected else {}),
            },
        )


def rec() -> None:
    paddle.seed(0)
    net = Recogniser4()
    net.eval()
    with tempfile.TemporaryDirectory() as tmp:
        data = _export(net, [None, 3, None, None], tmp)
    name = "paddle_ocr_rec_tiny.onnx"
    record(
        name,
        data,
        {
            "exporter": f"paddle2onnx {paddle2onnx.__version__} (paddlepaddle {paddle.__version__})",
            **_counts(net),
            "note": "PP-OCRv4 SVTR-LCNet: reshape([0, H, W, C]) from z.shape, Concat along channels",
            "true_shapes": record_shapes(name, _truths(data, [(1, 3, 48, 320), (2, 3, 48, 160)])),
        },
    )


def main(which: list[str]) -> None:
    for build in which or ["det", "rec", "tiny"]:
        {"det": det, "rec": rec, "tiny": tiny}[build]()


if __name__ == "__main__":
    main(sys.argv[1:])
