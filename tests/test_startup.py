"""Start-up as small as each command needs: the modules a command imports, counted from
`python -X importtime` (every import the process makes, a line each, whenever it happens), stay
within the budgets that docs/performance.md (Start-up) states, and no command loads a heavy
library it does not use. Times are not asserted (bench/bench_startup.py measures them): a module
count does not vary with the machine's load, and each module costs its import time on every run.

The budgets are the counts measured with the pinned dependencies on Python 3.11, plus about 10 %;
a change that passes one imports something new at start-up: import it where it is used, or raise
the budget here and in the docs with the measured cost."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

NUMPY = {"numpy"}  # 70 ms with numpy.ma: the trace self-check once used it (issue 39)
LIBRARIES = NUMPY | {"onnx", "jsonschema"}  # onnx 40 ms beyond numpy; jsonschema 30 ms
TEXT_ONLY = LIBRARIES | {"google.protobuf", "lark", "pydantic"}
# rich (20-40 ms) prints findings: a clean check says one plain line
LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)")

# command (with {out} filled in) -> (module budget, libraries it must not import), in an order
# where each command reads what one before it wrote
BUDGETS: dict[str, tuple[int, set[str]]] = {
    "--help": (250, TEXT_ONLY | {"rich"}),
    "translate llama-3-8b --tp 2 -o {out}/l.txt": (335, TEXT_ONLY),
    "validate {out}/l.txt": (250, TEXT_ONLY | {"rich"}),
    "translate llama-3-8b --tp 2 --pp 2 --format chakra-et -o {out}/l": (340, LIBRARIES),
    "validate {out}/l.0.et {out}/l.1.et {out}/l.2.et {out}/l.3.et": (305, LIBRARIES | {"rich"}),
    "translate resnet50 -o {out}/r.txt": (510, {"jsonschema", "lark", "pydantic"}),
}


def imported(args: list[str], cwd: Path) -> set[str]:
    """The modules `python -m modtrans ARGS` imports (`-X importtime` reports a few twice: one
    imported inside a circular import, one a failed attempt such as `nt` on POSIX)."""
    probe = [sys.executable, "-X", "importtime", "-m", "modtrans", *args]
    done = subprocess.run(probe, capture_output=True, text=True, cwd=cwd, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return {m[1] for m in map(LINE.match, done.stderr.splitlines()) if m}


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding what the `validate` commands read, written here too so that one command
    can be run alone."""
    folder = tmp_path_factory.mktemp("startup")
    for command in BUDGETS:
        if command.startswith("translate llama"):
            imported(command.format(out=folder).split(), folder)
    return folder


@pytest.mark.parametrize("command", list(BUDGETS))
def test_each_command_imports_no_more_modules_than_its_budget(command: str, out: Path) -> None:
    budget, forbidden = BUDGETS[command]
    modules = imported(command.format(out=out).split(), out)
    assert not forbidden & modules, f"{command}: imports {sorted(forbidden & modules)}"
    assert len(modules) <= budget, f"{command}: {len(modules)} modules, over its budget of {budget}"


def test_the_count_is_of_every_module_the_process_imports(out: Path) -> None:
    """The probe sees a module imported mid-command, not only at start-up: a translation from
    ONNX imports onnx when it reads the model, and `--help` imports none of it."""
    resnet = imported(["translate", "resnet50", "-o", str(out / "r.txt")], out)
    help_ = imported(["--help"], out)
    assert {"onnx", "numpy", "modtrans.extraction.load"} <= resnet
    assert {"typer", "modtrans.cli"} <= help_
    assert len(help_) < len(resnet)
