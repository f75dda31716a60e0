"""The text report written without rich where rich would write bare text (report._plain_text):
the same bytes rich writes, for real findings (a translation's warnings; a broken workload's
positioned errors, their source excerpt, caret and hint; repeats collapsed), and rich itself
wherever it would not write them bare."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from modtrans import pipeline, report
from modtrans.comm import Policy
from modtrans.diagnostics import Diagnostic
from modtrans.strategy import Parallelism
from modtrans.strategy.llm import Layout
from modtrans.workload.load import validate_file
from modtrans.workload.write import write


def _findings(tmp_path: Path) -> tuple[list[Diagnostic], report.Sources]:
    """Mixtral on 8 ranks (each stage over the device's memory: X516), and Llama-3-8B's SimAI text
    with three of its layer lines broken (a field too many, a count that is no number, an
    all-reduce of 0 bytes)."""
    layout = Layout(npus=32, tp=2, ep=4, sp=True)
    options = pipeline.Options(parallel=Parallelism(Policy.HYBRID_TRANSFORMER, 32, layout=layout))
    translated = pipeline.translate_checked("mixtral-8x7b", options)
    text = pipeline.translate_checked(
        "llama-3-8b",
        pipeline.Options(parallel=Parallelism(Policy.HYBRID_TRANSFORMER, 2, layout=Layout(npus=2, tp=2))),
    )
    assert text.workload is not None
    lines = write(text.workload).splitlines(keepends=True)
    lines[3] = lines[3].rstrip("\n") + "\t7\n"
    lines[5] = lines[5].replace("\t", "\tx", 1)
    moving = next(i for i in range(6, len(lines)) if "ALLREDUCE" in lines[i])
    lines[moving] = re.sub(r"ALLREDUCE\t\d+", "ALLREDUCE\t0", lines[moving], count=1)  # V212's hint
    path = tmp_path / "broken.txt"
    path.write_text("".join(lines))
    loaded, found = validate_file(path)
    assert any(d.span is not None for d in found)
    assert any(d.hint for d in found)
    return [*translated.diagnostics, *found], {loaded.path: loaded.line}


@pytest.mark.parametrize("everything", [True, False])
def test_the_plain_report_is_the_bytes_rich_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, everything: bool
) -> None:
    found, sources = _findings(tmp_path)
    assert any(d.code == "X516" for d in found)
    written = {}
    for path in ("plain", "rich"):
        if path == "rich":
            monkeypatch.setattr(report, "_plain_text", lambda *_: False)
        stream = io.StringIO()
        report.text(found, stream=stream, sources=sources, color=None, checked=1, everything=everything)
        written[path] = stream.getvalue()
    assert written["plain"] == written["rich"]
    assert "^" in written["plain"]
    assert "= hint:" in written["plain"]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rich_writes_what_is_not_bare_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Colour asked for, a terminal, FORCE_COLOR or TTY_COMPATIBLE=1, a tab or a character past
    ASCII: rich's to write."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    line = [[("m.txt:1:1: ", "bold"), ("error P101", "bold red"), (" bad", "")]]
    assert report._plain_text(line, io.StringIO(), None)
    assert report._plain_text(line, io.StringIO(), False)
    assert not report._plain_text(line, io.StringIO(), True)
    assert not report._plain_text(line, _Terminal(), None)
    assert not report._plain_text([[("a\tb", "")]], io.StringIO(), None)
    assert not report._plain_text([[("caf\u00e9", "")]], io.StringIO(), None)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not report._plain_text(line, io.StringIO(), None)
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    assert not report._plain_text(line, io.StringIO(), None)
