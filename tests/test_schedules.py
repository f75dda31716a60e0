"""DualPipe and DualPipeV (strategy/schedule.py) run their chunks in the order DeepSeek's own code
does, and a layout under them holds, sends and draws what that order implies.

The orders are fixtures/schedules/dualpipe.json: deepseek-ai/DualPipe's DualPipe.step and
DualPipeV.step run unchanged with recording compute methods (tools/record_dualpipe_schedules.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans.plan.model import Compute, Direction, Plan, Purpose, Schedule, Step, Transfer
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.schedule import order
from tests import plans
from tests.test_timeline import _lanes

Run = Callable[..., Result]
RECORDED = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "schedules" / "dualpipe.json").read_text()
)["schedules"]


def _as_recorded(schedule: Schedule, ranks: int, chunks: int, stage: int) -> list[list[object]]:
    """Our steps in the recording's terms: DualPipe numbers the reverse direction's micro-batches
    after the forward direction's; the recording counts each module's from 0."""
    half = chunks // 2 if schedule is Schedule.DUALPIPE else 0
    return [
        [kind, chunk, micro - chunk * half] for kind, micro, chunk in order(schedule, stage, ranks, chunks)
    ]


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_each_rank_runs_the_order_deepseeks_code_runs(case: str) -> None:
    name, ranks, chunks = re.fullmatch(r"(\w+)-p(\d+)-m(\d+)", case).groups()  # type: ignore[union-attr]
    schedule = Schedule(name)
    for stage, recorded in enumerate(RECORDED[case]):
        assert _as_recorded(schedule, int(ranks), int(chunks), stage) == recorded, f"rank {stage}"


# the toy Llama of 8 blocks (hidden 64, 4 heads in 2 key/value groups, MLP 128, vocabulary 96): 2
# blocks a stage at P = 4, every size counted by hand
TOY = {**plans.TOY, "num_hidden_layers": 8}
SPLIT = 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128  # q, o; k, v; gate, up, down: split over T
NORMS = 2 * 64  # the block's two RMSNorm scales: on every tensor rank


def _plan(tmp_path: Path, schedule: str) -> Plan:
    layout = Layout(npus=8, tp=2, pp=4, schedule=Schedule(schedule), global_batch=8, vocab_divisor=1)
    return plans.plan(plans.config(tmp_path, TOY), layout, (1, 16))


def test_dualpipe_holds_two_stages_and_swaps_their_gradients_with_the_mirror_rank(tmp_path: Path) -> None:
    """DualPipe keeps two copies of every stage (DeepSeek-V3 report, section 3.2.1): rank s holds
    stages s and P - 1 - s, so a middle stage's weights are twice 1F1B's; the copies' gradients
    are summed once per iteration (DualPipe's example_dualpipe.py adds the mirror's), a send and a
    receive of the rank's gradients with rank P - 1 - s: 4 blocks at stage 1 (model stages 1 and 2),
    1/T of each split weight and every norm, in fp32 (Megatron's bf16 main gradients: 4 bytes)."""
    dual, single = _plan(tmp_path, "dualpipe"), _plan(tmp_path, "1f1b")
    assert dual.layout is not None
    assert single.layout is not None
    assert dual.layout.memory[1].weights == 2 * single.layout.memory[1].weights
    tail = [
        op
        for op in dual.program(2)  # rank 2: stage 1's first rank (tensor ranks first)
        if isinstance(op, Transfer) and op.step is Step.WEIGHT_GRAD and op.along is Purpose.PIPELINE
    ]
    assert {op.offset for op in tail} == {4 - 1 - 2 * 1}
    sent = sum(op.bytes for op in tail if op.direction is Direction.SEND)
    received = sum(op.bytes for op in tail if op.direction is Direction.RECV)
    assert sent == received == 4 * (SPLIT // 2 + NORMS) * 4


def test_dualpipev_holds_a_1f1b_stage_of_weights_and_turns_on_the_last_rank(tmp_path: Path) -> None:
    """DualPipeV: 2P stages on P ranks in a V, rank s holding s and 2P - 1 - s: a 1F1B stage's
    share of the weights, no copies to sum; the turn from stage P - 1 to P stays on the last
    rank (no transfer), whose forward sends all go back up, to stage P - 2."""
    v, single = _plan(tmp_path, "dualpipev"), _plan(tmp_path, "1f1b")
    assert v.layout is not None
    assert single.layout is not None
    assert v.layout.memory[1].weights == single.layout.memory[1].weights
    last = [op for op in v.program(6) if isinstance(op, Transfer)]
    assert {op.offset for op in last if op.step is Step.FWD and op.direction is Direction.SEND} == {-1}
    assert not [op for op in last if op.step is Step.WEIGHT_GRAD]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"pp": 3}, "even"),
        ({"global_batch": 6}, "at least"),
        ({"global_batch": 18}, "even count"),
        ({"vpp": 2}, "--vpp 2 needs --schedule interleaved"),
    ],
)
def test_what_dualpipe_s_step_asserts_is_a_usage_error(options: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"npus": 12, "pp": 2, "schedule": Schedule.DUALPIPE, "global_batch": 12}
    values.update(options)
    if values["pp"] == 3:
        values["global_batch"] = 12
    with pytest.raises(LayoutError, match=message):
        Layout(**values)  # type: ignore[arg-type]


