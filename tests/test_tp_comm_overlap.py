"""Megatron-Core's --tp-comm-overlap (strategy/llm/userbuffers.py): Transformer Engine's userbuffers
run a block's sequence-parallel collectives inside the GEMMs, so they leave the NCCL collectives
and become the GEMMs' time."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans import cost, pipeline
from modtrans.comm import CommType, Policy
from modtrans.cost.gemm import Shape
from modtrans.plan import Collective, Compute, Place, Plan, Purpose, Step
from modtrans.simulate.network import network
from modtrans.strategy import Parallelism
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm import Layout
from modtrans.strategy.llm import userbuffers as ub
from modtrans.strategy.llm.options import LayoutError
from modtrans.strategy.roles import Split
from modtrans.strategy.share import shard
from tests import plans

TENSOR = frozenset({Purpose.TENSOR})
TOY = plans.TOY  # two Llama blocks: Q, K, V and gate, up each separate projections of one input
MICRO, SEQ = 2, 16

# Transformer Engine v1.9 (e79d915), transformer_engine/pytorch/module/base.py, initialize_ub:
# the GEMMs of a block whose communication userbuffers overlap, by method, and whether each moves
# an all-gather (layers_all_gather_overlap's names, but qkv_wgrad and fc1_wgrad: the reduce-
# scatters, layers_reduce_scatter_overlap, with proj_fprop and fc2_fprop)
TE_METHODS = {
    "ring_exchange": ["qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"],
    "pipeline": ["proj_fprop", "fc2_fprop"],
    "bulk": ["qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"],
}
TE_REDUCE_SCATTER = {"proj_fprop", "fc2_fprop", "qkv_wgrad", "fc1_wgrad"}
# where Megatron-LM issues each as an NCCL collective without the flag (megatron/core/
# tensor_parallel/layers.py: the column-parallel input all-gathered before the forward and again
# for the weight gradient, its gradient reduce-scattered; the row-parallel output reduce-scattered,
# its gradient all-gathered): (the GEMM's input side, its pass) -> the place ModTrans gives it
PLACE = {"fprop": {"column": Place.BEFORE_FWD, "row": Place.AFTER_FWD}}
PLACE |= {"dgrad": {"column": Place.BEFORE_BWD, "row": Place.BEFORE_BWD}, "wgrad": {"column": Place.AFTER_IG}}


def _expected_per_block() -> Counter[tuple[CommType, Place]]:
    """What TE's list removes from each block: qkv and fc1 column-parallel, proj and fc2 row."""
    out: Counter[tuple[CommType, Place]] = Counter()
    for names in TE_METHODS.values():
        for name in names:
            gemm, phase = name.split("_")
            side = "column" if gemm in ("qkv", "fc1") else "row"
            comm = CommType.REDUCESCATTER if name in TE_REDUCE_SCATTER else CommType.ALLGATHER
            out[(comm, PLACE[phase][side])] += 1
    return out


def _plan(tmp_path: Path, config: dict[str, Any], layout: Layout, tokens: tuple[int, int]) -> Plan:
    return plans.plan(plans.config(tmp_path, config), dataclasses.replace(layout, vocab_divisor=1), tokens)


def _tensor(plan: Plan) -> Counter[tuple[str, CommType, Place | None]]:
    return Counter(
        (plan.layers[op.layer].name, op.comm, op.place)
        for op in plan.program(0)
        if isinstance(op, Collective) and op.over == TENSOR
    )


def test_the_flag_removes_exactly_the_collectives_transformer_engine_overlaps(tmp_path: Path) -> None:
    layout = Layout(npus=2, tp=2, sp=True, micro_batch=MICRO, global_batch=2 * MICRO)
    off = _tensor(_plan(tmp_path, TOY, layout, (MICRO, SEQ)))
    on = _tensor(_plan(tmp_path, TOY, dataclasses.replace(layout, tp_comm_overlap=True), (MICRO, SEQ)))
    assert on <= off
    removed = off - on
    blocks, micro_batches = TOY["num_hidden_layers"], 2
    by_kind: Counter[tuple[CommType, Place | None]] = Counter()
    for (_, comm, place), n in removed.items():
        by_kind[(comm, place)] += n
    expected = Counter({k: v * blocks * micro_batches for k, v in _expected_per_block().items()})
    assert by_kind == expected  # 10 per block and micro-batch
    assert all(".layers." in name for name, _, _ in removed)
    # what stays NCCL's: outside the blocks (embedding, the output layer, the loss) and the norms'
    # gradient all-reduces
    kept = {name for name, _, place in on if place is not Place.TAIL}
    assert kept
    assert not any(".layers." in name for name in kept)


