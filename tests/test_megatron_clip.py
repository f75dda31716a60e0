"""What Megatron runs between the reduced gradients and Adam, held to Megatron-LM's own source and
to the devices' published streaming bandwidth; and the bucket kernels it runs at one data rank.

Transcribed from Megatron-LM core_r0.8.0 (baf94af), megatron/core/optimizer/optimizer.py,
MixedPrecisionOptimizer.step (Megatron-LM fc7f4f0, 2022, megatron/optimizer/optimizer.py: the same
order):

    found_inf_flag = self.prepare_grads()
        # if self.grad_scaler (fp16 alone without --loss-scale):
        #   torch._amp_foreach_non_finite_check_and_unscale_(main_grads, found_inf, inv_scale)
        #   torch.distributed.all_reduce(self.found_inf, op=MAX, group=self.get_model_parallel_group())
    if self.config.clip_grad > 0.0:          # --clip-grad 1.0 by default
        grad_norm = self.clip_grad_norm(self.config.clip_grad)
        # clip_grads.py, get_grad_norm_fp32: multi_tensor_applier(l2_norm_impl, ..., [grads_for_norm])
        #   torch.distributed.all_reduce(total_norm, op=SUM, group=model_parallel_group)
        # clip_grad_by_total_norm_fp32: multi_tensor_scale only `if clip_coeff < 1.0`
    num_zeros_in_grad = self.count_zeros() if self.config.log_num_zeros_in_grad else None
    success = self.step_with_ready_grads()   # Adam, the copy to the model's parameters

get_model_parallel_group() is parallel_state's 'tp-pp' group; DistributedOptimizer overrides it:
"With the distributed optimizer, the model parallel group is the entire world" (return None).
total_norm and found_inf are one fp32 number each (`torch.tensor([0], dtype=torch.float)`).

Megatron-Core's DDP at one data rank (distributed_data_parallel.py, __init__:
gradient_scaling_factor = 1.0 / data_parallel_world_size; param_and_grad_buffer.py,
Bucket.start_grad_sync): `norm = self.grad_data.norm(p=2)` if check_for_nan_in_grad, whatever D,
then `if self.gradient_scaling_factor != 1.0: self.grad_data *= ...`: at D = 1 the norm alone.
Megatron-LM 2022 (megatron/model/distributed.py, allreduce_gradients): `buffer_.data /=
mpu.get_data_parallel_world_size()`, no condition: at D = 1 too.

The A100's streaming bandwidth: BabelStream's Triad as Azure published it (Azure/AI-benchmarking-
guide 8fd0c6e, Azure_Results/ND_A100_v4_results.md): 1.70 TB/s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modtrans.comm import CommType
from modtrans.cost.gemm import clip_bytes, update_bytes
from modtrans.ir.document import Kind, Layer, Param, Role
from modtrans.plan import Collective, Compute, Op, Plan, Purpose, Step
from modtrans.request import prepare, request_of
from tests.conftest import both_tiers, fp16_gpt2, planned

A100_TRIAD = 1.70e12  # B/s (the module docstring)
GPT2_PARAMS = 124_439_808  # GPT-2 small (openai-community/gpt2), the output layer tied to wte
FP32 = 4


def _plan(options: dict[str, object], model: str = "gpt2") -> Plan:
    return planned(prepare(request_of(model, {"global_batch": 8, **options})))


def _finish(program: tuple[Op, ...]) -> list[Op]:
    """The program's end: the operations of Step.UPDATE, the step last (the distributed
    optimizer's parameter all-gathers after it are not)."""
    return [op for op in program if op.step is Step.UPDATE]


