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

# Import costs: numpy 69-73 ms (issue 39), onnx with numpy and ml_dtypes 0.1 s, rich 40 ms, pydantic
# 40 ms (docs/performance.md); jsonschema is asked only what is wrong with an invalid document.
LIBRARIES = {"numpy", "onnx", "jsonschema"}
TEXT_ONLY = LIBRARIES | {"google.protobuf", "lark", "pydantic"}  # protobuf reads traces; lark, odd lines
LINE = re.compile(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)")

# command (with {out} filled in) -> (module budget, libraries it must not import). A command reads
# what one before it wrote (WRITERS). rich prints findings: a clean check's summary is plain text.
# `modtrans --help` lists the commands without importing one (modtrans.cli.COMMANDS): typer, the
# interpreter's own modules and the command line's classes, none of the library behind them.
PROGRAM = {"modtrans.table", "modtrans.cli.common", "modtrans.request", "modtrans.strategy.groups"}
BUDGETS: dict[str, tuple[int, set[str]]] = {
    "--help": (165, TEXT_ONLY | {"rich"} | PROGRAM),
    "translate llama-3-8b --tp 2 -o {out}/l.txt": (300, TEXT_ONLY),
    # SimAI's keyed header: the quick check reads no text back, and the reader's keyed path no lark
    "translate llama-3-8b --tp 2 --pp 2 --sp --dialect simai -o {out}/s.txt": (300, TEXT_ONLY),
    "validate {out}/s.txt": (220, TEXT_ONLY | {"rich"}),
    "validate {out}/l.txt": (220, TEXT_ONLY | {"rich"}),
    "translate llama-3-8b --tp 2 --pp 2 --format chakra-et -o {out}/l": (340, LIBRARIES),
    "validate {out}/l.0.et {out}/l.1.et {out}/l.2.et {out}/l.3.et": (275, LIBRARIES | {"rich"}),
    "convert {out}/l.txt --to json -o {out}/w.json": (250, TEXT_ONLY | {"rich"}),
    "validate {out}/w.json": (220, TEXT_ONLY | {"rich"}),  # compiled predicates: jsonschema names faults
    "translate resnet50 -o {out}/r.txt": (510, {"jsonschema", "lark", "pydantic"}),
    "extract resnet50 -o {out}/r.ir.json": (500, {"jsonschema", "lark", "pydantic", "rich"}),
}
WRITERS = ("translate llama", "convert")
# Each command's --help imports its own module and what its options name (the option table), no
# other command's module: 212-234 modules measured, one budget for all.
for _command in ("validate", "fmt", "convert", "extract", "translate", "inspect", "fetch", "diff", "lsp",
                 "simulate", "estimate", "sweep", "zoo", "zoo list", "cost", "cost list"):  # fmt: skip
    BUDGETS[f"{_command} --help"] = (255, TEXT_ONLY | {"rich"})


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
        if command.startswith(WRITERS):
            imported(command.format(out=folder).split(), folder)
    return folder


@pytest.mark.parametrize("command", list(BUDGETS))
def test_each_command_imports_no_more_modules_than_its_budget(command: str, out: Path) -> None:
    budget, forbidden = BUDGETS[command]
    modules = imported(command.format(out=out).split(), out)
    assert not forbidden & modules, f"{command}: imports {sorted(forbidden & modules)}"
    assert len(modules) <= budget, f"{command}: {len(modules)} modules, over its budget of {budget}"


def test_every_command_has_its_help_budget() -> None:
    """A command added to the program is added here too (its --help measured)."""
    from modtrans.cli import COMMANDS

    assert {f"{name} --help" for name in COMMANDS} <= set(BUDGETS)


def test_a_commands_help_imports_no_other_commands_module(out: Path) -> None:
    translate = imported(["translate", "--help"], out)
    assert "modtrans.cli.translate" in translate
    assert not {"modtrans.cli.workload", "modtrans.cli.models", "modtrans.cli.simulate"} & translate


def test_the_count_is_of_every_module_the_process_imports(out: Path) -> None:
    """The probe sees a module imported mid-command, not only at start-up: a translation from
    ONNX imports onnx when it reads the model, and `--help` imports none of it."""
    resnet = imported(["translate", "resnet50", "-o", str(out / "r.txt")], out)
    help_ = imported(["--help"], out)
    assert {"onnx", "numpy", "modtrans.extraction.load"} <= resnet
    assert {"typer", "modtrans.cli"} <= help_
    assert len(help_) < len(resnet)