def _llama(layers: int = 1) -> dict[str, Any]:
    """A Llama 3 8B block's shapes (hidden 4096, 32 heads in 8 groups, MLP 14336)."""
    return {
        **TOY,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": layers,
        "vocab_size": 1024,
    }


def _gpu(device: str) -> Any:
    return cost.get("gpu", cost.Settings(device=device))


def _send_ns(tp: int, size: float, preset: str = "dgx-a100") -> float:
    """One send inside the node at the preset's rate: ASTRA-sim's switch, two hops (astra-sim
    518bd51 Switch::compute_hops_count) of the latency, the bytes at GB/s read as 2^30 B per 10^9 ns
    (NetworkFunction.cpp bw_GBps_to_Bpns)."""
    net = network(preset, tp)
    return 2 * net.latency[0] + size / (net.bandwidth[0] * 2**30 / 1e9)


@pytest.mark.parametrize(
    ("method", "step", "comm", "layer"),
    [
        (ub.RING, Step.FWD, CommType.ALLGATHER, "model.layers.0.mlp.gate_proj"),
        (ub.PIPELINE, Step.FWD, CommType.REDUCESCATTER, "model.layers.0.mlp.down_proj"),
        (ub.BULK, Step.WEIGHT_GRAD, CommType.REDUCESCATTER, "model.layers.0.mlp.gate_proj"),
        (ub.BULK, Step.INPUT_GRAD, CommType.ALLGATHER, "model.layers.0.self_attn.q_proj"),
        (ub.RING, Step.INPUT_GRAD, CommType.ALLGATHER, "model.layers.0.self_attn.o_proj"),
    ],
)
def test_a_fused_node_hides_the_shorter_of_gemm_and_transfer(
    method: str, step: Step, comm: CommType, layer: str
) -> None:
    """At Llama 3 8B's shapes on 8 A100s, 4,096 tokens: the fused time is at least the GEMM alone
    and at least the transfer alone, and less than the two in series (both matter here)."""
    tp, tokens = 8, 4096
    ir, _ = pipeline.extract_checked("llama-3-8b", input_shapes={"input_ids": (1, tokens)})
    assert ir is not None
    gpu = _gpu("a100")
    owner = ir.layer(layer)
    part = shard(owner, tp)  # the rank's column (N / T) or row (K / T) shard
    if "o_proj" in layer or "down_proj" in layer:
        part = shard(owner, tp, split=Split.K)
    size = tokens * 4096 * 2  # the block's b s h activation in bf16 (the whole gathered buffer)
    fused = ub.Fused(step, method, Comm(comm, size, TENSOR))
    net = ub.fabric(gpu, tp)
    ticks, alone = ub.fused_ticks(fused, [part], gpu, net, tp)
    chunk = size / tp
    # ring_exchange: T - 1 sends of a chunk; the others one exchange of (T - 1) / T of the buffer
    transfer = (tp - 1) * _send_ns(tp, chunk) if method == ub.RING else _send_ns(tp, (tp - 1) * chunk)
    assert ticks >= alone
    assert ticks >= transfer - tp  # ns ticks, each send truncated to whole ns
    assert ticks < alone + transfer


def test_the_gemm_beside_userbuffers_kernels_runs_on_the_sms_they_leave() -> None:
    """A bulk or pipeline overlap's GEMM on 108 - 16 A100 SMs (initialize_ub's num_sm 16): each
    SM's rate kept, so a GEMM of one tile takes what it took on 108, and one of many tiles more
    waves."""
    gpu = _gpu("a100")
    spared = gpu.spared(16)
    assert spared.kernels.sms == 108 - 16
    one_tile = [Shape(128, 4096, 128)]
    assert spared.gemm_seconds(one_tile, "bfloat16", 2) == pytest.approx(
        gpu.gemm_seconds(one_tile, "bfloat16", 2)
    )
    many = [Shape(4096, 4096, 1792)]  # Llama 3 8B's gate shard at T 8: 16 x 14 tiles of 256 x 128
    assert spared.gemm_seconds(many, "bfloat16", 2) > gpu.gemm_seconds(many, "bfloat16", 2)


