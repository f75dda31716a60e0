"""Workload comparison: align two workloads layer by layer and explain every difference.

    diff = compare(generated, reference, Options(fields=GROUPS["comm"], ignore_order=True))
    diff.equivalent, diff.counts, diff.differing

align.py pairs layers (names, content, position, moves), compare.py measures the fields (pure),
render.py turns the result into text, JSON or diagnostics (rich lives there). conventions.py says
why two workloads differ in kind before any row is compared; aicb.py knows AICB's own conventions.
"""

from modtrans.diff.compare import FIELDS, GROUPS, Options, WorkloadDiff, compare, parse_fields

__all__ = ["FIELDS", "GROUPS", "Options", "WorkloadDiff", "compare", "parse_fields"]
