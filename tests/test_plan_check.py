"""The plan's self-check across ranks (plan/check.py), against the trace-set validator that decodes
every rank's trace whole (chakra/validate.py check_set): on a real configuration (GPT-2's published
config.json) in an interleaved pipeline, clean and with a transfer broken in each way the pairing
can break, both must agree that something is unmatched, and the plan check must name it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

import modtrans
from modtrans import chakra
from modtrans.chakra.validate import check_set
from modtrans.plan import Collective, Direction, Plan, Purpose, Transfer
from modtrans.plan.check import consistency

GPT2 = Path(__file__).parent.parent / "fixtures" / "configs" / "gpt2.json"
STAGE = 1  # the pipeline stage whose program is broken; ranks 2 and 3 run it (TP 2)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """TP 2 x PP 4 with 3 virtual stages, 8 micro-batches: 8 ranks, 4 programs, 96 transfers each."""
    out = tmp_path_factory.mktemp("gpt2") / "t"
    result = modtrans.translate(
        GPT2, tp=2, pp=4, vpp=3, schedule="interleaved", global_batch=8, micro_batch=1, sp=True,
        seq_len=256, format="chakra-et", output=out,
    )  # fmt: skip
    assert result.plan is not None
    return result.plan


def _transfer_codes(plan: Plan, tmp_path: Path) -> set[str]:
    """What the validator finds on every rank's trace of the plan, decoded whole."""
    outputs = chakra.files(plan, tmp_path / "t", tick_ns=1.0)
    traces = {str(path): data for path, data in outputs[:-1]}
    return {d.code for d in check_set(traces, outputs[-1][1], "t.comm_groups.json")}


def _edit(plan: Plan, nth: int, direction: Direction, change: Callable[[Transfer], Transfer]) -> Plan:
    """The plan with the `nth` transfer of `direction` of stage STAGE's program changed."""
    program = list(plan.programs[STAGE])
    where = [i for i, op in enumerate(program) if isinstance(op, Transfer) and op.direction is direction]
    op = program[where[nth]]
    assert isinstance(op, Transfer)
    program[where[nth]] = change(op)
    programs = (*plan.programs[:STAGE], tuple(program), *plan.programs[STAGE + 1 :])
    return dataclasses.replace(plan, programs=programs)


def test_a_consistent_plan_is_found_consistent(plan: Plan, tmp_path: Path) -> None:
    assert consistency(plan) == []
    assert not _transfer_codes(plan, tmp_path) & {"T706", "T707"}


BROKEN: dict[str, tuple[Direction, Callable[[Transfer], Transfer], str]] = {
    # a receive whose tag no send carries: its send has no partner, nor has it
    "a send without its receive": (
        Direction.RECV,
        lambda t: dataclasses.replace(t, tag=t.tag + 10**6),
        "has 0 partners",
    ),
    "mismatched sizes": (
        Direction.SEND,
        lambda t: dataclasses.replace(t, bytes=t.bytes + 2),
        "has 0 partners",
    ),
    "a receive pointing the wrong way": (
        Direction.RECV,
        lambda t: dataclasses.replace(t, offset=-t.offset),
        "has 0 partners",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_transfer_is_found_as_the_whole_set_finds_it(case: str, plan: Plan, tmp_path: Path) -> None:
    direction, change, says = BROKEN[case]
    broken = _edit(plan, 3, direction, change)
    assert "T706" in _transfer_codes(broken, tmp_path)
    found = consistency(broken)
    assert {code for code, _ in found} == {"T706"}
    assert any(says in message for _, message in found), found


def test_a_transfer_with_two_partners_is_found(plan: Plan) -> None:
    """Two receives of stage 1 with one tag: the send to them has two partners."""
    program = plan.programs[STAGE]
    first = next(op for op in program if isinstance(op, Transfer) and op.direction is Direction.RECV)
    broken = _edit(plan, 1, Direction.RECV, lambda t: dataclasses.replace(t, tag=first.tag))
    assert any("has 2 partners" in message for _, message in consistency(broken))


def test_a_group_spanning_programs_must_issue_the_same_collectives(plan: Plan, tmp_path: Path) -> None:
    """Megatron's all-reduce of the gradient norm before the step (one fp32 number over the tensor
    and pipeline ranks: strategy/llm/clipping.py) is in a group of every stage's ranks: consistent
    as built; with stage 1's of 8 bytes, both checks find its group's ranks disagree (T707)."""
    program = list(plan.programs[STAGE])
    (at,) = [i for i, op in enumerate(program) if isinstance(op, Collective) and Purpose.PIPELINE in op.over]
    norm = program[at]
    assert isinstance(norm, Collective)
    assert {plan.program_of[r] for r in plan.mesh.members(0, norm.over)} == {0, 1, 2, 3}
    program[at] = dataclasses.replace(norm, bytes=8)
    programs = (*plan.programs[:STAGE], tuple(program), *plan.programs[STAGE + 1 :])
    broken = dataclasses.replace(plan, programs=programs)
    found = consistency(broken)
    assert [code for code, _ in found] == ["T707"]
    assert "spans programs [0, 1, 2, 3]" in found[0][1]
    assert "T707" in _transfer_codes(broken, tmp_path)
