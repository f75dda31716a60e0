"""The CI-sized run of our own fuzzer (tests/fuzzing.py): hostile workload text, workload JSON,
ONNX files, Chakra trace sets and a language-server session. Every case must give diagnostics,
never a traceback, with every position inside its file, and clean inputs must round-trip.
`python bench/fuzz.py` runs a larger campaign with the same checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import fuzzing


@pytest.mark.fuzz
@pytest.mark.parametrize(
    ("kind", "count"),
    [("text", 5000), ("json", 1000), ("onnx", 200), ("trace", 1000), ("config", 300)],
)
def test_no_input_crashes_or_misplaces_a_diagnostic(kind: str, count: int, tmp_path: Path) -> None:
    run, violations = fuzzing.campaign(kind, seed=20261201, count=count, scratch=tmp_path)
    assert run == count
    assert violations == []


def test_the_fuzzer_reaches_clean_inputs_and_every_check(tmp_path: Path) -> None:
    """The round-trip checks only bite on clean cases: the mutations must leave some clean."""
    clean = errors = 0
    for data in fuzzing.text_cases(20261201, 500):
        path = tmp_path / "case.txt"
        path.write_bytes(data)
        from modtrans.workload.load import validate_file

        _, found = validate_file(path)
        if any(d.severity == 1 for d in found):
            errors += 1
        else:
            clean += 1
    assert clean > 50
    assert errors > 200


def test_a_broken_round_trip_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fuzzer's checks can fail: a writer that drops a layer is reported."""
    import dataclasses

    from modtrans.workload.model import Dialect, Workload
    from modtrans.workload.write import write as real  # the writer fuzzing.write is

    def lossy(workload: Workload, dialect: Dialect | str | None = None) -> str:
        return real(dataclasses.replace(workload, layers=workload.layers[1:]), dialect)

    monkeypatch.setattr(fuzzing, "write", lossy)
    text = b"DATA\n2\na -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\nb -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n"
    assert fuzzing.check_text(text, tmp_path)


@pytest.mark.fuzz
def test_a_language_server_session_of_hostile_messages() -> None:
    pytest.importorskip("pygls")
    assert fuzzing.check_lsp(seed=20261201, count=400) == []