def test_the_unscaling_and_the_norm_are_the_steps_bytes_apart() -> None:
    """update_bytes with clipping False leaves out exactly the unscaling's read and write (fp16
    alone) and the norm's read of every fp32 main gradient."""
    elements = 1000

    def layer(dtype: str, width: int) -> Layer:
        weight = Param("w", Role.WEIGHT, (elements,), dtype, elements, elements * width, True)
        return Layer("fc", "fc", "Gemm", Kind.LINEAR, params=(weight,))

    assert clip_bytes("float16") == (2 * FP32, FP32)
    assert clip_bytes("bfloat16") == (0, FP32)
    for dtype, width, unscale in (("float16", 2, 8), ("bfloat16", 2, 0), ("float", 4, 0)):
        whole, apart = update_bytes(layer(dtype, width)), update_bytes(layer(dtype, width), clipping=False)
        assert whole - apart == elements * (unscale + FP32)


def test_the_norm_and_its_all_reduce_precede_the_step_over_the_model_parallel_ranks() -> None:
    """GPT-2 (not fp16: fp32 main gradients, no grad scaler) at T 2, P 2, D 2: each stage's step
    waits for one l2-norm kernel and an all-reduce of one fp32 number over the 4 tensor and
    pipeline ranks, not the data ranks; no unscaling without a grad scaler."""
    plan = _plan({"tp": 2, "pp": 2, "dp": 2, "framework": "megatron"})
    for stage in range(2):
        norm, reduce, step = _finish(plan.programs[stage])
        assert isinstance(norm, Compute)
        assert isinstance(reduce, Collective)
        assert isinstance(step, Compute)
        assert norm.step is reduce.step is step.step is Step.UPDATE
        assert (reduce.comm, reduce.bytes) == (CommType.ALLREDUCE, FP32)
        assert reduce.over == frozenset({Purpose.TENSOR, Purpose.PIPELINE})
        assert plan.mesh.span(reduce.over) == 4
        assert reduce.deps == (len(plan.programs[stage]) - 3,)
        assert step.deps == (len(plan.programs[stage]) - 2,)


@pytest.mark.parametrize("zero", [0, 1])
def test_gpt2_s_norm_over_its_main_gradients_or_this_rank_s_shard_of_them(zero: int) -> None:
    """At T 1, P 1, D 2 the norm reads GPT-2's 124,439,808 fp32 main gradients, 4 B each at the
    A100's 1.70 TB/s, with no collective (a model-parallel group of one rank); under the
    distributed optimizer its shard, half of them, and the all-reduce spans the world (2 ranks)."""
    plan = _plan({"dp": 2, "framework": "megatron", "zero": zero})
    ops = _finish(plan.programs[0])
    norm = ops[0]
    assert isinstance(norm, Compute)
    assert norm.time * 1e-9 == pytest.approx(FP32 * GPT2_PARAMS / (zero + 1) / A100_TRIAD, rel=2e-3)
    reduces = [op for op in ops if isinstance(op, Collective)]
    if zero:
        (reduce,) = reduces
        assert reduce.bytes == FP32
        assert plan.mesh.span(reduce.over) == plan.npus == 2
    else:
        assert reduces == []


@pytest.mark.parametrize("framework", ["megatron", "megatron-2022"])
def test_fp16_unscales_and_checks_for_inf_first(tmp_path: Path, framework: str) -> None:
    """fp16: the grad scaler's unscaling (a read and a write of each fp32 main gradient, 8 B) and
    its found_inf all-reduce (one number, MAX over the model-parallel ranks) before the norm and
    its all-reduce: two all-reduces of 4 B over the model-parallel ranks (the 2 tensor ranks at
    P 1), in that order."""
    plan = _plan({"tp": 2, "dp": 2, "framework": framework}, str(fp16_gpt2(tmp_path)))
    ops = _finish(plan.programs[0])
    kinds = [type(op).__name__ for op in ops]
    assert kinds == ["Compute", "Collective", "Compute", "Collective", "Compute"]
    unscale, found_inf, norm, total_norm, _ = ops
    assert isinstance(unscale, Compute)
    assert isinstance(norm, Compute)
    assert unscale.time == pytest.approx(2 * norm.time, rel=1e-3)
    for reduce in (found_inf, total_norm):
        assert isinstance(reduce, Collective)
        assert (reduce.comm, reduce.bytes) == (CommType.ALLREDUCE, FP32)
        assert reduce.over == frozenset({Purpose.TENSOR, Purpose.PIPELINE})
        assert plan.mesh.span(reduce.over) == 2


