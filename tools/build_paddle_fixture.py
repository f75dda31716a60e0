"""Build fixtures/onnx/paddle_ocr_tiny.onnx: a tiny text recogniser in PaddleOCR's shape, exported
by paddle2onnx, the exporter behind the Paddle-derived OCR models shipped in PyPI packages.

What paddle2onnx writes that other exporters do not: every weight is a `Constant` node (no
initializers), inputs are named `DynamicDimension.N`, and sizes computed from `paddle.shape` are
subgraphs of Shape / Slice / Concat / arithmetic feeding Reshape and Pad (here the width is padded
to a multiple of 8, as recognisers pad their input). The model: Conv + BatchNorm + ReLU, MaxPool,
Conv2DTranspose, the computed Pad, a reshape of [B, C, H, W] to the sequence [B, W, C*H], a
bidirectional LSTM and a CTC-style Linear + Softmax head. MANIFEST.json records Paddle's own
parameter count (all parameters, and those not stop_gradient).

Run in an environment of its own (paddle2onnx 2.1.0 with paddlepaddle 3.3.1 were used):
    pip install paddlepaddle paddle2onnx packaging && python tools/build_paddle_fixture.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import paddle  # type: ignore[import-not-found]
import paddle2onnx  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

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


def main() -> None:
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


if __name__ == "__main__":
    main()
