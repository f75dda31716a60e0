"""LLM-scale layouts on toy transformers whose every message size is computed by hand, and
properties of every layout's traces (the validator, byte totals, FLOP conservation)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import Result

from modtrans import chakra, pipeline
from modtrans.chakra.read import read
from modtrans.chakra.schema import schema
from modtrans.chakra.summary import summarize
from modtrans.chakra.validate import NAMES, check_set
from modtrans.chakra.write import collective_type
from modtrans.comm import CommType, Policy
from modtrans.ir.document import Kind
from modtrans.plan import Collective, Compute, Direction, Place, Plan, Purpose, Step, Transfer
from modtrans.plan.model import ResolvedCollective
from modtrans.plan.sizes import Consumer, written
from modtrans.strategy import Parallelism
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import Layout, Recompute, Schedule
from modtrans.strategy.llm.degrees import dense_data  # dense gradients' axes
from modtrans.strategy.llm.options import LayoutError
from tests import plans

Run = Callable[..., Result]
TOY = plans.TOY  # the two-block Llama in bf16 whose sizes the tests below count by hand
MOE = {**TOY, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}
MICRO, SEQ, HIDDEN, BYTES = 2, 16, 64, 2
A = MICRO * SEQ * HIDDEN * BYTES  # one micro-batch's hidden activation: 4,096 bytes
LOSS = MICRO * SEQ * 4  # one fp32 value per token of a micro-batch: 128 bytes
# the toy's parameters, counted from its configuration: embedding and head 96 x 64 each; per block
# q / o 64 x 64, k / v 64 x 32 (2 key/value heads of 16), gate / up / down 64 x 128, two norms of
# 64; a final norm of 64
TOY_BLOCK = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
TOY_ELEMENTS = 2 * 96 * 64 + 2 * TOY_BLOCK + 64


def _plan(tmp_path: Path, layout: Layout, config: dict[str, Any] = TOY, *, padded: bool = False) -> Plan:
    """The toy's plan; its vocabulary as configured (the counts below are by hand) unless `padded`
    (Megatron's --make-vocab-size-divisible-by, tested on its own)."""
    layout = dataclasses.replace(layout, micro_batch=MICRO)  # the IR is one micro-batch of MICRO sequences
    if not padded:
        layout = dataclasses.replace(layout, vocab_divisor=1)
    return plans.plan(plans.config(tmp_path, config), layout, (MICRO, SEQ))


def _collectives(plan: Plan, rank: int = 0) -> list[Collective]:
    """The rank's collectives but the all-reduces of one number before Megatron's optimizer step
    (strategy/llm/clipping.py; tests/test_megatron_clip.py), which the text formats have no place
    for."""
    return [op for op in plan.program(rank) if isinstance(op, Collective) and op.step is not Step.UPDATE]


def _names(plan: Plan, ops: list[Collective]) -> list[str]:
    return [plan.layers[op.layer].name for op in ops]


def _activations(plan: Plan) -> list[Collective]:
    """The tensor-parallel collectives of activations (the loss's per-token all-reduces left out)."""
    return [c for c in _collectives(plan) if c.over == frozenset({Purpose.TENSOR}) and c.bytes != LOSS]


def test_tensor_parallel_all_reduces_are_megatrons(tmp_path: Path) -> None:
    plan = _plan(tmp_path, Layout(npus=2, tp=2, global_batch=MICRO))
    tp = _activations(plan)
    assert {(c.comm, c.bytes) for c in tp} == {(CommType.ALLREDUCE, A)}
    forward = _names(plan, [c for c in tp if c.step is Step.FWD])
    backward = _names(plan, [c for c in tp if c.step is Step.INPUT_GRAD])
    # Shoeybi et al. 2019, fig. 3/4: per block the forward all-reduces after the attention output
    # and the MLP's second layer (g), the backward ones at the first layers' inputs (f); the
    # vocabulary-parallel embedding all-reduces its output, the column-parallel head its input gradient
    assert forward == [
        "model.embed_tokens",
        *(f"model.layers.{i}.{x}" for i in (0, 1) for x in ("self_attn.o_proj", "mlp.down_proj")),
    ]
    assert sorted(backward) == sorted(
        ["lm_head", *(f"model.layers.{i}.{x}" for i in (0, 1) for x in ("self_attn.q_proj", "mlp.gate_proj"))]
    )


def test_sequence_parallelism_halves_become_gathers_and_scatters(tmp_path: Path) -> None:
    plan = _plan(tmp_path, Layout(npus=2, tp=2, sp=True, global_batch=MICRO))
    every = _activations(plan)
    tp = [c for c in every if c.place is not Place.TAIL]
    # once per iteration, the norms' partial gradients (each saw 1/T of the sequence) all-reduced
    # over the tensor group in fp32, all flattened into ONE all-reduce after the backward
    # (megatron/core/distributed/finalize_model_grads.py at core_v0.14.0, finalize_model_grads ->
    # _allreduce_non_tensor_model_parallel_grads: `_flatten_dense_tensors(grads)`, one
    # torch.distributed.all_reduce over tp_group): two RMSNorms per block and the final one, HIDDEN
    # weights of 4 bytes each, issued with the first unit, whose gradient the backward ends with
    tail = [(plan.layers[c.layer].name, c.comm, c.bytes) for c in every if c.place is Place.TAIL]
    assert tail == [("model.embed_tokens", CommType.ALLREDUCE, (2 * 2 + 1) * HIDDEN * 4)]
    kinds = Counter((c.comm, c.step) for c in tp)
    # Korthikanti et al. 2022, section 4.2.2: g -> reduce-scatter, f -> all-gather, and the
    # conjugates in the backward pass; per block two of each direction
    assert kinds[(CommType.ALLGATHER, Step.FWD)] == 2 * 2 + 1  # q and gate of 2 blocks, the head
    assert kinds[(CommType.REDUCESCATTER, Step.FWD)] == 2 * 2 + 1  # o, down of 2 blocks, the embedding
    # the backward all-gathers: each row-parallel layer's and the embedding's output gradient (the
    # backward of their reduce-scatter), and each column-parallel layer's input again for its
    # weight gradient (Megatron-LM, tensor_parallel/layers.py,
    # LinearWithGradAccumulationAndAsyncCommunication.backward: the saved input is the sequence shard)
    assert kinds[(CommType.ALLGATHER, Step.INPUT_GRAD)] == (2 * 2 + 1) + (2 * 2 + 1)
    assert kinds[(CommType.REDUCESCATTER, Step.INPUT_GRAD)] == 2 * 2 + 1
    assert {c.bytes for c in tp} == {A}


@pytest.mark.parametrize("sp", [False, True])
def test_the_vocabulary_parallel_loss_all_reduces_3_fp32_values_per_token(tmp_path: Path, sp: bool) -> None:
    # megatron/core/tensor_parallel/cross_entropy.py, _VocabParallelCrossEntropy.forward: the
    # logits cast to fp32, then all-reduces of the maximum logit, the target's logit and the sum
    # of exponentials over the tensor group, one value per token; with or without SP (the head's
    # input is gathered first, so the logits cover the whole sequence)
    plan = _plan(tmp_path, Layout(npus=4, tp=2, dp=2, sp=sp, global_batch=2 * 3 * MICRO))  # GA 3
    loss = [c for c in _collectives(plan) if c.bytes == LOSS]
    assert [(c.comm, c.over, c.step, plan.layers[c.layer].name) for c in loss] == [
        (CommType.ALLREDUCE, frozenset({Purpose.TENSOR}), Step.FWD, "lm_head")
    ] * (3 * 3)
    # without tensor parallelism the logits are whole on each rank: nothing to all-reduce
    alone = _plan(tmp_path, Layout(npus=2, dp=2, global_batch=2 * MICRO))
    assert not [c for c in _collectives(alone) if c.bytes == LOSS]


def test_pipeline_sends_one_activation_per_micro_batch_in_1f1b_order(tmp_path: Path) -> None:
    plan = _plan(tmp_path, Layout(npus=2, pp=2, global_batch=4 * MICRO))  # GA 4
    first, last = plan.programs
    sends = [op for op in first if isinstance(op, Transfer) and op.direction is Direction.SEND]
    receives = [op for op in last if isinstance(op, Transfer) and op.direction is Direction.RECV]
    assert [(t.bytes, t.offset) for t in sends] == [(A, 1)] * 4  # activations forward to stage 1
    assert sorted(t.tag for t in sends) == sorted(t.tag for t in receives)
    # 1F1B on stage 0 of 2: one warm-up forward, then alternate (PipeDream-Flush)
    steps = [
        op.step
        for op in first
        if isinstance(op, Compute)
        and op.layer == 0
        and op.step not in (Step.INPUT_GRAD, Step.UPDATE, Step.GRAD_SYNC)  # D = 1's bucket NaN check
    ]
    assert (
        steps
        == [Step.FWD, Step.FWD, Step.WEIGHT_GRAD, Step.FWD, Step.WEIGHT_GRAD, Step.FWD]
        + [Step.WEIGHT_GRAD] * 2
    )


def test_data_parallel_and_zero_communication(tmp_path: Path) -> None:
    dense = _plan(tmp_path, Layout(npus=2, dp=2, global_batch=4 * MICRO))  # GA 2
    reduces = [c for c in _collectives(dense) if c.over == dense_data()]
    # bf16 parameters, gradients reduced in fp32 (Megatron-LM arguments.py validate_args: bf16 sets
    # accumulate_allreduce_grads_in_fp32; the gradient buffer is torch.float): 4 bytes a weight.
    # Without --overlap-grad-reduce the buffer is one bucket (distributed_data_parallel.py: "Set
    # bucket_size to infinity if overlap_grad_reduce is False"), all-reduced once per iteration
    # after the last backward, i.e. after the first layer's last weight gradient
    assert [(c.comm, c.bytes, c.place, dense.layers[c.layer].name) for c in reduces] == [
        (CommType.ALLREDUCE, TOY_ELEMENTS * 4, Place.TAIL, "model.embed_tokens")
    ]
    zero1 = _plan(tmp_path, Layout(npus=2, dp=2, zero=1, global_batch=4 * MICRO))
    # the distributed optimizer: fp32 gradients scattered, bf16 parameters gathered (AICB's GPT-13B
    # file: grad_param_comm 4 B and grad_gather 2 B per parameter), the bucket padded to a multiple
    # of lcm(D, 128) elements (param_layout.py, pad_bucket_end; every toy parameter's size is a
    # multiple of 64, so pad_param_start leaves no gap)
    padded = -(-TOY_ELEMENTS // 128) * 128
    assert [(c.comm, c.bytes) for c in _collectives(zero1)] == [
        (CommType.REDUCESCATTER, padded * 4),
        (CommType.ALLGATHER, padded * BYTES),
    ]
    zero3 = _plan(tmp_path, Layout(npus=2, dp=2, zero=3, global_batch=4 * MICRO))
    # per micro-batch: parameters gathered before the forward and the backward, gradients scattered
    assert Counter(c.comm for c in _collectives(zero3)) == {
        CommType.ALLGATHER: 2 * 2 * len(zero3.layers),
        CommType.REDUCESCATTER: 2 * len(zero3.layers),
    }


def test_expert_parallel_all_to_alls_and_local_experts(tmp_path: Path) -> None:
    plan = _plan(tmp_path, Layout(npus=4, dp=4, ep=2, global_batch=4 * MICRO), MOE)
    a2a = [c for c in _collectives(plan) if c.comm is CommType.ALLTOALL]
    # GShard dispatch / combine: tokens x top-k x hidden x bytes = 32 x 2 x 64 x 2
    assert {c.bytes for c in a2a} == {MICRO * SEQ * 2 * HIDDEN * BYTES}
    assert len(a2a) == 2 * 4  # per MoE block: dispatch and combine, forward and backward
    assert {c.over for c in a2a} == {frozenset({Purpose.EXPERT})}
    w1 = next(
        op
        for op in plan.program(0)
        if isinstance(op, Compute) and plan.layers[op.layer].name.endswith("experts.w1")
    )
    # this rank's 4 / 2 experts, one grouped GEMM; balanced routing: 32 tokens x top-2 / 4 experts
    # = 16 rows from each of the 2 ranks, so 2 experts x 2 x 16 rows x 64 x 128 multiply-adds
    assert w1.flops == 2 * 2 * (2 * 16) * HIDDEN * 128
    # and 2 of the 4 experts' weights: the experts' gradient buffer (a buffer of its own with EP)
    # holds, per block, w1, w3 and w2 of 2 experts: 3 x 2 x 128 x 64 elements in fp32
    expert_bytes = sum(
        c.bytes
        for c in _collectives(plan)
        if c.comm is CommType.ALLREDUCE and ".experts." in plan.layers[c.layer].name
    )
    assert expert_bytes == 2 * 3 * 2 * 128 * HIDDEN * 4  # 2 blocks
    expert_grads = {
        c.over
        for c in _collectives(plan)
        if c.comm is CommType.ALLREDUCE and ".experts." in plan.layers[c.layer].name
    }
    assert expert_grads == {frozenset({Purpose.DATA})}  # the D / E ranks holding the same experts


@pytest.mark.parametrize("mode", [Recompute.FULL, Recompute.SELECTIVE])
def test_recompute_before_each_backward(mode: Recompute, tmp_path: Path) -> None:
    plan = _plan(tmp_path, Layout(npus=1, recompute=mode, global_batch=2 * MICRO))
    recomputed = [op for op in plan.program(0) if isinstance(op, Compute) and op.step is Step.RECOMPUTE]
    block_units = [x for x in plan.layers if x.name.startswith("model.layers.")]
    if mode is Recompute.FULL:
        assert len(recomputed) == 2 * len(block_units)  # every block unit, both micro-batches
    else:
        assert len(recomputed) == 2 * 2  # the attention core, once per block and micro-batch
        assert all(plan.layers[op.layer].name.endswith("v_proj") for op in recomputed)


TOY4 = {**TOY, "num_hidden_layers": 4}
LAYOUTS = [
    (TOY, Layout(npus=8, tp=2, pp=2, global_batch=4 * MICRO)),
    (TOY, Layout(npus=8, tp=2, pp=2, sp=True, zero=1, global_batch=8 * MICRO)),
    (TOY4, Layout(npus=4, pp=2, schedule=Schedule.INTERLEAVED, vpp=2, zero=3, global_batch=8 * MICRO)),
    (TOY4, Layout(npus=4, pp=4, schedule=Schedule.GPIPE, recompute=Recompute.FULL, global_batch=4 * MICRO)),
    (MOE, Layout(npus=16, tp=2, pp=2, ep=2, sp=True, global_batch=8 * MICRO)),
]


@pytest.mark.parametrize(("config", "layout"), LAYOUTS)
def test_every_layouts_traces_validate_and_conserve_work(
    config: dict[str, Any], layout: Layout, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, layout, config)
    outputs = chakra.files(plan, tmp_path / "t", tick_ns=1.0)
    traces = dict(outputs[:-1])
    found = check_set(traces, outputs[-1][1], "t.comm_groups.json")
    # every send has its receive, every collective its partners (a toy's computes last < 1 us: T711)
    assert {d.code for d in found} <= {"T711"}
    # the bytes each rank's trace moves per collective type and group are the plan's (an
    # all-gather's as ASTRA-sim reads it: one rank's part, plan/sizes.py)
    rows = {r.rank: r for r in summarize([read(data, str(path)) for path, data in traces.items()])}
    for rank in range(layout.npus):
        planned: Counter[tuple[str, str]] = Counter()
        for op in plan.ops(rank):
            if isinstance(op, ResolvedCollective) and len(op.group.ranks) > 1:
                group = str(op.group.id) if op.group.id else "all"
                size = written(op.op.comm, op.op.bytes, len(op.group.ranks), Consumer.ASTRA_SIM)
                planned[(NAMES[collective_type(schema(), op.op.comm)], group)] += size
        in_trace = {key: size for key, (_, size) in rows[rank].collectives.items()}
        assert in_trace == dict(planned)
        sends = sum(
            op.bytes
            for op in plan.program(rank)
            if isinstance(op, Transfer) and op.direction is Direction.SEND
        )
        assert rows[rank].sends[1] == sends
    # FLOPs: every data-parallel replica computes the whole model once per micro-batch
    # (sharding rounds each layer's FLOPs up to whole numbers)
    single = _plan(tmp_path, Layout(npus=1, global_batch=MICRO), config)
    model = sum(op.flops for op in single.program(0) if isinstance(op, Compute))
    total = sum(
        op.flops
        for r in range(layout.npus)
        for op in plan.program(r)
        if isinstance(op, Compute) and op.step is not Step.RECOMPUTE
    )
    replicas, micro_batches = (
        plan.mesh.extent(Purpose.DATA) * plan.mesh.extent(Purpose.EXPERT),
        plan.micro_batches,
    )
    # without SP every tensor-parallel rank repeats the norms and residual adds (Korthikanti et
    # al. 2022, section 4.2.2: the work SP removes)
    ir, _ = pipeline.extract_checked(tmp_path / "config.json", input_shapes={"input_ids": (MICRO, SEQ)})
    assert ir is not None
    replicated = sum(x.flops.total for x in ir.layers if x.kind is Kind.NORM or ".residual" in x.name)
    repeated = 0 if layout.sp else (layout.tp - 1) * replicated
    assert total == pytest.approx(replicas * micro_batches * (model + repeated), rel=2e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tp", "3", "--npus", "8"), "--tp 3 x --pp 1 must divide --npus 8"),
        (("--tp", "2", "--dp", "2", "--npus", "8"), "must equal --npus 8"),
        (("--dp", "4", "--ep", "3"), "--ep 3 must divide --dp 4"),
        (("--sp",), "--sp shards the sequence"),
        (("--pp", "2", "--vpp", "2", "--schedule", "1f1b"), "--vpp 2 needs --schedule interleaved"),
        (("--pp", "2", "--schedule", "interleaved"), "--vpp V >= 2"),
        (("--dp", "2", "--global-batch", "3"), "must be a multiple of --micro-batch 1 x --dp 2"),
        (("--tp", "2", "--model-parallel-group", "2"), "give one of them"),
        (("--pp", "3"), "the 32 transformer blocks evenly: they must divide by the 3 pipeline chunks"),
        (("--pp", "4", "--vpp", "3", "--schedule", "interleaved"), "divide by the 12 pipeline chunks"),
        (("--dp", "2", "--ep", "2"), "--ep 2: the model has no mixture of experts"),
        # Llama-3-8B: 32 query heads, 8 key/value heads (Megatron's TransformerConfig rules)
        (("--tp", "3", "--npus", "3"), "--tp 3: the 32 attention heads must divide by it"),
        (("--tp", "64"), "--tp 64: the 32 attention heads must divide by it"),
        (("--tp", "16"), "--tp 16: the 8 key/value heads must divide by it"),
    ],
)
def test_layouts_that_make_no_sense_are_usage_errors(
    args: tuple[str, ...], message: str, run_cli: Run
) -> None:
    result = run_cli("translate", "llama-3-8b", *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_a_stages_list_is_refused_for_the_rule_it_breaks(parts: int) -> None:
    """Every --stages list of small sizes for a 4-block model: accepted exactly when it has P x V
    entries, each >= 1, adding up to the blocks; otherwise the message names that rule, with the
    numbers that break it, and no other (a sum of 20 for 32 blocks is not an empty chunk)."""
    from itertools import product

    from modtrans.strategy.llm.options import LayoutError
    from modtrans.strategy.llm.stages import partition

    blocks = 4
    for length in (1, 2, 3):
        for explicit in product(range(-1, 6), repeat=length):
            try:
                cut = partition([1] * blocks, parts, explicit)
            except LayoutError as error:
                message = str(error)
            else:
                assert [len(r) for r in cut] == list(explicit)
                continue
            assert message.startswith(f"--stages {','.join(map(str, explicit))}")
            if length != parts:
                assert f"lists {length} chunks; the pipeline has {parts}" in message
            elif min(explicit) < 1:
                assert "every chunk needs at least 1 block" in message
                assert f"has {min(explicit)}" in message
            else:
                assert sum(explicit) != blocks
                assert message.endswith(f"adds up to {sum(explicit)} blocks; the model has {blocks}")


def test_stages_that_do_not_add_up_say_so(run_cli: Run) -> None:
    result = run_cli("translate", "llama-3-8b", "--pp", "2", "--stages", "10,10")
    assert result.exit_code == 2
    assert "--stages 10,10 adds up to 20 blocks; the model has 32" in result.stderr


def test_text_outputs_say_what_they_can(run_cli: Run, tmp_path: Path) -> None:
    base = ("translate", "llama-3-8b", "--tp", "2", "--pp", "2", "--input-shape", "input_ids=1x256")
    refused = run_cli(*base)
    assert refused.exit_code == 1
    assert "D310" in refused.stderr
    assert "pipeline stages" in refused.stderr
    simai = tmp_path / "s.txt"
    assert run_cli(*base, "--dialect", "simai", "-o", simai).exit_code == 0
    header = simai.read_text().splitlines()[0]
    # AICB's header; pp_comm = micro-batch x sequence x hidden x 2 bytes (1 x 256 x 4096 x 2)
    assert "model_parallel_NPU_group: 2 ep: 1 pp: 2 vpp: 1 ga: 2 all_gpus: 4" in header
    assert header.endswith(f"pp_comm: {256 * 4096 * 2}")
    assert run_cli("validate", "--dialect", "simai", "--strict", simai).exit_code == 0
    meta = json.loads((tmp_path / "s.txt.meta.json").read_text())
    assert [c["blocks"] for c in meta["parallel"]["llm"]["chunks"]] in ([17, 15], [16, 16])
    zero = tmp_path / "z.txt"  # refused before issue 24; AICB writes it (grad_param_comm ...)
    assert run_cli(*base, "--dp", "2", "--zero", "1", "--dialect", "simai", "-o", zero).exit_code == 0
    assert run_cli("validate", "--dialect", "simai", "--strict", zero).exit_code == 0


def _moe_onnx(path: Path, top_k: int | None = 2) -> Path:
    """A Mixtral-style MoE block as transformers' exports name it (MixtralSparseMoeBlock: a
    `gate` router, Softmax, TopK, `experts.<e>.w1` / `w2`), each expert computed on every token
    and masked afterwards, as dense exports do."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    tokens, hidden, width, experts = 8, 16, 32, 4
    block = "/model/layers.0/block_sparse_moe"
    weights = [numpy_helper.from_array(np.zeros((hidden, experts), np.float32), "gate.weight")]
    nodes = [
        helper.make_node("MatMul", ["x", "gate.weight"], ["logits"], name=f"{block}/gate/MatMul"),
        helper.make_node("Softmax", ["logits"], ["probs"], name=f"{block}/Softmax", axis=-1),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, hidden])]
    if top_k is not None:
        weights.append(numpy_helper.from_array(np.array([top_k], np.int64), "k"))
        nodes.append(helper.make_node("TopK", ["probs", "k"], ["top", "chosen"], name=f"{block}/TopK"))
        outputs.append(helper.make_tensor_value_info("chosen", TensorProto.INT64, [tokens, top_k]))
    for e in range(experts):
        weights += [
            numpy_helper.from_array(np.zeros((hidden, width), np.float32), f"w1.{e}"),
            numpy_helper.from_array(np.zeros((width, hidden), np.float32), f"w2.{e}"),
        ]
        scope = f"{block}/experts.{e}"
        nodes += [
            helper.make_node("MatMul", ["x", f"w1.{e}"], [f"h{e}"], name=f"{scope}/w1/MatMul"),
            helper.make_node("Relu", [f"h{e}"], [f"a{e}"], name=f"{scope}/act/Relu"),
            helper.make_node("MatMul", [f"a{e}", f"w2.{e}"], [f"o{e}"], name=f"{scope}/w2/MatMul"),
        ]
    nodes.append(helper.make_node("Sum", [f"o{e}" for e in range(experts)], ["y"], name=f"{block}/Sum"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, hidden])]
    graph = helper.make_graph(nodes, "moe", inputs, outputs, weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize(
    ("factor", "pad", "kept"),
    [(None, False, 64), (0.5, False, 32), (1.25, False, 64), (1.25, True, 80), (0.3, True, 20)],
)
def test_a_capacity_factor_drops_or_pads_each_expert_s_tokens(
    tmp_path: Path, factor: float | None, pad: bool, kept: int
) -> None:
    """Megatron-Core's capacity (moe_utils.py get_capacity, from topk_softmax_with_capacity with
    num_tokens x topk): ceil(32 tokens x top-2 / 4 experts x F) per expert; under balanced routing
    each expert is routed 16, so F = 0.5 keeps 8 of each (32 of 64), F = 1.25 drops none (a
    capacity of 20), and padding to capacity (MoEAlltoAllTokenDispatcher's drop_and_pad) makes it
    4 x 20 = 80, or 4 x ceil(4.8) = 20 at F = 0.3. The dispatch all-to-alls carry the tokens kept
    x hidden x bytes; the experts compute on them."""
    layout = Layout(npus=4, dp=4, ep=2, global_batch=4 * MICRO, capacity_factor=factor, pad_to_capacity=pad)
    plan = _plan(tmp_path, layout, MOE)
    a2a = [c for c in _collectives(plan) if c.comm is CommType.ALLTOALL]
    assert {c.bytes for c in a2a} == {kept * HIDDEN * BYTES}
    w1 = next(
        op
        for op in plan.program(0)
        if isinstance(op, Compute) and plan.layers[op.layer].name.endswith("experts.w1")
    )
    # this rank's 2 experts, each on its share from the 2 expert ranks: kept / 4 x 2 rows each
    assert w1.flops == 2 * 2 * (kept // 4 * 2) * HIDDEN * 128


def test_a_capacity_factor_needs_a_mixture_and_padding_needs_a_factor(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="needs --moe-expert-capacity-factor"):
        Layout(npus=4, dp=4, pad_to_capacity=True)
    with pytest.raises(LayoutError, match="positive"):
        Layout(npus=4, dp=4, capacity_factor=0.0)
    layout = Layout(npus=4, dp=4, capacity_factor=1.0)
    result = plans.translated(plans.config(tmp_path, TOY), layout, (MICRO, SEQ))
    assert result.plan is None
    assert any("no mixture of experts" in d.message for d in result.diagnostics)


def test_an_onnx_mixture_of_experts_is_recognised(run_cli: Run, tmp_path: Path) -> None:
    ir, found = pipeline.extract_checked(_moe_onnx(tmp_path / "moe.onnx"))
    assert ir is not None
    assert not [d for d in found if d.code == "X505"]
    router = ir.layer("model.layers.0.block_sparse_moe.gate")
    assert router.moe is not None
    assert (router.moe.experts, router.moe.top_k, router.moe.expert) == (4, 2, None)
    w1 = ir.layer("model.layers.0.block_sparse_moe.experts.3.w1")
    assert w1.moe is not None
    assert w1.moe.expert == 3
    assert w1.gemm is not None
    # computed densely on all 8 tokens in the export; balanced top-2 routing gives it 8 x 2 / 4
    assert (w1.gemm.m, w1.gemm.k, w1.gemm.n) == (4, 16, 32)
    assert w1.flops.forward == 2 * 4 * 16 * 32
    prefix = tmp_path / "t"
    result = run_cli(
        "translate", tmp_path / "moe.onnx", "--dp", "4", "--ep", "2", "--format", "chakra-et", "-o", prefix
    )
    assert result.exit_code == 0, result.stderr
    assert run_cli("validate", prefix).exit_code == 0
    ir, found = pipeline.extract_checked(_moe_onnx(tmp_path / "no-topk.onnx", top_k=None))
    assert ir is not None
    assert "top-1 assumed" in next(d.message for d in found if d.code == "X505")


@pytest.mark.parametrize(("model", "vocabulary"), [("gpt2", 50257), ("bert-base", 30522)])
def test_only_the_word_embedding_is_vocabulary_parallel(model: str, vocabulary: int) -> None:
    """Megatron-LM builds the word embedding as a VocabParallelEmbedding (forward all-reduce over
    the tensor group) and the position and token-type embeddings as torch.nn.Embedding, replicated:
    no tensor-parallel collective, the whole table's gradient over the data group
    (megatron/core/models/common/embeddings/language_model_embedding.py). GPT-2's wpe once got
    the word embedding's all-reduce (issue 24)."""
    ir = pipeline.extract(model)
    plan = pipeline.translate_checked(
        model, pipeline.Options(parallel=Parallelism(Policy.HYBRID_TRANSFORMER, 4, 2), format="chakra-et")
    ).plan
    assert plan is not None
    embeddings = {layer.name: layer for layer in ir.layers if layer.kind is Kind.EMBEDDING}
    assert len(embeddings) >= 2
    for name, layer in embeddings.items():
        index = next(i for i, info in enumerate(plan.layers) if info.name == name)
        ops = [c for c in _collectives(plan) if c.layer == index]
        tensor = [c.comm for c in ops if c.over == frozenset({Purpose.TENSOR})]
        gradient = sum(c.bytes for c in ops if Purpose.DATA in c.over)
        table = layer.params[0]
        if table.shape[0] == vocabulary:
            assert tensor == [CommType.ALLREDUCE], name
            assert gradient == table.bytes // 2, name  # the rank's half of the vocabulary
        else:
            assert tensor == [], name
            assert gradient == table.bytes, name


SIMAI_LAYOUTS = [
    (Layout(npus=2, tp=2, sp=True, global_batch=MICRO), TOY),
    (Layout(npus=4, tp=2, dp=2, global_batch=4 * MICRO), TOY),
    (Layout(npus=2, dp=2, zero=1, global_batch=8 * MICRO), TOY),
    (Layout(npus=2, dp=2, zero=2, global_batch=4 * MICRO), TOY),
    (Layout(npus=4, tp=2, dp=2, sp=True, zero=3, global_batch=4 * MICRO), TOY),
    (Layout(npus=4, tp=2, pp=2, global_batch=4 * MICRO), TOY),
    (Layout(npus=4, pp=2, dp=2, schedule=Schedule.GPIPE, global_batch=8 * MICRO), TOY),
    (
        Layout(npus=2, pp=2, vpp=2, schedule=Schedule.INTERLEAVED, global_batch=2 * MICRO),
        {**TOY, "num_hidden_layers": 4},
    ),
    (Layout(npus=4, dp=4, ep=2, global_batch=8 * MICRO), MOE),
    (Layout(npus=8, tp=2, sp=True, dp=4, ep=2, global_batch=8 * MICRO), MOE),
    (Layout(npus=4, tp=2, dp=2, recompute=Recompute.FULL, global_batch=4 * MICRO), TOY),
]


@pytest.mark.parametrize(("layout", "config"), SIMAI_LAYOUTS)
def test_simai_text_and_traces_carry_the_same_bytes_per_iteration(
    layout: Layout, config: dict[str, Any], tmp_path: Path
) -> None:
    """SimAI runs each line of its file once per iteration (Workload.cc: one forward sweep, one
    backward sweep, no loop over ga), so the file's collectives must be the iteration's: per
    collective type and group, the SimAI text of a plan and the first stage's trace carry the
    same bytes. Before issue 24 the data-parallel all-reduce sat in every micro-batch's copy (GA
    times the bytes) and ZeRO was refused."""
    from modtrans.plan.simai import project_simai

    plan = _plan(tmp_path, layout, config)
    ep = plan.mesh.extent(Purpose.EXPERT)

    def group(over: frozenset[Purpose]) -> str:
        label = {
            frozenset({Purpose.TENSOR}): "tensor",
            frozenset({Purpose.EXPERT}): "expert",
            dense_data(): "data",
            frozenset({Purpose.DATA}): "expert-data",
        }[over]
        return "data" if label == "expert-data" and ep == 1 else label  # D / E = D

    traces: Counter[tuple[str, str]] = Counter()
    for op in plan.programs[0]:
        if isinstance(op, Collective) and op.step not in (
            Step.RECOMPUTE,
            Step.UPDATE,
        ):  # clipping.py's: not in text
            traces[(op.comm.value, group(op.over))] += op.bytes
    text: Counter[tuple[str, str]] = Counter()
    for layer in project_simai(plan).layers:
        for column, (_, phase) in enumerate(layer.phases):
            if not phase.comm_type.moves_data:
                continue
            base, _, suffix = phase.comm_type.value.partition("_")
            if suffix == "EP":
                over = "expert"
            elif suffix == "DP_EP":
                over = "expert-data" if ep > 1 else "data"
            else:
                over = "data" if column == 2 else "tensor"
            text[(base, over)] += phase.comm_size
    assert text == traces


@pytest.mark.parametrize(
    "layout",
    [
        Layout(npus=2, tp=2, sp=True, global_batch=MICRO),
        Layout(npus=4, tp=2, dp=2, global_batch=2 * MICRO),
        Layout(npus=2, dp=2, zero=1, global_batch=2 * MICRO),
        Layout(npus=4, tp=2, dp=2, sp=True, zero=2, global_batch=2 * MICRO),
        Layout(npus=4, tp=2, dp=2, recompute=Recompute.FULL, global_batch=2 * MICRO),
    ],
)
def test_astra_sim_text_and_traces_carry_the_same_collectives(layout: Layout, tmp_path: Path) -> None:
    """ASTRA-sim 1.0 text of a one-stage layout: per collective type and group, the same count and
    bytes as the plan's trace (an all-gather written as one rank's part, plan/sizes.py), a column's
    further collectives on lines of their own (plan/lines.py: the loss's all-reduces after the head,
    SP's all-gathers, ZeRO's reduce-scatter then all-gather; refused before)."""
    from modtrans.plan import project

    plan = _plan(tmp_path, layout)
    tensor = frozenset({Purpose.TENSOR})
    traces: Counter[tuple[str, bool, int]] = Counter()
    for op in plan.programs[0]:
        if isinstance(op, Collective) and op.step not in (
            Step.RECOMPUTE,
            Step.UPDATE,
        ):  # clipping.py's: not in text
            ranks = plan.mesh.span(op.over)
            traces[
                (op.comm.value, op.over == tensor, written(op.comm, op.bytes, ranks, Consumer.ASTRA_SIM))
            ] += 1
    text: Counter[tuple[str, bool, int]] = Counter()
    for layer in project(plan).layers:
        for column, (_, phase) in enumerate(layer.phases):
            if phase.comm_type.moves_data:
                text[(phase.comm_type.value, column < 2, phase.comm_size)] += 1
    assert text == traces
    assert text[("ALLREDUCE", True, LOSS)] == (3 if layout.tp > 1 else 0)


def test_seq_len_is_the_sequence_of_input_ids(run_cli: Run, tmp_path: Path) -> None:
    """--seq-len S (Megatron's --seq-length) is --input-shape input_ids=1xS: the embedding's
    tensor-parallel all-reduce is one micro-batch's hidden activation, S x 4,096 x 2 bytes."""
    by_seq, by_shape = tmp_path / "a.txt", tmp_path / "b.txt"
    base = ("translate", "llama-3-8b", "--tp", "2")
    assert run_cli(*base, "--seq-len", "256", "-o", by_seq).exit_code == 0
    assert run_cli(*base, "--input-shape", "input_ids=1x256", "-o", by_shape).exit_code == 0
    assert by_seq.read_text() == by_shape.read_text()
    embedding = by_seq.read_text().splitlines()[2].split("\t")
    assert embedding[0] == "model.embed_tokens"
    assert embedding[3:5] == ["ALLREDUCE", str(256 * 4096 * 2)]
    both = run_cli(*base, "--seq-len", "256", "--input-shape", "input_ids=1x8")
    assert both.exit_code == 2
    assert "give one" in both.stderr


def test_a_traces_all_gather_holds_one_ranks_part(tmp_path: Path) -> None:
    """ASTRA-sim 2.x reads an ALL_GATHER's comm_size as what each rank contributes (Ring.cc:
    final_data_size = data_size * nodes_in_ring; measured: 100 MiB on 8 NPUs takes 7 x 100 MiB / B).
    Under SP a rank contributes its sequence shard, A / T, and a reduce-scatter's comm_size is its
    whole input, A (Korthikanti et al. 2022, section 4.2.2). Before issue 24 the traces held the
    gathered A: ASTRA-sim moved T times the sequence-parallel traffic."""
    plan = _plan(tmp_path, Layout(npus=2, tp=2, sp=True, global_batch=MICRO))
    outputs = chakra.files(plan, tmp_path / "t", tick_ns=1.0)
    sizes: dict[str, set[int]] = {}
    for node in read(outputs[0][1], "t.0.et").nodes:
        if node.type == 7:  # COMM_COLL_NODE
            sizes.setdefault(NAMES[node.value("comm_type")], set()).add(node.value("comm_size"))
    assert (sizes["ALL_GATHER"], sizes["REDUCE_SCATTER"]) == ({A // 2}, {A})


@pytest.mark.parametrize(
    ("args", "cut"),
    [
        (("--pp", "4", "--vpp", "2", "--schedule", "interleaved", "--global-batch", "8"), "4,4,4,4,4,4,4,4"),
        (("--pp", "2", "--stages", "17,15"), "17,15"),
    ],
)
def test_the_pipeline_cut_is_megatrons(args: tuple[str, ...], cut: str, run_cli: Run, tmp_path: Path) -> None:
    """Megatron-LM gives every pipeline chunk num_layers / (P x V) blocks (transformer_block.py,
    get_num_layers_to_build), the embedding to the first and the head to the last; an uneven cut
    only when asked (--stages, its --decoder-first/last-pipeline-num-layers). Before issue 24 the
    cut balanced compute: Llama-3-8B at P 4 V 2 was 4, 5, 5, 5, 5, 5, 2, 1 blocks."""
    out = tmp_path / "s.txt"
    base = ("translate", "llama-3-8b", "--seq-len", "256", "--dialect", "simai", "-o", out)
    assert run_cli(*base, *args).exit_code == 0
    meta = json.loads((tmp_path / "s.txt.meta.json").read_text())
    assert ",".join(str(c["blocks"]) for c in meta["parallel"]["llm"]["chunks"]) == cut


@pytest.mark.parametrize(("tp", "accepted"), [(2, False), (3, True), (6, False)])
def test_key_value_heads_divide_by_tp(tp: int, accepted: bool, tmp_path: Path) -> None:
    """Megatron-Core's attention (attention.py, Attention.__init__: divide(num_query_groups,
    world_size)) gives every rank whole key/value groups. Six query heads in three groups: T 3
    (one group a rank) is accepted; T 2 (one and a half) and T 6 (half a group) are refused,
    naming the rule (transformer_config.py alone would take T 6: a divisor)."""
    heads = {"hidden_size": 48, "num_attention_heads": 6, "num_key_value_heads": 3}
    path = plans.config(tmp_path, {**TOY, **heads})
    layout = Layout(npus=tp, tp=tp, global_batch=MICRO, micro_batch=MICRO)
    result = plans.translated(path, layout, (MICRO, SEQ))
    messages = [d.message for d in result.diagnostics]
    assert (result.plan is not None) is accepted, messages
    if not accepted:
        assert any("the 3 key/value heads must divide by it" in m for m in messages)


@pytest.mark.parametrize(
    ("tp", "ep", "dp", "etp"), [(2, 2, 4, 1), (2, 4, 4, 1), (1, 2, 4, None), (2, 2, 4, None), (2, 4, 4, None)]
)
def test_expert_gradients_are_reduced_over_every_rank_holding_the_experts(
    tp: int, ep: int, dp: int, etp: int | None, tmp_path: Path
) -> None:
    """Megatron-Core's expert-data-parallel group has T x D / (ETP x E) ranks (parallel_state.py,
    initialize_model_parallel), each holding the same expert shards. Before issue 24 experts were
    whole on every tensor rank (ETP 1) but reduced over D / E ranks: DeepSeekMoE-like --tp 2 --ep 4
    --dp 4 reduced expert gradients over no one although ranks 0 and 1 hold the same experts."""
    layout = Layout(npus=tp * dp, tp=tp, dp=dp, ep=ep, etp=etp, sp=tp > 1, global_batch=dp * MICRO)
    plan = _plan(tmp_path, layout, MOE)
    shards = tp if etp is None else etp
    experts = {i for i, info in enumerate(plan.layers) if ".experts." in info.name}
    for rank in range(plan.npus):
        groups = {
            op.group.ranks
            for op in plan.ops(rank)
            if isinstance(op, ResolvedCollective)
            and op.op.layer in experts
            and op.op.step is Step.WEIGHT_GRAD
        }
        if tp * dp // (shards * ep) == 1:
            assert groups == set(), rank  # nobody else holds these expert shards
            continue
        assert [len(g) for g in groups] == [tp * dp // (shards * ep)], rank
        # every member holds the same experts (the same expert coordinate) and, with the experts
        # split over the tensor ranks, the same shard of them (the same tensor coordinate)
        (group,) = groups
        assert len({plan.mesh.coords(r)[1] for r in group}) == 1
        assert shards == 1 or len({plan.mesh.coords(r)[0] for r in group}) == 1
        assert rank in group


def test_experts_split_over_the_tensor_ranks_gather_their_tokens(tmp_path: Path) -> None:
    """ETP = T (Megatron-Core's default): after the dispatch all-to-all the tensor ranks all-gather
    the tokens, each computes 1/T of every local expert's GEMMs on all of them, and reduce-scatters
    before the combine (token_dispatcher.py, MoEAlltoAllTokenDispatcher); the backward runs the
    conjugates in reverse. Each rank routes 32 tokens / T = 16, x top-2 x 64 x 2 bytes = 4,096."""
    plan = _plan(tmp_path, Layout(npus=4, tp=2, dp=2, ep=2, sp=True, global_batch=2 * MICRO), MOE)
    routed = MICRO * SEQ // 2 * 2 * HIDDEN * BYTES
    by_layer: dict[str, list[tuple[Place | None, CommType, int, str]]] = {}
    for c in _collectives(plan):
        name = plan.layers[c.layer].name
        if c.over != dense_data() and c.place is not Place.TAIL:
            by_layer.setdefault(name, []).append((c.place, c.comm, c.bytes, "+".join(sorted(c.over))))
    router = by_layer["model.layers.0.block_sparse_moe.gate"]
    assert router == [
        (Place.AFTER_FWD, CommType.ALLTOALL, routed, "expert"),
        (Place.AFTER_FWD, CommType.ALLGATHER, 2 * routed, "tensor"),
        (Place.BEFORE_BWD, CommType.REDUCESCATTER, 2 * routed, "tensor"),
        (Place.BEFORE_BWD, CommType.ALLTOALL, routed, "expert"),
    ]
    last = next(v for k, v in by_layer.items() if k.startswith("model.layers.0.block_sparse_moe.experts."))
    assert last == [
        (Place.AFTER_FWD, CommType.REDUCESCATTER, 2 * routed, "tensor"),
        (Place.AFTER_FWD, CommType.ALLTOALL, routed, "expert"),
        (Place.BEFORE_BWD, CommType.ALLTOALL, routed, "expert"),
        (Place.BEFORE_BWD, CommType.ALLGATHER, 2 * routed, "tensor"),
    ]
    # the w1 of this rank's E / E_p = 2 experts, one grouped GEMM: 1/T of each one's 128
    # features, each on the 2 x 16 tokens both expert ranks send it (balanced routing: 32 tokens
    # x top-2 / 4 experts = 16 per rank), gathered over T
    w1 = next(
        op
        for op in plan.program(0)
        if isinstance(op, Compute) and plan.layers[op.layer].name.endswith("experts.w1")
    )
    assert w1.flops == 2 * 2 * (2 * 16) * HIDDEN * (128 // 2)


@pytest.mark.parametrize("pp", [2, 4])
def test_a_tied_embedding_is_reduced_across_the_first_and_last_stage(pp: int, tmp_path: Path) -> None:
    """Megatron-LM keeps a copy of a tied word embedding in the last stage's output layer: the copy
    is reduced over the data ranks with its stage, then the two gradients are all-reduced over the
    first and last stage once per iteration (finalize_model_grads.py, _allreduce_word_embedding_grads):
    vocabulary 96 x hidden 64 x 4 bytes (fp32 gradients of bf16 weights) = 24,576 B. Before issue 24
    neither was sent."""
    config = {**TOY, "num_hidden_layers": 4, "tie_word_embeddings": True}
    plan = _plan(tmp_path, Layout(npus=2 * pp, pp=pp, dp=2, global_batch=2 * pp * MICRO), config)
    grad = 96 * HIDDEN * 4
    names = [info.name for info in plan.layers]
    first, last = plan.programs[0], plan.programs[-1]

    def swaps(program: tuple[Any, ...], layer: str) -> list[tuple[Direction, int, int]]:
        return [
            (op.direction, op.offset, op.bytes)
            for op in program
            if isinstance(op, Transfer) and names[op.layer] == layer and op.step is Step.WEIGHT_GRAD
        ]

    assert swaps(first, "model.embed_tokens") == [
        (Direction.SEND, pp - 1, grad),
        (Direction.RECV, pp - 1, grad),
    ]
    assert swaps(last, "lm_head") == [(Direction.SEND, 1 - pp, grad), (Direction.RECV, 1 - pp, grad)]
    # the copy is in the last stage's gradient buffer (one bucket: the stage's blocks, the final
    # norm and the head), all-reduced over the data ranks once after the stage's last backward
    reduced = [
        (names[c.layer], c.bytes) for c in last if isinstance(c, Collective) and Purpose.DATA in c.over
    ]
    blocks = 4 // pp
    assert reduced == [
        (f"model.layers.{4 - blocks}.input_layernorm", (blocks * TOY_BLOCK + 64 + 96 * 64) * 4)
    ]
    outputs = chakra.files(plan, tmp_path / "t", tick_ns=1.0)
    assert {d.code for d in check_set(dict(outputs[:-1]), outputs[-1][1], "t.comm_groups.json")} <= {"T711"}


@pytest.mark.parametrize(
    ("dtype", "grad", "param"), [("bfloat16", 4, 2), ("float16", 2, 2), ("float32", 4, 4)]
)
@pytest.mark.parametrize("zero", [0, 1])
def test_data_parallel_bytes_per_iteration_are_megatrons(
    dtype: str, grad: int, param: int, zero: int, tmp_path: Path
) -> None:
    """Per iteration and data-parallel rank, Megatron-LM reduces every gradient once: all-reduce
    (DDP) or, with the distributed optimizer, reduce-scatter of the gradients and all-gather of
    the parameters (param_and_grad_buffer.py, start_grad_sync / start_param_sync), gradients in
    fp32 for bf16 (arguments.py), in their own dtype for fp16 and fp32; the distributed optimizer's
    bucket padded to a multiple of lcm(D, 128) elements (param_layout.py, pad_bucket_end)."""
    config = {**TOY, "torch_dtype": dtype}
    plan = _plan(tmp_path, Layout(npus=2, dp=2, zero=zero, global_batch=4 * MICRO), config)
    sent = Counter[CommType]()
    for c in _collectives(plan):
        sent[c.comm] += c.bytes
    if zero == 0:
        assert sent == {CommType.ALLREDUCE: TOY_ELEMENTS * grad}
    else:
        padded = -(-TOY_ELEMENTS // 128) * 128
        assert sent == {CommType.REDUCESCATTER: padded * grad, CommType.ALLGATHER: padded * param}


def test_the_distributed_optimizer_aligns_each_parameter_to_64_elements(tmp_path: Path) -> None:
    """Megatron-Core lays the distributed optimizer's buffer out in backward order (the parameters
    reversed, a module's bias before its weight), each parameter starting on a multiple of 64
    elements and the bucket ending on a multiple of lcm(D, 128) (param_layout.py, pad_param_start
    and pad_bucket_end). Qwen2's key and value biases have 32 elements (2 key/value heads of 16),
    so each leaves a gap of 32 before its weight; the query bias (64) leaves none."""
    config = {**TOY, "model_type": "qwen2", "torch_dtype": "float32"}
    plan = _plan(tmp_path, Layout(npus=4, dp=4, zero=1, global_batch=4 * MICRO), config)
    block = [  # one block's parameters, backward order
        64 * 128,
        64 * 128,
        64 * 128,
        64,  # down, up, gate; the post-attention norm
        64 * 64,
        32,
        64 * 32,
        32,
        64 * 32,
        64,
        64 * 64,
        64,  # o; v bias, weight; k; q; the input norm
    ]
    order = [64, 96 * 64, *block, *block, 96 * 64]  # final norm, head, blocks 1 and 0, embedding
    filled = 0
    for n in order:
        filled = -(-filled // 64) * 64 + n
    end = -(-filled // 128) * 128  # lcm(4, 128)
    assert filled == TOY_ELEMENTS + 2 * (64 + 32 + 32) + 2 * (32 + 32)  # biases, and two gaps a block
    scatter = [c.bytes for c in _collectives(plan) if c.comm is CommType.REDUCESCATTER]
    assert scatter == [end * 4]


def test_overlap_grad_reduce_buckets_of_40_million_parameters_on_the_first_stage(tmp_path: Path) -> None:
    """--overlap-grad-reduce: buckets of at least max(40,000,000, 1,000,000 x D) parameters, filled
    in backward order, each all-reduced after the weight gradient that fills it; the rest of the
    buffer once after the backward; only pipeline rank 0 buckets (distributed_data_parallel.py:
    bucket_size default, "if disable_bucketing or pp_rank > 0: self.bucket_size = None")."""
    config = {**TOY, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 4}
    config |= {"num_attention_heads": 16, "num_key_value_heads": 8, "torch_dtype": "float32"}
    h, f, kv = 2048, 8192, 8 * 128
    layout = Layout(npus=4, pp=2, dp=2, overlap_grad_reduce=True, global_batch=2 * MICRO)
    plan = _plan(tmp_path, layout, config)

    def block(i: int) -> list[tuple[str, int]]:  # backward order
        p = f"model.layers.{i}"
        mlp = [(f"{p}.mlp.{x}_proj", h * f) for x in ("down", "up", "gate")]
        attention = [(f"{p}.self_attn.{x}_proj", n) for x, n in (("o", h * h), ("v", h * kv), ("k", h * kv))]
        norms = [(f"{p}.post_attention_layernorm", h), (f"{p}.input_layernorm", h)]
        return [*mlp, norms[0], *attention, (f"{p}.self_attn.q_proj", h * h), norms[1]]

    expected, filled = [], 0
    for name, n in [*block(1), *block(0), ("model.embed_tokens", 96 * h)]:  # stage 0: blocks 0, 1
        filled += n
        if filled >= 40_000_000 or name == "model.embed_tokens":
            expected.append((name, filled * 4))
            filled = 0
    names = [info.name for info in plan.layers]

    def reduces(program: tuple[Any, ...]) -> list[tuple[str, int]]:
        ops = [c for c in program if isinstance(c, Collective) and Purpose.DATA in c.over]
        return sorted((names[c.layer], c.bytes) for c in ops)

    assert reduces(plan.programs[0]) == sorted(expected)
    assert len(expected) > 2
    stage = 2 * sum(n for _, n in block(3)) + h + 96 * h  # blocks 2, 3, the final norm, the head
    assert reduces(plan.programs[1]) == [("model.layers.2.input_layernorm", stage * 4)]


@pytest.mark.parametrize(
    ("tp", "divisor", "framework", "rows"),
    [
        (1, 128, Framework.MEGATRON, 128),  # 96 padded to 128 (Megatron's default 128 x T)
        (2, 128, Framework.MEGATRON, 256),  # 128 x 2
        (2, 3, Framework.MEGATRON, 96),  # --make-vocab-size-divisible-by 3: 96 is a multiple of 6
        (2, 128, Framework.DEEPSPEED, 96),  # DeepSpeed trains the vocabulary as configured
    ],
)
def test_megatron_pads_the_vocabulary_to_a_multiple_of_128_times_t(
    tp: int, divisor: int, framework: Framework, rows: int, tmp_path: Path
) -> None:
    """megatron/core/tokenizers/utils/build_tokenizer.py, vocab_size_with_padding: the vocabulary
    rounded up to a multiple of --make-vocab-size-divisible-by (default 128, arguments.py) x T;
    the embedding and the output layer get the padded rows. GPT-2's 50,257 becomes the familiar
    50,304 at T = 1. Measured here on the toy's 96: the data-parallel all-reduce of a rank's
    gradients and the output layer's forward FLOPs (2 x tokens x hidden x rows / T)."""
    layout = Layout(
        npus=2 * tp, tp=tp, dp=2, global_batch=2 * MICRO, framework=framework, vocab_divisor=divisor
    )
    plan = _plan(tmp_path, dataclasses.replace(layout, micro_batch=MICRO), padded=True)
    names = [info.name for info in plan.layers]
    head = next(
        op
        for op in plan.program(0)
        if isinstance(op, Compute) and names[op.layer] == "lm_head" and op.step is Step.FWD
    )
    assert head.flops == 2 * MICRO * SEQ * HIDDEN * rows // tp
    if tp == 1:
        reduced = sum(c.bytes for c in _collectives(plan) if Purpose.DATA in c.over)
        assert reduced == (TOY_ELEMENTS + 2 * (rows - 96) * HIDDEN) * 4


RULES = {
    # rule: the words its refusal names
    "sp needs tp": "--sp shards the sequence",
    "heads": "attention heads must divide",
    "key/value heads": "key/value heads must divide by it",
    "blocks": "pipeline chunks",
    "ep divides dp": "must divide --dp",
    "ep needs experts": "no mixture of experts",
    "ep divides experts": "must divide the 4 experts",
    "moe needs sp": "needs --sp",
    "interleaved": "--schedule interleaved needs",
    "vpp needs interleaved": "needs --schedule interleaved",
}


def _broken(
    tp: int, pp: int, dp: int, ep: int, sp: bool, vpp: int, ga: int, moe: bool, interleaved: bool
) -> set[str]:
    """The Megatron-LM rules a layout of the 4-block toy (4 heads, 2 key/value heads; the MoE
    toy's 4 experts) breaks (arguments.py validate_args, transformer_config.py, moe_layer.py)."""
    broken = set()
    broken |= {"sp needs tp"} if sp and tp == 1 else set()
    broken |= {"heads"} if 4 % tp else set()
    broken |= {"key/value heads"} if 2 % tp else set()
    broken |= {"blocks"} if 4 % (pp * vpp) else set()
    broken |= {"ep divides dp"} if dp % ep else set()
    broken |= {"ep needs experts"} if ep > 1 and not moe else set()
    broken |= {"ep divides experts"} if moe and 4 % ep else set()
    broken |= {"moe needs sp"} if moe and tp > 1 and not sp else set()
    broken |= {"interleaved"} if interleaved and (vpp < 2 or pp < 2 or ga % pp) else set()
    broken |= {"vpp needs interleaved"} if vpp > 1 and not interleaved else set()
    return broken


@settings(max_examples=150, deadline=None)
@given(  # weighted towards layouts that keep the rules, so that both outcomes are drawn often
    tp=st.sampled_from([1, 1, 2, 2, 4, 3, 8]),
    pp=st.sampled_from([1, 1, 2, 2, 4, 3]),
    dp=st.sampled_from([1, 2, 4]),
    ep=st.sampled_from([1, 1, 1, 2, 4, 3]),
    sp=st.booleans(),
    vpp=st.sampled_from([1, 1, 1, 2]),
    ga=st.sampled_from([1, 2, 4, 3]),
    moe=st.booleans(),
    interleaved=st.sampled_from([False, False, False, True]),
)
def test_every_accepted_layout_keeps_megatrons_rules_and_every_refusal_names_one(
    tp: int, pp: int, dp: int, ep: int, sp: bool, vpp: int, ga: int, moe: bool, interleaved: bool
) -> None:
    import tempfile

    schedule = Schedule.INTERLEAVED if interleaved else Schedule.ONE_F_ONE_B
    broken = _broken(tp, pp, dp, ep, sp, vpp, ga, moe, interleaved)
    try:  # the layout's own rules refuse it as it is made; the model's (heads, experts) in translation
        layout = Layout(
            npus=tp * pp * dp,
            tp=tp,
            pp=pp,
            dp=dp,
            ep=ep,
            sp=sp,
            vpp=vpp,
            schedule=schedule,
            global_batch=MICRO * dp * ga,
            micro_batch=MICRO,
        )
    except LayoutError as error:
        refused = str(error)
        assert broken, refused
        assert any(RULES[rule] in refused for rule in broken), (broken, refused)
        return
    config = {**(MOE if moe else TOY), "num_hidden_layers": 4}
    with tempfile.TemporaryDirectory() as folder:
        result = plans.translated(plans.config(Path(folder), config), layout, (MICRO, SEQ))
    messages = " ".join(d.message for d in result.diagnostics)
    assert (result.plan is None) == bool(broken), (broken, messages)
    if broken:
        assert any(RULES[rule] in messages for rule in broken), (broken, messages)


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_deepspeeds_data_parallelism_per_iteration(zero: int, tmp_path: Path) -> None:
    """DeepSpeed (38327e0) sends gradients in the model's dtype (bf16: 2 bytes) and ZeRO 1 and 2
    all-reduce whole buckets (stage_1_and_2.py average_tensor, use_multi_rank_bucket_allreduce),
    ZeRO 2 in every micro-batch, ZeRO 1 (and bf16's BF16_Optimizer without ZeRO) at the boundary,
    then one all-gather of the updated parameters. BF16_Optimizer (ZeRO 0 in bf16) all-reduces its
    fp32 gradient buffer: bf16_optimizer.py, get_grads_for_reduction `return
    self.fp32_groups_gradients_flat`, 4 bytes an element. The toy's elements as counted above."""
    block = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 2 * 64
    elements = 2 * 96 * 64 + 2 * block + 64
    ga = 4
    layout = Layout(npus=2, dp=2, zero=zero, framework=Framework.DEEPSPEED, global_batch=2 * ga * MICRO)
    plan = _plan(tmp_path, layout)
    sent = Counter[CommType]()
    for c in _collectives(plan):
        sent[c.comm] += c.bytes
    reduces = ga if zero == 2 else 1
    width = 4 if zero == 0 else BYTES  # BF16_Optimizer's fp32 gradients
    assert sent == {CommType.ALLREDUCE: reduces * elements * width, CommType.ALLGATHER: elements * BYTES}


def test_deepspeed_zero3_gathers_what_it_released(tmp_path: Path) -> None:
    """ZeRO 3 (stage3.py, partitioned_param_coordinator.py): a parameter of at most 1e5 elements
    persists (gathered once, after the step); a larger one is gathered before each micro-batch's
    forward, and again before its backward only if more than 1e9 elements are fetched in between
    (the reuse distance). With a vocabulary of 10 million, the head (640 million elements) lies
    between the embedding's forward and backward twice: the embedding is gathered again, the head
    (nothing after it) is not; the 8,192-element projections persist."""
    config = {**TOY, "vocab_size": 10_000_000}
    ga = 2
    layout = Layout(npus=2, dp=2, zero=3, framework=Framework.DEEPSPEED, global_batch=2 * ga * MICRO)
    plan = _plan(tmp_path, layout, config)
    names = [info.name for info in plan.layers]
    places: dict[str, Counter[tuple[Place | None, CommType]]] = {}
    for c in _collectives(plan):
        places.setdefault(names[c.layer], Counter())[(c.place, c.comm)] += 1
    table = 10_000_000 * HIDDEN * BYTES
    assert places["model.embed_tokens"] == {
        (Place.BEFORE_FWD, CommType.ALLGATHER): ga,
        (Place.BEFORE_BWD, CommType.ALLGATHER): ga,
        (Place.AFTER_WG, CommType.REDUCESCATTER): ga,
    }
    assert places["lm_head"] == {
        (Place.BEFORE_FWD, CommType.ALLGATHER): ga,
        (Place.AFTER_WG, CommType.REDUCESCATTER): ga,
    }
    assert places["model.layers.0.self_attn.q_proj"] == {
        (Place.AFTER_WG, CommType.REDUCESCATTER): ga,
        (Place.TAIL, CommType.ALLGATHER): 1,
    }
    gathered = {
        c.bytes for c in _collectives(plan) if names[c.layer] == "lm_head" and c.comm is CommType.ALLGATHER
    }
    assert gathered == {table}


@pytest.mark.parametrize(
    ("zero", "expected"),
    [
        (0, {(Place.AFTER_WG, CommType.ALLREDUCE): 1}),
        (2, {(Place.BEFORE_FWD, CommType.ALLGATHER): 1, (Place.AFTER_WG, CommType.REDUCESCATTER): 1}),
        (
            3,
            {
                (Place.BEFORE_FWD, CommType.ALLGATHER): 1,
                (Place.BEFORE_BWD, CommType.ALLGATHER): 1,
                (Place.AFTER_WG, CommType.REDUCESCATTER): 1,
            },
        ),
    ],
)
def test_fsdp_reduces_every_micro_batch(
    zero: int, expected: dict[tuple[Place, CommType], int], tmp_path: Path
) -> None:
    """PyTorch FSDP (_runtime_utils.py; FSDP2 foreach_reduce): NO_SHARD all-reduces, SHARD_GRAD_OP
    gathers before the forward and keeps the parameters, FULL_SHARD gathers again before the
    backward; all reduce the gradients in every micro-batch (outside no_sync), in the parameters'
    dtype (reduce_dtype defaults to param_dtype): the toy's q_proj, 64 x 64 x 2 bytes, GA times."""
    ga = 3
    layout = Layout(npus=2, dp=2, zero=zero, framework=Framework.FSDP, global_batch=2 * ga * MICRO)
    plan = _plan(tmp_path, layout)
    q = [info.name for info in plan.layers].index("model.layers.0.self_attn.q_proj")
    ops = [c for c in _collectives(plan) if c.layer == q]
    assert Counter((c.place, c.comm) for c in ops) == {key: n * ga for key, n in expected.items()}
    assert {c.bytes for c in ops} == {HIDDEN * HIDDEN * BYTES}


@pytest.mark.parametrize("framework", [Framework.FSDP, Framework.DEEPSPEED])
def test_the_optimizer_step_waits_for_every_gradient_reduction(framework: Framework, tmp_path: Path) -> None:
    """The step reads reduced gradients, so it follows every reduce-scatter of the last backward
    (the embedding's comes last): FSDP's post-backward final callback waits on the reduce-scatter
    stream (torch/distributed/fsdp/_runtime_utils.py, _post_backward_final_callback); DeepSpeed's
    ZeRO-3 synchronizes its reduce-and-partition stream in independent_gradient_partition_epilogue
    (runtime/zero/stage3.py). Each reduce-scatter of the last micro-batch is an ancestor."""
    layout = Layout(npus=2, dp=2, zero=3, framework=framework, global_batch=2 * 2 * MICRO)
    program = _plan(tmp_path, layout).program(0)
    (update,) = [i for i, op in enumerate(program) if isinstance(op, Compute) and op.step is Step.UPDATE]
    ancestors, todo = set(), [update]
    while todo:
        for dep in program[todo.pop()].deps:
            if dep not in ancestors:
                ancestors.add(dep)
                todo.append(dep)
    reductions = {
        i for i, op in enumerate(program) if isinstance(op, Collective) and op.comm is CommType.REDUCESCATTER
    }
    # two micro-batches reduce alike; the earlier ones precede on the rank's one lane (estimate/chains.py)
    last = sorted(reductions)[len(reductions) // 2 :]
    assert len(last) >= 2
    assert set(last) <= ancestors


def test_an_ep_rank_runs_its_experts_as_one_grouped_gemm_or_one_node_each(
    run_cli: Run, tmp_path: Path
) -> None:
    """Mixtral-8x7B at EP 2: a rank holds 4 of the 8 experts. Grouped (the default), a block's w1
    is one node, a GEMM of 4 groups of 2 x 64 tokens (256 tokens x top-2 / 8 experts = 64 from
    each expert rank); --per-expert, 4 nodes. Either way the rank computes the same FLOPs and
    reduces the same gradient bytes."""
    from modtrans.strategy.share import regroup

    totals = {}
    for label, extra in (("grouped", ()), ("each", ("--per-expert",))):
        prefix = tmp_path / label
        args = (
            "translate",
            "mixtral-8x7b",
            "--ep",
            "2",
            "--dp",
            "2",
            "--seq-len",
            "256",
            "--format",
            "chakra-et",
        )
        assert run_cli(*args, *extra, "-o", prefix).exit_code == 0
        path = tmp_path / f"{label}.0.et"
        (totals[label],) = summarize([read(path.read_bytes(), str(path))])
    assert totals["grouped"].flops == totals["each"].flops
    assert totals["grouped"].collectives == totals["each"].collectives
    assert totals["grouped"].nodes < totals["each"].nodes
    ir, _ = pipeline.extract_checked("mixtral-8x7b", input_shapes={"input_ids": (1, 256)})
    assert ir is not None
    w1 = regroup(ir.layer("model.layers.0.block_sparse_moe.experts.w1"), 2)
    assert w1.gemm is not None
    assert (w1.gemm.groups, w1.gemm.m) == (4, 2 * 64)
    assert w1.params[0].elements == 4 * 14336 * 4096  # its 4 experts' weights


def test_overlap_param_gather_gathers_each_bucket_before_its_first_forward(tmp_path: Path) -> None:
    """--overlap-param-gather (megatron/core/optimizer/distrib_optimizer.py at core_r0.8.0):
    zero_grad dispatches the first bucket's all-gather before the forward; the forward pre-hook of
    the first module holding a bucket's parameters waits for it and dispatches the next bucket's
    (_finish_param_sync_helper), buckets in forward order (_get_model_param_buffer_dp_views). So:
    one gather per bucket and iteration, the first with nothing before it, each next one after the
    one before it, each waited for by its bucket's first forward of micro-batch 0, none by the
    optimizer step; the buckets and their bytes those of the default, which gathers after them."""
    config = {**TOY, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 4}
    config |= {"num_attention_heads": 16, "num_key_value_heads": 8, "torch_dtype": "float32"}
    base = Layout(npus=2, dp=2, zero=1, overlap_grad_reduce=True, global_batch=4 * MICRO)
    plan = _plan(tmp_path, dataclasses.replace(base, overlap_param_gather=True), config)
    default = _plan(tmp_path, base, config)
    names = [info.name for info in plan.layers]
    ops = plan.programs[0]
    gathered = [
        (i, op) for i, op in enumerate(ops) if isinstance(op, Collective) and op.comm is CommType.ALLGATHER
    ]
    gathers = [i for i, _ in gathered]
    assert all(op.place is Place.NEXT_FWD for _, op in gathered)
    before = [c for c in _collectives(default) if c.comm is CommType.ALLGATHER]
    assert [c.place for c in before] == [Place.AFTER_STEP] * len(before)
    assert sorted(op.bytes for _, op in gathered) == sorted(c.bytes for c in before)
    scatters = [c.bytes for c in _collectives(plan) if c.comm is CommType.REDUCESCATTER]
    assert len(gathers) == len(scatters) > 2  # one per bucket, once per iteration
    assert gathers[0] == 0  # the first: issued before the first forward, waiting for nothing
    assert ops[0].deps == ()
    assert [ops[i].deps for i in gathers[1:]] == [(i,) for i in gathers[:-1]]  # one after another
    # the first bucket (forward order) holds the embedding: the backward's last, the buffer's end
    assert names[ops[gathers[0]].layer] == "model.embed_tokens"
    first_forward: dict[int, int] = {}
    for i, op in enumerate(ops):
        if isinstance(op, Compute) and op.step is Step.FWD:
            first_forward.setdefault(op.layer, i)
    for k, g in enumerate(gathers):
        waiter = first_forward[ops[g].layer]
        assert g in ops[waiter].deps  # the bucket's first forward waits for its gather
        if k + 1 < len(gathers):  # and the next gather is issued then, to run beside that forward
            assert waiter - 1 == gathers[k + 1] or ops[gathers[k + 1]].layer == ops[g].layer
    # the buckets in forward order: each gather's unit later in the model than the one before
    assert [ops[g].layer for g in gathers] == sorted(ops[g].layer for g in gathers)
    step = next(op for op in ops if isinstance(op, Compute) and op.step is Step.UPDATE)
    assert not set(step.deps) & set(gathers)


@pytest.mark.parametrize("layout", [{"zero": 0, "overlap_grad_reduce": True}, {"zero": 1}])
def test_overlap_param_gather_needs_the_distributed_optimizer_and_buckets(layout: dict[str, Any]) -> None:
    """megatron/training/arguments.py at core_r0.8.0, validate_args: "--overlap-param-gather only
    supported with distributed optimizer", "--overlap-grad-reduce should be turned on when using
    --overlap-param-gather"."""
    with pytest.raises(LayoutError, match="--overlap-param-gather"):
        Layout(npus=2, dp=2, overlap_param_gather=True, **layout)


def test_the_distributed_optimizer_gathers_the_parameters_after_its_step(tmp_path: Path) -> None:
    """Without --overlap-param-gather the updated parameters are all-gathered synchronously after
    the optimizer step, bucket after bucket in forward order (megatron/core/optimizer/
    distrib_optimizer.py at core_r0.8.0, step_with_ready_grads ->
    _reset_metadata_and_sync_gather_all_model_params): the step (its gradient norm first:
    strategy/llm/clipping.py) waits for every reduce-scatter and for no gather; the first gather
    waits for the step, each next one for the one before it."""
    config = {**TOY, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 4}
    config |= {"num_attention_heads": 16, "num_key_value_heads": 8, "torch_dtype": "float32"}
    layout = Layout(npus=2, dp=2, zero=1, overlap_grad_reduce=True, global_batch=4 * MICRO)
    ops = _plan(tmp_path, layout, config).programs[0]
    updates = [i for i, op in enumerate(ops) if isinstance(op, Compute) and op.step is Step.UPDATE]
    norm, step = updates[0], updates[-1]  # the gradient norm's kernel, Adam
    scatters = [
        i for i, op in enumerate(ops) if isinstance(op, Collective) and op.comm is CommType.REDUCESCATTER
    ]
    gathers = [i for i, op in enumerate(ops) if isinstance(op, Collective) and op.comm is CommType.ALLGATHER]
    assert len(gathers) == len(scatters) > 2
    assert set(scatters) <= set(ops[norm].deps)
    assert gathers[0] > step
    assert [ops[i].deps for i in gathers] == [(step,), *[(i,) for i in gathers[:-1]]]
    assert [ops[i].layer for i in gathers] == [ops[gathers[0]].layer] * len(gathers)  # the buffer's end
    # forward order: the bucket filled last (reduced after the model's first unit) first; fp32
    # parameters and gradients, so each gather moves its bucket's reduce-scatter's bytes
    by_unit = sorted((ops[i].layer, ops[i].bytes) for i in scatters)
    assert [ops[i].bytes for i in gathers] == [b for _, b in by_unit]
