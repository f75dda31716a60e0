"""`--framework flash-attn --zero 1`: PyTorch's ZeroRedundancyOptimizer as flash-attention's
gpt3l, gpt3xl and 2.7B runs use it (training/configs/optimizer/adamw-zero.yaml at 4a6eaa9f),
against pytorch/pytorch torch/distributed/optim/zero_redundancy_optimizer.py: DDP's all-reduce of
the gradients, each rank's step over its partition of the state, then every parameter broadcast
from its owner in its own dtype (step -> _sync_params), fp32 under Lightning's bf16 autocast.
The plan's side counts the toy Llama's parameters by hand; the torch side runs the optimizer
itself (marker hf), on a fake process group whose broadcasts are recorded."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from modtrans.comm import CommType
from modtrans.plan import Collective, Compute, Plan, Purpose, Step
from modtrans.plan.model import StageMemory
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import Layout
from tests import plans

MICRO, SEQ, D = 2, 16, 2
# the toy Llama's parameters (tests/plans.py TOY: vocabulary 96, hidden 64, 4 heads in 2 key/value
# groups, MLP 128, untied): the embedding and the output layer 96 x 64 each, the final norm 64, and
# per block q and o 64 x 64, k and v 64 x 32, gate, up and down 64 x 128, two norms of 64
BLOCK = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
ELEMENTS = 2 * 96 * 64 + 64 + 2 * BLOCK  # 86,336
FP32 = 4  # the parameters under Lightning's bf16 autocast, so their gradients and the broadcasts
DATA = frozenset({Purpose.DATA})


def _layout(**options: Any) -> Layout:
    """flash-attn's DDP over D ranks, one micro-batch each, with `options`."""
    flash = Framework.FLASH_ATTN
    return Layout(npus=D, dp=D, framework=flash, micro_batch=MICRO, global_batch=D * MICRO, **options)


def _plan(tmp_path: Path, zero: int) -> Plan:
    layout = _layout(vocab_divisor=1, zero=zero)
    return plans.plan(plans.config(tmp_path, plans.TOY), layout, (MICRO, SEQ))


def _memory(plan: Plan) -> StageMemory:
    assert plan.layout is not None
    (memory,) = plan.layout.memory
    return memory


def _collectives(plan: Plan) -> list[tuple[int, Collective]]:
    return [(i, op) for i, op in enumerate(plan.programs[0]) if isinstance(op, Collective)]


def test_gradients_are_all_reduced_then_the_fp32_parameters_gathered_after_the_step(tmp_path: Path) -> None:
    """DDP's all-reduce of every fp32 gradient as at --zero 0; after the step (its only
    dependency the update's compute) the broadcasts of every parameter, written as the all-gather
    that brings each rank the same bytes: all fp32 parameters but its own partition's."""
    before, after = _plan(tmp_path, 0), _plan(tmp_path, 1)
    reduce = [(op.comm, op.bytes) for _, op in _collectives(before)]
    assert reduce == [(CommType.ALLREDUCE, ELEMENTS * FP32)]
    (_, first), (g, gather) = _collectives(after)
    assert (first.comm, first.bytes) == reduce[0]
    assert (gather.comm, gather.bytes) == (CommType.ALLGATHER, ELEMENTS * FP32)
    assert gather.over >= DATA
    assert Purpose.TENSOR not in gather.over
    program = after.programs[0]
    (step,) = gather.deps
    update = program[step]
    assert isinstance(update, Compute)
    assert update.step is Step.UPDATE
    assert g == len(program) - 1  # nothing after it: the next iteration's forward waits for it


# _partition_parameters by hand at D = 2 (greedy, largest first, the first of the smallest): the
# linear weights (gate, up, down 8,192 x 6; the output layer 6,144; q, o 4,096 x 4; k, v 2,048 x 4)
# give rank 0 8,192 x 3, 6,144, 4,096, 2,048 x 3 = 40,960 and rank 1 38,912; then the rest (the
# embedding 6,144 to rank 1, the five norms of 64 to rank 0): 41,280 and 45,056
FIRST = 41_280


def test_each_rank_steps_and_keeps_its_partition_of_adams_moments(tmp_path: Path) -> None:
    """The step's compute on 1/D of the parameters; the memory: Adam's two fp32 moments of the
    parameters ZeroRedundancyOptimizer gives rank 0, everything else whole (the fp32 parameters,
    which it does not partition, their fp32 gradients and the bf16 copies autocast holds for the
    backward)."""
    before, after = _plan(tmp_path, 0), _plan(tmp_path, 1)

    def updates(plan: Plan) -> list[int]:
        return [op.time for op in plan.programs[0] if isinstance(op, Compute) and op.step is Step.UPDATE]

    ((whole_step,), (shard,)) = updates(before), updates(after)
    assert shard == pytest.approx(whole_step / D, abs=len(before.layers))  # each layer's share rounded up
    whole, zero = _memory(before), _memory(after)
    assert whole.optimizer == ELEMENTS * (4 + 8)
    assert zero == StageMemory(
        whole.parameters,
        whole.weights,
        whole.gradients,
        ELEMENTS * 4 + FIRST * 8,
        whole.activations,
        whole.cached,
    )


