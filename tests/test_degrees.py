"""The registry of parallel degrees (strategy/llm/degrees.py) holds every axis a plan uses, and
every registered degree is an option, a Layout field and a token of the rank order: a degree is
its module, found through the registry, with nothing listed elsewhere to forget."""

from __future__ import annotations

import dataclasses

import pytest

from modtrans import picture, pipeline, sidecar, table
from modtrans.comm import Policy
from modtrans.plan.model import Collective, Plan, Purpose, Transfer
from modtrans.strategy import Parallelism
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import degrees
from modtrans.strategy.llm.degrees import Degree, dense_data, listed, register, registered
from modtrans.strategy.llm.options import ORDER, Layout, LayoutError, span
from modtrans.sweep import finalists, rows, space
from tests import plans

SEQUENCE = 256
PRESETS = (Policy.DATA, Policy.MODEL, Policy.HYBRID_DATA_MODEL, Policy.HYBRID_TRANSFORMER)
DEGREES = sorted(registered().values(), key=lambda d: d.token)


def _llm(model: str, layout: Layout) -> Plan:
    """A built-in configuration's plan (the published dimensions, a short sequence)."""
    return plans.plan(model, layout, (1, SEQUENCE))


def _preset(policy: Policy) -> Plan:
    """The zoo's GPT-2 under an ASTRA-sim keyword on 4 NPUs (the hybrids 2 x 2)."""
    options = pipeline.Options(parallel=Parallelism(policy, 4, 2), format="chakra-et")
    plan = pipeline.translate_checked("gpt2", options).plan
    assert plan is not None
    return plan


def _purposes(plan: Plan) -> set[Purpose]:
    """Every axis the plan's mesh has and its collectives and transfers name, on every stage."""
    used = {a.purpose for a in plan.mesh.axes}
    for p in range(len(plan.programs)):
        for op in plan.programs[p]:
            if isinstance(op, Collective):
                used |= op.over
            elif isinstance(op, Transfer):
                used.add(op.along)
    return used


@pytest.fixture(scope="module")
def used() -> set[Purpose]:
    """The axes of plans that exercise every degree: tensor, context, pipeline and data on
    Llama-3-8B, experts on Mixtral-8x7B, HSDP's replicas on Llama-3-8B, and the keyword presets."""
    plans = [
        _llm("llama-3-8b", Layout(npus=16, tp=2, cp=2, pp=2, zero=1)),
        _llm("mixtral-8x7b", Layout(npus=8, tp=2, pp=2, ep=2, sp=True)),
        _llm("llama-3-8b", Layout(npus=8, dp_replicate=2, zero=3, framework=Framework.FSDP)),
        *(_preset(p) for p in PRESETS),
    ]
    return set().union(*(_purposes(plan) for plan in plans))


def test_every_axis_a_plan_uses_is_a_registered_degrees(used: set[Purpose]) -> None:
    """No purpose comes from anywhere but a degree's module: the plans' axes are the registry's."""
    declared = {d.purpose for d in registered().values()}
    assert used <= declared, f"axes no degree registers: {sorted(used - declared)}"


def test_every_registered_degree_is_used_by_some_plan(used: set[Purpose]) -> None:
    """The other way round: the plans above reach every registered degree's axis, so the first
    test sees them all (a degree added without a plan here fails this one)."""
    assert {d.purpose for d in registered().values()} <= used


@pytest.mark.parametrize("degree", DEGREES, ids=lambda d: d.token)
def test_a_degree_is_an_option_a_layout_field_and_a_token_of_the_rank_order(degree: Degree) -> None:
    """Each registered degree has its row in the option table (a layout option, --TOKEN), its
    field in Layout, and its one place in ORDER, Megatron-Core's order string."""
    row = table.BY_NAME.get(degree.token)
    assert row is not None, f"no row for --{degree.token} in table.py"
    assert row.layout
    assert degree.token in {f.name for f in dataclasses.fields(Layout)}
    assert ORDER.split("-").count(degree.token) == 1


def test_each_degree_has_a_place_of_its_own_where_outputs_list_them() -> None:
    """Degree.listed orders the .meta.json's keys and the title: one place each, none left out,
    so that the order is the registry's and not the modules' import order."""
    assert sorted(d.listed for d in DEGREES) == list(range(len(DEGREES)))


def test_the_rank_order_names_only_registered_degrees() -> None:
    assert set(ORDER.split("-")) == set(registered())


