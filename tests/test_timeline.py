"""--timeline: the plan's schedule as a picture (plan/timeline.py, picture.py; a trace set's read
back through chakra/programs.py). The structure is checked (lanes, blocks, their order per
schedule) against the schedules' published orders."""

from __future__ import annotations

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
    """Per stage, its blocks in time order: (step, micro-batch, chunk)."""
    lanes: dict[int, list[tuple[str, int, int]]] = {}
    for stage, body in re.findall(r'<g class="lane" data-stage="(\d+)">(.*?)</g>', svg, re.S):
        blocks = re.findall(r'data-step="(\w+)" data-micro="(-?\d+)" data-chunk="(\d+)" x="([\d.]+)"', body)
        ordered = sorted(blocks, key=lambda b: float(b[3]))
        lanes[int(stage)] = [(step[0], int(micro), int(chunk)) for step, micro, chunk, _ in ordered]
    return lanes


def _draw(run_cli: Run, tmp_path: Path, *options: str) -> dict[int, list[tuple[str, int, int]]]:
    tmp_path.mkdir(exist_ok=True)
    picture = tmp_path / "t.svg"
    args = ("translate", "llama-3-8b", "--seq-len", "256", "--format", "chakra-et", *options)
    done = run_cli(*args, "-o", tmp_path / "t", "--timeline", picture)
    assert done.exit_code == 0, done.output
    return _lanes(picture.read_text())


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
        found = re.search(r"([\d,]+) ticks", path.read_text())
        assert found is not None
        return int(found.group(1).replace(",", ""))

    assert end(tmp_path / "z" / "t.svg") < end(tmp_path / "o" / "t.svg")


def test_simai_text_refuses_zero_bubble(run_cli: Run, tmp_path: Path) -> None:
    done = run_cli(
        "translate", "llama-3-8b", "--pp", "2", "--schedule", "zb-h1", "-d", "simai", "-o", tmp_path / "s.txt"
    )
    assert done.exit_code == 1
    assert "zb-h1" in done.stderr
