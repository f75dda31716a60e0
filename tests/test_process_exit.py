"""`modtrans` ends its process without the interpreter's teardown (cli.run): what it prints still
arrives whole, through a pipe or not, and its exit status is the command's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

MODTRANS = [sys.executable, "-m", "modtrans"]


def _run(*args: str, **options: Any) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*MODTRANS, *args], capture_output=True, check=False, **options)


def test_everything_printed_arrives_through_a_pipe(tmp_path: Path) -> None:
    """A megabyte of JSON on stdout (a 64 KB pipe buffer many times over) and the same written to a
    file by the same command are the same bytes."""
    workload = tmp_path / "w.txt"
    assert _run("translate", "bert-base", "-o", str(workload)).returncode == 0
    text = workload.read_text()
    big = text.splitlines()
    rows = "\n".join(big[2:] * 40)
    workload.write_text(f"{big[0]}\n{len(big[2:]) * 40}\n{rows}\n")
    piped = _run("convert", str(workload), "--to", "json")
    assert piped.returncode == 0, piped.stderr
    written = tmp_path / "w.json"
    assert _run("convert", str(workload), "--to", "json", "-o", str(written)).returncode == 0
    assert len(piped.stdout) > 1 << 20
    assert piped.stdout == written.read_bytes()


def test_the_exit_status_is_the_commands(tmp_path: Path) -> None:
    clean = tmp_path / "clean.txt"
    assert _run("translate", "resnet50", "-o", str(clean)).returncode == 0
    assert _run("validate", str(clean)).returncode == 0
    broken = tmp_path / "broken.txt"
    broken.write_text(clean.read_text().replace("ALLREDUCE", "ALLREDUCEX", 1))
    found = _run("validate", str(broken))
    assert found.returncode == 1
    assert b"error V210 unknown comm type" in found.stdout
    usage = _run("translate", "resnet50", "--npus", "x")
    assert usage.returncode == 2
    assert usage.stderr.startswith(b"modtrans: --npus")
    for args, printed in ((("--version",), b"modtrans "), (("zoo", "list"), b"resnet50")):
        done = _run(*args)
        assert done.returncode == 0
        assert printed in done.stdout, args


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """`modtrans ... | head -1`: the rest cannot be written; the process says nothing about it.
    The output is many pipe buffers long, so the writer is still writing when the reader goes,
    however fast either runs (bert-base's 20 KB fitted in the pipe and checked nothing)."""
    workload = tmp_path / "w.txt"
    assert _run("translate", "bert-base", "-o", str(workload)).returncode == 0
    lines = workload.read_text().splitlines()
    workload.write_text(f"{lines[0]}\n{len(lines[2:]) * 40}\n" + "\n".join(lines[2:] * 40) + "\n")
    process = subprocess.Popen(
        [*MODTRANS, "convert", str(workload), "--to", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == b"{"
    process.stdout.close()
    _, error = process.communicate(timeout=60)
    assert workload.stat().st_size > 4 * (64 << 10)  # its JSON is larger still
    assert b"Traceback" not in error
    assert process.returncode != 0 or error == b""
