"""Megatron-LM's kernels between the reduced gradients and Adam (`--framework megatron` and
`megatron-2022`: frameworks.py, clips_apart), each followed by an all-reduce of one number.

Read from NVIDIA/Megatron-LM core_r0.8.0 (baf94af), megatron/core/optimizer/optimizer.py,
MixedPrecisionOptimizer.step, and from fc7f4f0 (2022), megatron/optimizer/optimizer.py, the same
order in both:

    unscale     fp16 only (a grad scaler exists for fp16 alone without --loss-scale: cost/gemm.py,
                update_bytes): prepare_grads -> _unscale_main_grads_and_check_for_nan,
                torch._amp_foreach_non_finite_check_and_unscale_ over the fp32 main gradients (a
                read and a write: cost/gemm.py, clip_bytes), then `all_reduce(self.found_inf,
                op=MAX, group=self.get_model_parallel_group())` of one fp32 number, then
                `self.found_inf.item()`: the host waits for it
    norm        --clip-grad 1.0 by default (megatron/training/arguments.py at core_r0.8.0,
                megatron/arguments.py at fc7f4f0) > 0: clip_grad_norm -> get_grad_norm_fp32
                (core_r0.8.0, megatron/core/optimizer/clip_grads.py; clip_grad_norm_fp32 at
                fc7f4f0, megatron/optimizer/clip_grads.py): one multi_tensor_l2norm over the main
                gradients (a read), then `all_reduce(total_norm, op=SUM,
                group=model_parallel_group)` of one fp32 number and `total_norm.item()`
    scale       clip_grad_by_total_norm_fp32: multi_tensor_scale over the gradients only `if
                clip_coeff < 1.0`, clip_coeff = max_norm / (total_norm + 1e-6): the norm over 1.0.
                Not charged: past the first iterations a pretraining run's norm stays under it,
                Megatron's own log reading 0.231 to 0.356 at iterations 122-126 of a 2,048-token
                pretraining run with --clip-grad 1.0 (epfLLM/Megatron-LLM issue 11, its
                "grad norm:" column), where the first iterations clip (NVIDIA/nccl issue 743: BERT's
                "grad norm: 217.199" at iteration 20); an iteration time is a steady state's
    count       count_zeros only with --log-num-zeros-in-grad, off by default (store_true, both
                arguments.py): not charged
    step        then Adam (update_bytes with clipping False: the unscaling and the norm are these)

The group: get_model_parallel_group(), the tensor and pipeline ranks (parallel_state.py:
_MODEL_PARALLEL_GROUP from the 'tp-pp' rank generator at core_r0.8.0; mpu at fc7f4f0), but under
the distributed optimizer every rank: DistributedOptimizer.get_model_parallel_group returns None
("With the distributed optimizer, the model parallel group is the entire world": both versions;
each rank's norm is over its own shard of the main gradients). Megatron-Core steps the experts'
parameters with an optimizer of their own where they are in a buffer of their own (optimizer/
__init__.py, get_megatron_optimizer: moe_param_groups, model_parallel_group=get_model_parallel_
group(with_expert_parallel=True), the tensor, expert and pipeline ranks; then ChainedOptimizer):
ChainedOptimizer.step runs each one's prepare_grads (unscaling and all-reduce), then each one's
get_grad_norm (norm and all-reduce), in that order. The kernels are timed as one memory-bound
kernel each (cost/base.py, memory_ticks) over the main gradients this rank's optimizer holds (its
tensor-parallel shard of the trainable parameters, over D under the distributed optimizer:
build.update_shards); an all-reduce over one rank is no collective. Both tiers' (program.py's
StageProgram._optimizer; estimate/fast.py). The text formats write the kernels in the stage's
first unit's update column and have no place for the all-reduces (Chakra traces carry them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from modtrans.comm import CommType
from modtrans.cost import CostModel
from modtrans.cost.base import memory_ticks
from modtrans.cost.gemm import FP32, clip_bytes
from modtrans.plan.model import Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.roles import LayerRole

Finish = Callable[[Iterable[int]], tuple[Comm, ...]]
"""The unit indices a rank steps (a unit standing for several blocks once each) -> its kernels and
all-reduces before the step, in order: each Comm's kernel runs, then its all-reduce."""

MODEL_PARALLEL = frozenset({Purpose.TENSOR, Purpose.PIPELINE})  # parallel_state: 'tp-pp'


def finishing(
    units: Sequence[Unit], layout: Layout, cost: CostModel, shards: Callable[[Unit], int]
) -> Finish | None:
    """Megatron's unscaling and norm kernels and their all-reduces for `layout`'s rank (the
    module's docstring), or None where the framework's step keeps them (frameworks.py,
    clips_apart); `shards`: the ranks a unit's optimizer state is split over (build.update_shards)."""
    if not layout.framework.clips_apart:
        return None
    separate = layout.ep > 1 or layout.expert_tp != layout.tp  # experts in an optimizer of their own
    moved = [_bytes(u, shards(u)) for u in units]
    expert = [separate and u.role is LayerRole.EXPERT for u in units]
    groups = (group(layout, expert=False), group(layout, expert=True))

    def finish(indices: Iterable[int]) -> tuple[Comm, ...]:
        sums = [[0, 0], [0, 0]]  # per optimizer (dense, experts): unscaling, norm bytes
        for i in indices:
            for k in range(2):
                sums[expert[i]][k] += moved[i][k]
        optimizers = [(groups[e], s) for e, s in enumerate(sums) if s[1]]
        return tuple(
            Comm(CommType.ALLREDUCE, FP32, over, memory_ticks(cost, s[k]))
            for k in range(2)
            for over, s in optimizers
            if s[k]
        )

    return finish


def group(layout: Layout, *, expert: bool) -> frozenset[Purpose]:
    """The all-reduces' group on the layout's mesh (the module's docstring): the model-parallel
    ranks (the experts' optimizer's with the expert ranks), or every rank under the distributed
    optimizer."""
    present = frozenset(a.purpose for a in layout.mesh().axes)
    if layout.framework.distributed_optimizer and layout.zero in (1, 2):
        return present
    return present & (MODEL_PARALLEL | ({Purpose.EXPERT} if expert else set()))


def _bytes(u: Unit, shards: int) -> tuple[int, int]:
    """The unscaling's and the norm's bytes over the unit's main gradients on this rank."""
    out = [0, 0]
    for p in u.x.owner.params:
        if p.trainable and p.counted and p.elements:
            held = -(-u.held(p) // shards)
            for k, per in enumerate(clip_bytes(p.dtype)):
                out[k] += held * per
    return out[0], out[1]