def test_its_broadcasts_are_not_megatrons_gathers_in_the_next_forward() -> None:
    """ZeroRedundancyOptimizer.step returns once _sync_params has waited for every broadcast
    (overlap_with_ddp False: adamw-zero.yaml sets none), so --overlap-param-gather, which defers
    Megatron's distributed optimizer's gathers to the next forward, is refused with it."""
    from modtrans.strategy.llm.options import LayoutError

    with pytest.raises(LayoutError, match="ZeroRedundancyOptimizer broadcasts"):
        _layout(zero=1, overlap_grad_reduce=True, overlap_param_gather=True)


@pytest.mark.hf
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.distributed.optim's torch.jit.script
def test_torchs_zero_redundancy_optimizer_broadcasts_what_the_all_gather_moves(tmp_path: Path) -> None:
    """torch's ZeroRedundancyOptimizer over the toy Llama's fp32 parameters (transformers'
    LlamaForCausalLM of the same configuration) as rank 0 of D on a fake process group, AdamW in
    two parameter groups as flash-attention's group_parameters_for_optimizer makes them (the
    linear layers' weights decayed, the rest not): its step broadcasts each parameter once, fp32,
    after its local step, the bytes our all-gather carries; each rank keeps the state of its
    partition only: rank 0's what our memory counts."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    dist = torch.distributed
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.testing._internal.distributed.fake_pg import FakeStore

    config = transformers.LlamaConfig(**{k: v for k, v in plans.TOY.items() if k != "model_type"})
    model = transformers.LlamaForCausalLM(config).float()
    decay = [p for m in model.modules() if isinstance(m, torch.nn.Linear) for p in [m.weight]]
    rest = [p for p in model.parameters() if all(p is not q for q in decay)]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=D)
    sent: list[tuple[int, Any, int, bool]] = []
    try:
        zero = ZeroRedundancyOptimizer(
            [{"params": decay}, {"params": rest, "weight_decay": 0.0}],
            optimizer_class=torch.optim.AdamW,
            lr=1e-3,
            weight_decay=0.1,
        )
        real = dist.broadcast

        def broadcast(tensor: Any, src: int, group: Any = None, async_op: bool = False) -> Any:
            sent.append((tensor.numel(), tensor.dtype, src, bool(zero.optim.state)))
            return real(tensor, src, group=group, async_op=async_op)

        for p in model.parameters():
            p.grad = torch.ones_like(p)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(dist, "broadcast", broadcast)
            zero.step()
        partition = zero._partition_parameters()
        states = [s for state in zero.optim.state.values() for s in state.values() if s.dim()]
        kept = sum(s.numel() * s.element_size() for s in states)
    finally:
        dist.destroy_process_group()
    params = list(model.parameters())
    assert sum(p.numel() for p in params) == ELEMENTS
    assert len(sent) == len(params)  # one broadcast per parameter tensor
    assert all(dtype == torch.float32 and stepped for _, dtype, _, stepped in sent)
    assert sum(n * FP32 for n, *_ in sent) == _collectives(_plan(tmp_path, 1))[-1][1].bytes
    owned = [sum(p.numel() for group in rank for p in group["params"]) for rank in partition]
    assert owned[0] == FIRST
    assert kept == 8 * owned[0]  # exp_avg and exp_avg_sq, fp32, of rank 0's parameters only
    assert kept == _memory(_plan(tmp_path, 1)).optimizer - ELEMENTS * 4


@pytest.mark.hf
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.distributed.optim's torch.jit.script
def test_the_partition_is_torchs_for_gpt3_2_7b_on_8_ranks() -> None:
    """zero_redundancy.partition against torch's _partition_parameters over GPT3-2.7B's parameter
    shapes (flash-attention's gpt3-2.7B-flash-hdim128: 32 blocks of 2,560, vocabulary 50,264,
    2,048 positions; meta tensors) in flash-attention's two groups at D = 8: every rank's
    elements, rank 0's 1.34 x the mean (the word embedding on top of an even share)."""
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from modtrans.strategy.llm.zero_redundancy import partition

    h, vocab, positions, ranks = 2560, 50264, 2048, 8
    decay = [(3 * h, h), (h, h), (4 * h, h), (h, 4 * h)] * 32
    block = [(3 * h,), (h,), (4 * h,), (h,)] + [(h,)] * 4  # four biases, two norms' weights and biases
    rest = [(vocab, h), (positions, h), (h,), (h,)] + block * 32
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    try:

        def made(shapes: Sequence[tuple[int, ...]]) -> list[Any]:
            return [torch.nn.Parameter(torch.empty(*s, device="meta")) for s in shapes]

        zero = ZeroRedundancyOptimizer(
            [{"params": made(decay)}, {"params": made(rest), "weight_decay": 0.0}],
            optimizer_class=torch.optim.AdamW,
            lr=1e-3,
        )
        torchs = [sum(p.numel() for g in rank for p in g["params"]) for rank in zero._partition_parameters()]
    finally:
        dist.destroy_process_group()

    def numel(shape: tuple[int, ...]) -> int:
        return int(torch.Size(shape).numel())

    ours = partition([[numel(s) for s in decay], [numel(s) for s in rest]], ranks)
    assert ours == torchs
    assert ours[0] / (sum(ours) / ranks) == pytest.approx(1.34, abs=0.005)
