"""What a refused command prints: one line naming the rule, exit 2, no traceback (the project's
rule for bad input)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from typer.testing import Result


def refused_in_one_line(result: Result, rule: str) -> None:
    """`result` is a usage refusal whose one line says `rule`."""
    assert result.exit_code == 2, result.output
    assert rule in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def text_formats_refuse(run_cli: Callable[..., Any], options: Sequence[str], at: Path, naming: str) -> None:
    """ASTRA-sim 1.0's and SimAI's text files refuse a translation of llama-3-8b under `options`
    with D310 (a finding, exit 1), the message naming `naming`: their FWD_IN_BCKWD recomputes every
    layer alike."""
    for dialect in ("astra-sim", "simai"):
        refused: Result = run_cli(
            "translate", "llama-3-8b", *options, "--dialect", dialect, "-o", at / "w.txt"
        )
        assert refused.exit_code == 1
        assert "D310" in refused.output
        assert naming in refused.output
