"""When each model chunk's gradient reduction launches under Megatron's interleaved schedule, held
to Megatron-Core's own code, transcribed here as the independent expectation.

megatron/core/pipeline_parallel/schedules.py at core_r0.8.0,
forward_backward_pipelining_with_interleaving: get_model_chunk_id and
is_last_microbatch_for_model_chunk below are its helpers, as written there; backward_step_helper
(microbatch_id) runs the backward, then, with config.grad_sync_func set (training.py, train:
--overlap-grad-reduce with delay_grad_reduce, the default), computes
`grad_sync_microbatch_id = microbatch_id - pipeline_parallel_rank` and, where that is a chunk's
last micro-batch, calls grad_sync_func on get_model_chunk_id(grad_sync_microbatch_id,
forward=False); the helper returns and the step's gradient is sent. After the cooldown's last
send_backward_recv_backward it "Launch[es] any remaining grad reductions". Without the overlap
every reduction is finalize_model_grads', after the schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from modtrans.estimate import pipeline
from modtrans.plan.model import Collective, Compute, Direction, Op, Place, Purpose, Schedule, Step, Transfer
from modtrans.request import prepare, request_of
from modtrans.strategy.frameworks import Framework, Launch
from modtrans.strategy.schedule import BWD
from tests.conftest import ancestors, planned

P, V, M = 4, 3, 4  # pipeline ranks, model chunks a rank, micro-batches (GPT-2's 12 blocks, one a chunk)
TOTAL = M * V  # total_num_microbatches: the backwards a rank runs
AFTER_SEND = -1  # "Launch any remaining grad reductions", after the last send


def get_model_chunk_id(microbatch_id: int, forward: bool) -> int:
    """schedules.py, core_r0.8.0, as written."""
    microbatch_id_in_group = microbatch_id % (P * V)
    model_chunk_id = microbatch_id_in_group // P
    if not forward:
        model_chunk_id = V - model_chunk_id - 1
    return model_chunk_id


def is_last_microbatch_for_model_chunk(microbatch_id: int) -> bool:
    """schedules.py, core_r0.8.0, as written."""
    microbatch_group_size = P * V
    num_microbatch_groups = TOTAL // microbatch_group_size
    microbatch_group_id = microbatch_id // microbatch_group_size
    microbatch_id_in_group = microbatch_id % microbatch_group_size
    if microbatch_group_id == num_microbatch_groups - 1:
        return microbatch_id_in_group % P == P - 1
    return False


def megatron_launches(rank: int) -> dict[int, int]:
    """Per model chunk, the backward (its microbatch_id) after whose compute grad_sync_func
    launches its reduction, or AFTER_SEND: backward_step_helper's loop, then the remaining ones."""
    out: dict[int, int] = {}
    for microbatch_id in range(TOTAL):
        grad_sync_microbatch_id = microbatch_id - rank
        if grad_sync_microbatch_id >= 0 and is_last_microbatch_for_model_chunk(grad_sync_microbatch_id):
            out[get_model_chunk_id(grad_sync_microbatch_id, forward=False)] = microbatch_id
    return {c: out.get(c, AFTER_SEND) for c in range(V)}


def test_the_transcription_says_what_the_brief_said() -> None:
    """Rank 0 launches each chunk's right after its last backward, chunk 0's after the last one;
    the last rank P - 1 backwards later, chunk 0's (and there only chunk 0's) after the last send."""
    assert megatron_launches(0) == {2: 3, 1: 7, 0: 11}
    assert megatron_launches(P - 1) == {2: 3 + P - 1, 1: 7 + P - 1, 0: AFTER_SEND}


SMALL = {"npus": 8, "pp": P, "vpp": V, "dp": 2, "global_batch": 8, "zero": 1}
BACKWARD = (Step.INPUT_GRAD, Step.WEIGHT_GRAD)


def _backwards(ops: Sequence[Op]) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """The rank's backwards in order, each (its model chunk, its last compute), and each unit's
    chunk: the rank's units in model order, cut where another rank's come between."""
    units = sorted({x.layer for x in ops if isinstance(x, Compute) and x.step in BACKWARD})
    chunk_of, chunk = {}, 0
    for previous, u in zip([units[0], *units], units, strict=False):
        chunk += u > previous + 1
        chunk_of[u] = chunk
    steps: list[tuple[int, int]] = []
    key = None
    for i, x in enumerate(ops):
        if isinstance(x, Compute) and x.step in BACKWARD:
            mine = (chunk_of[x.layer], x.outputs[0].name.rsplit("#", 1)[-1])
            if mine != key:
                steps.append((mine[0], i))
            key, steps[-1] = mine, (mine[0], i)
    return steps, chunk_of


