"""Data parallelism and ZeRO as DeepSpeed runs them (`--framework deepspeed`), per iteration of GA
micro-batches over the data ranks, from microsoft/DeepSpeed 38327e0 (v0.16.4):

    gradients   in the model's dtype (bf16 / fp16 / fp32) on the wire: engine.py,
                communication_data_type (the model's dtype unless set)
    ZeRO 0      one ALLREDUCE of the gradients at the accumulation boundary (engine.py,
                allreduce_gradients); bf16 runs BF16_Optimizer (engine.py, no ZeRO), which
                accumulates each micro-batch's gradients into an fp32 buffer and hands that
                buffer to the reduction (bf16_optimizer.py, BF16_Optimizer.update_hp_grads and
                get_grads_for_reduction: `return self.fp32_groups_gradients_flat`; engine.py,
                allreduce_gradients: "This is currently for BF16 optimizer"; the pipeline engine
                likewise, pipe/engine.py, PipelineEngine._bf16_reduce_grads: "Make our own list of
                gradients from the optimizer's FP32 grads"): 4 bytes a parameter on the wire; then
                it ALLGATHERs the updated bf16 parameters once (bf16_optimizer.py, step). The same
                code in the 2022 DeepSpeed BigScience's BLOOM ran (pipe/engine.py's
                _bf16_reduce_grads and bf16_optimizer.py's get_grads_for_reduction as above); a
                tied weight's gradient crosses the pipeline in fp32 as well (pipe/engine.py,
                _exec_reduce_tied_grads: `weight._hp_grad if self.bfloat16_enabled()`), which
                build._tied's swap of grad_bytes already moves
    ZeRO 1      one ALLREDUCE of the gradients at the boundary: stage_1_and_2.py average_tensor
                all-reduces each bucket whole and keeps its own slices (use_multi_rank_bucket_
                allreduce, the default since v0.12.4), not a reduce-scatter; after the step one
                ALLGATHER of the parameters (utils.all_gather_dp_groups)
    ZeRO 2      the same ALLREDUCE in every micro-batch ("if self.partition_gradients or
                self.is_gradient_accumulation_boundary"), the ALLGATHER once
    ZeRO 3      per micro-batch: ALLGATHER of a unit's parameters before its forward, again
                before its backward only where the parameters were released in between (the
                reuse rule: released when more than stage3_max_reuse_distance = 1e9 elements are
                fetched before their next use, partitioned_param_coordinator.py), REDUCESCATTER of
                its gradients after its weight gradient (stage3.py, __avg_scatter_grads);
                parameters of at most stage3_param_persistence_threshold = 1e5 elements are never
                released and are gathered once after the step (stage3.py, _post_step)
Left out: the one-element gradient-norm and overflow all-reduces, and the padding of each group to
a multiple of 2 x D (ZeRO 1/2) or each parameter to a multiple of D (ZeRO 3). The reuse distance
counts the units after this one in the model, both ways (DeepSpeed's pipeline engine refuses
ZeRO 2 and 3, so the model is one stage).
"""

from __future__ import annotations

from collections.abc import Sequence

from modtrans.comm import CommType
from modtrans.ir.document import Param
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm import memory
from modtrans.strategy.llm.unit import Unit
from modtrans.strategy.roles import LayerRole

REUSE_DISTANCE = 1_000_000_000  # stage3_max_reuse_distance (runtime/zero/config.py)
PERSISTENCE = 100_000  # stage3_param_persistence_threshold (elements)


def apply(units: Sequence[Unit], zero: int, data_ranks: int, expert_data_ranks: int) -> None:
    after = 0  # parameters (elements) of the units after this one
    behind: list[int] = []
    for u in reversed(units):
        behind.append(after)
        after += _elements(u)
    for u, later in zip(units, reversed(behind), strict=True):
        ranks = expert_data_ranks if u.role is LayerRole.EXPERT else data_ranks
        params = u.param_bytes()
        # BF16_Optimizer's fp32 buffer, or the model's dtype
        grads = u.grad_bytes() if zero == 0 and _bf16(u) else params
        if grads == 0 or ranks == 1:
            continue
        over = u.grads_over
        if zero == 3:
            _stage3(u, later, over)
            continue
        reduce = Comm(CommType.ALLREDUCE, grads, over)
        u.attach(Place.AFTER_WG if zero == 2 else Place.TAIL, reduce)
        if zero in (1, 2) or _bf16(u):
            u.attach(Place.TAIL, Comm(CommType.ALLGATHER, params, over))


def _stage3(u: Unit, later: int, over: frozenset[Purpose]) -> None:
    persistent = sum(u.held(p, p.bytes) for p in _params(u) if p.elements <= PERSISTENCE)
    released = u.param_bytes() - persistent
    if released:
        u.attach(Place.BEFORE_FWD, Comm(CommType.ALLGATHER, released, over))
        if 2 * later > REUSE_DISTANCE:  # fetched again before the backward reuses it
            u.attach(Place.BEFORE_BWD, Comm(CommType.ALLGATHER, released, over))
    u.attach(Place.AFTER_WG, Comm(CommType.REDUCESCATTER, u.param_bytes(), over))
    if persistent:
        u.attach(Place.TAIL, Comm(CommType.ALLGATHER, persistent, over))


def _params(u: Unit) -> list[Param]:
    return [p for p in u.x.owner.params if p.counted and p.trainable]


def _elements(u: Unit) -> int:
    return sum(u.held(p) for p in _params(u))


def _bf16(u: Unit) -> bool:
    """BF16_Optimizer's model (bf16 without ZeRO): it gathers the updated parameters."""
    return memory.bf16_params(u)
