"""The command line: exit codes, output formats, fmt and convert (a handful of end-to-end runs)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tests.conftest import CORPUS, INVALID

Run = Callable[..., Result]
RESNET = CORPUS / "astra-sim" / "Resnet50_DataParallel.txt"


def test_validate_clean_file_exits_0(run_cli: Run) -> None:
    result = run_cli("validate", RESNET)
    assert result.exit_code == 0
    assert result.stdout.strip().endswith("1 file checked: no problems")


def test_validate_text_report_with_caret(run_cli: Run) -> None:
    result = run_cli("validate", INVALID / "unknown_comm.txt")
    assert result.exit_code == 1
    path = str(INVALID / "unknown_comm.txt")
    assert result.stdout.splitlines() == [
        f"{path}:3:30: error V210 unknown comm type `AllReduce` (weight-gradient comm type)",
        "    3 | conv1 -1 1 NONE 0 1 NONE 0 1 AllReduce 64 1",
        "      |                              ^^^^^^^^^",
        "    = hint: did you mean `ALLREDUCE`?",
        "1 file checked: 1 error",
    ]


def test_validate_strict_and_warnings(run_cli: Run) -> None:
    path = INVALID / "none_with_size.txt"
    assert run_cli("validate", path).exit_code == 0
    assert run_cli("validate", "--strict", path).exit_code == 1


def test_validate_unreadable_exits_2(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli("validate", tmp_path / "missing.txt")
    assert result.exit_code == 2
    assert "F001" in result.stdout
    assert run_cli("validate").exit_code == 2


def test_validate_json_github_sarif(run_cli: Run) -> None:
    path = INVALID / "bad_numbers.txt"
    as_json = json.loads(run_cli("validate", "--format", "json", path).stdout)
    assert [(d["code"], d["span"]["line"], d["span"]["column"]) for d in as_json] == [
        ("V202", 3, 10),
        ("V202", 3, 21),
        ("V203", 3, 44),
        ("V202", 3, 48),
    ]
    github = run_cli("validate", "-f", "github", path).stdout.splitlines()
    assert github[0].startswith(f"::error file={path},line=3,col=10,endLine=3,endColumn=13,title=V202::")
    log = json.loads(run_cli("validate", "-f", "sarif", path).stdout)
    # SARIF 2.1.0 (OASIS) required members: version, runs[].tool.driver.name, results[].message.text
    assert log["version"] == "2.1.0"
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "modtrans"
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["V202", "V203"]
    first = run["results"][0]
    assert first["ruleId"] == "V202"
    assert first["level"] == "error"
    assert first["message"]["text"]
    assert first["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3,
        "startColumn": 10,
        "endLine": 3,
        "endColumn": 13,
    }


def test_github_format_is_automatic_under_actions(run_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert run_cli("validate", INVALID / "bom.txt").stdout.startswith("::error file=")


def test_explain(run_cli: Run) -> None:
    result = run_cli("validate", "--explain", "v201")
    assert result.exit_code == 0
    assert result.stdout.startswith("V201 (error): layer count differs")
    assert run_cli("validate", "--explain", "X999").exit_code == 2


def test_dialect_option(run_cli: Run) -> None:
    path = CORPUS / "astra-sim" / "Transformer_HybridParallel_Fwd_In_Bckwd.txt"
    assert run_cli("validate", path).exit_code == 0
    result = run_cli("validate", "--dialect", "chakra", path)
    assert result.exit_code == 1
    assert "D301" in result.stdout


def test_fmt_check_then_write(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "resnet.txt"
    shutil.copy(RESNET, path)
    before = path.read_bytes()
    check = run_cli("fmt", "--check", path)
    assert check.exit_code == 1
    assert "would reformat" in check.stderr
    assert path.read_bytes() == before
    assert run_cli("fmt", path).exit_code == 0
    after = path.read_bytes()
    assert after.split() == before.split()
    assert b"\r" not in after
    assert run_cli("fmt", "--check", path).exit_code == 0
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_fmt_leaves_files_with_errors_alone(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "bad.txt"
    shutil.copy(INVALID / "bad_numbers.txt", path)
    before = path.read_bytes()
    result = run_cli("fmt", path)
    assert result.exit_code == 1
    assert "V202" in result.stderr
    assert path.read_bytes() == before


def test_fmt_refuses_a_dialect_that_cannot_express_the_file(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "simai.txt"
    shutil.copy(CORPUS / "SimAI" / "microAllReduce.txt", path)
    before = path.read_bytes()
    result = run_cli("fmt", "--dialect", "astra-sim", path)
    assert result.exit_code == 1
    assert "D310" in result.stderr
    assert path.read_bytes() == before


def test_convert_json_and_back(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "resnet.json"
    assert run_cli("convert", RESNET, "--to", "json", "-o", out).exit_code == 0
    document = json.loads(out.read_text())
    assert document["header"] == {"policy": "DATA"}
    assert len(document["layers"]) == 54
    assert document["layers"][53]["weight_grad"] == {
        "compute_time": 9220,
        "comm_type": "ALLREDUCE",
        "comm_size": 8192000,
    }  # file: fc1000 ... 9220 ALLREDUCE 8192000 922
    text = run_cli("convert", out, "--to", "text")
    assert text.exit_code == 0
    assert text.stdout.split() == RESNET.read_text().split()


def test_convert_reports_schema_errors_in_domain_words(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "w.json"
    run_cli("convert", RESNET, "-o", out)
    document = json.loads(out.read_text())
    document["layers"][3]["weight_grad"]["comm_size"] = -5
    out.write_text(json.dumps(document))
    result = run_cli("convert", out, "--to", "text")
    assert result.exit_code == 1
    assert "S402" in result.stderr
    assert "layer 3 (`layer_64_1_conv2`), weight-gradient comm size" in result.stderr


def test_convert_refuses_to_overwrite_its_input(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "r.txt"
    shutil.copy(RESNET, path)
    assert run_cli("convert", path, "--to", "text", "-o", path).exit_code == 2
    assert path.read_bytes() == RESNET.read_bytes()


def test_convert_between_dialects_says_what_is_lost(run_cli: Run, tmp_path: Path) -> None:
    # ASTRA-sim 1.0 -> SimAI: written, with SimAI's own readings of it as warnings
    fwd_in_bckwd = CORPUS / "astra-sim" / "Transformer_HybridParallel_Fwd_In_Bckwd.txt"
    out = tmp_path / "simai.txt"
    result = run_cli("convert", fwd_in_bckwd, "--to", "text", "--dialect", "simai", "-o", out)
    assert result.exit_code == 0
    assert out.read_text().startswith(
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 4 checkpoints: 2 2 11"
    )
    assert [line.split()[2] for line in result.stderr.splitlines() if " warning " in line] == [
        "D306",
        "D306",
        "D307",
    ]
    # SimAI -> ASTRA-sim 1.0: refused, naming every construct 1.0 cannot express
    simai = CORPUS / "SimAI" / "workload_analytical.txt"
    result = run_cli("convert", simai, "--to", "text", "--dialect", "astra-sim", "-o", tmp_path / "astra.txt")
    assert result.exit_code == 1
    assert "ep:, pp:, vpp:, ga:, all_gpus:, pp_comm:" in result.stderr
    assert "ALLGATHER_DP_EP" in result.stderr
    assert not (tmp_path / "astra.txt").exists()
    # a lossless one loses nothing, but SimAI runs no DATA file (D314: SIGFPE in its report, found
    # running SimAI 1.6): that warning alone
    result = run_cli(
        "convert", CORPUS / "astra-sim" / "Resnet50_DataParallel.txt", "--to", "text", "--dialect", "simai"
    )
    assert result.exit_code == 0
    assert [line.split()[2] for line in result.stderr.splitlines() if " warning " in line] == ["D314"]
    assert " error " not in result.stderr
