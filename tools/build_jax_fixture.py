"""Build fixtures/onnx/jax_scan_classifier.onnx: a Flax NNX model exported by jax2onnx, the path
from JAX to ONNX (the file-type classifiers shipped in PyPI packages come out of JAX).

What jax2onnx writes that other exporters do not: NHWC convs between Transposes, GroupNorm and
LayerNorm decomposed into ReduceMean / Sub / Mul / Sqrt / Div, opset 23 (Gelu as one op), and a
`jax.lax.scan` as an ONNX Loop with a constant trip count whose body receives the weights it uses
as loop-carried values. The model: Conv + GroupNorm + ReLU on [B, 16, 16, 3], a spatial mean,
Linear + LayerNorm + GELU, six steps of h = tanh(Linear(h)) in the scan, Linear + softmax.
MANIFEST.json records JAX's own parameter count (the leaves of nnx.state(model, nnx.Param)).

Run in an environment of its own (jax 0.10.2, flax 0.12.8, jax2onnx 0.17.1 were used):
    pip install jax jaxlib jax2onnx && python tools/build_jax_fixture.py
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx  # type: ignore[import-not-found]
from jax2onnx import to_onnx  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

NAME = "jax_scan_classifier.onnx"
STEPS = 6


class Classifier(nnx.Module):  # type: ignore[misc]
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.conv = nnx.Conv(3, 16, (3, 3), padding="SAME", rngs=rngs)
        self.norm = nnx.GroupNorm(16, num_groups=4, rngs=rngs)
        self.fc1 = nnx.Linear(16, 32, rngs=rngs)
        self.ln = nnx.LayerNorm(32, rngs=rngs)
        self.cell = nnx.Linear(32, 32, rngs=rngs)
        self.fc2 = nnx.Linear(32, 5, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        y = jnp.mean(nnx.relu(self.norm(self.conv(x))), axis=(1, 2))
        y = nnx.gelu(self.ln(self.fc1(y)))
        y, _ = jax.lax.scan(lambda h, _: (jnp.tanh(self.cell(h)), None), y, None, length=STEPS)
        return nnx.softmax(self.fc2(y))


def main() -> None:
    model = Classifier(nnx.Rngs(2026))
    leaves = jax.tree_util.tree_leaves(nnx.state(model, nnx.Param))
    parameters = sum(int(np.prod(leaf.shape)) for leaf in leaves)
    proto = to_onnx(model, [("B", 16, 16, 3)], input_names=["x"])
    record(
        NAME,
        proto.SerializeToString(),
        {
            "exporter": f"jax2onnx {version('jax2onnx')} (jax {jax.__version__}, flax {version('flax')})",
            "jax_parameters": parameters,
            "scan_steps": STEPS,
            "note": "lax.scan as a Loop of constant trip count; the cell's weights are loop-carried",
        },
    )


if __name__ == "__main__":
    main()
