"""--timeline: the plan's schedule as a picture (plan/timeline.py, picture.py; a trace set's read
back through chakra/programs.py). The structure is checked (lanes, blocks, their order per
schedule) against the schedules' published orders."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

Run = Callable[..., Result]
ROOT = Path(__file__).resolve().parents[1]
PICTURE = "docs/llama-3-8b-tp2-pp4-interleaved.svg"
COMMAND = (
    "translate", "llama-3-8b", "--tp", "2", "--pp", "4", "--vpp", "2", "--schedule", "interleaved",
    "--global-batch", "8", "--seq-len", "512", "--format", "chakra-et",
)  # fmt: skip


def _lanes(svg: str) -> dict[int, list[tuple[str, int, int]]]:
    """Per stage, its schedule's blocks in time order: (step, micro-batch, chunk); the optimizer
    step after them is left out (test_optimizer_step_is_drawn_last), and the gradient-sync kernels
    Megatron runs once an iteration over its bucket (at D = 1 too: the NaN check's norm)."""
    lanes: dict[int, list[tuple[str, int, int]]] = {}
    for stage, body in re.findall(r'<g class="lane" data-stage="(\d+)">(.*?)</g>', svg, re.S):
        blocks = re.findall(r'data-step="(\w+)" data-micro="(-?\d+)" data-chunk="(\d+)" x="([\d.]+)"', body)
        ordered = sorted(
            (b for b in blocks if b[0] not in ("update", "grad_sync")), key=lambda b: float(b[3])
        )
        lanes[int(stage)] = [(step[0], int(micro), int(chunk)) for step, micro, chunk, _ in ordered]
    return lanes


def _draw(run_cli: Run, tmp_path: Path, *options: str) -> dict[int, list[tuple[str, int, int]]]:
    tmp_path.mkdir(exist_ok=True)
    picture = tmp_path / "t.svg"
    args = ("translate", "llama-3-8b", "--seq-len", "256", "--format", "chakra-et", *options)
    done = run_cli(*args, "-o", tmp_path / "t", "--timeline", picture)
    assert done.exit_code == 0, done.output
    return _lanes(picture.read_text())


def test_optimizer_step_is_drawn_last(run_cli: Run, tmp_path: Path) -> None:
    """Each stage ends with its optimizer step (U), after its last backward, named in the legend."""
    _draw(run_cli, tmp_path, "--pp", "2", "--global-batch", "4")
    svg = (tmp_path / "t.svg").read_text()
    for _, body in re.findall(r'<g class="lane" data-stage="(\d+)">(.*?)</g>', svg, re.S):
        blocks = re.findall(r'data-step="(\w+)" data-micro="-?\d+" data-chunk="\d+" x="([\d.]+)"', body)
        last = max(blocks, key=lambda b: float(b[1]))
        assert last[0] == "update"
        assert sum(b[0] == "update" for b in blocks) == 1
    assert "optimizer step" in svg


def test_1f1b_warms_up_p_minus_the_stage_forwards(run_cli: Run, tmp_path: Path) -> None:
    """1F1B (Narayanan et al. 2021, fig. 4): stage p runs P - p forwards before its first backward,
    then alternates, then drains; every micro-batch once forward (F) and once backward (B)."""
    lanes = _draw(run_cli, tmp_path, "--pp", "4", "--global-batch", "8")
    assert sorted(lanes) == [0, 1, 2, 3]
    for stage, blocks in lanes.items():
        assert sorted(b for b in blocks if b[0] == "f") == [("f", m, 0) for m in range(8)]
        assert sorted(b for b in blocks if b[0] == "i") == [("i", m, 0) for m in range(8)]
        steps = "".join("F" if b[0] == "f" else "B" for b in blocks)
        warm = 4 - stage
        assert steps == "F" * warm + "BF" * (8 - warm) + "B" * warm, (stage, steps)


def test_gpipe_runs_every_forward_before_any_backward(run_cli: Run, tmp_path: Path) -> None:
    lanes = _draw(run_cli, tmp_path, "--pp", "2", "--global-batch", "4", "--schedule", "gpipe")
    for blocks in lanes.values():
        assert "".join("F" if b[0] == "f" else "B" for b in blocks) == "FFFFBBBB"


def test_interleaved_runs_each_micro_batch_through_each_chunk(run_cli: Run, tmp_path: Path) -> None:
    """Interleaved 1F1B with V = 2 chunks per stage: each stage runs every micro-batch forward and
    backward through both its chunks; stage 0 warms up (P - 1) x 2 + (V - 1) x P = 10 forward
    chunks before its first backward, then alternates (Megatron-LM's schedules.py,
    get_pipeline_model_parallel_warmup_microbatches... num_warmup_microbatches)."""
    lanes = _draw(
        run_cli, tmp_path, "--pp", "4", "--vpp", "2", "--schedule", "interleaved", "--global-batch", "8"
    )
    for blocks in lanes.values():
        forwards = [b for b in blocks if b[0] == "f"]
        assert sorted(forwards) == [("f", m, c) for m in range(8) for c in (0, 1)]
    first = "".join("F" if b[0] == "f" else "B" for b in lanes[0])
    assert first.index("B") == 11  # 10 warm-up forwards, then the first steady forward
    assert first[11:13] == "BF"


def test_the_readme_picture_is_what_its_command_draws(run_cli: Run, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    assert PICTURE in readme
    assert " ".join(("modtrans", *COMMAND)) in " ".join(readme.split())
    drawn = tmp_path / "p.svg"
    assert run_cli(*COMMAND, "-o", tmp_path / "t", "--timeline", drawn).exit_code == 0
    assert drawn.read_text() == (ROOT / PICTURE).read_text()


@pytest.mark.parametrize("fmt", ["text", "chakra-et"])
def test_a_keyword_preset_draws_one_lane(fmt: str, run_cli: Run, tmp_path: Path) -> None:
    picture = tmp_path / "g.svg"
    out = tmp_path / ("g" if fmt == "chakra-et" else "g.txt")
    done = run_cli("translate", "gpt2", "--format", fmt, "-o", out, "--timeline", picture)
    assert done.exit_code == 0, done.output
    lanes = _lanes(picture.read_text())
    assert list(lanes) == [0]
    assert [b[0] for b in lanes[0]][:1] == ["f"]


def _geometry(svg: str) -> list[tuple[str, ...]]:
    """Every block's step, micro-batch, chunk, lane and left edge, as drawn."""
    return re.findall(
        r'class="block" data-step="(\w+)" data-micro="(-?\d+)" data-chunk="(\d+)" x="([\d.]+)" y="(\d+)"', svg
    )


@pytest.mark.parametrize(
    "layout",
    [
        ("--pp", "4", "--vpp", "2", "--schedule", "interleaved", "--global-batch", "8"),
        ("--pp", "2", "--dp", "2", "--global-batch", "8", "--recompute", "full"),
        ("--pp", "2", "--global-batch", "4", "--schedule", "gpipe"),
    ],
    ids=["interleaved", "1f1b-full-recompute", "gpipe"],
)
def test_a_trace_set_on_disk_draws_the_schedule_its_plan_drew(
    run_cli: Run, tmp_path: Path, layout: tuple[str, ...]
) -> None:
    """`inspect PREFIX --timeline` reads the schedule back from the traces (chakra/programs.py:
    each stage's first rank, its nodes, dependencies, sends and receives); it draws the blocks
    `translate --timeline` drew from the plan, at the same places."""
    args = ("translate", "llama-3-8b", "--seq-len", "256", "--format", "chakra-et", *layout)
    made = run_cli(*args, "-o", tmp_path / "t", "--timeline", tmp_path / "plan.svg")
    assert made.exit_code == 0, made.output
    done = run_cli("inspect", tmp_path / "t", "--timeline", tmp_path / "traces.svg")
    assert done.exit_code == 0, done.output
    from_plan = _geometry((tmp_path / "plan.svg").read_text())
    from_traces = _geometry((tmp_path / "traces.svg").read_text())
    assert len(from_plan) == len(from_traces) > 0
    for a, b in zip(from_plan, from_traces, strict=True):
        assert (a[0], a[1], a[2], a[4]) == (b[0], b[1], b[2], b[4])
        assert abs(float(a[3]) - float(b[3])) < 1.0  # pixels: the traces' durations are whole us


def test_a_png_is_the_same_picture(run_cli: Run, tmp_path: Path) -> None:
    """FILE.png: Pillow draws the SVG's picture, at its size (the `png` extra)."""
    from PIL import Image

    args = ("translate", "llama-3-8b", "--seq-len", "256", "--pp", "2", "--global-batch", "4")
    made = run_cli(*args, "--format", "chakra-et", "-o", tmp_path / "t", "--timeline", tmp_path / "p.svg")
    assert made.exit_code == 0, made.output
    assert run_cli("inspect", tmp_path / "t", "--timeline", tmp_path / "p.png").exit_code == 0
    size = re.search(r'width="(\d+)" height="(\d+)"', (tmp_path / "p.svg").read_text())
    assert size is not None
    with Image.open(tmp_path / "p.png") as image:
        assert image.format == "PNG"
        assert image.size == (int(size.group(1)), int(size.group(2)))
        # a forward block's colour is drawn (picture.COLOURS: #4e79a7)
        assert (0x4E, 0x79, 0xA7) in {c for _, c in image.getcolors(1 << 16) or []}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("inspect", "gpt2", "--timeline", "x.svg"), "give its PREFIX"),
        (("translate", "gpt2", "-o", "g.txt", "--timeline", "x.pdf"), "FILE.svg or FILE.png"),
    ],
)
def test_a_timeline_it_cannot_draw_is_one_line(
    run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], said: str
) -> None:
    monkeypatch.chdir(tmp_path)
    done = run_cli(*args)
    assert done.exit_code == 2, done.output
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_inspect_never_draws_over_a_trace_of_its_set(run_cli: Run, tmp_path: Path) -> None:
    assert run_cli("translate", "gpt2", "--format", "chakra-et", "-o", tmp_path / "t").exit_code == 0
    before = (tmp_path / "t.0.et").read_bytes()
    renamed = tmp_path / "t.0.svg"
    (tmp_path / "t.0.et").rename(renamed)
    (tmp_path / "t.0.et").symlink_to(renamed)
    done = run_cli("inspect", tmp_path / "t", "--timeline", renamed)
    assert done.exit_code == 2
    assert renamed.read_bytes() == before


