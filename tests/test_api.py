"""The library does what the command line does: `modtrans.translate` takes its options, applies
the same rules and writes the same bytes (traces, group file, text, JSON and their metadata)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

import modtrans
from modtrans import api, pipeline
from modtrans.diagnostics import DiagnosticError
from modtrans.request import UsageError

Run = Callable[..., Result]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_issues_llama_traces_are_the_command_lines_byte_for_byte(
    run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("out").mkdir()
    Path("cli").mkdir()
    result = modtrans.translate(
        "llama-3-8b", tp=2, pp=2, dp=2, schedule="1f1b", format="chakra-et", output="out/llama"
    )
    options = ("--tp", "2", "--pp", "2", "--dp", "2", "--schedule", "1f1b", "--format", "chakra-et")
    done = run_cli("translate", "llama-3-8b", *options, "-o", "cli/llama")
    assert done.exit_code == 0, done.output
    api, cli = _files(tmp_path / "out"), _files(tmp_path / "cli")
    assert len(api) == 8 + 2  # a trace per rank, the group file, the metadata
    assert api == cli
    assert [p.name for p in result.written] == list(api)
    assert result.metadata == json.loads(api["llama.et-meta.json"])
    assert result.plan is not None
    assert result.plan.npus == 8
    assert result.workload is None  # ASTRA-sim 1.0 text holds no pipeline (D310): traces only


@pytest.mark.parametrize(
    ("options", "to"),
    [
        ({"tp": 2}, "text"),
        ({"parallel": "HYBRID_TRANSFORMER", "npus": 8, "packages": 2}, "text"),
        ({"tp": 4}, "json"),
        ({"tp": 2, "pp": 2, "micro_batch": 2, "dialect": "simai"}, "text"),
        ({"params": "weights", "dialect": "simai"}, "text"),
    ],
)
def test_text_and_json_are_the_command_lines_byte_for_byte(
    run_cli: Run,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    options: dict[str, object],
    to: str,
) -> None:
    for side in ("api", "cli"):
        (tmp_path / side).mkdir()
    monkeypatch.chdir(tmp_path / "api")
    result = modtrans.translate("gpt2", **options, format=to, output="gpt2.out")
    monkeypatch.chdir(tmp_path / "cli")
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    done = run_cli("translate", "gpt2", *flags, "--format", to, "-o", "gpt2.out")
    assert done.exit_code == 0, done.output
    assert _files(tmp_path / "api") == _files(tmp_path / "cli")
    assert set(_files(tmp_path / "api")) == {"gpt2.out", "gpt2.out.meta.json"}
    assert result.text == (tmp_path / "api" / "gpt2.out").read_text()
    assert result.metadata == json.loads((tmp_path / "api" / "gpt2.out.meta.json").read_text())


def test_without_an_output_nothing_is_written_and_the_result_holds_it_all(tmp_path: Path) -> None:
    result = modtrans.translate("gpt2", tp=2)
    assert result.written == ()
    assert result.files == ()
    assert result.workload is not None
    assert result.plan is not None
    assert result.text is not None
    assert result.text == modtrans.write(result.workload, "astra-sim")
    assert result.metadata["parallel"]["npus"] == 2


def test_the_older_keywords_still_work() -> None:
    result = modtrans.translate("resnet50", params="weights", batch=8, compute="astra-sim-reference")
    assert result.workload is not None
    assert len(result.workload.layers) == 54
    hybrid = modtrans.translate("gpt2", parallel="HYBRID_TRANSFORMER", npus=8, model_parallel_group=4)
    assert hybrid.workload is not None
    assert hybrid.workload.header.model_parallel_group == 4
    assert len(api.workload("resnet50", params="weights").layers) == 54  # the workload alone


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"tp": 3, "npus": 4}, "--tp 3 x --pp 1 must divide --npus 4"),
        ({"format": "chakra-et"}, "--format chakra-et writes files: give -o DIR/PREFIX"),
        ({"parallel": "DATA", "tp": 2}, "lay out a transformer; --parallel DATA is not one"),
        ({"npus": 8, "packages": 3}, "--packages must divide --npus"),
        ({"output": ""}, "--output is empty"),
    ],
)
def test_the_option_rules_are_the_librarys(options: dict[str, object], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        modtrans.translate("gpt2", **options)


def test_an_input_is_not_overwritten_without_force(tmp_path: Path) -> None:
    entry = pipeline.model_file("llama-3-8b")
    assert entry is not None
    config = tmp_path / "config.json"
    config.write_bytes(entry.read_bytes())
    with pytest.raises(UsageError, match="refusing to overwrite the input"):
        modtrans.translate(config, tp=2, output=config)
    assert config.read_bytes() == entry.read_bytes()


def test_what_the_text_cannot_hold_is_a_diagnostic_error() -> None:
    with pytest.raises(DiagnosticError) as raised:
        modtrans.translate("gpt2", pp=2)
    assert "D310" in {d.code for d in raised.value.diagnostics}


def test_per_layer_rules_come_as_a_mapping_or_a_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("*attn* MODEL  # the attention\n")
    common = {"parallel": "HYBRID_CUSTOMIZED", "npus": 4}
    from_file = modtrans.translate("gpt2", **common, per_layer=rules)
    from_mapping = modtrans.translate("gpt2", **common, per_layer={"*attn*": "MODEL"})
    assert from_file.text == from_mapping.text
    rules.write_text("*attn* SIDEWAYS\n")
    with pytest.raises(UsageError, match="expected `PATTERN KEYWORD`"):
        modtrans.translate("gpt2", **common, per_layer=rules)


def test_notes_say_what_is_ignored() -> None:
    result = modtrans.translate("gpt2", passes=3)
    assert result.notes == (
        "modtrans: warning: --passes is ignored: only --format chakra-et uses it, not text",
    )
