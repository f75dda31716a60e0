"""Build fixtures/onnx/torchscript_loop_if.onnx and torchscript_vad.onnx: scripted PyTorch modules
whose Python control flow the TorchScript-based exporter writes as ONNX control flow.

torchscript_loop_if: a `for t in range(x.size(0))` over the sequence becomes a Loop whose trip
count is Gather(Shape(x), 0), and an `if x.size(0) > 4` becomes an If on a shape comparison, each
branch a Linear.

torchscript_vad: a voice-activity detector in the shape of the ones shipped in PyPI packages (the
issue's `sr` case): samples padded to a multiple of 4 by pads computed from the input's length, a
strided Conv1d "STFT", then `if sr == 16000` on an input's value choosing between two LSTMs (an
If no input shape decides), and a Linear(24, 1) head with its one-element bias.

The Loop's body refers to the weights of the outer graph, and declares its carried state with
dims of its own (`h.13_dim_0`), which onnx's shape inference keeps over the initial value's.
MANIFEST.json records PyTorch's own parameter count and the parameters of the branch not taken
when the sequence is longer than 4 (`small`).

Run in an environment with PyTorch (torch 2.13.0, CPU build, was used):
    pip install torch==2.13.0 onnx && python tools/build_control_flow_fixture.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

NAME = "torchscript_loop_if.onnx"


class Recurrent(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(16, 32)
        self.rec = torch.nn.Linear(32, 32)
        self.big = torch.nn.Linear(32, 8)
        self.small = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.size(1), 32)
        for t in range(x.size(0)):
            h = torch.tanh(self.inp(x[t]) + self.rec(h))
        if x.size(0) > 4:
            return self.big(h)  # type: ignore[no-any-return]
        return self.small(h)  # type: ignore[no-any-return]


class Vad(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stft = torch.nn.Conv1d(1, 16, 8, stride=4)
        self.lstm16 = torch.nn.LSTM(16, 24)
        self.lstm8 = torch.nn.LSTM(16, 24)
        self.head = torch.nn.Linear(24, 1)

    def forward(self, x: torch.Tensor, sr: torch.Tensor) -> torch.Tensor:
        pad = (4 - x.size(-1) % 4) % 4
        frames = self.stft(torch.nn.functional.pad(x, [0, pad]).unsqueeze(1)).permute(2, 0, 1)
        if bool(sr == 16000):
            y, _ = self.lstm16(frames)
        else:
            y, _ = self.lstm8(frames)
        return torch.sigmoid(self.head(y[-1]))


def _scripted(
    model: torch.nn.Module, args: tuple[torch.Tensor, ...], axes: dict[str, dict[int, str]]
) -> bytes:
    """`model`, its weights drawn at random (distinct values, so the exporter merges no equal
    initializers), scripted and exported by the TorchScript-based exporter."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        torch.onnx.export(
            torch.jit.script(model),
            args,
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=list(axes),
            dynamic_axes={name: dims for name, dims in axes.items() if dims},
        )
        return path.read_bytes()


def main() -> None:
    exporter = f"torch.onnx.export(torch.jit.script(...), dynamo=False, opset 17), torch {torch.__version__}"
    torch.manual_seed(2026)
    model = Recurrent()
    record(
        NAME,
        _scripted(model, (torch.randn(6, 2, 16),), {"x": {0: "sequence", 1: "batch"}}),
        {
            "exporter": exporter,
            "torch_parameters": sum(p.numel() for p in model.parameters()),
            "untaken_branch_parameters": sum(p.numel() for p in model.small.parameters()),
            "note": "Loop over the sequence (trip count from the input's shape); If on x.size(0) > 4",
        },
    )
    vad = Vad()
    record(
        "torchscript_vad.onnx",
        _scripted(
            vad, (torch.randn(2, 512), torch.tensor(16000)), {"x": {0: "batch", 1: "samples"}, "sr": {}}
        ),
        {
            "exporter": exporter,
            "torch_parameters": sum(p.numel() for p in vad.parameters()),
            "lstm_parameters": sum(p.numel() for p in vad.lstm16.parameters()),
            "note": "pads computed from the length; If on the value of input sr, an LSTM each branch",
            "expected_diagnostics": ["X504", "X513"],
        },
    )


if __name__ == "__main__":
    main()