def test_the_default_batch_is_the_fewest_micro_batches_dualpipe_runs() -> None:
    assert Layout(npus=4, pp=4, schedule=Schedule.DUALPIPE).micro_batches == 8
    assert Layout(npus=4, pp=4).micro_batches == 4


@pytest.mark.parametrize("schedule", ["dualpipe", "dualpipev"])
def test_the_picture_and_the_traces_on_disk_draw_deepseeks_order(
    schedule: str, run_cli: Run, tmp_path: Path
) -> None:
    """Each lane is the recorded order: a whole backward (B) and an input-gradient-only one (I)
    drawn as backward blocks, W blocks of their own; DualPipe's reverse micro-batches (chunk 1)
    numbered after the forward ones; the trace set read back from disk draws the same."""
    args = ("translate", "llama-3-8b", "--seq-len", "256", "--format", "chakra-et", "--pp", "4")
    done = run_cli(*args, "--schedule", schedule, "-o", tmp_path / "t", "--timeline", tmp_path / "a.svg")
    assert done.exit_code == 0, done.output
    lanes = _lanes((tmp_path / "a.svg").read_text())
    half = 4 if schedule == "dualpipe" else 0
    for stage, recorded in enumerate(RECORDED[f"{schedule}-p4-m8"]):
        expected = [({"B": "i", "I": "i"}.get(k, k.lower()), m + c * half, c) for k, c, m in recorded]
        assert lanes[stage] == expected, f"stage {stage}"
    assert run_cli("inspect", tmp_path / "t", "--timeline", tmp_path / "b.svg").exit_code == 0
    assert _lanes((tmp_path / "b.svg").read_text()) == lanes


def test_simai_text_refuses_dualpipe(run_cli: Run, tmp_path: Path) -> None:
    done = run_cli(
        "translate",
        "llama-3-8b",
        "--pp",
        "2",
        "--schedule",
        "dualpipe",
        "-d",
        "simai",
        "-o",
        tmp_path / "s.txt",
    )
    assert done.exit_code == 1
    assert "dualpipe" in done.stderr
    assert len([line for line in done.stderr.splitlines() if " error " in line]) == 1


def _micro_of(op: object) -> int:
    for tensor in (*getattr(op, "outputs", ()), *getattr(op, "inputs", ())):
        found = re.search(r"#m(\d+)", tensor.name)
        if found:
            return int(found.group(1))
    return -1


def test_an_f_and_b_pair_interleaves_its_computes_and_waits_only_for_its_own(tmp_path: Path) -> None:
    """DualPipe's _forward_backward_chunk (DeepSeek-V3 report, figure 4): the forward of one
    micro-batch and the backward of another overlap, each one's communication under the other's
    compute. Stage 0 (P = 4, 8 micro-batches) runs F3 with B5 as its first such pair (the recorded
    order's step 4): their computes alternate, and no operation of either waits for one of the other."""
    plan = _plan(tmp_path, "dualpipe")
    ops = plan.program(0)
    micro = {i: _micro_of(op) for i, op in enumerate(ops)}
    forward = {i for i, op in enumerate(ops) if micro[i] == 3 and op.step is Step.FWD}
    backward = {i for i, op in enumerate(ops) if micro[i] == 5 and op.step is not Step.FWD}
    pair = [
        3 if i in forward else 5
        for i, op in enumerate(ops)
        if isinstance(op, Compute) and i in forward | backward
    ]
    first = pair.index(5)
    assert pair[first - 1 : first + 7] == [3, 5, 3, 5, 3, 5, 3, 5]
    for i in forward | backward:
        other = backward if i in forward else forward
        assert not other & set(ops[i].deps), i


def test_the_ends_activations_are_where_the_ends_are(tmp_path: Path) -> None:
    """The embedding's inputs and the logits are held where the model's first and last stages run:
    under DualPipe on both stage 0 and stage P - 1 (each holds both ends: the same memory), under
    DualPipeV on stage 0 alone (the V starts and ends there); their stages hold P + 1 micro-batches
    of their blocks alike."""
    dual, v = (_plan(tmp_path, s).layout for s in ("dualpipe", "dualpipev"))
    assert dual is not None
    assert v is not None
    assert dual.memory[0].activations == dual.memory[3].activations
    assert v.memory[0].activations > v.memory[1].activations == v.memory[3].activations
    assert dual.memory[0].activations > dual.memory[1].activations == dual.memory[2].activations