def test_zero_bubble_h1_defers_each_stage_s_weight_gradients_by_s(run_cli: Run, tmp_path: Path) -> None:
    """ZB-H1 (Qi et al. 2024, section 3.1): backwards split into B (input gradient) and W (weight
    gradient); stage s holds 1F1B's P - s forwards before its first B and runs its first W after
    its (s + 1)-th B, so at most P micro-batches' activations are held (1F1B's peak) and the
    deferred W's fill the cool-down: a shorter iteration than 1F1B's with a free network."""
    lanes = _draw(run_cli, tmp_path / "z", "--pp", "4", "--global-batch", "8", "--schedule", "zb-h1")
    for stage, blocks in lanes.items():
        kinds = [b[0] for b in blocks]
        assert kinds.count("f") == kinds.count("i") == kinds.count("w") == 8
        assert kinds.index("i") == 4 - stage  # P - s forwards first
        first_w = kinds.index("w")
        assert kinds[:first_w].count("i") == stage + 1
        held = 0
        for kind in kinds:
            held += {"f": 1, "w": -1}.get(kind, 0)
            assert held <= 4
    _draw(run_cli, tmp_path / "o", "--pp", "4", "--global-batch", "8")  # 1F1B, beside it

    def end(path: Path) -> int:
        found = re.search(r"\(([\d,]+) ns\) per iteration", path.read_text())
        assert found is not None
        return int(found.group(1).replace(",", ""))

    assert end(tmp_path / "z" / "t.svg") < end(tmp_path / "o" / "t.svg")


