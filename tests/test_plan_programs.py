"""A layout's programs built when read (plan/programs.py): each outline says what its program
says of communication, so the group ids and the check across ranks made from outlines are the
ones the whole programs give; and writing a large set builds each program once, not all at once.

Real configurations: GPT-2's published config.json (its tied embedding swapped between the first
and last stages), T5's (an encoder-decoder: the skip connection across stages) and the built-in
Mixtral (experts over an expert axis), under every schedule."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import modtrans
from modtrans import pipeline
from modtrans.chakra import ahead
from modtrans.outputs import SAMPLE, SELF_CHECK
from modtrans.plan import Collective, Compute, Plan, Transfer
from modtrans.plan.check import consistency
from modtrans.plan.timeline import timeline
from modtrans.request import prepare, request_of
from modtrans.strategy.program import StageProgram

CONFIGS = Path(__file__).parent.parent / "fixtures" / "configs"
GPT2, T5 = CONFIGS / "gpt2.json", CONFIGS / "t5-base.json"

LAYOUTS: dict[str, tuple[str | Path, dict[str, Any]]] = {
    "gpt2-1f1b-dp": (GPT2, {"tp": 2, "pp": 4, "dp": 2, "global_batch": 16}),
    "gpt2-interleaved": (GPT2, {"tp": 2, "pp": 4, "vpp": 3, "schedule": "interleaved", "global_batch": 8}),
    "gpt2-gpipe-full": (GPT2, {"pp": 4, "schedule": "gpipe", "recompute": "full", "global_batch": 8}),
    "gpt2-zb-h1": (GPT2, {"pp": 4, "dp": 2, "schedule": "zb-h1", "global_batch": 16}),
    "gpt2-dualpipe": (GPT2, {"pp": 4, "schedule": "dualpipe", "global_batch": 16}),
    "gpt2-dualpipev": (GPT2, {"pp": 3, "schedule": "dualpipev", "global_batch": 8}),
    "t5-1f1b-sp": (T5, {"tp": 2, "pp": 4, "sp": True, "recompute": "selective", "global_batch": 8}),
    "mixtral-ep": ("mixtral-8x7b", {"tp": 2, "pp": 2, "ep": 2, "dp": 2, "sp": True, "global_batch": 8}),
}


def _plan(model: str | Path, options: dict[str, Any], output: Path) -> Plan:
    given = {"seq_len": 128, "micro_batch": 1, "format": "chakra-et", "output": output, **options}
    request = request_of(model, given)
    result = pipeline.translate_checked(request.model, prepare(request).options)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan


@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_an_outline_says_what_its_program_says_of_communication(case: str, tmp_path: Path) -> None:
    plan = _plan(*LAYOUTS[case], tmp_path / "t")
    assert len(plan.programs) > 1
    for p in range(len(plan.programs)):
        program, outline = plan.programs[p], plan.outline(p)
        assert len(outline) == len(program)
        for op, seen in zip(program, outline, strict=True):
            assert (type(seen), seen.layer, seen.step) == (type(op), op.layer, op.step)
            if isinstance(op, Transfer):  # every field but the dependencies an outline does not keep
                assert dataclasses.replace(seen, deps=()) == dataclasses.replace(op, deps=())
            elif isinstance(op, Collective):
                assert isinstance(seen, Collective)
                assert (seen.comm, seen.bytes, seen.over, seen.place) == (
                    op.comm,
                    op.bytes,
                    op.over,
                    op.place,
                )
            else:  # the text projections read a unit's times from the outline (plan/lines.py)
                assert isinstance(seen, Compute)
                assert isinstance(op, Compute)
                assert (seen.time, seen.flops) == (op.time, op.flops)
    # the same plan with every program built and held, as it was before programs were built lazily
    held = dataclasses.replace(plan, programs=tuple(plan.programs))
    assert plan.groups() == held.groups()
    assert plan.overs() == held.overs()
    assert [plan.group_id(r, o) for r in range(plan.npus) for o in plan.overs()] == [
        held.group_id(r, o) for r in range(plan.npus) for o in held.overs()
    ]
    assert consistency(plan) == consistency(held) == []


def test_a_large_set_is_written_building_each_program_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TP 4 x PP 12 x DP 2 of GPT-2 (96 ranks, over SELF_CHECK: the sampled self-check): the group ids
    and the check across ranks read outlines; the self-check encodes the SAMPLE programs; writing
    builds each program once more (a sampled one at most: the encoder may keep its nodes). In this
    process alone (one core: no workers encode ahead; test_chakra_ahead.py counts theirs)."""
    monkeypatch.setattr(ahead, "cores", lambda: 1)
    built: list[tuple[int, bool]] = []
    build = StageProgram.build

    def counted(self: StageProgram) -> Any:
        built.append((self.stage, self.outline))
        return build(self)

    monkeypatch.setattr(StageProgram, "build", counted)
    stages = 12
    result = modtrans.translate(
        GPT2, tp=4, pp=stages, dp=2, global_batch=24, micro_batch=1, seq_len=128, format="chakra-et",
        output=tmp_path / "t",
    )  # fmt: skip
    assert result.plan is not None
    assert result.plan.npus > SELF_CHECK
    assert len(list(tmp_path.glob("t.*.et"))) == 8 * stages
    whole = Counter(stage for stage, outline in built if not outline)
    outlines = Counter(stage for stage, outline in built if outline)
    assert sorted(whole) == sorted(outlines) == list(range(stages))
    assert sum(whole.values()) <= stages + SAMPLE  # the sample's, and each once as it is written
    assert max(whole.values()) <= 2
    assert max(outlines.values()) == 1  # kept: the group ids and the check across ranks read them


def test_the_timeline_builds_each_program_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline runs every stage at once, reading each stage's program again at every round:
    a program is built once for it, not once a round (two are kept built)."""
    built: list[int] = []
    build = StageProgram.build

    def counted(self: StageProgram) -> Any:
        if not self.outline:
            built.append(self.stage)
        return build(self)

    plan = _plan(GPT2, {"pp": 4, "vpp": 3, "schedule": "interleaved", "global_batch": 8}, tmp_path / "t")
    monkeypatch.setattr(StageProgram, "build", counted)
    drawn = timeline(plan)
    assert drawn.stages == 4
    assert sorted(built) == [0, 1, 2, 3]
