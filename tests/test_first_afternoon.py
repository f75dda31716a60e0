"""What a new user meets in the first hour: pipes, --version, what was written, names of files
that are not what a command reads, built-ins named by name, a did-you-mean."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans import zoo
from tests.conftest import CORPUS

ROOT = Path(__file__).resolve().parent.parent
RESNET_REFERENCE = ROOT / "fixtures/workloads/corpus/astra-sim/Resnet50_DataParallel.txt"


def _modtrans(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modtrans", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        check=False,
    )


def test_standard_input_and_output_are_dash() -> None:
    translated = _modtrans("translate", "resnet50").stdout
    checked = _modtrans("validate", "-", stdin=translated.encode())
    assert checked.returncode == 0, checked.stdout
    compared = _modtrans("diff", "-", str(RESNET_REFERENCE), stdin=translated.encode())
    assert compared.stdout.startswith("<stdin> vs ")
    document = _modtrans("convert", "-", "-o", "-", stdin=translated.encode()).stdout
    assert json.loads(document)["format"] == "modtrans-workload"
    messy = translated.replace("\t", "  ")
    assert _modtrans("fmt", "-", stdin=messy.encode()).stdout == translated


def test_version() -> None:
    done = _modtrans("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("modtrans 0.")


def test_an_output_says_what_was_written_unless_quiet(tmp_path: Path) -> None:
    out = tmp_path / "w.txt"
    said = _modtrans("translate", "resnet50", "-o", str(out))
    assert said.stderr.strip() == f"wrote {out} and {out}.meta.json"
    assert _modtrans("translate", "resnet50", "-o", str(out), "-q").stderr == ""
    empty = _modtrans("translate", "resnet50", "-o", "")
    assert empty.returncode == 2
    assert empty.stderr.startswith("modtrans: --output is empty")


@pytest.mark.parametrize(
    "options",
    [
        (),
        ("--like", str(CORPUS / "astra-sim" / "Resnet50_DataParallel.txt")),
        ("--format", "chakra-et", "--npus", "2"),
        ("--format", "json"),
    ],
)
def test_quiet_says_nothing_of_a_clean_translation(
    tmp_path: Path, options: tuple[str, ...], run_cli: Callable[..., Result]
) -> None:
    """Every informational line (what was written, what --like took) is left out under -q; the
    same run without it says something, so the test sees the line it silences. In process: -q is
    the CLI's own printing, no process boundary is involved."""
    out = tmp_path / "out"
    args = ("translate", "resnet50", "-o", str(out), *options)
    assert run_cli(*args).stderr != ""
    quiet = run_cli(*args, "-q")
    assert quiet.exit_code == 0
    assert quiet.stderr == ""


def test_chakra_traces_into_a_folder_are_named_after_the_model(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("chakra")
    done = _modtrans("translate", "resnet50", "--format", "chakra-et", "--npus", "2", "-o", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "resnet50.0.et",
        "resnet50.1.et",
        "resnet50.comm_groups.json",
        "resnet50.et-meta.json",
    ]
    assert f"{tmp_path}/resnet50.0.et .. {tmp_path}/resnet50.1.et" in done.stderr
    many = _modtrans(
        "translate", "resnet50", "--format", "chakra-et", "--npus", "100000", "-o", str(tmp_path)
    )
    assert many.returncode == 2
    assert "pass --force" in many.stderr


def test_a_file_that_is_not_a_model_says_what_it_is(tmp_path: Path) -> None:
    workload = tmp_path / "generated.txt"
    workload.write_text(_modtrans("translate", "resnet50").stdout)
    said = _modtrans("translate", str(workload))
    assert "this is a workload text file, not an ONNX model" in said.stderr
    ir = tmp_path / "model.ir.json"
    _modtrans("extract", "resnet50", "-o", str(ir))
    checked = _modtrans("validate", str(ir))
    assert checked.stdout.count("error") == 2  # the one finding, and the summary line
    assert "this is a ModTrans IR document" in checked.stdout
    entry = zoo.get("resnet50")
    assert entry is not None
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(entry.path.read_bytes()[:5000])
    assert "truncated: the file ends at byte 5000" in _modtrans("inspect", str(truncated)).stderr


def test_built_ins_are_named_by_name_and_typos_get_a_suggestion() -> None:
    said = _modtrans("translate", "resnet50", "--input-shape", "input=1x3x2")
    assert said.stderr.startswith("resnet50: error X501")
    assert "zoo" not in said.stderr
    assert "did you mean `resnet50`?" in _modtrans("translate", "resnet51").stderr


def test_options_that_do_not_apply_are_said_so() -> None:
    said = _modtrans("translate", "resnet50", "--dataflow", "os", "--checkpoint-every", "3", "--passes", "2")
    assert said.returncode == 0
    warnings = [line for line in said.stderr.splitlines() if "is ignored" in line]
    assert [w.split()[2] for w in warnings] == ["--dataflow", "--checkpoint-every", "--passes"]


def test_validate_collapses_repeats_says_strict_and_checks_its_options(tmp_path: Path) -> None:
    simai = ROOT / "fixtures/workloads/corpus/SimAI/workload_analytical.txt"
    short = _modtrans("validate", str(simai)).stdout
    full = _modtrans("validate", "--all", str(simai)).stdout
    # V212 is a zero-byte collective: counted here straight from the file's fields
    rows = [line.split() for line in simai.read_text().splitlines()[2:]]
    zero = sum(1 for f in rows for i in (3, 6, 9) if len(f) > i + 1 and f[i] != "NONE" and f[i + 1] == "0")
    assert full.count("warning V212") == zero
    assert f"... and {zero - 3} more V212 (--all shows every finding)" in short
    assert short.count("warning V212") == 3
    assert len(short.splitlines()) < len(full.splitlines()) / 10
    assert json.loads(_modtrans("validate", "--format", "json", str(simai)).stdout).__len__() == 221
    assert short.splitlines()[-1] == "1 file checked: 221 warnings"
    strict = _modtrans("validate", "--strict", str(simai))
    assert strict.returncode == 1
    assert strict.stdout.splitlines()[-1].endswith("(--strict: warnings fail)")
    unknown = _modtrans("validate", "--ignore", "V999", str(simai))
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("modtrans: --ignore 'V999': unknown code")
    explained = _modtrans("validate", "--explain", "V201", str(simai))
    assert explained.returncode == 0
    assert "not checked" in explained.stderr


def test_p110_suggests_the_keyword_a_run_together_word_starts_with(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("DATAPARALLEL\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
    assert "did you mean `DATA`?" in _modtrans("validate", str(path)).stdout


def test_p102_gives_the_real_length_of_a_long_line(tmp_path: Path) -> None:
    path = tmp_path / "w.txt"
    path.write_text("DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1 " + "x" * 3_000_000 + "\n")
    said = _modtrans("validate", str(path)).stdout
    assert "line 3 is 3,000,034 bytes long" in said
    assert said.count("P102") == 1
