"""The kernels Megatron runs over each data-parallel bucket's gradients before its collective,
held to Megatron-LM's own source and to the devices' published streaming bandwidth.

Transcribed from Megatron-LM core_r0.8.0 (baf94af), megatron/core/distributed/
param_and_grad_buffer.py, Bucket.start_grad_sync, which the bucket's last gradient hook calls
(register_grad_ready) or, without --overlap-grad-reduce, finish_grad_sync after the backward:

    if self.ddp_config.check_for_nan_in_grad:
        norm = self.grad_data.norm(p=2)          # reads the bucket's gradients once
        assert not norm.isnan(), ...
    if self.gradient_scaling_factor != 1.0:
        self.grad_data *= self.gradient_scaling_factor    # reads and writes them
    ... _reduce_scatter_base(local_data_view, self.grad_data, ...)  # or all_reduce(self.grad_data)

check_for_nan_in_grad is training's --check-for-nan-in-loss-and-grad, on by default
(megatron/training/arguments.py: `--no-check-for-nan-in-loss-and-grad`, store_false) and turned off
for fp16 under dynamic loss scaling (validate_args: "if not args.loss_scale:
args.check_for_nan_in_loss_and_grad = False"); gradient_scaling_factor is 1 / D
(distributed_data_parallel.py, DistributedDataParallel.__init__, average_in_collective False by
default). grad_data is the bucket's whole view of the gradient buffer, its padding included, fp32
for bf16 and fp32 models (accumulate_allreduce_grads_in_fp32), fp16 for fp16 ones. So 3 passes of
4 bytes over a bf16 or fp32 bucket, 2 passes of 2 bytes over an fp16 one.

Megatron-LM 2022 (NVIDIA/Megatron-LM fc7f4f0) scales the whole buffer alone, no NaN check:
megatron/model/distributed.py, DistributedDataParallel.allreduce_gradients, `buffer_.data /=
mpu.get_data_parallel_world_size()` before its all-reduce: 2 passes.

The devices' streaming bandwidth: BabelStream's Triad as Azure published it
(Azure/AI-benchmarking-guide 8fd0c6e): 1.70 TB/s on the A100-SXM4-80GB
(Azure_Results/ND_A100_v4_results.md), 2.97 TB/s on the H100 (ND_H100_v5_results.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modtrans import estimate
from modtrans.comm import CommType
from modtrans.plan import Collective, Compute, Plan, Purpose, Step
from modtrans.request import prepare, request_of
from tests.conftest import fp16_gpt2, planned
from tests.test_megatron_dp import (
    BATCH,
    D,
    megatron_buckets,
    megatron_parameters,
    plan_32b,
)

A100_TRIAD = 1.70e12  # B/s, BabelStream Triad on ND A100 v4 (the module docstring)
H100_TRIAD = 2.97e12  # B/s, on ND H100 v5
GPT2_PARAMS = 124_439_808  # GPT-2 small (openai-community/gpt2), the output layer tied to wte
FP32, FP16 = 4, 2


def _seconds(passes: list[int], nbytes: int, bandwidth: float) -> float:
    """Megatron's kernels over a bucket of `nbytes`, each `passes` over it, at `bandwidth`."""
    return sum(p * nbytes / bandwidth for p in passes)


