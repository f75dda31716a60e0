"""The quick check of written text (workload/quick.py) stands in for reading the text back
(validate.py) only where the two agree: it never passes a text the full check finds anything in
(real translations, the corpus and the reference collection written canonically, the invalid
fixtures, and every field of real lines spoiled one way after another), it passes what the writer
makes of a clean translation (else it saves nothing), and what the workload's checks find is
reported as the full check reports it, positioned in the text. The written workload is the one
the text reads back as, the premise of checking the workload instead of the text."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import modtrans
from modtrans.workload import quick
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.parse import parse
from modtrans.workload.validate import validate
from modtrans.workload.write import write
from tests.conftest import CORPUS, INVALID, corpus_files, ids, reference_files

TRANSLATIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-3-8b tp2 pp2 dp2 sp simai": (
        "llama-3-8b",
        {"tp": 2, "pp": 2, "dp": 2, "sp": True, "global_batch": 8},
    ),
    "gpt2 tp2 dp2 zero1 sp simai": ("gpt2", {"tp": 2, "dp": 2, "sp": True, "zero": 1}),
    "gpt2 fwd-in-bckwd simai": (
        "gpt2",
        {"parallel": "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "npus": 8, "model_parallel_group": 2},
    ),
    "gpt2 fwd-in-bckwd two checkpoints simai": (
        "gpt2",
        {
            "parallel": "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
            "npus": 8,
            "model_parallel_group": 2,
            "checkpoints": "0,3",
        },
    ),
}
DIALECTS = ("simai", "astra-sim")


@functools.cache
def _translated(name: str, dialect: str) -> tuple[str, Workload]:
    model, options = TRANSLATIONS[name]
    result = modtrans.translate(model, dialect=dialect, **options)
    assert result.text is not None
    assert result.workload is not None
    return result.text, result.workload


CASES = [
    (name, dialect)
    for name in TRANSLATIONS
    for dialect in DIALECTS
    if not (dialect == "astra-sim" and " pp2 " in name)  # ASTRA-sim 1.0's text has one program
]


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_a_translation_reads_back_as_the_workload_it_was_written_from(name: str, dialect: str) -> None:
    """What lets the checks run on the workload instead of the text: the reader makes of the
    text the very workload (header and every field of every layer) the writer was given."""
    text, workload = _translated(name, dialect)
    back = parse(text)
    assert back.diagnostics == ()
    assert back.workload == workload


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_the_quick_check_agrees_with_reading_back_on_translations(name: str, dialect: str) -> None:
    text, workload = _translated(name, dialect)
    full = validate(text, dialect=dialect)
    assert quick.clean(text, workload, Dialect(dialect)) is (not full)
    # two checkpoints: SimAI reads the first only (D306), so the quick check defers to the full one
    assert bool(full) is (name.endswith("checkpoints simai") and dialect == "simai")


def test_the_quick_checks_findings_are_the_full_checks_positioned_in_the_text() -> None:
    """Where the workload's checks find something, translate reports what `validate` reports,
    each finding at its line and column of the written text."""
    model, options = TRANSLATIONS["gpt2 fwd-in-bckwd two checkpoints simai"]
    quick_run = modtrans.translate(model, dialect="simai", **options)
    full_run = modtrans.translate(model, dialect="simai", check="full", **options)
    assert quick_run.text == full_run.text
    codes = [(d.code, d.span) for d in quick_run.diagnostics if d.code.startswith("D")]
    assert codes == [(d.code, d.span) for d in full_run.diagnostics if d.code.startswith("D")]
    assert [c for c, _ in codes] == ["D306", "D306"]
    assert all(span is not None and span.line == 1 for _, span in codes)


def _canonical(path: Path) -> tuple[str, Workload, Dialect]:
    workload = parse(path.read_bytes().decode("utf-8")).workload
    assert workload is not None
    assert workload.dialect is not None
    return write(workload, workload.dialect), workload, workload.dialect


@pytest.mark.parametrize(
    "path",
    corpus_files() + reference_files(),
    ids=ids(corpus_files(), CORPUS) + [p.name for p in reference_files()],
)
def test_the_quick_check_never_passes_what_reading_back_finds_in_real_files(path: Path) -> None:
    """Real files of every consumer (ASTRA-sim's, SimAI's, AICB's, Chakra's), written canonically:
    where the quick check passes, `validate` finds nothing; where a file has no unknown header
    token and validate finds nothing, the quick check passes."""
    text, workload, dialect = _canonical(path)
    full = validate(text, dialect=dialect)
    passed = quick.clean(text, workload, dialect)
    assert not (passed and full)
    if not full and not workload.header.extra:
        assert passed


def _spoiled(line: str) -> Iterator[str]:
    """`line` spoiled one way after another: each field replaced by what a consumer misreads or
    cannot read (a blank inside, a sign, a leading zero, 20 digits, an unknown word, nothing), a
    field dropped, one added, blanks where the writer puts none, a carriage return."""
    fields = line.split("\t")
    bad = ("a b", "-1", "07", "1" * 20, "ALLREDUCE_X", "", "1.5", "\u00e9")
    for i in range(len(fields)):
        for value in bad:
            yield "\t".join([*fields[:i], value, *fields[i + 1 :]])
        yield "\t".join(fields[:i] + fields[i + 1 :])
    yield line + "\tDATA_X"
    yield " " + line
    yield line + " "
    yield line + "\r"
    yield line.replace("\t", "  ", 1)


def _texts(text: str) -> Iterator[str]:
    lines = text.split("\n")
    header, count, layers = lines[0], lines[1], lines[2:-1]
    for at in sorted({0, len(layers) // 2, len(layers) - 1}):
        for spoiled in _spoiled(layers[at]):
            yield "\n".join([header, count, *layers[:at], spoiled, *layers[at + 1 :], ""])
    yield "\n".join([header, str(len(layers) + 1), *layers, ""])  # the count off by one
    yield "\n".join([header, count, *layers[:-1], ""])  # a line lost
    yield "\n".join([header, count, "", *layers, ""])  # a blank line
    yield "\n".join([header, count, *layers])  # no final line break
    yield "\r\n".join([header, count, *layers, ""])
    tokens = header.split(" ")
    for i in range(1, len(tokens)):
        for value in ("-1", "07", str(2**31), "x", ""):
            yield "\n".join([" ".join([*tokens[:i], value, *tokens[i + 1 :]]), count, *layers, ""])
        yield "\n".join([" ".join(tokens[:i] + tokens[i + 1 :]), count, *layers, ""])


@pytest.mark.parametrize(("name", "dialect"), CASES)
def test_the_quick_check_never_passes_a_spoiled_translation(name: str, dialect: str) -> None:
    """The translation's first 40 lines (each spoiled text is read back whole, lark's path for
    the spoiled line)."""
    workload = _translated(name, dialect)[1]
    workload = dataclasses.replace(workload, layers=workload.layers[:40])
    text = write(workload, Dialect(dialect))
    spoiled = 0
    for changed in _texts(text):
        if validate(changed, dialect=dialect):
            spoiled += 1
            assert not quick.clean(changed, workload, Dialect(dialect)), changed[:300]
    assert spoiled > 100  # the spoiling was seen by the full check: the assertion above ran


@pytest.mark.parametrize("path", sorted(INVALID.glob("*.txt")), ids=lambda p: p.name)
def test_the_quick_check_never_passes_an_invalid_fixture(path: Path) -> None:
    text = path.read_bytes().decode("utf-8", errors="replace")
    workload = parse(text).workload
    if workload is None:
        pytest.skip("no workload to compare with: the reader stops at line 1 or 2")
    dialect = workload.dialect or Dialect.ASTRA_SIM
    if validate(text, dialect=dialect):
        assert not quick.clean(text, workload, dialect)


def test_check_is_an_option_of_translate_and_full_reads_the_text_back(tmp_path: Path) -> None:
    model, options = TRANSLATIONS["llama-3-8b tp2 pp2 dp2 sp simai"]
    quick_run = modtrans.translate(model, dialect="simai", output=str(tmp_path / "q.txt"), **options)
    full_run = modtrans.translate(
        model, dialect="simai", check="full", output=str(tmp_path / "f.txt"), **options
    )
    assert (tmp_path / "q.txt").read_bytes() == (tmp_path / "f.txt").read_bytes()
    assert quick_run.diagnostics == full_run.diagnostics
    with pytest.raises(ValueError, match="--check"):
        modtrans.translate(model, dialect="simai", check="none", **options)
    json = modtrans.translate(model, dialect="simai", format="json", check="full", **options)
    assert any("--check is ignored" in note for note in json.notes)


@pytest.mark.parametrize(("name", "dialect"), [c for c in CASES if c[0].startswith("llama")])
def test_a_repeated_line_under_a_spoiled_name_is_never_passed(name: str, dialect: str) -> None:
    """A line whose fields after the name repeat an earlier line's (a later block's copy) is read
    by its name alone: a name the reader splits or refuses is still caught there."""
    text, workload = _translated(name, dialect)
    lines = text.split("\n")
    at = next(
        i
        for i in range(len(workload.layers) - 1, 0, -1)
        if any(
            line.endswith(lines[2 + i][len(workload.layers[i].name) :])
            and line.startswith(workload.layers[j].name + "\t")
            for j, line in enumerate(lines[2 : 2 + i])
        )
    )
    spoiled = 0
    for bad in ("a b", "a\x0bb", "a\x1cb", "a\x0cb", "\u00e9"):
        old = workload.layers[at].name
        layers = list(workload.layers)
        layers[at] = dataclasses.replace(layers[at], name=bad)
        changed = "\n".join([*lines[: 2 + at], bad + lines[2 + at][len(old) :], *lines[3 + at :]])
        if validate(changed, dialect=dialect):
            spoiled += 1
            assert not quick.clean(
                changed, dataclasses.replace(workload, layers=tuple(layers)), Dialect(dialect)
            )
    assert spoiled >= 3
