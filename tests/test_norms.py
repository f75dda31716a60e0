"""RMSNorm op by op (cost/norms.py), held to PyTorch's LlamaRMSNorm as measured.

linkedin/Liger-Kernel, benchmark/benchmark_rms_norm.py (LlamaRMSNorm: the cast up, pow, mean,
rsqrt, multiply, cast down, scale; bf16 x of 2,048 rows, triton.testing.do_bench's median),
benchmark/data/h100_all_benchmark_data.csv (3534d44, an H100 NVL) and a100_all_benchmark_data.csv
(bdbfead, an A100 80GB PCIe), rows `rms_norm,huggingface,forward|backward`. The device profiles
take their bytes an element at hidden 4,096; the other hidden sizes of the models we run (2,048 to
8,192) are the check, each at the measured part's streaming rate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from modtrans import cost
from modtrans.cost.gpu import Gpu
from modtrans.cost.norms import eager_rmsnorm_bytes
from modtrans.extraction import extract
from modtrans.ir.document import Activation, Flops, Kind, Layer
from modtrans.request import Request, prepare

ROWS = 2048
# hidden -> (forward, backward) ms
H100_NVL = {2048: (0.09072, 0.23389), 8192: (0.32608, 0.80995)}
A100_PCIE = {2048: (0.13824, 0.36762), 8192: (0.52326, 1.37626)}
STREAM = {"h100": 3.9e12 * 0.887, "a100": 1.935e12 * 0.834}  # the parts' peaks x the SXM efficiency


def _norm(hidden: int) -> Layer:
    x = Activation("x", (ROWS, hidden), "bfloat16", ROWS * hidden * 2)
    y = Activation("y", (ROWS, hidden), "bfloat16", ROWS * hidden * 2)
    return Layer("norm", "norm", "RMSNormalization", Kind.NORM, inputs=(x,), outputs=(y,), flops=Flops())


@pytest.mark.parametrize(("device", "measured"), [("h100", H100_NVL), ("a100", A100_PCIE)])
def test_an_eager_rmsnorm_moves_what_llamarmsnorm_measured(
    device: str, measured: dict[int, tuple[float, float]]
) -> None:
    model = cost.get("gpu", cost.Settings(device=device, norms="eager"))
    assert isinstance(model, Gpu)
    per_element = model.kernels.eager_rmsnorm
    assert per_element is not None
    for hidden, (forward, backward) in measured.items():
        elements = ROWS * hidden
        assert elements * per_element["forward"] / STREAM[device] * 1e3 == pytest.approx(forward, rel=0.11)
        assert elements * per_element["backward"] / STREAM[device] * 1e3 == pytest.approx(backward, rel=0.11)


def test_torchtitan_runs_its_rmsnorm_op_by_op_and_megatron_fused() -> None:
    """torchtitan's published runs (compile off) pay the measured ops; Megatron's fused kernel one
    pass: read x, write y, each bf16."""
    times = {}
    for framework in ("torchtitan", "megatron"):
        request = Request(model="llama-3-8b", dp=8, zero=3, framework=framework, device="h100", seq_len=2048)
        options = prepare(request).options
        model = cost.get(options.compute, options.cost)
        times[framework] = model.times(_norm(4096))
    elements, stream = ROWS * 4096, 3.35e12 * 0.887
    assert times["torchtitan"].forward * 1e-9 == pytest.approx(elements * 74.0 / stream, rel=0.01)
    assert times["megatron"].forward * 1e-9 == pytest.approx(elements * 4 / stream, rel=0.01)


@pytest.mark.parametrize("statistic", [False, True])
def test_an_rmsnorm_is_costed_by_its_result_whatever_statistic_it_also_writes(
    tmp_path: Path, statistic: bool
) -> None:
    """onnxruntime's SimplifiedLayerNormalization (core/graph/contrib_ops/contrib_defs.cc) writes
    Y and, optionally, inv_std_var: fp32, 1 along the normalised axis. The measured bytes are an
    element of Y (x's rows x hidden), the statistic's kernel among them: the optional output adds
    nothing (counted against Y's width, its 2,048 fp32 values were 4,096 bf16 elements more)."""
    hidden = 4096
    outputs = ["y", "inv"] if statistic else ["y"]
    node = helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], outputs, axis=-1, stash_type=1)
    declared = [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [ROWS, hidden])]
    if statistic:
        declared.append(helper.make_tensor_value_info("inv", TensorProto.FLOAT, [ROWS, 1]))
    scale = helper.make_tensor(
        "scale", TensorProto.BFLOAT16, [hidden], np.ones(hidden, np.uint16).tobytes(), raw=True
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [ROWS, hidden])],
        declared,
        [scale],
    )
    path = tmp_path / "rmsnorm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    ir, found = extract(path)
    assert ir is not None, found
    (layer,) = [x for x in ir.layers if x.op_type == "SimplifiedLayerNormalization"]
    assert len(layer.outputs) == len(outputs)
    model = cost.get("gpu", cost.Settings(device="h100", norms="eager"))
    assert isinstance(model, Gpu)
    per_element = model.kernels.eager_rmsnorm
    assert per_element is not None
    elements = ROWS * hidden
    expected = (round(elements * per_element["forward"]), round(elements * per_element["backward"]))
    assert eager_rmsnorm_bytes(layer, per_element) == expected
