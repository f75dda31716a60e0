"""Every parallelism strategy on a two-layer MLP whose sizes are worked out by hand below.

    x [2, 8] -> fc1: Gemm 8 -> 16 (+bias) -> Relu -> fc2: Gemm 16 -> 4 (+bias) -> y [2, 4], fp32

    P(fc1) = (8*16 + 16) * 4 = 576 bytes     P(fc2) = (16*4 + 4) * 4 = 272 bytes   (--params trainable)
    A_out(fc1) = 2*16*4 = 128                 A_out(fc2) = 2*4*4 = 32
    A_in(fc1) = 0: x is a model input (no input gradient), A_in(fc2) = the Relu output, 128 bytes

The formulas are those of modtrans/strategy/parallel.py's docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import Result

from modtrans import cost
from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Severity
from modtrans.pipeline import Options, translate_checked
from modtrans.strategy import SUPPORTED, Parallelism, StrategyError
from modtrans.strategy.roles import Split
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.validate import validate
from modtrans.workload.write import write

Run = Callable[..., Result]
N = CommType.NONE
AR, AG = CommType.ALLREDUCE, CommType.ALLGATHER


@pytest.fixture(scope="module")
def mlp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def init(name: str, shape: tuple[int, ...]) -> TensorProto:
        return numpy_helper.from_array(np.full(shape, 0.5, np.float32), name)

    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="/fc1/Gemm", transB=1),
        helper.make_node("Relu", ["h"], ["r"], name="/act/Relu"),
        helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="/fc2/Gemm", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [init("w1", (16, 8)), init("b1", (16,)), init("w2", (4, 16)), init("b2", (4,))],
    )
    path = tmp_path_factory.mktemp("mlp") / "mlp.onnx"
    onnx.save(helper.make_model(graph), path)
    return path


def _comms(w: Workload) -> list[tuple[tuple[CommType, int], ...]]:
    return [tuple((p.comm_type, p.comm_size) for _, p in layer.phases) for layer in w.layers]


def _translate(
    path: Path, dialect: Dialect = Dialect.ASTRA_SIM, compute: str = "scalesim-v3", **parallel: Any
) -> Workload:
    options = Options(parallel=Parallelism(**parallel), compute=compute, dialect=dialect)
    result = translate_checked(path, options)
    assert result.workload is not None, result.diagnostics
    found = [d.code for d in validate(write(result.workload, dialect), dialect=dialect)]
    # clean for its consumer; SimAI runs only the transformer keywords (D314: SIGFPE in its report
    # on any other, found running SimAI 1.6 f5efb5a9)
    runs = dialect is not Dialect.SIMAI or result.workload.header.policy.is_transformer
    assert found == ([] if runs else ["D314"])
    return result.workload


def test_data(mlp: Path) -> None:
    w = _translate(mlp, policy=Policy.DATA, npus=4)
    assert _comms(w) == [((N, 0), (N, 0), (AR, 576)), ((N, 0), (N, 0), (AR, 272))]


def test_model(mlp: Path) -> None:
    w = _translate(mlp, policy=Policy.MODEL, npus=8)
    # fwd all-gathers the output; ig all-reduces the input gradient (not for fc1: x is an input).
    # ASTRA-sim reads an all-gather's size as one rank's part (Ring.cc: final_data_size = data_size
    # * nodes_in_ring): the outputs of 128 and 32 bytes are written as 128 / 8 and 32 / 8
    assert _comms(w) == [((AG, 16), (N, 0), (N, 0)), ((AG, 4), (AR, 128), (N, 0))]


def test_each_npu_computes_its_shard(mlp: Path) -> None:
    from modtrans.pipeline import extract
    from modtrans.strategy import shard

    fc1 = extract(mlp).layer("fc1")  # forward GEMM (M, K, N) = (2, 8, 16)
    part = shard(fc1, 8)  # 16 / 8 = 2 output features per NPU
    assert part.gemm is not None
    assert (part.gemm.m, part.gemm.k, part.gemm.n) == (2, 8, 2)
    assert part.flops.forward == fc1.flops.forward // 8
    tiny = cost.get("scalesim-v3", cost.Settings(array=(2, 2)))
    # WS on 2x2: ceil(K/2) * ceil(N/2) * (2*2 + 2 + M - 2) - 1 -> 4 * 8 * 6 - 1 = 191, and 4 * 1 * 6 - 1 = 23
    assert (tiny.times(fc1).forward, tiny.times(part).forward) == (191, 23)
    row = shard(fc1, 4, split=Split.K)  # row parallel: the reduction is split
    assert row.gemm is not None
    assert (row.gemm.k, row.gemm.n) == (2, 16)


def test_hybrid_data_model(mlp: Path) -> None:
    w = _translate(mlp, policy=Policy.HYBRID_DATA_MODEL, npus=8, group=2)
    # model parallel within groups of 2: each all-reduces its half of the parameters: 288 and 136
    # the all-gathers: each rank's half of the outputs (128 / 2, 32 / 2)
    assert _comms(w) == [((AG, 64), (N, 0), (AR, 288)), ((AG, 16), (AR, 128), (AR, 136))]


def test_hybrid_model_data(mlp: Path) -> None:
    w = _translate(mlp, policy=Policy.HYBRID_MODEL_DATA, npus=8, group=2)
    # data parallel within groups of 2, model parallel across 8/2 = 4 groups: 576/4 = 144, 272/4 = 68
    # the all-gathers: each rank's quarter of the outputs (128 / 4, 32 / 4)
    assert _comms(w) == [((AG, 32), (N, 0), (AR, 144)), ((AG, 8), (AR, 128), (AR, 68))]


def test_hybrid_transformer(mlp: Path) -> None:
    w = _translate(mlp, policy=Policy.HYBRID_TRANSFORMER, npus=8, group=2)
    # fc1 is column parallel (fed by the input): ig all-reduce of its input, none since x is an input;
    # fc2 is row parallel (fed by fc1 through the Relu): fwd all-reduce of its output (32 bytes).
    # The data-parallel all-reduces move each rank's share: fc1's (16 x 8 + 16) / 2, fc2's 4 x 16 / 2
    # and its bias of 4 whole (Megatron's RowParallelLinear: the bias not parallelized), fp32
    assert _comms(w) == [((N, 0), (N, 0), (AR, 288)), ((AR, 32), (N, 0), (AR, 144))]
    assert w.header.model_parallel_group == 2


def test_hybrid_transformer_fwd_in_bckwd_checkpoints(mlp: Path) -> None:
    w = _translate(mlp, policy=Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, npus=8, group=2, checkpoint_every=1)
    # a checkpoint at each layer; each segment is recomputed from its last layer
    assert (w.header.checkpoints, w.header.checkpoint_initiates) == ((0, 1), (1, 0))
    w = _translate(mlp, policy=Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, npus=8, group=2)
    assert (w.header.checkpoints, w.header.checkpoint_initiates) == ((0,), (1,))


def test_fwd_in_bckwd_recomputes_what_astra_sim_1_0_recomputes(mlp: Path) -> None:
    # ASTRA-sim 1.0 (branch ASTRA-sim-1.0, astra-sim/workload/Workload.cc,
    # iterate_hybrid_parallel_Transformer_fwd_in_bckwd): Forward_In_BackPass runs the forwards from
    # the checkpoint and stops at the layer that needs_fwd_in_bckwd_initiation, whose forward is
    # not run again. fc1, fc2 with the default checkpoint 0, initiated by fc2: fc1 alone; a
    # checkpoint at each layer (one-layer segments): each recomputes itself
    from modtrans.plan import Compute, Step

    def recomputed(**options: Any) -> list[int]:
        parallel = Parallelism(Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, 8, 2, **options)
        plan = translate_checked(mlp, Options(parallel=parallel)).plan
        assert plan is not None
        return [op.layer for op in plan.programs[0] if isinstance(op, Compute) and op.step is Step.RECOMPUTE]

    assert recomputed() == [0]
    assert recomputed(checkpoint_every=1) == [1, 0]


def test_hybrid_customized_automatic_and_from_rules(mlp: Path) -> None:
    # automatic: MODEL costs A_out + 2 A_in (fc1 128, fc2 32 + 256 = 288) against DATA's 2P (1152, 544)
    w = _translate(mlp, policy=Policy.HYBRID_CUSTOMIZED, npus=8)
    assert [x.policy for x in w.layers] == [Policy.MODEL, Policy.MODEL]
    w = _translate(mlp, policy=Policy.HYBRID_CUSTOMIZED, npus=8, per_layer={"fc2": Policy.DATA})
    assert [x.policy for x in w.layers] == [Policy.DATA, Policy.DATA]  # unmatched layers are DATA
    assert _comms(w)[1] == ((N, 0), (N, 0), (AR, 272))


def test_inconsistent_options(mlp: Path) -> None:
    for parallel, message in [
        (Parallelism(policy=Policy.HYBRID_DATA_MODEL, npus=8), "needs --model-parallel-group"),
        (Parallelism(policy=Policy.HYBRID_TRANSFORMER, npus=6, group=4), "divide --npus 6"),
        (
            Parallelism(policy=Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, npus=4, group=2, checkpoints=(5,)),
            "layers 0..1",
        ),
    ]:
        result = translate_checked(mlp, Options(parallel=parallel))
        assert result.workload is None
        assert [d.code for d in result.diagnostics] == ["X501"]
        assert message in result.diagnostics[0].message
    from modtrans.pipeline import extract
    from modtrans.strategy import build

    ir, roofline = extract(mlp), cost.get("roofline")
    with pytest.raises(StrategyError, match="not a training strategy"):
        build(ir, roofline, Parallelism(Policy.MICRO))


@pytest.mark.parametrize(
    "policy",
    SUPPORTED,
)
def test_simai_output_is_clean_for_simai(policy: Policy) -> None:
    w = _translate(Path("gpt2"), Dialect.SIMAI, "roofline", policy=policy, npus=8, group=4)
    h = w.header
    assert (h.ep, h.pp, h.vpp, h.ga, h.all_gpus) == (1, 1, 1, 1, 8)
    assert h.model_parallel_group in (1, 4)


def test_simai_keeps_only_one_checkpoint(run_cli: Run) -> None:
    args = (
        "translate",
        "gpt2",
        "-p",
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
        "--npus",
        "8",
        "--model-parallel-group",
        "4",
        "--dialect",
        "simai",
    )
    # one default in every dialect: a checkpoint at layer 0, recomputation from the last layer
    simai = run_cli(*args).stdout.splitlines()[0]
    astra = run_cli(*args[:-2]).stdout.splitlines()[0]
    assert "checkpoints: 1 0 checkpoint_initiates: 1 75" in simai
    assert "checkpoints: 1 0 checkpoint_initiates: 1 75" in astra
    result = run_cli(*args, "--checkpoint-every", "12")
    assert result.exit_code == 0
    assert "warning D306" in result.stderr  # SimAI reads only the first index: said, not hidden


def test_transformer_builtins_follow_megatron() -> None:
    w = _translate(Path("bert-base"), policy=Policy.HYBRID_TRANSFORMER, npus=8, group=4, compute="roofline")
    by_name = {layer.name: layer for layer in w.layers}
    q = by_name["encoder.layer.0.attention.self.query"]
    k = by_name["encoder.layer.0.attention.self.key"]
    out = by_name["encoder.layer.0.attention.output.dense"]
    # hidden activations are 1 x 128 x 768 fp32 = 393,216 bytes
    assert (q.input_grad.comm_type, q.input_grad.comm_size) == (AR, 393_216)  # Q, K, V share one
    assert k.input_grad.comm_type is N
    assert (out.fwd.comm_type, out.fwd.comm_size) == (AR, 393_216)  # row parallel
    assert q.weight_grad.comm_size == (768 * 768 + 768) * 4 // 4  # a quarter of the shard each


def test_chakra_dialect_refuses_what_it_cannot_convert(run_cli: Run) -> None:
    result = run_cli(
        "translate",
        "gpt2",
        "-p",
        "HYBRID_TRANSFORMER",
        "--npus",
        "8",
        "--model-parallel-group",
        "4",
        "--dialect",
        "chakra",
        "--time-unit",
        "us",
    )
    assert result.exit_code == 1
    assert "D301" in result.stderr or "D310" in result.stderr
    assert result.stdout == ""
    ok = run_cli(
        "translate", "vgg16", "-p", "MODEL", "--npus", "4", "--dialect", "chakra", "--time-unit", "us"
    )
    assert ok.exit_code == 0, ok.stderr
    strict = run_cli("translate", "vgg16", "--dialect", "chakra", "--time-unit", "ns", "--strict")  # X508
    assert strict.exit_code == 1
    assert strict.stdout == ""


def test_warnings_are_warnings(mlp: Path) -> None:
    result = translate_checked(mlp, Options(dialect=Dialect.CHAKRA))
    assert [d.severity for d in result.diagnostics] == [Severity.WARNING]


def test_packages_give_the_group(run_cli: Run) -> None:
    args = ("translate", "vgg16", "-p", "HYBRID_DATA_MODEL", "--npus", "8", "--params", "weights")
    by_group = run_cli(*args, "--model-parallel-group", "4").stdout
    by_packages = run_cli(*args, "--packages", "2").stdout  # 8 NPUs in 2 packages: groups of 4
    assert by_group == by_packages
    assert by_group
    assert run_cli(*args, "--packages", "3").exit_code == 2
