"""What each command imports: the heavy libraries only where the command needs them (issue 16:
`--help` and text commands never load onnx, numpy, jsonschema or protobuf; nothing imports the
39-grammar rfc3987_syntax that jsonschema's format checkers would pull in; no command imports
pydantic, which typer 0.29 would import to convert option values: cli/convert.py converts them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

WORKLOAD = Path(__file__).resolve().parent.parent / "fixtures" / "workloads"
HEAVY = {"onnx", "numpy", "jsonschema", "google.protobuf", "rfc3987_syntax", "pydantic"}
_PROBE = """
import json, sys
from modtrans.cli import main
roots = tuple(json.loads(sys.argv[1]))
sys.argv = ["modtrans", *sys.argv[2:]]
try:
    main()
except SystemExit:
    pass
print("\\n" + json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in roots)))
"""


def _modules(roots: tuple[str, ...], *args: str) -> set[str]:
    """The modules under the top-level packages `roots` that `modtrans ARGS` has loaded when it ends."""
    probe = [sys.executable, "-c", _PROBE, json.dumps(roots), *args]
    done = subprocess.run(probe, capture_output=True, text=True, check=False)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _imported(*args: str) -> set[str]:
    modules = _modules(("onnx", "numpy", "jsonschema", "google", "rfc3987_syntax", "pydantic"), *args)
    return {name for name in HEAVY if name in modules}


def _first_workload() -> Path:
    return next(p for p in sorted(WORKLOAD.rglob("*.txt")))


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (("--help",), set()),
        (("validate", "{workload}"), set()),
        (("diff", "{workload}", "{workload}"), set()),
        (("diff", "--rtol", "0.5", "--format", "json", "{workload}", "{workload}"), set()),
        (("convert", "{workload}", "--to", "json", "-o", "{out}/w.json"), set()),
        (("translate", "llama-3-8b", "-o", "{out}/l.txt"), set()),  # a configuration needs no onnx
        (("translate", "resnet50", "-o", "{out}/r.txt"), {"onnx", "numpy", "google.protobuf"}),
        (
            ("extract", "resnet50", "-o", "{out}/r.ir.json"),
            {"onnx", "numpy", "jsonschema", "google.protobuf"},
        ),
    ],
)
def test_each_command_imports_only_what_it_needs(
    args: tuple[str, ...], allowed: set[str], tmp_path: Path
) -> None:
    filled = [a.format(workload=_first_workload(), out=tmp_path) for a in args]
    assert _imported(*filled) <= allowed


def test_no_command_loads_the_network_stack_unless_it_downloads(tmp_path: Path) -> None:
    """urllib.request brings http.client and email: 20 ms that only `fetch` needs."""
    modules = _modules(("http", "urllib", "email"), "translate", "resnet50", "-o", str(tmp_path / "r.txt"))
    assert not {"urllib.request", "http.client"} & modules


def test_a_translation_that_prints_no_report_does_not_load_rich(tmp_path: Path) -> None:
    """rich is 40 ms to import: report.py, diff/render.py and ir/render.py load it when they
    print, so a clean translate -o (which says only what it wrote) never does."""
    assert _modules(("rich",), "translate", "resnet50", "-o", str(tmp_path / "r.txt")) == set()


def test_lark_is_imported_only_for_lines_the_fast_paths_do_not_read(tmp_path: Path) -> None:
    """lark's import and parser cost 22 ms. A translation validates what it writes, whose header
    (the usual one or SimAI's keyed one), count and layer lines all take the fast paths; `--help`
    parses nothing."""
    out = tmp_path / "r.txt"
    assert _modules(("lark",), "--help") == set()
    assert _modules(("lark",), "translate", "resnet50", "-o", str(out)) == set()
    assert _modules(("lark",), "validate", str(out)) == set()
    out.write_text(out.read_text().replace("\t", "\t\t", 1).replace("DATA", "DATA ep: 2", 1))
    assert _modules(("lark",), "validate", str(out)) == set()  # SimAI's keyed header: a fast path
    out.write_text(out.read_text().replace("DATA", "DATA mode: 1", 1))
    assert "lark" in _modules(("lark",), "validate", str(out))  # AICB's unknown key: the full path


def test_a_text_translation_does_not_load_the_trace_writer(tmp_path: Path) -> None:
    """The library's writers (outputs.py) load the Chakra writer only for traces: a text output
    imports what it did before the API held them (it cost 25-75 ms a translation)."""
    text = _modules(("modtrans",), "translate", "resnet50", "-o", str(tmp_path / "r.txt"))
    assert "modtrans.outputs" in text  # the probe sees the writers' module...
    assert not {m for m in text if m.startswith("modtrans.chakra")}  # ...and no trace code


def test_a_trace_translation_does_not_load_the_text_writer_or_its_checks(tmp_path: Path) -> None:
    """The formats register together (formats/__init__.py), yet a trace set's translation loads
    none of the text's writer, quick check and validator (formats/text.py imports them when a text
    is made): their classes and regexes were 4-6 ms of C4's serial start."""
    args = ["translate", "llama-3-8b", "--tp", "2", "--format", "chakra-et", "-o", str(tmp_path / "t")]
    traces = _modules(("modtrans",), *args)
    assert "modtrans.formats.text" in traces
    assert "modtrans.chakra.write" in traces
    text = {"modtrans.workload.quick", "modtrans.workload.checks", "modtrans.workload.validate"}
    assert not traces & (text | {"modtrans.workload.write"})
