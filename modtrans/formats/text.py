"""The text format's writer and checker, shared by its dialects: the text must pass our own
checks as its consumer would read it (workload/validate.py) before it is written."""

from __future__ import annotations

import dataclasses

from modtrans.diagnostics import Diagnostic, DiagnosticError, has_errors
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.validate import validate
from modtrans.workload.write import write


def render(workload: Workload, dialect: Dialect, found: list[Diagnostic], subject: str | None) -> str | None:
    """The dialect's text of `workload`, or None when it cannot be written or fails its checks
    (their findings added to `found`)."""
    try:
        text = write(workload, dialect)
    except DiagnosticError as error:
        found += [d if d.path else dataclasses.replace(d, path=subject) for d in error.diagnostics]
        return None
    checked = validate(text, dialect=dialect)
    found += checked
    return None if has_errors(checked) else text
