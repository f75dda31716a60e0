"""One transformer layer's time and the optimizer step, against what was measured.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", arXiv
2205.05198), Table 4: one layer of their GPT 22B (hidden 6,144, 64 heads, sequence 2,048,
micro-batch 4) at tensor parallel 8 on DGX A100s, forward and backward in ms by recomputation
mode. A layer's time here is what a rank runs: its compute nodes (the gpu cost model, Megatron-LM of
2022: eager attention, dropout 0.1) and its tensor-parallel collectives at what the dgx-a100 preset
gives ASTRA-sim (NCCL's measured bandwidth, simulate/nccl.py), as ASTRA-sim's analytical ring
charges them (nccl.ring_seconds), each operation started once what it depends on is done, one
compute and one collective at a time, as ASTRA-sim's workload layer runs a rank's program. The
norms' gradient all-reduce at the iteration's end (Place.TAIL) is not the layer's.

The forward is Megatron's in series (its tensor-parallel all-reduce or reduce-scatter waits for
the GEMM before it): within 2 %. The backward's collectives run in series here too, while
Megatron-LM issues the column-parallel linears' backward collectives beside their GEMMs
(megatron/mpu/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward, 2022) and
hides 13-36 % of them: a GEMM slowed s times beside them would hide 1/s, and the published A100
slowdowns (1.29x by the SMs NCCL holds, 1.76x in one profile) hide too much (docs/simulate.md,
"Overlapped compute and collectives"). So the measured backward lies between ours and ours
without its collectives' time: the most any overlap could hide.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans.api import run
from modtrans.comm import CommType
from modtrans.cost.gemm import update_bytes
from modtrans.ir.document import Kind, Layer, Param, Role
from modtrans.plan.model import Collective, Compute, Place, Plan, Step
from modtrans.request import Request, prepare
from modtrans.simulate import nccl, network

# Korthikanti et al. 2022, Table 4 (ms): forward, backward
TABLE_4 = {
    "no recomputation": ((), (7.7, 11.9)),
    "sequence parallelism": (("sp",), (7.2, 11.8)),
    "full recomputation": (("full",), (7.7, 19.5)),
    "selective recomputation": (("selective",), (7.7, 13.2)),
    "selective + sequence parallelism": (("selective", "sp"), (7.2, 13.1)),
}
_RING = {
    CommType.ALLREDUCE: "all-reduce",
    CommType.REDUCESCATTER: "reduce-scatter",
    CommType.ALLGATHER: "all-gather",
}


def _plan(tmp_path: Path, modes: tuple[str, ...]) -> Plan:
    config = tmp_path / "gpt-22b.json"
    gpt = {"model_type": "gpt2", "n_embd": 6144, "n_layer": 48, "n_head": 64, "n_positions": 2048}
    config.write_text(json.dumps({**gpt, "vocab_size": 51200, "torch_dtype": "float16", "attn_pdrop": 0.1}))
    recompute = next((m for m in modes if m != "sp"), None)
    request = Request(
        model=str(config), tp=8, micro_batch=4, global_batch=4, attention="eager",
        sp="sp" in modes, recompute=recompute,
    )  # fmt: skip
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result.plan


def _layer_ms(plan: Plan, block: str) -> tuple[float, float, float]:
    """Forward and backward (with what is recomputed before it) of the block's units on rank 0:
    from the first of its operations' start to the last one's end, rank 0's program run on two
    lanes, each operation after its dependencies and its lane's previous one; and the backward's
    collectives' time."""
    net = network("dgx-a100", 8)
    units = {i for i, info in enumerate(plan.layers) if info.name.startswith(block)}
    lanes = {"compute": 0.0, "comm": 0.0}
    end: list[float] = []
    spans: dict[str, list[float]] = {"fwd": [], "bwd": []}
    talk = 0.0
    for op in plan.programs[0]:
        if isinstance(op, Compute):
            lane, seconds = "compute", op.time * 1e-9  # the plan's ticks: ns
        elif isinstance(op, Collective):
            kind = _RING[op.comm]
            lane, seconds = "comm", nccl.ring_seconds(kind, op.bytes, 8, net.bandwidth[0], net.latency[0])
        else:
            raise AssertionError(f"one stage moves nothing point to point: {op}")
        start = max([lanes[lane], *(end[d] for d in op.deps)])
        lanes[lane] = start + seconds
        end.append(start + seconds)
        if op.layer in units and getattr(op, "place", None) is not Place.TAIL:  # at the iteration end
            spans["fwd" if op.step is Step.FWD else "bwd"] += [start, start + seconds]
            talk += seconds if lane == "comm" and op.step is not Step.FWD else 0.0
    forward, backward = ((max(v) - min(v)) * 1e3 for v in (spans["fwd"], spans["bwd"]))
    return forward, backward, talk * 1e3


@pytest.mark.parametrize("mode", list(TABLE_4))
def test_a_22b_layer_as_korthikantis_table_4_measured_it(mode: str, tmp_path: Path) -> None:
    modes, (forward, backward) = TABLE_4[mode]
    found, serial, collectives = _layer_ms(_plan(tmp_path, modes), "transformer.h.1.")
    assert found == pytest.approx(forward, rel=0.02)
    assert serial - collectives < backward <= serial


