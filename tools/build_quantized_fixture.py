"""Build fixtures/onnx/mlp_lstm_quantized.onnx: a float MLP + LSTM quantized by onnxruntime's own
`quantize_dynamic` (the dynamically quantized models shipped in PyPI packages are made this way),
and record in MANIFEST.json the float model's parameter count, counted here with numpy, which the
tests compare the quantized model's extracted parameters against.

The float model (made with onnx.helper, seeded weights): x [batch, 64] -> MatMul 64x128 -> Relu ->
MatMul 128x32; and an LSTM over s [seq, batch, 16] with hidden 24. quantize_dynamic turns the
MatMuls into DynamicQuantizeLinear + MatMulInteger (uint8 activations, int8 weights) and the LSTM
into com.microsoft DynamicQuantizeLSTM (its weights stored [D, input, 4H]).

Run with onnxruntime installed (not a dependency of modtrans):
    pip install onnxruntime && python tools/build_quantized_fixture.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime  # type: ignore[import-untyped]
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fixture_manifest import record

NAME = "mlp_lstm_quantized.onnx"


def float_model() -> onnx.ModelProto:
    rng = np.random.default_rng(2026)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    weights = [
        weight("fc1.weight", 64, 128),
        weight("fc2.weight", 128, 32),
        weight("lstm.W", 1, 4 * 24, 16),
        weight("lstm.R", 1, 4 * 24, 24),
        weight("lstm.B", 1, 8 * 24),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="/fc1/MatMul"),
        helper.make_node("Relu", ["h"], ["a"], name="/act/Relu"),
        helper.make_node("MatMul", ["a", "fc2.weight"], ["y"], name="/fc2/MatMul"),
        helper.make_node(
            "LSTM", ["s", "lstm.W", "lstm.R", "lstm.B"], ["seq_out"], name="/lstm/LSTM", hidden_size=24
        ),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64]),
        helper.make_tensor_value_info("s", TensorProto.FLOAT, ["sequence", "batch", 16]),
    ]
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32]),
        helper.make_tensor_value_info("seq_out", TensorProto.FLOAT, ["sequence", 1, "batch", 24]),
    ]
    graph = helper.make_graph(nodes, "mlp_lstm", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main() -> None:
    model = float_model()
    parameters = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "float.onnx"
        onnx.save(model, source)
        quantized = Path(tmp) / NAME
        quantize_dynamic(
            source, quantized, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "LSTM"]
        )
        record(
            NAME,
            quantized.read_bytes(),
            {
                "exporter": f"onnxruntime {onnxruntime.__version__} quantize_dynamic(QInt8, MatMul + LSTM)",
                "inputs": {"x": ["batch", 64], "s": ["sequence", "batch", 16]},
                "note": "float parameters counted with numpy before quantization (fc1, fc2, LSTM W, R, B)",
                "float_parameters": parameters,
            },
        )


if __name__ == "__main__":
    main()