@pytest.mark.parametrize("overlap", [True, False])
@pytest.mark.parametrize("rank", [0, P - 1])
def test_each_chunks_buckets_launch_where_megatron_launches_them(rank: int, overlap: bool) -> None:
    """The trace of rank `rank` (the first and the last pipeline stage): its backwards run the
    chunks in Megatron's backward order, and each chunk's data-parallel reduce-scatters wait for
    the compute of the backward Megatron launches them after, and for nothing of the next one's;
    those launched after the last send wait for it. Without --overlap-grad-reduce all wait for the
    last backward (its send but on the first stage), and the tied embedding's swap always does."""
    options = {**SMALL, "overlap_grad_reduce": overlap, "format": "chakra-et", "output": "x/"}
    ops = planned(prepare(request_of("gpt2", options))).programs[rank]
    steps, chunk_of = _backwards(ops)
    assert [c for c, _ in steps] == [get_model_chunk_id(k, forward=False) for k in range(TOTAL)]
    expected = megatron_launches(rank) if overlap else dict.fromkeys(range(V), AFTER_SEND)
    sends = [i for i, x in enumerate(ops) if isinstance(x, Transfer) and x.direction is Direction.SEND]
    buckets = [
        i
        for i, x in enumerate(ops)
        if isinstance(x, Collective) and x.place is Place.TAIL and Purpose.DATA in x.over
    ]
    assert {chunk_of[ops[i].layer] for i in buckets} == set(range(V))
    for i in buckets:
        before = ancestors(ops, i)
        k = expected[chunk_of[ops[i].layer]]
        if k == AFTER_SEND and rank > 0:
            assert max(j for j in sends if ops[j].step is Step.INPUT_GRAD) in before
            continue
        k = TOTAL - 1 if k == AFTER_SEND else k
        assert steps[k][1] in before, (k, ops[i])
        if k + 1 < TOTAL:
            assert steps[k + 1][1] not in before
    # the tied embedding's swap: finalize_model_grads' _allreduce_embedding_grads, after them all
    swaps = [i for i, x in enumerate(ops) if isinstance(x, Transfer) and x.step is Step.WEIGHT_GRAD]
    assert len(swaps) == 2  # GPT-2's wte on the first stage, its lm_head copy on the last
    final = max(j for j in sends if ops[j].step is Step.INPUT_GRAD) if rank > 0 else steps[-1][1]
    assert all(final in ancestors(ops, i) for i in swaps)


def test_the_fast_tier_takes_each_chunks_reduction_after_the_same_backward() -> None:
    """pipeline.steps, the fast tier's plan: on every rank the lane takes a chunk's reduction
    after the backward Megatron launches it after (after that backward's send), the remaining
    ones after the last backward."""
    launch = Framework.MEGATRON.chunk_reductions(Schedule.INTERLEAVED, overlap=True)
    assert launch is Launch.DELAYED
    _, _, order = pipeline.steps(Schedule.INTERLEAVED, P, M, V, P * V, launch)
    for rank in range(P):
        backwards = [step for step in order if step[0] == rank and step[1] == pipeline.KINDS[BWD]]
        assert [step[2] // P for step in backwards] == [
            get_model_chunk_id(k, forward=False) for k in range(TOTAL)
        ]
        said = {v // P: k for k, step in enumerate(backwards) for v in step[7]}
        expected = megatron_launches(rank)
        assert said == {c: TOTAL - 1 if k == AFTER_SEND else k for c, k in expected.items()}


def test_the_convention_is_megatrons_interleaved_schedule_alone() -> None:
    assert Framework.MEGATRON.chunk_reductions(Schedule.INTERLEAVED, overlap=False) is Launch.AFTER
    assert Framework.NEMO.chunk_reductions(Schedule.INTERLEAVED, overlap=True) is Launch.DELAYED
    # Megatron-LM of 2022: reduce_model_grads after forward_backward_func returns
    assert Framework.MEGATRON_2022.chunk_reductions(Schedule.INTERLEAVED, overlap=False) is Launch.AFTER
    assert Framework.MEGATRON.chunk_reductions(Schedule.ONE_F_ONE_B, overlap=True) is Launch.READY
    assert Framework.FSDP.chunk_reductions(Schedule.INTERLEAVED, overlap=False) is Launch.READY
