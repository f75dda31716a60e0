"""A run of digits longer than int() accepts (4,300) in any integer a user gives: every numeric
token of every real workload (header values, the count, each layer field), a workload JSON
integer, and every integer option. Each is a positioned V204 (S401 in JSON) or a one-line usage
error, never `ValueError: Exceeds the limit (4300 digits)`: the text fast paths, lark, the JSON
reader and the option converter all read digits through `numbers.integer`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import modtrans
from modtrans.cli import app
from modtrans.workload.load import validate_file
from tests.conftest import corpus_files

# int() refuses each of these, whatever its value: it counts leading zeros too
RUNS = ["4" + "0" * 4300, "0" * 5000 + "4", "-" + "0" * 4400 + "1", "+" + "0" * 4400]
_NUMBER = re.compile(r"(?<![\w.-])[+-]?[0-9]+(?![\w.])")


def _small_files() -> list[Path]:
    # one file per directory and dialect: the fast paths and lark see every header and line shape
    seen: dict[Path, Path] = {}
    for path in corpus_files():
        if path.stat().st_size < 20_000:
            seen.setdefault(path.parent, path)
    return sorted(seen.values())


@pytest.mark.parametrize("path", _small_files(), ids=lambda p: p.name)
def test_every_numeric_token_of_a_real_file_holds_a_digit_run(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    checked = 0
    for number, line in enumerate(lines[:4], 1):
        for match in _NUMBER.finditer(line):
            for run in RUNS:
                edited = [
                    *lines[: number - 1],
                    line[: match.start()] + run + line[match.end() :],
                    *lines[number:],
                ]
                text = "\n".join(edited)
                found = modtrans.validate(text)  # raised ValueError before
                result = modtrans.parse(text)
                if result.workload is not None and result.ok:  # 5,000 zeros and a 4 is 4, spelled so
                    assert modtrans.write(result.workload) == text, (path.name, number, run[:8])
                here = [d for d in found if d.span is not None and d.span.line == number]
                assert here, (path.name, number, match.group(), run[:8])
                checked += 1
    assert checked >= 4


def test_a_workload_json_integer_of_thousands_of_digits_is_s401(tmp_path: Path) -> None:
    source = tmp_path / "w.txt"
    source.write_text("DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    target = tmp_path / "w.json"
    assert CliRunner().invoke(app, ["convert", str(source), "--to", "json", "-o", str(target)]).exit_code == 0
    document = json.loads(target.read_text())
    document["layers"][0]["update_time"] = -1  # a marker the dump holds once
    text = json.dumps(document).replace('"update_time": -1', '"update_time": ' + RUNS[0])
    assert RUNS[0] in text
    target.write_text(text)
    _, found = validate_file(target)
    assert [d.code for d in found] == ["S401"]
    assert found[0].span is not None


def _integer_options(command: str) -> list[str]:
    text = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
    return sorted(set(re.findall(r"(--[a-z][a-z-]+)(?:,\s+-\w)?\s+N\b", text)))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "subject"), [("translate", "gpt2"), ("diff", "resnet50"), ("inspect", "gpt2")]
)
def test_every_integer_option_refuses_a_digit_run_on_one_line(command: str, subject: str) -> None:
    options = _integer_options(command)
    if command == "translate":
        assert {"--npus", "--tp", "--batch", "--global-batch"} <= set(options)
    for option in options:
        for run in RUNS[:2]:
            args = [command, subject, *(["resnet50"] if command == "diff" else []), option, run]
            result = CliRunner().invoke(app, args)
            assert result.exception is None or isinstance(result.exception, SystemExit), (
                option,
                result.exception,
            )
            assert "4300" not in result.output, (option, result.output)
            if run == RUNS[0]:  # 4 x 10^4300: past every limit
                assert result.exit_code == 2, (option, result.output)
                assert len(result.output.strip().splitlines()) == 1, (option, result.output)
            else:  # 4 behind 5,000 zeros is 4: taken, or refused for what 4 means there
                assert result.exit_code in (0, 1, 2), (option, result.output)
