"""Build fixtures/onnx/tf2onnx_*.onnx: Keras models and a tf.function exported by tf2onnx, the
converter behind the TensorFlow-trained models shipped as ONNX.

What tf2onnx writes that PyTorch's exporters do not: NHWC inputs with a Transpose in front, input
dims named `unk__N`, BatchNormalization folded into the conv before it, Keras's one LSTM bias
widened to ONNX's [Wb, Rb] (Rb zeros), and a `tf.while_loop` as an ONNX Loop with no trip count,
its condition computed in the body. Weights are drawn at random first: tf2onnx's optimizer drops
an Add of a zero bias, and Keras initialises biases to zero.

- tf2onnx_cnn: Conv2D + BatchNormalization + ReLU, DepthwiseConv2D, Conv2DTranspose, global
  pooling, Dense + softmax, on [B, 32, 32, 3].
- tf2onnx_lstm: LSTM(24, return_sequences) + Dense(4) on [B, T, 16].
- tf2onnx_while: h = tanh(x_t W + h) over t < T, a tf.while_loop on [B, T, 16].

MANIFEST.json records Keras's own counts (count_params, and BatchNormalization's share).

Run in an environment of its own (tf2onnx pins protobuf 3; these versions were used):
    pip install tensorflow-cpu==2.15.1 tf2onnx==1.16.1 onnx==1.16.2 'numpy<2'
    python tools/build_tf2onnx_fixtures.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import tensorflow as tf  # type: ignore[import-not-found]
import tf2onnx  # type: ignore[import-not-found]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

EXPORTER = f"tf2onnx {tf2onnx.__version__} (tensorflow {tf.__version__}, opset 17)"


def _randomise(model: Any, rng: np.random.Generator) -> None:
    model.set_weights(
        [rng.standard_normal(w.shape).astype(np.float32) * 0.1 + 0.5 for w in model.get_weights()]
    )


def cnn(rng: np.random.Generator) -> None:
    image = tf.keras.Input((32, 32, 3), name="image")
    x = tf.keras.layers.Conv2D(16, 3, padding="same")(image)
    x = tf.keras.layers.BatchNormalization()(x)
    x = tf.keras.layers.ReLU()(x)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same")(x)
    x = tf.keras.layers.Conv2DTranspose(8, 2, strides=2)(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    model = tf.keras.Model(image, tf.keras.layers.Dense(10, activation="softmax")(x))
    _randomise(model, rng)
    norm = sum(layer.count_params() for layer in model.layers if "batch_normalization" in layer.name)
    spec = [tf.TensorSpec([None, 32, 32, 3], tf.float32, name="image")]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=17)
    record(
        "tf2onnx_cnn.onnx",
        proto.SerializeToString(),
        {
            "exporter": EXPORTER,
            "keras_parameters": model.count_params(),
            "keras_batchnorm_parameters": norm,
            "note": "NHWC; BatchNormalization folded into the conv before it",
        },
    )


def lstm(rng: np.random.Generator) -> None:
    frames = tf.keras.Input((None, 16), name="frames")
    y = tf.keras.layers.LSTM(24, return_sequences=True)(frames)
    model = tf.keras.Model(frames, tf.keras.layers.Dense(4)(y))
    _randomise(model, rng)
    spec = [tf.TensorSpec([None, None, 16], tf.float32, name="frames")]
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=spec, opset=17)
    record(
        "tf2onnx_lstm.onnx",
        proto.SerializeToString(),
        {
            "exporter": EXPORTER,
            "keras_parameters": model.count_params(),
            "note": "batch-first; Keras's single LSTM bias becomes ONNX's [Wb, Rb] with Rb zero",
        },
    )


def while_loop(rng: np.random.Generator) -> None:
    values = rng.standard_normal((16, 16)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, None, 16], tf.float32, name="frames")])
    def rnn(frames: Any) -> Any:
        weight = tf.constant(values)  # made inside the function: a captured tensor would be an input
        steps = tf.shape(frames)[1]

        def body(t: Any, h: Any) -> tuple[Any, Any]:
            return t + 1, tf.tanh(tf.matmul(frames[:, t, :], weight) + h)

        _, h = tf.while_loop(lambda t, h: t < steps, body, [tf.constant(0), tf.zeros_like(frames[:, 0, :])])
        return h

    proto, _ = tf2onnx.convert.from_function(rnn, input_signature=rnn.input_signature, opset=17)
    record(
        "tf2onnx_while.onnx",
        proto.SerializeToString(),
        {
            "exporter": EXPORTER,
            "parameters": 16 * 16,
            "note": "a tf.while_loop: ONNX Loop without a trip count, its condition computed in the body",
            # with --batch alone the loop's count is unknown (X514), and so is the step's slice
            # frames[:, t]; with the frames fixed both follow (extraction/whiles.py)
            "expected_diagnostics": ["X504", "X510", "X514"],
        },
    )


def main() -> None:
    rng = np.random.default_rng(2026)
    tf.random.set_seed(2026)
    cnn(rng)
    lstm(rng)
    while_loop(rng)


if __name__ == "__main__":
    main()