def test_a_bulk_overlap_gives_back_its_sms_when_the_collective_ends() -> None:
    """initialize_ub's default set_sm_margin is False (transformer_engine/pytorch/module/base.py at
    v1.9, get_default_config): cuBLAS is launched on every SM and the comm kernel's 16 are taken only
    while it runs. A short collective (1 MiB) beside a long GEMM (Llama 3 8B's gate shard at T 2,
    4,096 tokens) then costs about the transfer, never the whole GEMM on 92 SMs."""
    tp, tokens = 2, 4096
    ir, _ = pipeline.extract_checked("llama-3-8b", input_shapes={"input_ids": (1, tokens)})
    assert ir is not None
    gpu = _gpu("a100")
    part = shard(ir.layer("model.layers.0.mlp.gate_proj"), tp)
    size = 2**20
    fused = ub.Fused(Step.WEIGHT_GRAD, ub.BULK, Comm(CommType.REDUCESCATTER, size, TENSOR))
    ticks, alone = ub.fused_ticks(fused, [part], gpu, ub.fabric(gpu, tp), tp)
    on_spared = gpu.spared(16).times(part).weight_grad
    transfer = _send_ns(tp, size / tp)
    assert on_spared > alone  # the 92 SMs are slower here, so the bound below can fail
    assert alone <= ticks <= alone + transfer
    assert ticks < on_spared


@pytest.mark.parametrize(
    ("layout", "words"),
    [
        ({"npus": 2, "tp": 2}, "--sp"),
        ({"npus": 2, "tp": 2, "sp": True, "framework": "megatron-2022"}, "--framework megatron"),
    ],
)
def test_the_flag_needs_sequence_parallelism_and_megatron_core(layout: dict[str, Any], words: str) -> None:
    """megatron/training/arguments.py at core_r0.8.0, validate_args: "Tensor parallel
    communication/GEMM overlap can happen only when sequence parallelism is enabled"."""
    from modtrans.strategy.frameworks import Framework

    given = {**layout, "framework": Framework(layout.get("framework", "megatron"))}
    with pytest.raises(LayoutError, match=words):
        Layout(tp_comm_overlap=True, **given)


def test_the_command_line_refuses_it_in_one_line(run_cli: Any, tmp_path: Path) -> None:
    result: Result = run_cli(
        "translate",
        "llama-3-8b",
        "--tp",
        "2",
        "--tp-comm-overlap",
        "--seq-len",
        "64",
        "-o",
        str(tmp_path / "x"),
    )
    assert result.exit_code == 2
    assert "--tp-comm-overlap" in result.output
    assert "--sp" in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_userbuffers_stay_inside_a_node(tmp_path: Path) -> None:
    """TE's userbuffers map peers' memory over NVLink (CUDA IPC or multicast): T up to a node."""
    gpu = _gpu("h100")
    with pytest.raises(LayoutError, match="spans nodes"):
        ub.fabric(gpu, 16)
    b200 = _gpu("b200")
    with pytest.raises(LayoutError, match="no NVLink node"):
        ub.fabric(b200, 8)


@pytest.mark.parametrize(
    ("config", "tp", "device"),
    [
        # Megatron-LM's model_table 32B (GPT-2 architecture: one c_attn, one c_fc GEMM) on H100s
        ({"model_type": "gpt2", "n_embd": 7168, "n_layer": 2, "n_head": 56, "n_positions": 4096}, 8, "h100"),
        # Llama 3 8B's blocks (separate Q, K, V and gate, up: Megatron's one GEMM of each) on A100s
        (_llama(2), 4, "a100"),
    ],
)
def test_every_fused_phase_takes_at_least_what_it_computed_alone(
    tmp_path: Path, config: dict[str, Any], tp: int, device: str
) -> None:
    """Per compute node, the flag never makes a phase shorter than without it (the GEMM's work is
    all still done) and lengthens only the phases of a block's linears."""
    config = {**config, "vocab_size": 1024, "torch_dtype": "bfloat16"}
    layout = Layout(npus=tp, tp=tp, sp=True, global_batch=1)
    settings = cost.Settings(device=device)
    times = []
    for flag in (False, True):
        options = pipeline.Options(
            parallel=Parallelism(
                Policy.HYBRID_TRANSFORMER,
                tp,
                layout=dataclasses.replace(layout, tp_comm_overlap=flag, vocab_divisor=1),
            ),
            input_shapes={"input_ids": (1, 4096)},
            format="chakra-et",
            cost=settings,
        )
        result = pipeline.translate_checked(str(plans.config(tmp_path, config)), options)
        assert result.plan is not None
        plan = result.plan
        times.append(
            {
                (plan.layers[op.layer].name, op.step): op.time
                for op in plan.program(0)
                if isinstance(op, Compute)
            }
        )
    off, on = times
    assert on.keys() == off.keys()
    longer = {key for key in on if on[key] != off[key]}
    assert all(on[key] >= off[key] for key in on)
    assert longer
    assert all(name.count(".") >= 3 and ("attn" in name or "mlp" in name) for name, _ in longer)
