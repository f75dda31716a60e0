"""Build fixtures/onnx/torchscript_loop_if.onnx: a scripted PyTorch module whose Python control
flow the TorchScript-based exporter writes as ONNX control flow: a `for t in range(x.size(0))`
over the sequence becomes a Loop whose trip count is Gather(Shape(x), 0), and an
`if x.size(0) > 4` becomes an If on a shape comparison, each branch a Linear.

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


def main() -> None:
    torch.manual_seed(2026)
    model = Recurrent()
    with torch.no_grad():  # distinct values, so the exporter does not merge equal initializers
        for p in model.parameters():
            p.copy_(torch.randn_like(p))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / NAME
        torch.onnx.export(
            torch.jit.script(model),
            (torch.randn(6, 2, 16),),
            str(path),
            dynamo=False,
            opset_version=17,
            input_names=["x"],
            dynamic_axes={"x": {0: "sequence", 1: "batch"}},
        )
        record(
            NAME,
            path.read_bytes(),
            {
                "exporter": "torch.onnx.export(torch.jit.script(...), dynamo=False, opset 17), "
                f"torch {torch.__version__}",
                "torch_parameters": sum(p.numel() for p in model.parameters()),
                "untaken_branch_parameters": sum(p.numel() for p in model.small.parameters()),
                "note": "Loop over the sequence (trip count from the input's shape); If on x.size(0) > 4",
            },
        )


if __name__ == "__main__":
    main()
