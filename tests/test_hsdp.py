"""HSDP (--dp-replicate R, strategy/llm/hsdp.py and fsdp.py) held to PyTorch's own code: the
groups FSDP1 makes for HYBRID_SHARD (transcribed below), the sizes its _reduce_grad moves, FSDP2
run for real on four CPU ranks (tests/hsdp_collectives.py, marker hf), and the refusals."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans.api import run
from modtrans.comm import CommType
from modtrans.plan.model import Collective, Compute, Plan, Step
from modtrans.request import Request, prepare
from tests.refusals import refused_in_one_line
from tests.torchrun import LLAMA, run_script

NPUS, PER_NODE = 16, 8


def _plan(**options: Any) -> Plan:
    request = Request(**{"model": "llama-3-8b", "seq_len": 256, "framework": "fsdp", "zero": 3, **options})
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result.plan


def _init_intra_and_inter_node_groups(world: int, per_node: int) -> tuple[set[tuple[int, ...]], ...]:
    """FSDP1's default HYBRID_SHARD groups, transcribed from torch/distributed/fsdp/_init_utils.py,
    _init_intra_and_inter_node_groups: `for i in range(num_nodes): local_group_ranks = [j + i *
    num_devices_per_node for j in range(num_devices_per_node)]` (the shard groups) and `for i in
    range(num_devices_per_node): cross_group_ranks = [j * num_devices_per_node + i for j in
    range(num_nodes)]` (the replicate groups)."""
    nodes = world // per_node
    intra = {tuple(j + i * per_node for j in range(per_node)) for i in range(nodes)}
    inter = {tuple(j * per_node + i for j in range(nodes)) for i in range(per_node)}
    return intra, inter


def test_the_groups_are_fsdp1s_intra_and_inter_node_groups() -> None:
    """On 16 ranks, R = 2: every gather and reduce-scatter runs in a node's 8 ranks, every
    all-reduce across the two nodes' ranks of one local rank, as HYBRID_SHARD's default groups."""
    plan = _plan(npus=NPUS, dp_replicate=NPUS // PER_NODE)
    intra, inter = _init_intra_and_inter_node_groups(NPUS, PER_NODE)
    groups: dict[CommType, set[tuple[int, ...]]] = {}
    for op in plan.programs[0]:
        if isinstance(op, Collective):
            members = {plan.mesh.members(r, op.over) for r in range(NPUS)}
            groups.setdefault(op.comm, set()).update(members)
    assert groups == {CommType.ALLGATHER: intra, CommType.REDUCESCATTER: intra, CommType.ALLREDUCE: inter}


def test_each_reduce_scatter_is_followed_by_the_all_reduce_of_its_shard() -> None:
    """_reduce_grad: the reduce-scatter's output is one of world_size chunks of the padded gradient
    (_get_reduce_scatter_tensors: `chunks = padded_unsharded_grad.chunk(world_size)`, world_size the
    shard group's), which `dist.all_reduce(new_sharded_grad, group=state._inter_node_pg)` reduces
    next: an all-reduce of 1 / (D / R) of each reduce-scatter's bytes, right after it."""
    plan = _plan(npus=NPUS, dp_replicate=2)
    ops = [op for op in plan.programs[0] if isinstance(op, Collective) and op.step is Step.WEIGHT_GRAD]
    pairs = [(a, b) for a, b in itertools.pairwise(ops) if a.comm is CommType.REDUCESCATTER]
    assert pairs
    assert len(pairs) == sum(op.comm is CommType.ALLREDUCE for op in ops)
    for scatter, reduce in pairs:
        assert (reduce.comm, reduce.layer) == (CommType.ALLREDUCE, scatter.layer)
        assert reduce.bytes * (NPUS // 2) == scatter.bytes  # Llama 3 8B's tensors split evenly by 8


def test_the_state_is_sharded_over_the_shard_group() -> None:
    """FSDP shards each flat parameter over its process group, the shard group under HSDP (D / R =
    8 here): the fp32 parameter, its fp32 gradient (_cast_grad_to_param_dtype) and Adam's two fp32
    moments, 4 + 4 + 8 bytes a parameter / 8."""
    memory = _plan(npus=NPUS, dp_replicate=2).memory[0]
    assert memory.gradients == memory.parameters * 4 // 8
    assert memory.optimizer == memory.parameters * 8 // 8


def test_a_trace_set_of_hsdp_validates(run_cli: Any, tmp_path: Path) -> None:
    prefix = tmp_path / "hsdp"
    made: Result = run_cli(
        "translate", "llama-3-8b", "--npus", "16", "--dp-replicate", "2", "--zero", "3",
        "--framework", "fsdp",
        "--seq-len", "128", "--format", "chakra-et", "-o", prefix,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    checked: Result = run_cli("validate", prefix)
    assert checked.exit_code == 0, checked.output
    groups = json.loads(prefix.with_name("hsdp.comm_groups.json").read_text(encoding="utf-8"))
    intra, inter = _init_intra_and_inter_node_groups(NPUS, PER_NODE)
    assert {tuple(g) for g in groups.values()} == intra | inter


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        (["--dp-replicate", "2", "--zero", "3"], "hybrid sharding is PyTorch FSDP's"),
        (["--dp-replicate", "3", "--zero", "3", "--framework", "fsdp"], "must divide --dp 16"),
        (["--dp-replicate", "2", "--zero", "0", "--framework", "torchtitan"], "it needs --zero 3"),
        (["--dp-replicate", "16", "--zero", "3", "--framework", "fsdp"], "that is DDP"),
    ],
)
def test_the_command_line_refuses_it_where_it_means_nothing(
    run_cli: Any, tmp_path: Path, options: list[str], rule: str
) -> None:
    result: Result = run_cli("translate", "llama-3-8b", "--npus", "16", *options, "-o", tmp_path / "x")
    refused_in_one_line(result, rule)


@pytest.mark.hf
def test_the_collectives_and_state_are_what_fsdp2_runs(tmp_path: Path) -> None:
    """FSDP2 on a 2 x 2 mesh (R = 2 replicas of 2 shard ranks), as torchtitan shards: rank 0's
    all-gathers and reduce-scatters over {0, 1}, its all-reduces over {0, 2}, their bytes, and its
    gradient and optimizer shards, against the plan of the same configuration. Neither the root's
    parameters nor the last block's are gathered again for the backward (fsdp.unresharded), and
    the root's group is one all-gather, the forward's first, and one reduce-scatter then
    all-reduce, the backward's last (fsdp.rooted), as FSDP2 issues them."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path / "calls.json"
    measured = run_script("hsdp_collectives.py", out)
    torch: Counter[tuple[str, str, tuple[int, ...]]] = Counter()
    for call in measured["calls"]:
        torch[call["op"], call["phase"], tuple(call["ranks"])] += call["bytes"]

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16", **LLAMA}))
    plan = _plan(
        model=str(config), npus=4, dp_replicate=2, micro_batch=2, global_batch=8, seq_len=16,
        framework="torchtitan",
    )  # fmt: skip
    ours: Counter[tuple[str, str, tuple[int, ...]]] = Counter()
    for op in plan.programs[0]:
        if isinstance(op, Collective):
            phase = "forward" if op.step is Step.FWD else "backward"
            ours[op.comm.value.lower(), phase, plan.mesh.members(0, op.over)] += op.bytes
    held = measured["held"]
    assert ours == torch
    calls = measured["calls"]
    assert (calls[0]["op"], calls[0]["phase"], calls[0]["bytes"]) == ("allgather", "forward", held["root"])
    root_grads = held["root"] * 2  # bf16 gathered, reduce-scattered in fp32
    last = [(c["op"], c["bytes"]) for c in calls[-2:]]
    assert last == [("reducescatter", root_grads), ("allreduce", root_grads // 2)]
    planned = [op for op in plan.programs[0] if isinstance(op, Collective)]
    assert (planned[0].comm, planned[0].bytes) == (CommType.ALLGATHER, held["root"])
    assert [(op.comm, op.bytes) for op in planned[-2:]] == [
        (CommType.REDUCESCATTER, root_grads),
        (CommType.ALLREDUCE, root_grads // 2),
    ]
    memory = plan.memory[0]
    assert (memory.gradients, memory.optimizer) == (held["gradients"], held["optimizer"])
    assert memory.weights == held["weights"] + held["root"] + held["block"]


def test_fms_fsdp_reduces_in_bf16_over_sdpa_flash() -> None:
    """fms-fsdp's bfSixteen policy (fms_fsdp/policies/mixed_precision.py: param_dtype, reduce_dtype
    bfloat16) gathers and reduce-scatters 2 bytes a parameter, where torchtitan's fp32 reduce_dtype
    sends 4; its attention is F.scaled_dot_product_attention (FlashAttention-2), and its compile
    is allowed."""
    fms = _plan(npus=8, framework="fms-fsdp", compile=True, device="h100")
    titan = _plan(npus=8, framework="torchtitan")

    def sent(plan: Plan, comm: CommType) -> int:
        return sum(op.bytes for op in plan.programs[0] if isinstance(op, Collective) and op.comm is comm)

    def computed(plan: Plan) -> int:
        return sum(op.time for op in plan.programs[0] if isinstance(op, Compute))

    flash2 = _plan(npus=8, framework="fms-fsdp", compile=True, attention="flash2", device="h100")
    newest = _plan(npus=8, framework="fms-fsdp", compile=True, attention="flash", device="h100")
    assert computed(fms) == computed(flash2) != computed(newest)

    params = fms.memory[0].parameters
    assert sent(fms, CommType.REDUCESCATTER) == 2 * params
    assert sent(titan, CommType.REDUCESCATTER) == 4 * params
