"""An empty input file is refused in one line that names what the command reads, whatever its
name (.json, .onnx, .txt) and wherever it is read: a model reader, a workload reader, or a command
that reads either (inspect, diff). Exit 2, nothing written, no traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

import modtrans
from modtrans.diagnostics import DiagnosticError

Run = Callable[..., Result]

MODEL = "an ONNX model or a Hugging Face config.json"
WORKLOAD = "a workload (text or JSON)"
EITHER = "an ONNX model, a Hugging Face config.json or a workload"

# what an editor or `touch` leaves: nothing, line ends and blanks, a byte-order mark alone
CONTENTS = {"nothing": b"", "blank lines": b"\n  \t\r\n\n", "byte-order mark": b"\xef\xbb\xbf\n"}
NAMES = ("config.json", "model.onnx", "workload.txt")


@pytest.fixture(params=[(n, c) for n in NAMES for c in CONTENTS], ids=lambda p: f"{p[0]}-{p[1]}")
def empty(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name, content = request.param
    path: Path = tmp_path / str(name)
    path.write_bytes(CONTENTS[content])
    return path


def _refused(done: Result, path: Path, takes: str) -> None:
    assert done.exit_code == 2, done.output
    assert done.output.splitlines()[0] == f"{path}: error F007 empty file: expected {takes}", done.output
    assert "Traceback" not in done.output


@pytest.mark.parametrize(
    ("command", "takes"),
    [
        (("translate", "{}", "-o", "{out}"), MODEL),
        (("translate", "{}", "--format", "chakra-et", "-o", "{out}/"), MODEL),
        (("extract", "{}", "-o", "{out}"), MODEL),
        (("inspect", "{}"), EITHER),
        (("diff", "{}", "gpt2"), EITHER),
        (("diff", "gpt2", "{}"), EITHER),
        (("validate", "{}"), WORKLOAD),
        (("fmt", "{}"), WORKLOAD),
        (("convert", "{}", "-o", "{out}"), WORKLOAD),
    ],
)
def test_each_command_names_what_it_reads(
    command: tuple[str, ...], takes: str, empty: Path, run_cli: Run, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "written"
    argv = [word.format(empty, out=out) for word in command]
    before = empty.read_bytes()
    _refused(run_cli(*argv), empty, takes)
    assert not (tmp_path / "out").exists()  # nothing written
    assert empty.read_bytes() == before  # fmt leaves it as it was


@pytest.mark.parametrize(("command", "takes"), [("validate", WORKLOAD), ("inspect", EITHER)])
def test_standard_input_that_is_empty(command: str, takes: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", command, "-"], input=b"", capture_output=True, check=False
    )
    assert done.returncode == 2, done.stderr
    said = (done.stdout + done.stderr).decode()  # validate's findings go to stdout
    assert said.startswith(f"<stdin>: error F007 empty file: expected {takes}"), said


def test_like_names_the_empty_reference(run_cli: Run, tmp_path: Path) -> None:
    reference = tmp_path / "reference.txt"
    reference.write_bytes(b"")
    done = run_cli("translate", "gpt2", "--like", reference, "-o", tmp_path / "g.txt")
    assert done.exit_code == 2, done.output
    assert f"--like {reference}: empty file: expected {WORKLOAD}" in done.stderr
    assert not (tmp_path / "g.txt").exists()


@pytest.mark.parametrize("read", [modtrans.extract, modtrans.translate])
def test_the_library_refuses_it_alike(read: Callable[[Path], object], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"")
    with pytest.raises(DiagnosticError) as raised:
        read(path)
    assert [(d.code, d.message) for d in raised.value.diagnostics] == [
        ("F007", f"empty file: expected {MODEL}")
    ]


def test_a_file_with_content_is_read_as_before(run_cli: Run, tmp_path: Path) -> None:
    """Only nothing is empty: one character that is not white space goes to the file's reader."""
    path = tmp_path / "config.json"
    path.write_bytes(b"\n{\n")
    done = run_cli("inspect", path)
    assert done.exit_code == 2
    assert "F007" not in done.stderr
    assert "S401" in done.stderr  # JSON's own finding, positioned
