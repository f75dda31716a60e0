"""--timeline: the plan's schedule as an SVG picture (plan/timeline.py, picture.py). The structure
is checked (lanes, blocks, their order per schedule) against the schedules' published orders."""

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