def test_simai_text_refuses_zero_bubble(run_cli: Run, tmp_path: Path) -> None:
    done = run_cli(
        "translate", "llama-3-8b", "--pp", "2", "--schedule", "zb-h1", "-d", "simai", "-o", tmp_path / "s.txt"
    )
    assert done.exit_code == 1
    assert "zb-h1" in done.stderr


def _notes(svg: str) -> list[str]:
    return re.findall(r'<text class="note"[^>]*>([^<]*)</text>', svg)


def _ns(svg: str) -> int:
    found = re.search(r"\(([\d,]+) ns\) per iteration with a free network", svg)
    assert found is not None
    return int(found.group(1).replace(",", ""))


def test_one_lane_s_iteration_is_the_workload_s_compute(run_cli: Run, tmp_path: Path) -> None:
    """A keyword preset on one lane: the iteration with a free network is every layer's forward,
    input-gradient and weight-gradient compute and its optimizer step, as the text written beside it
    says (ns; DATA's lines hold the step in their update column, plan/lines.py)."""
    import modtrans

    out, picture = tmp_path / "r.txt", tmp_path / "r.svg"
    assert run_cli("translate", "resnet50", "-o", out, "--timeline", picture).exit_code == 0
    workload = modtrans.parse(out.read_text()).workload
    assert workload is not None
    phases = [(x.fwd, x.input_grad, x.weight_grad) for x in workload.layers]
    step = sum(x.update_time for x in workload.layers)
    assert _ns(picture.read_text()) == sum(p.compute_time for three in phases for p in three) + step


