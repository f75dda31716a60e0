"""The layout's mesh against Megatron-Core's own account of its rank groups: the examples in
megatron/core/parallel_state.py, initialize_model_parallel's docstring (NVIDIA/Megatron-LM,
commit 00caa53), written out there by hand for 16 and 8 GPUs."""

from __future__ import annotations

from modtrans.plan.model import Mesh, Purpose
from modtrans.strategy.llm.options import ORDER, Layout, span


def _groups(mesh: Mesh, over: frozenset[Purpose]) -> list[tuple[int, ...]]:
    return sorted({mesh.members(rank, over) for rank in range(mesh.size)})


def test_the_rank_order_is_megatrons_default() -> None:
    """initialize_model_parallel(..., order: str = "tp-cp-ep-dp-pp", ...); HSDP's replicas, which
    Megatron has not, just slower than dp (torchtitan's mesh: dp_replicate outside dp_shard), an
    axis only where R > 1."""
    tokens = ORDER.split("-")
    assert "-".join(t for t in tokens if t != "dp_replicate") == "tp-cp-ep-dp-pp"
    assert tokens.index("dp_replicate") == tokens.index("dp") + 1


def test_tensor_pipeline_and_data_groups_are_megatrons() -> None:
    """ "16 GPUs ... 2 GPUs to parallelize the model tensor, and 4 GPUs to parallelize the model
    pipeline. The present function will create 8 tensor model-parallel groups, 4 pipeline
    model-parallel groups and 8 data-parallel groups"."""
    mesh = Layout(npus=16, tp=2, pp=4).mesh()
    assert _groups(mesh, span("tp")) == [(2 * i, 2 * i + 1) for i in range(8)]
    assert _groups(mesh, span("pp")) == [(0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)]
    data = [(0, 2), (1, 3), (4, 6), (5, 7), (8, 10), (9, 11), (12, 14), (13, 15)]
    assert _groups(mesh, span("cp-ep-dp")) == data


def test_context_groups_are_megatrons() -> None:
    """ "assume we have 8 GPUs, if tensor model parallel size is 4 and context parallel size is 2
    ... Four groups are build to do context parallel communications: [GPU0, GPU4], [GPU1, GPU5],
    [GPU2, GPU6], and [GPU3, GPU7]"."""
    mesh = Layout(npus=8, tp=4, cp=2).mesh()
    assert _groups(mesh, span("cp")) == [(0, 4), (1, 5), (2, 6), (3, 7)]


def test_the_expert_data_axis_holds_d_over_e_ranks() -> None:
    """With --dp 4 --ep 2 the dense gradients span D = 4 ranks and an expert's the D / E = 2 that
    hold the same experts (the mesh's dp axis); the mesh has no context axis without C."""
    layout = Layout(npus=4, dp=4, ep=2)
    assert (layout.data_ranks, layout.expert_data_ranks) == (4, 2)
    mesh = layout.mesh()
    assert [a.purpose for a in mesh.axes] == [Purpose.TENSOR, Purpose.EXPERT, Purpose.DATA, Purpose.PIPELINE]
    assert mesh.span(span("cp-ep-dp")) == 4
    assert mesh.span(span("dp")) == 2
