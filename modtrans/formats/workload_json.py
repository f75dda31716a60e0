"""Workload JSON (schemas/workload.schema.json): the projected workload as a document, for
scripting and `modtrans convert`. Each text dialect registers a JSON output of its projection."""

from __future__ import annotations

from modtrans.diagnostics import Diagnostic
from modtrans.workload.model import Dialect, Workload


def render(workload: Workload, dialect: Dialect, found: list[Diagnostic], subject: str | None) -> str | None:
    """The workload as JSON: it holds every field, so nothing is refused or checked here."""
    from modtrans.workload import jsonform  # with jsonsource: registered with every format, used by this one

    return jsonform.dumps(workload)
