"""Units of identical blocks are costed once (strategy/llm/build.py `_costed`), under a cost model
that reads shapes alone (cost/base.py `by_shape`): the plan is the one costing every unit makes,
and a model that claims shape-only times gives a layer renamed the times of the original."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from modtrans import cost, pipeline
from modtrans.comm import Policy
from modtrans.cost.base import Model, by_shape
from modtrans.ir.document import Activation, Block
from modtrans.strategy import Parallelism, program
from modtrans.strategy.llm import Layout, Recompute
from modtrans.strategy.llm import build as llm_build

LAYOUTS = {
    "llama-3-70b": Layout(npus=64 * 16, tp=8, pp=8, sp=True, global_batch=128),
    "mixtral-8x7b": Layout(npus=32, tp=2, ep=4, sp=True, recompute=Recompute.SELECTIVE),
    "gpt3-13b": Layout(npus=16, tp=4, sp=True, recompute=Recompute.FULL),
}


def _plan(model: str, layout: Layout) -> Any:
    options = pipeline.Options(parallel=Parallelism(Policy.HYBRID_TRANSFORMER, layout.npus, layout=layout))
    result = pipeline.translate_checked(model, options)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan


@pytest.mark.parametrize("model", sorted(LAYOUTS))
def test_a_plan_costed_by_shape_is_the_plan_costed_unit_by_unit(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zoo's Llama-3-70B, Mixtral and GPT-3 13B (selective and full recomputation too): every
    layer's times and every stage's program equal what costing each unit alone gives, and the
    costings made are a few per block kind, not one per unit."""
    calls: list[int] = []
    costed = program.costed  # build.py's name for it, patched there

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return costed(*args, **kwargs)

    monkeypatch.setattr(llm_build, "costed", counted)
    shared = _plan(model, LAYOUTS[model])
    made = len(calls)
    monkeypatch.setattr(llm_build, "by_shape", lambda _: False)
    alone = _plan(model, LAYOUTS[model])
    units = len(calls) - made
    assert units == len(alone.layers)
    assert made < units / 4  # 80, 32 or 40 blocks: their units costed once
    assert shared.layers == alone.layers
    for stage in sorted(set(alone.program_of)):
        rank = alone.program_of.index(stage)
        assert shared.program(rank) == alone.program(rank)


def _renamed(layer: Any) -> Any:
    """The layer as the next block's would be: every name and the block number changed."""

    def tensors(side: tuple[Activation, ...]) -> tuple[Activation, ...]:
        return tuple(dataclasses.replace(a, name=a.name + ".next") for a in side)

    params = tuple(dataclasses.replace(p, name=p.name + ".next") for p in layer.params)
    block = layer.block
    if block is not None and block.index is not None:
        block = Block(block.index + 1, block.part, block.heads)
    return dataclasses.replace(
        layer,
        name=layer.name + "_next",
        node=layer.node + "_next",
        params=params,
        inputs=tensors(layer.inputs),
        outputs=tensors(layer.outputs),
        producers=tuple(p + "_next" for p in layer.producers),
        block=block,
    )


@pytest.mark.parametrize("name", [m.value for m in Model if m is not Model.SCALESIM])
def test_a_shape_only_model_times_a_renamed_layer_alike(name: str) -> None:
    """Every built-in model that says it reads shapes alone (SCALE-Sim's own, which runs the
    simulator, aside) gives each of Mixtral's layers, renamed and moved to the next block, the
    times it gives the layer."""
    model = cost.get(name)
    assert by_shape(model)
    ir, found = pipeline.extract_checked("mixtral-8x7b")
    assert ir is not None, [str(d) for d in found]
    for layer in ir.layers:
        assert model.times(_renamed(layer)) == model.times(layer), layer.name


def test_a_model_of_measured_times_is_asked_about_every_layer() -> None:
    """Measured times are looked up by layer name (cost/measured.py): not shape-only."""
    from modtrans.cost.measured import Measured

    assert not by_shape(Measured(cost.get("gpu"), {}, {}))
