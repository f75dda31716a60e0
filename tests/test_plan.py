"""The execution plan: meshes and groups, the techniques' registry, the projection onto the text."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest

import modtrans
from modtrans.comm import CommType, Policy
from modtrans.plan import (
    Axis,
    Collective,
    Compute,
    Direction,
    LayerInfo,
    Mesh,
    Op,
    Plan,
    ProjectionError,
    Purpose,
    Step,
    Transfer,
    project,
)
from modtrans.plan.model import Preset, ResolvedCollective
from modtrans.strategy import SUPPORTED, tensors
from modtrans.strategy.program import StageProgram
from modtrans.strategy.techniques import load

TENSOR, DATA, PIPE = Purpose.TENSOR, Purpose.DATA, Purpose.PIPELINE


def test_groups_are_megatrons_for_tensor_fastest() -> None:
    # Megatron-LM's initialize_model_parallel docstring: 8 GPUs, tensor-parallel size 2 ->
    # tensor groups [g0, g1], [g2, g3], [g4, g5], [g6, g7]; data groups [g0, g2, g4, g6], [g1, g3, g5, g7]
    mesh = Mesh((Axis(TENSOR, 2), Axis(DATA, 4)))
    assert [mesh.members(r, frozenset({TENSOR})) for r in (0, 2, 4, 6)] == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert mesh.members(0, frozenset({DATA})) == (0, 2, 4, 6)
    assert mesh.members(5, frozenset({DATA})) == (1, 3, 5, 7)
    assert all(mesh.rank(mesh.coords(r)) == r for r in range(8))
    assert mesh.peer(1, DATA, 1) == 3
    assert mesh.peer(7, DATA, 1) is None


def _plan(programs: tuple[tuple[Op, ...], ...], mesh: Mesh, preset: Preset, layers: int = 2) -> Plan:
    infos = tuple(LayerInfo(f"l{i}", 5) for i in range(layers))
    of = tuple(min(r, len(programs) - 1) for r in range(mesh.size))
    return Plan(mesh, infos, programs, of, preset=preset)


def _compute(layer: int, step: Step, time: int = 10) -> Compute:
    return Compute(layer, step, time, 100, (), ())


def test_group_ids_are_positive_and_the_whole_world_has_none() -> None:
    mesh = Mesh((Axis(TENSOR, 2), Axis(DATA, 2)))
    program = (
        _compute(0, Step.FWD),
        Collective(0, Step.FWD, CommType.ALLREDUCE, 64, frozenset({TENSOR})),
        Collective(0, Step.WEIGHT_GRAD, CommType.ALLREDUCE, 64, frozenset({DATA})),
        Collective(1, Step.WEIGHT_GRAD, CommType.ALLREDUCE, 64, frozenset({TENSOR, DATA})),
    )
    plan = _plan((program,), mesh, Preset(Policy.HYBRID_TRANSFORMER))
    groups = [(g.id, g.purpose, g.ranks) for g in plan.groups()]
    assert groups == [(1, "tensor", (0, 1)), (2, "tensor", (2, 3)), (3, "data", (0, 2)), (4, "data", (1, 3))]
    assert plan.group(3, frozenset({TENSOR, DATA})).id == 0  # every rank: ASTRA-sim's empty pg_name
    resolved = list(plan.ops(3))
    assert [r.group.id if isinstance(r, ResolvedCollective) else None for r in resolved[1:]] == [2, 4, 0]


def test_the_text_cannot_say_different_programs_or_transfers() -> None:
    mesh = Mesh((Axis(PIPE, 2),))
    send = Transfer(0, Step.FWD, Direction.SEND, PIPE, 1, 7, 4096)
    recv = Transfer(1, Step.FWD, Direction.RECV, PIPE, -1, 7, 4096)
    two = _plan(((_compute(0, Step.FWD), send), (recv, _compute(1, Step.FWD))), mesh, Preset(Policy.DATA))
    with pytest.raises(ProjectionError, match="2 different programs"):
        project(two)
    one = _plan(((_compute(0, Step.FWD), send),), mesh, Preset(Policy.DATA))
    with pytest.raises(ProjectionError, match="point-to-point send"):
        project(one)


def test_the_text_has_one_collective_per_column_over_the_keywords_group() -> None:
    mesh = Mesh((Axis(TENSOR, 2), Axis(DATA, 2)))
    preset = Preset(Policy.HYBRID_TRANSFORMER)
    tp, dp = frozenset({TENSOR}), frozenset({DATA})
    fwd = _compute(0, Step.FWD)
    twice = (
        fwd,
        Collective(0, Step.FWD, CommType.ALLREDUCE, 8, tp),
        Collective(0, Step.FWD, CommType.ALLGATHER, 8, tp),
    )
    with pytest.raises(ProjectionError, match="two collectives in its fwd"):
        project(_plan((twice,), mesh, preset))
    elsewhere = (fwd, Collective(0, Step.FWD, CommType.ALLREDUCE, 8, dp))  # forward over data: not the text's
    with pytest.raises(ProjectionError, match="spans another group"):
        project(_plan((elsewhere,), mesh, preset))
    recomputed = (fwd, _compute(0, Step.RECOMPUTE))
    with pytest.raises(ProjectionError, match="recomputes its forward"):
        project(_plan((recomputed,), mesh, preset))
    fine = (
        fwd,
        Collective(0, Step.FWD, CommType.ALLREDUCE, 8, tp),
        Collective(0, Step.WEIGHT_GRAD, CommType.ALLREDUCE, 4, dp),
    )
    workload = project(_plan((fine,), mesh, preset, layers=1))
    layer = workload.layers[0]
    assert (layer.fwd.compute_time, layer.fwd.comm_type, layer.fwd.comm_size) == (10, CommType.ALLREDUCE, 8)
    # two collectives: ASTRA-sim 1.0 would wait the update column after each (Layer::call), so the
    # optimizer step (5) is in the weight-gradient compute, the column the 1 tick it needs (D313)
    wg = layer.weight_grad
    assert (wg.compute_time, wg.comm_type, wg.comm_size, layer.update_time) == (5, CommType.ALLREDUCE, 4, 1)


def test_every_keyword_translate_writes_has_a_registered_technique() -> None:
    assert set(load()) == set(SUPPORTED)


def test_a_layouts_stage_programs_are_built_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """SimAI's text holds stage 0's program alone (SimAI adds the pipeline by formula): a SimAI
    translation of four stages builds that one's outline (its computes and collectives, no
    tensors) and no program, and names no unit's tensors (strategy/tensors.py). Read in any
    order, every stage's program is the one built stage after stage, and the plan equals (and
    pickles as) the plan built whole."""
    built: list[int] = []
    outlined: list[int] = []
    build = StageProgram.build

    def counted(self: StageProgram) -> tuple[Op, ...]:
        (outlined if self.outline else built).append(self.stage)
        return build(self)

    monkeypatch.setattr(StageProgram, "build", counted)
    named: list[int] = []
    ios = tensors.ios

    def counted_ios(*args: Any) -> Any:
        named.append(1)
        return ios(*args)

    monkeypatch.setattr(tensors, "ios", counted_ios)
    layout = {"tp": 2, "pp": 4, "vpp": 2, "schedule": "interleaved", "sp": True, "global_batch": 8}
    result = modtrans.translate("llama-3-8b", dialect="simai", **layout)
    assert (built, outlined, named) == ([], [0], [])
    backwards = modtrans.translate("llama-3-8b", dialect="simai", **layout).plan
    forwards = result.plan
    assert backwards is not None
    assert forwards is not None
    last_first = [backwards.programs[s] for s in (3, 2, 1, 0)]
    assert built == [3, 2, 1, 0]  # each built once, when first read
    in_order = [forwards.programs[s] for s in range(4)]
    assert last_first[::-1] == in_order
    assert backwards == forwards
    assert pickle.loads(pickle.dumps(forwards)) == forwards
    assert all(isinstance(op, Compute | Collective | Transfer) for program in in_order for op in program)


@pytest.mark.parametrize("sizes", [(8, 8, 16), (2, 1, 4, 3), (1,), (5, 7)])
def test_along_is_each_ranks_coordinate_on_the_axis(sizes: tuple[int, ...]) -> None:
    """Mesh.along(axis), the pipeline stage of every rank (a plan's program_of), is Megatron's rank
    order read directly: axis 0 fastest, rank = sum of coordinate x stride (Mesh.coords)."""
    purposes = [Purpose.TENSOR, Purpose.DATA, Purpose.PIPELINE, Purpose.EXPERT][: len(sizes)]
    mesh = Mesh(tuple(Axis(p, n) for p, n in zip(purposes, sizes, strict=True)))
    for axis, n in enumerate(sizes):
        stride = math.prod(sizes[:axis])
        assert mesh.along(axis) == tuple((r // stride) % n for r in range(math.prod(sizes)))
        assert mesh.along(axis) == tuple(mesh.coords(r)[axis] for r in range(mesh.size))