@pytest.fixture(scope="module")
def mcore32b(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Megatron-Core's published 32B run as tests/test_megatron_dp.py builds it: TP 8, DP 48, bf16,
    --overlap-grad-reduce --overlap-param-gather, 73 buckets."""
    return plan_32b(tmp_path_factory.mktemp("mcore32b"))


def _before(plan: Plan) -> list[tuple[Collective, Compute]]:
    """Rank 0's data-parallel reductions, each with the compute it waits for, in program order
    (not the optimizer's all-reduces of one number before its step: tests/test_megatron_clip.py)."""
    ops = plan.programs[0]
    out = []
    for op in ops:
        if not isinstance(op, Collective) or op.step is Step.UPDATE:
            continue
        if Purpose.DATA in op.over and op.comm is not CommType.ALLGATHER:
            (dep,) = op.deps
            source = ops[dep]
            assert isinstance(source, Compute)
            out.append((op, source))
    return out


def test_every_bucket_is_checked_and_scaled_before_its_reduce_scatter(mcore32b: Plan) -> None:
    """Each of the 73 buckets' reduce-scatters waits for one compute of the norm's and the scale's
    time over the bucket's fp32 gradients, 12 bytes an element of Megatron's bucket at the H100's
    2.97 TB/s (ModTrans's buckets differ from Megatron's by an input norm's 14,592 elements or
    less: tests/test_megatron_dp.py, 0.03 % of a bucket): 15.5 ms an iteration in all."""
    theirs = megatron_buckets(megatron_parameters(), D)
    before = _before(mcore32b)[::-1]  # backward order, as Megatron fills them
    assert len(before) == len(theirs) == 73
    for (op, kernels), n in zip(before, theirs, strict=True):
        assert op.comm is CommType.REDUCESCATTER
        assert kernels.step is Step.GRAD_SYNC  # not a layer's: the update column holds it
        assert kernels.flops == 0
        assert kernels.time * 1e-9 == pytest.approx(_seconds([1, 2], FP32 * n, H100_TRIAD), rel=1e-3)
    total = sum(kernels.time for _, kernels in before) * 1e-9
    assert total == pytest.approx(_seconds([1, 2], FP32 * sum(theirs), H100_TRIAD), rel=1e-3)
    assert 0.0150 < total < 0.0160


def test_the_kernels_follow_the_last_micro_batch_s_gradient_and_hold_the_backward(mcore32b: Plan) -> None:
    """The hook runs them as the bucket's last gradient is in, on the compute stream, before the
    autograd engine goes on with the backward (and the NaN check's host sync makes the CPU wait for
    them): each waits for a weight gradient of micro-batch 3, the last of 192 / 48, and the next
    backward compute waits for it."""
    ops = mcore32b.programs[0]
    last = f"m{BATCH // D - 1}"
    for _, kernels in _before(mcore32b):
        (dep,) = kernels.deps
        gradient = ops[dep]
        assert isinstance(gradient, Compute)
        assert gradient.step is Step.WEIGHT_GRAD
        assert {t.name.rsplit("#", 1)[1] for t in gradient.outputs} == {last}
        index = ops.index(kernels)
        after = [op for op in ops[index + 1 :] if isinstance(op, Compute) and index in op.deps]
        if any(op.step is Step.INPUT_GRAD for op in after):
            continue
        assert kernels is _before(mcore32b)[0][1]  # the backward's last bucket: the step follows


def _gpt2(framework: str, zero: int, config: Path | None = None) -> tuple[Collective, Compute | None]:
    """GPT-2 small on 2 data ranks (A100s, the default device) under `framework` and `zero`: its
    one bucket's reduction (no --overlap-grad-reduce: one bucket a buffer) and the compute it
    waits for where that is not a layer's."""
    model = str(config) if config is not None else "gpt2"
    plan = planned(
        prepare(request_of(model, {"dp": 2, "global_batch": 4, "framework": framework, "zero": zero}))
    )
    ((op, source),) = _before(plan)
    return op, source if source.step is Step.GRAD_SYNC else None


@pytest.mark.parametrize("zero", [0, 1])
def test_gpt2_s_bucket_under_megatron_core_plain_or_distributed(zero: int) -> None:
    """Without the distributed optimizer (--zero 0) an all-reduce, with it a reduce-scatter, of the
    fp32 gradients of GPT-2's 124,439,808 parameters (a multiple of lcm(2, 128): no padding), after
    12 bytes an element at the A100's 1.70 TB/s."""
    op, kernels = _gpt2("megatron", zero)
    assert op.comm is (CommType.REDUCESCATTER if zero else CommType.ALLREDUCE)
    assert op.bytes == FP32 * GPT2_PARAMS
    assert kernels is not None
    assert kernels.time * 1e-9 == pytest.approx(_seconds([1, 2], FP32 * GPT2_PARAMS, A100_TRIAD), rel=1e-3)


def test_megatron_2022_scales_its_buffer_without_a_nan_check() -> None:
    """Megatron-LM 2022's `buffer_.data /= D` before the all-reduce: 8 bytes an fp32 element."""
    op, kernels = _gpt2("megatron-2022", 0)
    assert op.comm is CommType.ALLREDUCE
    assert kernels is not None
    assert kernels.time * 1e-9 == pytest.approx(_seconds([2], FP32 * GPT2_PARAMS, A100_TRIAD), rel=1e-3)


def test_fp16_turns_the_nan_check_off(tmp_path: Path) -> None:
    """An fp16 model: Megatron's gradient buffer in fp16 (2 bytes), the NaN check off under dynamic
    loss scaling, so the scale alone: 4 bytes an element. Its vocabulary padded to 50,304 (Megatron's
    --make-vocab-size-divisible-by 128, as a config file is read)."""
    path = fp16_gpt2(tmp_path)
    op, kernels = _gpt2("megatron", 0, path)
    params = GPT2_PARAMS + (50304 - 50257) * 768
    assert op.bytes == FP16 * params
    assert kernels is not None
    assert kernels.time * 1e-9 == pytest.approx(_seconds([2], FP16 * params, A100_TRIAD), rel=1e-3)


@pytest.mark.parametrize(("framework", "zero"), [("nemo", 1), ("flash-attn", 0)])
def test_frameworks_with_other_buckets_run_none(framework: str, zero: int) -> None:
    """NeMo's buckets are Apex's DistributedFusedAdam's, flash-attn's PyTorch DDP's: neither runs
    Megatron's kernels; the reduction waits for the last weight gradient itself."""
    _, kernels = _gpt2(framework, zero)
    assert kernels is None


@pytest.mark.parametrize(
    "options",
    [
        {"pp": 2, "dp": 2, "global_batch": 8, "schedule": "zb-h1"},
        {"pp": 2, "dp": 2, "global_batch": 8, "schedule": "interleaved", "vpp": 2, "zero": 1},
    ],
    ids=["zb-h1", "interleaved-zero1"],
)
def test_the_fast_tier_runs_the_kernels_where_the_traces_do(options: dict[str, object]) -> None:
    """The fast tier (estimate/lastback.py: the kernels a link of the chunk's last backward, after
    the bucket's weight gradient, the first block's only) against the exact tier, which walks the
    traces as ASTRA-sim runs them (tests/test_estimate.py's recorded runs, to the nanosecond): the
    same iteration within 0.02 %, each stage's compute within 0.01 % (the traces' whole
    microseconds), where ZB-H1 ends a chunk with its weight gradients alone and where each of two
    chunks a stage has its bucket."""

    prepared = prepare(request_of("gpt2", {**options, "format": "chakra-et", "output": "unused/"}))
    exact = estimate.plan(planned(prepared), network="dgx-a100")
    layout = prepared.options.parallel.layout
    assert layout is not None
    fast = estimate.layout("gpt2", layout, network="dgx-a100")
    assert fast.iteration_s == pytest.approx(exact.iteration_s, rel=2e-4)
    for mine, theirs in zip(fast.stages, exact.stages, strict=True):
        assert mine.compute_s == pytest.approx(theirs.compute_s, rel=1e-4)
