"""Build fixtures/onnx/jax_scan_classifier.onnx and jax_scan_rnn.onnx: Flax NNX models exported by
jax2onnx, the path from JAX to ONNX (the file-type classifiers shipped in PyPI packages come out
of JAX).

What jax2onnx writes that other exporters do not: NHWC convs between Transposes, GroupNorm and
LayerNorm decomposed into ReduceMean / Sub / Mul / Sqrt / Div, opset 23 (Gelu as one op), and a
`jax.lax.scan` as an ONNX Loop with a constant trip count whose body receives the weights it uses
as loop-carried values. The model: Conv + GroupNorm + ReLU on [B, 16, 16, 3], a spatial mean,
Linear + LayerNorm + GELU, six steps of h = tanh(Linear(h)) in the scan, Linear + softmax.
jax_scan_rnn scans a recurrent cell over a sequence input xs [7, B, 16] and stacks its outputs
(the Loop's scan outputs, [7, B, 4]), then a softmax. MANIFEST.json records JAX's own parameter
count (the leaves of nnx.state(model, nnx.Param)).

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


class Recurrent(nnx.Module):  # type: ignore[misc]
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.inp = nnx.Linear(16, 32, rngs=rngs)
        self.rec = nnx.Linear(32, 32, rngs=rngs)
        self.out = nnx.Linear(32, 4, rngs=rngs)

    def __call__(self, xs: Any) -> Any:
        def step(h: Any, x: Any) -> tuple[Any, Any]:
            h = jnp.tanh(self.inp(x) + self.rec(h))
            return h, self.out(h)

        _, ys = jax.lax.scan(step, jnp.zeros((xs.shape[1], 32)), xs)
        return nnx.softmax(ys)


def _count(model: nnx.Module) -> int:
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param)))


def main() -> None:
    exporter = f"jax2onnx {version('jax2onnx')} (jax {jax.__version__}, flax {version('flax')})"
    model = Classifier(nnx.Rngs(2026))
    record(
        NAME,
        to_onnx(model, [("B", 16, 16, 3)], input_names=["x"]).SerializeToString(),
        {
            "exporter": exporter,
            "jax_parameters": _count(model),
            "scan_steps": STEPS,
            "note": "lax.scan as a Loop of constant trip count; the cell's weights are loop-carried",
        },
    )
    rnn = Recurrent(nnx.Rngs(2026))
    record(
        "jax_scan_rnn.onnx",
        to_onnx(rnn, [(7, "B", 16)], input_names=["xs"]).SerializeToString(),
        {
            "exporter": exporter,
            "jax_parameters": _count(rnn),
            "scan_steps": 7,
            "note": "lax.scan over xs [7, B, 16]: the Loop's scan outputs stack [7, B, 4]",
        },
    )


if __name__ == "__main__":
    main()