def test_the_dense_gradients_span_megatrons_data_parallel_group_with_context() -> None:
    """Megatron-Core reduces dense gradients over get_data_parallel_group(with_context_parallel=
    True): its RankGenerator's "cp-ep-dp" (ep folded into dp for dense weights), the replica
    degrees the registry holds; HSDP's replicas (hsdp.py) are data ranks too: a plan without them
    has no such axis, so the group is Megatron's."""
    assert dense_data() == span("cp-ep-dp-dp_replicate")
    layout = Layout(npus=32, tp=2, cp=2, pp=2, dp=4)
    assert layout.gradient_ranks == layout.mesh().span(dense_data()) == 8  # D x C
    experts = Layout(npus=16, tp=2, pp=2, dp=4, ep=2)
    assert experts.gradient_ranks == experts.mesh().span(dense_data()) == 4  # D: E carved from it


def test_a_token_registered_twice_differently_is_refused() -> None:
    """Two modules claiming one degree is a programming error, not a silent overwrite."""
    context = registered()["cp"]
    with pytest.raises(ValueError, match="registered twice"):
        register(dataclasses.replace(context, optional=False))
    assert registered()["cp"] is context


def test_a_degrees_own_rules_run_with_the_layouts() -> None:
    """Context parallelism's rules live in context.py and a Layout runs them: Megatron-LM's and
    NeMo's only (Framework.context_parallel)."""
    with pytest.raises(LayoutError, match="--framework fsdp has no context parallelism"):
        Layout(npus=4, cp=2, framework=Framework.FSDP)


@pytest.mark.parametrize("degree", DEGREES, ids=lambda d: d.token)
def test_a_degree_is_a_list_the_sweep_tries_and_a_column_of_its_table(degree: Degree) -> None:
    """The sweep tries each degree but D (N fixes it) from its list option, and its table has a
    column for every degree: what a sweep can vary, its table can show."""
    searched = {d.token for d in space.searched()}
    own = {row.name: row for row in table.SWEEP_OWN if row.group == table.SPACE}
    assert (degree.token in searched) is (not degree.data)
    assert (degree.token in own) is (not degree.data), f"--{degree.token} in the sweep's search space"
    assert degree.token in rows.COLUMNS


def test_every_degree_is_in_the_metadata_as_the_options_gave_it() -> None:
    """.meta.json's parallel.llm names every degree, with the size its option was given (D as
    --dp gives it, experts carved from it), in the listed order, before the other keys."""
    given = {"tp": 2, "cp": 2, "pp": 2, "dp": 2, "ep": 1}
    plan = _llm("llama-3-8b", Layout(npus=16, tp=2, cp=2, pp=2, dp=2, ep=1))
    assert plan.layout is not None
    llm = sidecar.layout(plan.mesh, plan.layout)
    assert list(llm)[: len(DEGREES)] == [d.token for d in listed()]
    assert {k: llm[k] for k in given} == given
    moe = _llm("mixtral-8x7b", Layout(npus=8, tp=2, pp=2, ep=2, sp=True))
    assert moe.layout is not None
    assert {k: sidecar.layout(moe.mesh, moe.layout)[k] for k in ("dp", "ep")} == {"dp": 2, "ep": 2}


def test_a_layouts_own_options_come_back_from_the_sweeps_translation() -> None:
    """The options a finalist is translated with make the layout the sweep chose: every degree
    given (D following from N), through the request's own reading of them."""
    for layout in (
        Layout(npus=32, tp=2, cp=2, pp=2, sp=True, global_batch=32),
        Layout(npus=32, tp=2, pp=2, ep=2, sp=True, global_batch=32),
    ):
        options = finalists.translation_options(layout, {})
        assert set(options) & set(registered()) == {d.token for d in DEGREES if not d.data}
        fields = {f.name for f in dataclasses.fields(Layout)}
        made = Layout(**{k: v for k, v in options.items() if k in fields and v is not None})
        assert (made.tp, made.cp, made.pp, made.ep) == (layout.tp, layout.cp, layout.pp, layout.ep)
        assert made.data_ranks == space.options_of(layout)["dp"] == 32 // (2 * layout.cp * 2)


def test_a_degree_registered_in_its_module_alone_reaches_each_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """A throwaway degree, registered and nothing else: the metadata lists it last (its axis's 1
    rank where a mesh has none), the timeline's title shows it where it is more than 1, and the
    sweep's space takes its values by name."""
    extra = Degree("zz", Purpose("zz-axis"), listed=len(DEGREES), optional=True)
    monkeypatch.setitem(degrees._DEGREES, extra.token, extra)
    plan = _llm("llama-3-8b", Layout(npus=4, tp=2, pp=2))
    assert plan.layout is not None
    llm = sidecar.layout(plan.mesh, plan.layout)
    assert list(llm)[len(DEGREES)] == "zz"
    assert llm["zz"] == 1
    assert "ZZ3" in picture.title_of("m", {**llm, "zz": 3})
    assert "ZZ" not in picture.title_of("m", llm)
    assert space.Space.of(zz=(1, 3), tp=(2,)).degrees == {"zz": (1, 3), "tp": (2,)}