def test_the_update_is_megatrons_mixed_precision_adam() -> None:
    """fp16 parameters with fp32 main parameters, gradients and moments: 50 B an element (Adam's
    seven fp32 passes, the norm's read, the zeroing, the unscaling's read and write, the copy back
    to fp16); bf16 42 B, no unscaling: Megatron builds no grad scaler for bf16 without
    --loss-scale (megatron/core/optimizer/__init__.py at core_r0.8.0: "otherwise we are running in
    bf16 with no loss-scale so leave it as None"; prepare_grads unscales `if self.grad_scaler`);
    fp32 parameters 36 B. Counted by hand from MixedPrecisionOptimizer.step's kernels."""
    elements = 1000

    def layer(dtype: str, width: int) -> Layer:
        weight = Param("w", Role.WEIGHT, (elements,), dtype, elements, elements * width, True)
        return Layer("fc", "fc", "Gemm", Kind.LINEAR, params=(weight,))

    assert update_bytes(layer("float16", 2)) == elements * (7 * 4 + 4 + 4 + 2 * 4 + 4 + 2)
    assert update_bytes(layer("bfloat16", 2)) == elements * (7 * 4 + 4 + 4 + 4 + 2)
    assert update_bytes(layer("float", 4)) == elements * (7 * 4 + 4 + 4)


def test_the_optimizer_step_ends_each_ranks_program(tmp_path: Path) -> None:
    """One compute of its own per rank, after every weight gradient, as long as its parameters'
    update traffic at the measured streaming bandwidth (BabelStream Triad 1.70 TB/s on an A100):
    the 50 B an fp16 parameter less what Megatron runs before it as kernels of their own, each
    followed by an all-reduce of one fp32 number over the model-parallel (here the 8 tensor) ranks
    (megatron/core/optimizer/optimizer.py at core_r0.8.0, MixedPrecisionOptimizer.step:
    _unscale_main_grads_and_check_for_nan's unscaling, 8 B, then get_grad_norm_fp32's
    multi_tensor_l2norm, 4 B: tests/test_megatron_clip.py holds them to the source)."""
    plan = _plan(tmp_path, ())
    program = plan.programs[0]
    updates = [i for i, op in enumerate(program) if isinstance(op, Compute) and op.step is Step.UPDATE]
    assert len(updates) == 3  # the unscaling, the norm, Adam
    step = program[updates[-1]]
    assert isinstance(step, Compute)
    last_wg = max(
        i for i, op in enumerate(program) if isinstance(op, Compute) and op.step is Step.WEIGHT_GRAD
    )
    assert last_wg in program[updates[0]].deps
    assert updates[-1] == len(program) - 1
    # 22B at TP 8: 12 h^2 / 8 + 13 h (biases, norms) per layer, 48 layers, the embeddings' shards
    h = 6144
    params = 48 * (12 * h * h // 8 + 13 * h) + (51200 // 8 + 2048) * h
    assert step.time * 1e-9 == pytest.approx(params * (50 - 8 - 4) / 1.70e12, rel=0.03)
    unscale, norm = (program[i] for i in updates[:2])
    assert isinstance(unscale, Compute)
    assert isinstance(norm, Compute)
    assert unscale.time * 1e-9 == pytest.approx(params * 8 / 1.70e12, rel=0.03)
    assert norm.time * 1e-9 == pytest.approx(params * 4 / 1.70e12, rel=0.03)


@pytest.mark.parametrize(("framework", "zero"), [("megatron", 1), ("deepspeed", 2), ("fsdp", 3)])
def test_a_sharded_optimizer_steps_over_its_share_of_the_parameters(
    tmp_path: Path, framework: str, zero: int
) -> None:
    """With ZeRO-1/2/3, FSDP or Megatron's distributed optimizer each of the D data-parallel
    ranks keeps and updates 1/D of the optimizer state (Rajbhandari et al. 2020, ZeRO, sec. 5.1:
    "each data parallel process only updates its partition"): the step lasts its share's traffic,
    a quarter of the 22B model's 50 B a parameter at 1.70 TB/s on four data ranks; but Megatron's
    distributed optimizer zeroes the whole gradient buffer on every rank (zero_grad_buffer ->
    ParamAndGradBuffer.reset, `self.grad_data.zero_()`, megatron/core/distributed/
    param_and_grad_buffer.py at core_r0.8.0): 4 B a parameter whole, a quarter of the other 46,
    less the unscaling's 8 B and the norm's 4 B, which Megatron runs as kernels of their own
    before its step (tests/test_megatron_clip.py)."""
    config = tmp_path / "gpt-22b.json"
    gpt = {"model_type": "gpt2", "n_embd": 6144, "n_layer": 48, "n_head": 64, "n_positions": 2048}
    config.write_text(json.dumps({**gpt, "vocab_size": 51200, "torch_dtype": "float16"}))
    request = Request(model=str(config), tp=8, dp=4, zero=zero, framework=framework, micro_batch=1)
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    program = result.plan.programs[0]
    step = [op for op in program if isinstance(op, Compute) and op.step is Step.UPDATE][-1]
    h = 6144
    params = 48 * (12 * h * h // 8 + 13 * h) + (51200 // 8 + 2048) * h
    moved = params * ((46 - 8 - 4) / 4 + 4) if framework == "megatron" else params / 4 * 50
    assert step.time * 1e-9 == pytest.approx(moved / 1.70e12, rel=0.03)
