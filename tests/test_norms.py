"""RMSNorm op by op and under torch.compile (cost/norms.py), held to PyTorch's LlamaRMSNorm as measured.

linkedin/Liger-Kernel, benchmark/scripts/benchmark_rms_norm.py (LlamaRMSNorm: the cast up, pow,
mean, rsqrt, multiply, cast down, scale; the same module under @torch.compile; bf16 x of 2,048
rows, hidden 1,024 to 32,768, triton.testing.do_bench's median), benchmark/data/
h100_all_benchmark_data.csv (3534d44, an H100 NVL) and a100_all_benchmark_data.csv (bdbfead, an
A100 80GB PCIe), rows `rms_norm,{huggingface,torchcompile},{forward,backward}`, copied unchanged to
fixtures/liger/rms_norm.csv (its MANIFEST.md). Every row is the check, each at the measured part's
streaming rate and SMs x boost clock. A third part, Liger's A100-SXM4-80GB rows of the op-by-op
module (benchmark/data/all_benchmark_data.csv at ead96b6, fixtures/liger/rms_norm_a100_sxm4.csv),
which no profile is fitted on, checks how the op-by-op time moves between parts: with the SMs x
clock, not with the bandwidth.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from modtrans import cost
from modtrans.cost.gpu import Gpu
from modtrans.cost.norms import NormCost, rmsnorm_bytes, rmsnorm_seconds
from modtrans.extraction import extract
from modtrans.ir.document import Activation, Block, Flops, Kind, Layer
from modtrans.request import Request, prepare

ROWS = 2048
MEASURED = Path(__file__).resolve().parent.parent / "fixtures" / "liger" / "rms_norm.csv"
PARTS = {"h100": "NVIDIA H100 NVL", "a100": "NVIDIA A100 80GB PCIe"}
STREAM = {"h100": 3.9e12 * 0.887, "a100": 1.935e12 * 0.834}  # the parts' peaks x the SXM efficiency
# the parts' SMs x boost clock: the H100 NVL's 132 at 1,785 MHz (NVIDIA H100 NVL GPU Product Brief
# PB-11773-001_v01), the A100's 108 at 1,410 MHz (NVIDIA A100 Tensor Core GPU Architecture whitepaper)
SM = {"h100": 132 * 1.785e9, "a100": 108 * 1.41e9}
SXM4 = Path(__file__).resolve().parent.parent / "fixtures" / "liger" / "rms_norm_a100_sxm4.csv"
SXM4_STREAM = 1.70e12  # Azure/AI-benchmarking-guide 8fd0c6e, ND_A100_v4: BabelStream Triad on A100-SXM4-80GB
PROVIDERS = {"eager": "huggingface", "compiled": "torchcompile"}
# the largest miss of any one row: op by op the fit's 7.2 %; compiled, the backward's weight-gradient
# reduction over the rows is not linear in the elements (22.6 % at the A100's hidden 32,768)
TOLERANCE = {"eager": 0.08, "compiled": 0.25}


def _rows(device: str, norms: str, mode: str, path: Path = MEASURED) -> list[tuple[int, float]]:
    """(hidden, ms) of the measured rows."""
    with path.open(encoding="utf-8") as f:
        return [
            (int(r["x_value"]), float(r["y_value_50"]))
            for r in csv.DictReader(f)
            if r["gpu_name"] == PARTS.get(device, device)
            and r["kernel_provider"] == PROVIDERS[norms]
            and r["kernel_operation_mode"] == mode
            and r["metric_name"] == "speed"
        ]


def _norm(hidden: int, rows: int = ROWS, block: int | None = None) -> Layer:
    x = Activation("x", (rows, hidden), "bfloat16", rows * hidden * 2)
    y = Activation("y", (rows, hidden), "bfloat16", rows * hidden * 2)
    where = Block(block) if block is not None else None
    return Layer(
        "norm", "norm", "RMSNormalization", Kind.NORM, inputs=(x,), outputs=(y,), flops=Flops(), block=where
    )


def _cost(device: str, norms: str) -> NormCost:
    compiled = norms == "compiled"
    model = cost.get(
        "gpu", cost.Settings(device=device, norms="fused" if compiled else norms, compiled=compiled)
    )
    assert isinstance(model, Gpu)
    found = model.compiled if compiled else model.norms
    assert found is not None
    return found


@pytest.mark.parametrize("norms", ["eager", "compiled"])
@pytest.mark.parametrize("device", ["h100", "a100"])
def test_an_rmsnorm_takes_what_llamarmsnorm_measured_at_every_size(device: str, norms: str) -> None:
    """Each of the six sizes, forward and backward, on both parts, within the stated tolerance."""
    found = _cost(device, norms)
    for index, mode in enumerate(("forward", "backward")):
        rows = _rows(device, norms, mode)
        assert [h for h, _ in rows] == [1024, 2048, 4096, 8192, 16384, 32768]
        for hidden, ms in rows:
            seconds = rmsnorm_seconds(_norm(hidden), found, STREAM[device], SM[device])
            assert seconds is not None
            assert seconds[index] * 1e3 == pytest.approx(ms, rel=TOLERANCE[norms]), (mode, hidden)


@pytest.mark.parametrize("norms", ["eager", "compiled"])
@pytest.mark.parametrize("device", ["h100", "a100"])
def test_the_profile_holds_the_least_squares_fit_of_the_measured_rows(device: str, norms: str) -> None:
    """The stored fixed time and the part an element are the fit devices.json names: least squares
    of the relative error of (fixed + elements x seconds an element) over the six rows, to the digit
    stored; op by op the seconds held as SM cycles (x the part's SMs x clock), compiled as bytes (x
    its streaming rate)."""
    found = _cost(device, norms)
    for mode in ("forward", "backward"):
        rows = _rows(device, norms, mode)
        n = np.array([ROWS * h for h, _ in rows], dtype=float)
        t = np.array([ms * 1e-3 for _, ms in rows])
        fixed, per_byte = np.linalg.lstsq(np.stack([1 / t, n / t], axis=1), np.ones_like(t), rcond=None)[0]
        if norms == "eager":
            assert getattr(found, f"{mode}_cycles") == pytest.approx(per_byte * SM[device], abs=0.0006)
        else:
            assert getattr(found, mode) == pytest.approx(per_byte * STREAM[device], abs=0.06)
        assert getattr(found, f"{mode}_fixed_s") == pytest.approx(fixed, abs=0.06e-6)


def _sxm4_miss(found: NormCost, mode: str, by_clock: bool) -> list[float]:
    """The relative misses of each A100-SXM4-80GB row, `found` moved there by the SMs x clock (the
    model) or, as before, its bytes at the streaming rate."""
    index = ("forward", "backward").index(mode)
    misses = []
    for hidden, ms in _rows("NVIDIA A100-SXM4-80GB", "eager", mode, SXM4):
        sm = SM["a100"] if by_clock else 0.0
        seconds = rmsnorm_seconds(_norm(hidden), found, SXM4_STREAM, sm)
        assert seconds is not None
        misses.append(seconds[index] * 1e3 / ms - 1)
    return misses


@pytest.mark.parametrize("mode", ["forward", "backward"])
def test_the_op_by_op_time_moves_between_parts_with_the_sms_not_the_bandwidth(mode: str) -> None:
    """A third part none is fitted on, the A100-SXM4-80GB (108 SMs at 1,410 MHz, BabelStream 1.70
    TB/s), measured on the same module: the A100 80GB PCIe's fit (the same SMs and clock) predicts
    each row within 7 %; the H100 NVL's SM cycles, on the A100's SMs x clock, within 15 %, where the
    NVL's time an element at the A100's bandwidth (its fit's bytes at the streaming rate) is 11 % to
    28 % over at every size."""
    assert len(_rows("NVIDIA A100-SXM4-80GB", "eager", mode, SXM4)) == 6
    assert max(abs(m) for m in _sxm4_miss(_cost("a100", "eager"), mode, True)) < 0.07
    nvl = _cost("h100", "eager")
    assert max(abs(m) for m in _sxm4_miss(nvl, mode, True)) < 0.15
    per_byte = dataclasses.replace(
        nvl,
        forward=nvl.forward_cycles / SM["h100"] * STREAM["h100"],
        backward=nvl.backward_cycles / SM["h100"] * STREAM["h100"],
    )
    assert min(_sxm4_miss(per_byte, mode, False)) > 0.10


def test_torchtitans_hbm2e_h100_streams_its_op_by_op_rmsnorm_at_the_count() -> None:
    """On torchtitan's 2.4 TB/s HBM2e H100 (benchmarks/llama3_h100_202412_torchtitan.md) the
    kernels' 38 and 108 bytes an element (torch's own count: tests/test_norms_hf.py) take longer at
    its streaming rate than the NVL's SM cycles at its SMs: a norm of 16,384 x 4,096 costs its fixed
    time plus the count at 2.4 TB/s x 0.887."""
    model = cost.get("gpu", cost.Settings(device="h100-hbm2e", norms="eager"))
    assert isinstance(model, Gpu)
    measured = model.norms
    assert measured is not None
    times = model.times(_norm(4096, rows=16384))
    elements, stream = 16384 * 4096, 2.4e12 * 0.887
    assert times.forward * 1e-9 == pytest.approx(measured.forward_fixed_s + elements * 38 / stream, rel=1e-3)
    assert times.input_grad * 1e-9 == pytest.approx(
        measured.backward_fixed_s + elements * 108 / stream, rel=1e-3
    )


def test_torchtitan_runs_its_rmsnorm_op_by_op_compiled_under_compile_and_megatron_fused() -> None:
    """torchtitan's published runs without --compile pay the measured ops at torchtitan's own size
    (16,384 tokens x 4,096: the 32,768 x 2,048 row's elements); with it a block's norm the compiled
    kernels, the final norm outside the blocks (which apply_compile leaves alone) the ops still;
    Megatron's fused kernel one pass: read x, write y, each bf16."""
    times, outside = {}, {}
    runs = {"eager": ("torchtitan", False), "compiled": ("torchtitan", True), "fused": ("megatron", False)}
    for name, (framework, compiled) in runs.items():
        request = Request(
            model="llama-3-8b",
            dp=8,
            zero=3,
            framework=framework,
            device="h100",
            seq_len=2048,
            compile=compiled,
        )
        options = prepare(request).options
        model = cost.get(options.compute, options.cost)
        times[name] = model.times(_norm(4096, rows=16384, block=3))
        outside[name] = model.times(_norm(4096, rows=16384))
    stream = 3.35e12 * 0.887  # the SXM part's
    # the H100 NVL's rows at 32,768 x 2,048 moved to the SXM part: op by op by the SMs x clock (132 x
    # 1,980 MHz, nvidia-smi's clocks.max.sm), compiled by the streaming rate
    for name, ms, rel, ratio in (
        ("eager", 1.2193, 0.03, SM["h100"] / (132 * 1.98e9)),
        ("compiled", 0.1559, 0.15, STREAM["h100"] / stream),
    ):
        assert times[name].forward * 1e-9 == pytest.approx(ms * 1e-3 * ratio, rel=rel), name
    assert times["fused"].forward * 1e-9 == pytest.approx(16384 * 4096 * 4 / stream, rel=0.01)
    assert outside["compiled"] == outside["eager"] == times["eager"]


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
    measured = _cost("h100", "eager")
    elements = ROWS * hidden
    expected = (round(elements * measured.forward), round(elements * measured.backward))
    assert rmsnorm_bytes(layer, measured) == expected


@pytest.mark.parametrize("device", ["h100", "h100-hbm2e"])
def test_efficiency_memory_scales_the_op_by_op_rmsnorm_whichever_bound_holds(device: str) -> None:
    """`--efficiency memory=0.5` halves the memory class's rates: the op-by-op norm's time an
    element doubles whether its SM cycles (the H100 SXM) or its bytes (the HBM2e part) bind."""
    times = {}
    for factor in (1.0, 0.5):
        model = cost.get("gpu", cost.Settings(device=device, norms="eager", efficiency=(("memory", factor),)))
        assert isinstance(model, Gpu)
        measured = model.norms
        assert measured is not None
        seconds = model.times(_norm(4096, rows=16384)).forward * 1e-9
        times[factor] = seconds - measured.forward_fixed_s
    assert times[0.5] == pytest.approx(2 * times[1.0], rel=1e-3)
