"""What a refused command prints: one line naming the rule, exit 2, no traceback (the project's
rule for bad input)."""

from __future__ import annotations

from typer.testing import Result


def refused_in_one_line(result: Result, rule: str) -> None:
    """`result` is a usage refusal whose one line says `rule`."""
    assert result.exit_code == 2, result.output
    assert rule in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
