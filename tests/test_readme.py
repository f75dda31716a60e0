"""The README's own examples: the Python block runs and passes the project's ruff settings; every
command line in a shell block names only options the command has."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modtrans.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_the_python_examples_run_from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for block in _blocks("python"):
        exec(compile(block, "README.md", "exec"), {})


def test_the_python_examples_pass_ruff(tmp_path: Path) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    for index, block in enumerate(_blocks("python")):
        example = tmp_path / f"example_{index}.py"
        example.write_text(block)
        done = subprocess.run(
            [ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(example)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout


def _command_lines() -> list[list[str]]:
    """Each `modtrans ...` line of the shell blocks, with its indented `[--option]` continuations."""
    commands: list[list[str]] = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            body = line.split("#", 1)[0].replace("&&", " ")
            if line.startswith("modtrans "):
                commands.append(shlex.split(body))
            elif line.startswith(" ") and line.strip().startswith("[") and commands:
                commands[-1] += shlex.split(body)
    return commands


def test_every_documented_option_exists() -> None:
    runner = CliRunner()
    helps: dict[str, str] = {}
    checked = 0
    for words in _command_lines():
        if len(words) < 2 or words[1] in ("zoo", "cost"):
            continue
        command = words[1]
        if command not in helps:
            helps[command] = runner.invoke(app, [command, "--help"]).output
        for word in words[2:]:
            for option in re.findall(r"--[a-z][a-z-]*", word.split("=", 1)[0]):
                checked += 1
                assert option in helps[command], f"README: `modtrans {command} {option}` does not exist"
    assert checked > 40  # the synopses and examples: 47 options when this was written
