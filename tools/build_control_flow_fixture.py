"""Build fixtures/onnx/torchscript_loop_if.onnx, torchscript_vad.onnx and
torchscript_vad_branches.onnx: scripted PyTorch modules whose Python control flow the
TorchScript-based exporter writes as ONNX control flow.

torchscript_loop_if: a `for t in range(x.size(0))` over the sequence becomes a Loop whose trip
count is Gather(Shape(x), 0), and an `if x.size(0) > 4` becomes an If on a shape comparison, each
branch a Linear.

torchscript_vad: a voice-activity detector in the shape of the ones shipped in PyPI packages (the
issue's `sr` case): samples padded to a multiple of 4 by pads computed from the input's length, a
strided Conv1d "STFT", then `if sr == 16000` on an input's value choosing between two LSTMs (an
If no input shape decides), and a Linear(24, 1) head with its one-element bias.

torchscript_vad_branches: a detector in the shape of Silero VAD (inputs `input` [B, samples],
`state` [2, B, H], `sr`): the whole model of each sample rate is a branch of `if sr == 16000`
(an If no input shape decides), and inside each branch: an `if x.size(-1) > window` on the
input's shape (an If the shapes decide: 512 samples are kept whole at 16 kHz, the last 256 at
8), a reflect-padded conv "STFT" whose pads are computed from the input's length (Shape ->
arithmetic -> Pad), its magnitude, a strided conv encoder, an LSTMCell on the state and a 1x1
conv decoder. Each branch reads `input` and `state` from the enclosing graph. The two rates'
STFTs differ (n_fft 64 hop 32, n_fft 32 hop 8), so the If's third output, the encoder's frames,
has a different shape in each branch. Its `.shapes.json` holds the shape of every tensor when
onnxruntime runs it with each sample rate.

The Loop's body refers to the weights of the outer graph, and declares its carried state with
dims of its own (`h.13_dim_0`), which onnx's shape inference keeps over the initial value's.
MANIFEST.json records PyTorch's own parameter count and the parameters of the branch not taken
when the sequence is longer than 4 (`small`).

Run in an environment with PyTorch (torch 2.13.0, CPU build, onnx 1.23.2 and onnxruntime 1.32.0
were used), from the checkout:
    pip install torch==2.13.0 onnx onnxruntime && PYTHONPATH=. python tools/build_control_flow_fixture.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import onnxruntime_shapes, record, record_shapes

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


class Rate(torch.nn.Module):
    """One sample rate's detector in Silero VAD's shape: STFT as a conv of a basis, magnitude,
    encoder, LSTMCell decoder (silero-vad's VADRNNJIT: stft, encoder, decoder.rnn)."""

    def __init__(self, n_fft: int, hop: int, window: int, hidden: int) -> None:
        super().__init__()
        self.n_fft, self.hop, self.window = n_fft, hop, window
        self.register_buffer("basis", torch.randn(n_fft + 2, 1, n_fft))
        self.enc1 = torch.nn.Conv1d(n_fft // 2 + 1, 16, 3, padding=1)
        self.enc2 = torch.nn.Conv1d(16, hidden, 3, stride=2, padding=1)
        self.rnn = torch.nn.LSTMCell(hidden, hidden)
        self.dec = torch.nn.Conv1d(hidden, 1, 1)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if x.size(-1) > self.window:  # a chunk longer than the window: keep its end
            x = x[:, x.size(-1) - self.window :]
        pad = self.hop - x.size(-1) % self.hop + self.hop // 2
        x = torch.nn.functional.pad(x.unsqueeze(1), [0, pad], mode="reflect")
        spec = torch.nn.functional.conv1d(x, self.basis, stride=self.hop)
        cut = self.n_fft // 2 + 1
        magnitude = torch.sqrt(spec[:, :cut] ** 2 + spec[:, cut:] ** 2)
        frames = torch.relu(self.enc2(torch.relu(self.enc1(magnitude))))
        h, c = self.rnn(frames.mean(dim=2), (state[0], state[1]))
        out = torch.sigmoid(self.dec(torch.relu(h).unsqueeze(2))).squeeze(2)
        return out, torch.stack([h, c]), frames


class VadBranches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model16 = Rate(64, 32, 512, 32)  # Silero's windows: 512 samples at 16 kHz, 256 at 8
        self.model8 = Rate(32, 8, 256, 32)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor, sr: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if bool(sr == 16000):
            out, new, frames = self.model16(x, state)
        else:
            out, new, frames = self.model8(x, state)
        return out, new, torch.tanh(frames)


def _scripted(
    model: torch.nn.Module,
    args: tuple[torch.Tensor, ...],
    axes: dict[str, dict[int, str]],
    opset: int = 17,
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
            opset_version=opset,
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


def branches() -> None:
    """torchscript_vad_branches.onnx and its shapes, each sample rate run by onnxruntime."""
    exporter = f"torch.onnx.export(torch.jit.script(...), dynamo=False, opset 16), torch {torch.__version__}"
    torch.manual_seed(2026)
    vad = VadBranches()
    name = "torchscript_vad_branches.onnx"
    data = _scripted(
        vad,
        (torch.randn(1, 512), torch.zeros(2, 1, 32), torch.tensor(16000)),
        {"input": {0: "batch", 1: "samples"}, "state": {1: "batch"}, "sr": {}},
        opset=16,  # Silero VAD v5's
    )
    runs = []
    for rate in (16000, 8000):
        feeds = {
            "input": np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32),
            "state": np.zeros((2, 1, 32), np.float32),
            "sr": np.array(rate, np.int64),
        }
        runs.append((feeds, onnxruntime_shapes(data, feeds)))
    record(
        name,
        data,
        {
            "exporter": exporter,
            "torch_parameters": sum(p.numel() for p in vad.parameters()),
            # the STFT bases, buffers as Silero's forward_basis_buffer is: weights in the file
            "torch_buffer_elements": sum(b.numel() for b in vad.buffers()),
            "note": "Silero-VAD-shaped: If on sr around each rate's model; inside, an If on the "
            "input's length and reflect pads computed from it; frames differ between the branches",
            "expected_diagnostics": ["X513", "X517"],
            "true_shapes": record_shapes(name, runs),
        },
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["branches"]:
        branches()
    else:
        main()
        branches()
