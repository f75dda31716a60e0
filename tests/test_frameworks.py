"""The named framework versions and configurations of `--framework` (strategy/frameworks.py), each
against the source that sets what it sends."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from modtrans.comm import CommType
from modtrans.plan import Collective, Compute, Direction, Op, Plan, Purpose, Step, Transfer
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import Layout, LayoutError, Schedule
from tests import plans

MICRO, SEQ, HIDDEN = 2, 16, 64
A = MICRO * SEQ * HIDDEN * 2  # one micro-batch's hidden activation in bf16: 4,096 bytes
TENSOR = frozenset({Purpose.TENSOR})


def _plan(tmp_path: Path, layout: Layout, layers: int = 2) -> Plan:
    """The toy Llama of `layers` blocks under `layout`."""
    path = plans.config(tmp_path, {**plans.TOY, "num_hidden_layers": layers})
    return plans.plan(path, layout, (MICRO, SEQ))


def _pipeline(framework: Framework, sp: bool = False) -> Layout:
    return Layout(
        npus=4,
        tp=2,
        pp=2,
        sp=sp,
        micro_batch=MICRO,
        global_batch=3 * MICRO,
        vocab_divisor=1,
        framework=framework,
    )


def test_megatron_2022_scatters_each_boundary_over_the_tensor_ranks_and_gathers_it(tmp_path: Path) -> None:
    """Megatron-LM v3.0, megatron/p2p_communication.py, _communicate: without SP each tensor rank
    sends 1/T of the activation (split_tensor_into_1d_equal_chunks) and the receiver all-gathers
    it over the tensor group (gather_split_1d_tensor) before using it; with SP the activation is
    a sequence shard already and crosses as it is. Today's Megatron sends the whole activation."""
    _assert_partitioned(_plan(tmp_path, _pipeline(Framework.MEGATRON_2022)))
    for sp, added in ((False, True), (True, False)):  # gathered on arrival only without SP
        then = _plan(tmp_path, _pipeline(Framework.MEGATRON_2022, sp=sp))
        today = _plan(tmp_path, _pipeline(Framework.MEGATRON, sp=sp))
        for old, new in zip(then.programs, today.programs, strict=True):
            received = sum(isinstance(op, Transfer) and op.direction is Direction.RECV for op in old)
            assert _gathers(old) - _gathers(new) == (received if added else 0)
            assert {op.bytes for op in new if isinstance(op, Transfer)} == {A // 2 if sp else A}


def test_deepspeeds_pipeline_engine_partitions_and_waits_for_its_sends(tmp_path: Path) -> None:
    """DeepSpeed's PipelineEngine (microsoft/DeepSpeed 38327e0, deepspeed/runtime/pipe/): each
    tensor rank sends its 1/T PartitionedTensor of a boundary and the receiver rebuilds it over the
    tensor group (engine.py, is_pipe_partitioned and is_grad_partitioned for a model-parallel grid,
    runtime/config.py's defaults True; _exec_recv_activations: PartitionedTensor.from_meta(...).full());
    p2p.py's send refuses async_op (`assert async_op == False`), so what follows a send waits."""
    plan = _plan(tmp_path, _pipeline(Framework.DEEPSPEED))
    first = plan.programs[0]
    sends = [i for i, op in enumerate(first) if isinstance(op, Transfer) and op.direction is Direction.SEND]
    assert len(sends) == 3
    for i in sends:
        assert [op for op in first[i + 1 :] if i in op.deps]
    _assert_partitioned(plan)


def _assert_partitioned(plan: Plan) -> None:
    """Every boundary crosses as a tensor rank's 1/T of it (T = 2), and each receive is followed by
    the all-gather over the tensor group that rebuilds it, waiting for that receive."""
    for program in plan.programs:
        for i, op in enumerate(program):
            if isinstance(op, Transfer):
                assert op.bytes == A // 2
                if op.direction is Direction.RECV:
                    gather = program[i + 1]
                    assert isinstance(gather, Collective)
                    assert (gather.comm, gather.bytes, gather.over, gather.deps) == (
                        CommType.ALLGATHER, A, TENSOR, (i,),
                    )  # fmt: skip


@pytest.mark.parametrize("schedule", [Schedule.GPIPE, Schedule.INTERLEAVED, Schedule.ZB_H1])
def test_deepspeeds_pipeline_runs_its_one_schedule(schedule: Schedule) -> None:
    """DeepSpeed's PipelineEngine trains with one schedule (deepspeed/runtime/pipe/engine.py,
    train_batch: `sched = schedule.TrainSchedule(...)`, 1F1B): any other is refused (on the
    command line in one line, exit 2)."""
    vpp = 2 if schedule is Schedule.INTERLEAVED else 1
    with pytest.raises(LayoutError, match="TrainSchedule"):
        Layout(npus=2, pp=2, vpp=vpp, global_batch=4, schedule=schedule, framework=Framework.DEEPSPEED)
    Layout(npus=2, pp=2, global_batch=4, framework=Framework.DEEPSPEED)  # its 1F1B


def _gathers(program: tuple[Op, ...]) -> int:
    return sum(
        isinstance(op, Collective) and op.comm is CommType.ALLGATHER and op.over == TENSOR for op in program
    )


def test_megatron_2022_waits_for_its_sends(tmp_path: Path) -> None:
    """_communicate waits for every request it batched (`req.wait()`), sends included, before the
    schedule goes on: what follows the send depends on it. Today's default leaves sends to finish
    on their own (nothing waits for them)."""
    for framework, waits in ((Framework.MEGATRON_2022, True), (Framework.MEGATRON, False)):
        first = _plan(tmp_path, _pipeline(framework)).programs[0]
        sends = [
            i for i, op in enumerate(first) if isinstance(op, Transfer) and op.direction is Direction.SEND
        ]
        assert len(sends) == 3  # one activation per micro-batch
        for i in sends:
            assert bool([op for op in first[i + 1 :] if i in op.deps]) is waits


def test_torchtitan_gathers_bf16_parameters_and_reduces_fp32_gradients(tmp_path: Path) -> None:
    """torchtitan's FSDP2: fully_shard with MixedPrecisionPolicy(param_dtype=bfloat16,
    reduce_dtype=float32) (torchtitan/config/job_config.py, mixed_precision_param and
    mixed_precision_reduce): q_proj's 64 x 64 parameters gathered at 2 bytes each, its gradient
    reduce-scattered at 4. Plain FSDP reduces in the parameters' dtype (reduce_dtype defaults to
    param_dtype). llm-foundry's runs, Composer's FSDP with mixed precision DEFAULT
    (composer/trainer/mosaic_fsdp_utils.py at v0.21.3, get_mixed_precision: reduce_dtype
    torch.float32), the same."""
    sent = ((Framework.TORCHTITAN, 4), (Framework.LLM_FOUNDRY, 4), (Framework.FSDP, 2))
    for framework, grad_bytes in sent:
        layout = Layout(npus=2, dp=2, zero=3, framework=framework, micro_batch=MICRO, global_batch=2 * MICRO)
        plan = _plan(tmp_path, layout)
        q = [info.name for info in plan.layers].index("model.layers.0.self_attn.q_proj")
        ops = [op for op in plan.programs[0] if isinstance(op, Collective) and op.layer == q]
        sizes = {(c.comm, c.bytes) for c in ops}
        assert sizes == {
            (CommType.ALLGATHER, HIDDEN * HIDDEN * 2),
            (CommType.REDUCESCATTER, HIDDEN * HIDDEN * grad_bytes),
        }


def test_megatron_2022_interleaved_sends_a_forward_after_the_next_backward(tmp_path: Path) -> None:
    """forward_backward_pipelining_with_interleaving (Megatron-LM v3.0, schedules.py): in the
    steady state each iteration runs forward_step_helper, then backward_step_helper, then one
    send_forward_backward_recv_forward_backward, so the forward's output leaves after the backward
    that follows it, behind that backward's gradient; warm-up forwards send at once
    (send_forward_recv_forward). Today's Megatron sends each forward's output when it is made."""
    layout = Layout(
        npus=4, tp=2, pp=2, vpp=2, schedule=Schedule.INTERLEAVED, micro_batch=MICRO, global_batch=8 * MICRO,
        vocab_divisor=1,
    )  # fmt: skip
    for framework, deferred in ((Framework.MEGATRON_2022, True), (Framework.MEGATRON, False)):
        program = _plan(tmp_path, dataclasses.replace(layout, framework=framework), layers=8).programs[0]
        before = []  # per forward send: the step of the compute before it
        for i, op in enumerate(program):
            if isinstance(op, Transfer) and op.direction is Direction.SEND and op.step is Step.FWD:
                last = next(x for x in reversed(program[:i]) if isinstance(x, Compute))
                before.append(last.step)
        assert Step.FWD in before  # the warm-up's
        assert any(step is not Step.FWD for step in before) is deferred


def test_flash_attn_all_reduces_fp32_gradients_and_refuses_zero_2_and_3() -> None:
    """flash-attention's training scripts: Lightning's DDP over fp32 parameters under bf16 autocast
    (training/configs/experiment/pile/base.yaml at 4a6eaa9f), so the gradients all-reduced are fp32,
    as the megatron family's; its loss apex's fused cross-entropy, which saves the logits and
    writes their gradient over them; its larger runs' ZeroRedundancyOptimizer is --zero 1
    (tests/test_zero_redundancy.py), and no config of it runs more: 2 and 3 are refused."""
    import pytest

    from modtrans.strategy.llm.options import LayoutError

    flash = Framework.FLASH_ATTN
    assert flash.family is Framework.MEGATRON
    assert flash.loss == "fused"
    assert flash.attention == "flash1"
    assert flash.logit_bytes(2) == 2
    assert Framework.MEGATRON.logit_bytes(2) == 6
    layout = Layout(npus=2, dp=2, framework=flash, micro_batch=MICRO, global_batch=2 * MICRO)
    assert dataclasses.replace(layout, zero=1).zero == 1
    for zero in (2, 3):
        with pytest.raises(LayoutError, match="ZeroRedundancyOptimizer"):
            dataclasses.replace(layout, zero=zero)


def test_flash_attn_reduces_fp32_gradients_under_fp16_autocast_too(tmp_path: Path) -> None:
    """flash-attention's GPT-2 runs train under Lightning's fp16 mixed precision (training/configs/
    experiment/owt/base.yaml at 4a6eaa9f: trainer.precision 16): fp16 autocast over the fp32
    module, whose gradients are fp32 as under bf16; Megatron-LM's fp16 reduces them in fp16."""
    path = plans.config(tmp_path, {**plans.TOY, "torch_dtype": "float16"})
    sent = {}
    for framework in (Framework.FLASH_ATTN, Framework.MEGATRON):
        layout = Layout(
            npus=2, dp=2, framework=framework, micro_batch=MICRO, global_batch=2 * MICRO, vocab_divisor=1
        )
        plan = plans.plan(path, layout, (MICRO, SEQ))
        (reduce,) = [op for op in plan.programs[0] if isinstance(op, Collective)]
        sent[framework] = reduce.bytes
    assert sent[Framework.FLASH_ATTN] == 2 * sent[Framework.MEGATRON]


@pytest.mark.parametrize("framework", ["fsdp", "deepspeed"])
def test_a_framework_running_the_models_own_module_runs_sdpas_flashattention_2(
    run_cli: Any, tmp_path: Path, framework: str
) -> None:
    """FSDP and DeepSpeed run the module they are handed (Framework.wraps_module): the model's own
    attention, PyTorch's SDPA, whose first GPU backend is FlashAttention-2 (torch's priority
    order, held to torch itself in tests/test_hf_own_attention.py). A built-in's attention has a
    fused kernel (Heads.eager is the transformers reading's), so on an H100 the translation is
    --attention flash2's, not the device's newest kernel's (FlashAttention-3), and M807 (an
    attention charged op by op) is not said."""
    written = []
    for name, chosen in (
        ("own", []),
        ("flash2", ["--attention", "flash2"]),
        ("flash", ["--attention", "flash"]),
    ):
        prefix = tmp_path / name
        done = run_cli(
            "translate", "llama-3-8b", "--seq-len", "1024", "--dp", "2", "--zero", "3", "--device", "h100",
            "--framework", framework, *chosen, "--format", "chakra-et", "-o", prefix,
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        assert "M807" not in done.output
        meta = json.loads(prefix.with_name(f"{name}.et-meta.json").read_text(encoding="utf-8"))
        timed = run_cli("estimate", prefix, "--network", "hgx-h100")
        assert timed.exit_code == 0, timed.output
        iteration = next(line for line in timed.output.splitlines() if line.startswith("iteration:"))
        written.append((meta["compute"], meta["parallel"], iteration))
    assert written[0] == written[1]
    assert written[0][2] != written[2][2]


def test_the_framework_alone_lays_the_model_out(run_cli: Any, tmp_path: Path) -> None:
    """--framework is an option of the layout (table.py, layout=True): given alone with --npus it
    runs its own data parallelism over the N ranks, as --dp N does, rather than the keyword
    presets' Megatron-LM gradients (fsdp reduces bf16 gradients in their own dtype, Megatron in
    fp32: 2 against 4 bytes a parameter, frameworks.gradient_bytes)."""
    files = {}
    for name, options in (
        ("alone", ["--framework", "fsdp", "--npus", "8"]),
        ("dp", ["--framework", "fsdp", "--dp", "8"]),
        ("megatron", ["--dp", "8"]),
    ):
        out = tmp_path / f"{name}.txt"
        done = run_cli("translate", "llama-3-8b", "--seq-len", "128", *options, "-o", out)
        assert done.exit_code == 0, done.output
        files[name] = out.read_text(encoding="utf-8")
    assert files["alone"] == files["dp"]
    params = 8_030_261_248  # Llama 3 8B: its safetensors index's total_size, 16,060,522,496 B in bf16
    assert _reduced(files["alone"]) == 2 * params
    assert _reduced(files["megatron"]) == 4 * params


def _reduced(text: str) -> int:
    """The bytes a workload file's weight-gradient all-reduces move, over its layers."""
    rows = [line.split("\t") for line in text.splitlines()[2:]]
    return sum(int(row[10]) for row in rows if row[9] == "ALLREDUCE")
