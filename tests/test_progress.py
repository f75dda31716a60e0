"""Progress on long runs (issue 27): the library reports its tasks (modtrans/progress.py), the CLI
draws them with rich a second in, only on a terminal and never with -q."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from modtrans import progress, report
from modtrans.fileio import write_all

Run = Callable[..., Result]


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def start(self, label: str, total: int | None) -> object:
        self.events.append(("start", (label, total)))
        return label

    def step(self, handle: object, amount: int) -> None:
        self.events.append(("step", handle))

    def stop(self, handle: object) -> None:
        self.events.append(("stop", handle))


def test_writing_files_reports_one_step_a_file(tmp_path: Path) -> None:
    heard = Recorder()
    with progress.listening(heard):
        write_all([(tmp_path / f"f{i}", b"x") for i in range(3)])
    assert heard.events == [("start", ("writing", 3)), *[("step", "writing")] * 3, ("stop", "writing")]


def test_validating_a_trace_set_reports_each_rank(run_cli: Run, tmp_path: Path) -> None:
    from modtrans.chakra.validate import validate_paths

    assert (
        run_cli(
            "translate", "gpt2", "--tp", "2", "--dp", "2", "--format", "chakra-et", "-o", tmp_path / "t"
        ).exit_code
        == 0
    )
    heard = Recorder()
    with progress.listening(heard):
        validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    starts = [e for kind, e in heard.events if kind == "start"]
    assert starts == [("checking t", 4)]
    assert sum(kind == "step" for kind, _ in heard.events) == 4


def test_nobody_listening_costs_nothing_and_says_nothing(tmp_path: Path) -> None:
    with progress.task("x", total=2) as advance:
        advance()
    assert isinstance(report.status("m", quiet=True), type(report.status("m", quiet=True)))


def test_the_display_draws_each_task_once_shown() -> None:
    from rich.console import Console

    out = io.StringIO()
    display = report._Display("translating gpt2", Console(file=out, force_terminal=True, width=100))
    display.DELAY_S = 0.0
    display.timer.interval = 0.0
    with display, progress.task("writing", total=4) as advance:
        for _ in range(4):
            advance()
            time.sleep(0.05)
    drawn = out.getvalue()
    assert "translating gpt2" in drawn
    assert "writing" in drawn


def test_piped_or_quiet_runs_show_no_progress(run_cli: Run, tmp_path: Path) -> None:
    """Under the test runner standard error is not a terminal: nothing but the one-line summary."""
    done = run_cli("translate", "gpt2", "--tp", "2", "--format", "chakra-et", "-o", tmp_path / "t")
    assert done.exit_code == 0
    assert "\x1b[" not in done.stderr
    assert done.stderr.count("\n") == 1
    quiet = run_cli("translate", "gpt2", "--tp", "2", "--format", "chakra-et", "-q", "-o", tmp_path / "u")
    assert quiet.stderr == ""