@pytest.mark.parametrize(("framework", "zero"), [("nemo", 1), ("deepspeed", 0), ("fsdp", 3)])
def test_other_frameworks_keep_the_norm_in_their_step(framework: str, zero: int) -> None:
    """Not Megatron's MixedPrecisionOptimizer: one step compute, nothing before it."""
    plan = _plan({"tp": 2, "dp": 2, "framework": framework, "zero": zero})
    assert [type(op) for op in _finish(plan.programs[0])] == [Compute]


@pytest.mark.parametrize(("framework", "passes"), [("megatron", 1), ("megatron-2022", 2)])
def test_at_one_data_rank_the_bucket_kernels_still_run(framework: str, passes: int) -> None:
    """At D = 1 Megatron-Core still checks its one bucket for NaN (a read of the fp32 gradients)
    but skips the scale by 1.0; Megatron-LM 2022 divides its buffer by 1 (a read and a write); no
    collective over one data rank either way."""
    plan = _plan({"tp": 2, "dp": 1, "framework": framework})
    program = plan.programs[0]
    (kernels,) = [op for op in program if isinstance(op, Compute) and op.step is Step.GRAD_SYNC]
    assert not [op for op in program if isinstance(op, Collective) and Purpose.DATA in op.over]
    norm = _finish(program)[0]  # the optimizer's norm reads the same fp32 gradients once
    assert isinstance(norm, Compute)
    assert kernels.time == pytest.approx(passes * norm.time, rel=2e-3)


def test_fp16_at_one_data_rank_runs_no_bucket_kernel(tmp_path: Path) -> None:
    """fp16 under dynamic loss scaling turns the NaN check off, and the scale by 1.0 is skipped."""
    plan = _plan({"tp": 2, "dp": 1, "framework": "megatron"}, str(fp16_gpt2(tmp_path)))
    assert not [op for op in plan.programs[0] if op.step is Step.GRAD_SYNC]


@pytest.mark.parametrize(
    "options",
    [
        {"tp": 2, "pp": 2, "dp": 2, "framework": "megatron", "zero": 1},
        {"tp": 2, "pp": 2, "dp": 1, "framework": "megatron"},
    ],
    ids=["zero1", "dp1"],
)
def test_the_fast_tier_finishes_as_the_traces_do(options: dict[str, object]) -> None:
    """The fast tier's stage end (estimate/fast.py, _finish) against the exact tier's traces:
    the same iteration within 0.02 %, under the distributed optimizer (the all-reduces over every
    rank) and at one data rank (the bucket's NaN check alone, no collective); each stage's wall
    too: the all-reduces over the pipeline ranks end every stage together (fast.py, _finished)."""
    _, exact, fast = both_tiers("gpt2", {"global_batch": 8, **options})
    assert fast.iteration_s == pytest.approx(exact.iteration_s, rel=2e-4)
    for theirs, ours in zip(exact.stages, fast.stages, strict=True):  # the all-reduces hold every stage
        assert ours.wall_s == pytest.approx(theirs.wall_s, rel=2e-4)


def test_under_sp_the_fast_tier_runs_the_kernels_over_one_rank_after_the_schedule() -> None:
    """At D = 1 under SP the norms' tensor all-reduce follows the chunk's first unit, where the
    bucket over one data rank has no collective: its kernels still run after the schedule in both
    tiers (program.py's _alone_kernels; fast.py's _buckets), the same iteration within 0.02 %."""
    options = {"tp": 2, "pp": 2, "dp": 1, "sp": True, "framework": "megatron"}
    _, exact, fast = both_tiers("gpt2", {"global_batch": 8, **options})
    assert fast.iteration_s == pytest.approx(exact.iteration_s, rel=2e-4)
