"""The text format's writer and checker, shared by its dialects: the text must pass our own
checks as its consumer would read it (workload/validate.py) before it is written. The quick
check (workload/quick.py: the text's form, the workload's checks) stands in for reading the text
back; where it finds anything, or --check full asks, the text is read back and checked whole."""

from __future__ import annotations

import dataclasses

from modtrans.diagnostics import Diagnostic, DiagnosticError
from modtrans.workload.model import Dialect, Workload

# The writer and the checks are imported when a text is made: the formats are registered together
# (formats/__init__.py), and a trace set's translation reads none of them (the checks' and the
# reader's regexes, 4-6 ms of its start).


def render(workload: Workload, dialect: Dialect, found: list[Diagnostic], subject: str | None) -> str | None:
    """The dialect's text of `workload`, or None when the dialect cannot say it (the writer's
    refusals added to `found`, located at `subject`)."""
    from modtrans.workload.write import write

    try:
        return write(workload, dialect)
    except DiagnosticError as error:
        found += [d if d.path else dataclasses.replace(d, path=subject) for d in error.diagnostics]
        return None


def check(text: str, workload: Workload, dialect: Dialect, full: bool) -> list[Diagnostic]:
    """The findings on `text`, written from `workload`: none when the quick check passes (unless
    `full`), else those of `modtrans validate --dialect` on the text, positioned in it."""
    from modtrans.workload import quick
    from modtrans.workload.validate import validate

    if not full and quick.clean(text, workload, dialect):
        return []
    return validate(text, dialect=dialect)