@pytest.mark.parametrize(
    "model",
    [("llama-3-8b", "--seq-len", "256", "--pp", "2", "--global-batch", "4", "-d", "simai"), ("resnet50",)],
)
def test_the_time_axis_has_a_unit_and_its_ticks_where_their_times_are(
    run_cli: Run, tmp_path: Path, model: tuple[str, ...]
) -> None:
    """Ticks labelled in one unit, the largest the span holds once, evenly stepped from 0, each at
    its time's share of the lane's width (the footer's ns the whole lane)."""
    picture = tmp_path / "p.svg"
    done = run_cli("translate", *model, "-o", tmp_path / "o.txt", "--timeline", picture)
    assert done.exit_code == 0, done.output
    svg = picture.read_text()
    axis = re.search(r'<g class="axis" data-unit="([^"]+)">(.*?)</g>', svg, re.S)
    assert axis is not None
    ticks = re.findall(r'data-ns="([\d.]+)" x="([\d.]+)"[^>]*>([^<]*)</text>', axis.group(2))
    span = _ns(svg)
    size = {"ms": 1e6, "µs": 1e3}[axis.group(1)]
    assert 1 <= span / size < 1000  # the largest unit the span holds once
    assert 4 <= len(ticks) <= 11
    lane = re.search(r'<rect x="(\d+)" y="\d+" width="([\d.]+)" height="\d+" fill="#f4f4f4"/>', svg)
    assert lane is not None
    left, width = float(lane.group(1)), float(lane.group(2))
    steps = {round(float(b[0]) - float(a[0]), 3) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1
    for ns, x, label in ticks:
        number, shown = label.split(" ")
        assert shown == axis.group(1)
        assert float(number.replace(",", "")) == pytest.approx(float(ns) / size)
        assert float(x) == pytest.approx(left + float(ns) / span * width, abs=0.6)
        assert float(ns) <= span


def test_narrow_blocks_are_counted_in_the_legend(run_cli: Run, tmp_path: Path) -> None:
    """Each label fits its block (9 px a character); the blocks drawn without their full label
    (step and micro-batch) are counted in the legend, none left unsaid."""
    lanes = _draw(run_cli, tmp_path, "--pp", "4", "--global-batch", "64")
    svg = (tmp_path / "t.svg").read_text()
    blocks = re.findall(
        r'data-micro="(-?\d+)" data-chunk="\d+" x="[\d.]+" y="[\d.]+" width="([\d.]+)"[^>]*>'
        r'<title>[^<]*</title></rect>(?:\n<text class="label"[^>]*>([^<]*)</text>)?',
        svg,
    )
    assert (
        len(blocks) == sum(len(b) for b in lanes.values()) + 8 == 4 * 64 * 2 + 8
    )  # + an optimizer step and the bucket's NaN check (grad_sync) a stage
    short = 0
    for micro, width, label in blocks:
        assert len(label) * 9 < float(width) or not label
        short += not label or (not label.endswith(micro) and micro != "-1")  # -1: the optimizer step
    notes = " ".join(_notes(svg))
    assert f"{short:,} of {len(blocks):,} blocks too narrow for their label" in notes
    assert short > 0


def test_the_title_says_the_layout_s_own_dp(run_cli: Run, tmp_path: Path) -> None:
    """--dp 4 --ep 2: DP4 (the experts are carved from the data-parallel ranks), EP2 beside it."""
    picture = tmp_path / "m.svg"
    args = ("deepseek-moe-16b", "--dp", "4", "--ep", "2", "--pp", "2", "-d", "simai")
    assert run_cli("translate", *args, "-o", tmp_path / "m.txt", "--timeline", picture).exit_code == 0
    title = re.search(r"<title>([^<]*)</title>", picture.read_text())
    assert title is not None
    assert title.group(1).startswith("deepseek-moe-16b: TP1 x PP2 x DP4 (EP2), 1f1b")


def test_every_file_written_is_said_and_the_footer_has_one_unit(run_cli: Run, tmp_path: Path) -> None:
    """translate --timeline names each file it wrote, the traces counted apart from the rest;
    inspect --timeline says what it wrote; both footers in ns, equal to the traces' microsecond."""
    made = run_cli(
        "translate", "llama-3-8b", "--seq-len", "256", "--pp", "2", "--global-batch", "4",
        "--format", "chakra-et", "-o", tmp_path / "t", "--timeline", tmp_path / "plan.svg",
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    written = sorted(tmp_path.iterdir())
    traces = [p for p in written if p.suffix == ".et"]
    said = made.stderr.strip().splitlines()[-1]
    assert said.startswith(f"wrote {len(traces)} Chakra traces: {traces[0]} .. {traces[-1]}, ")
    assert all(str(p) in said for p in written if p.suffix != ".et")
    drawn = run_cli("inspect", tmp_path / "t", "--timeline", tmp_path / "traces.svg")
    assert drawn.exit_code == 0, drawn.output
    assert f"wrote {tmp_path / 'traces.svg'}" in drawn.stderr
    plan, traces_ns = _ns((tmp_path / "plan.svg").read_text()), _ns((tmp_path / "traces.svg").read_text())
    assert abs(plan - traces_ns) <= 1000 * len(_lanes((tmp_path / "plan.svg").read_text())[0])
