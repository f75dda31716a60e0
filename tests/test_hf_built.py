"""A built transformers model's IR is made in one place (modtrans/hf/built.py): extract(), the
tests and the tools/hf_*.py reports each wrote the steps themselves (inputs, record, a
provenance, layers), and a copy that drifts checks something a translation does not read.

Reads the sources alone: no torch needed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "modtrans" / "hf" / "built.py"
STEPS = re.compile(r"\b(?:library\.record|layers\.layers)\(")
"""A recording made, or its layers read, where built.read does both."""


def test_only_built_py_makes_a_recording_into_an_ir() -> None:
    sources = [p for folder in ("modtrans", "tests", "tools", "bench") for p in (ROOT / folder).rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sources
        if path not in (HOME, Path(__file__).resolve())
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if STEPS.search(line)
    ]
    assert found == [], "call modtrans.hf.built.read"
    assert STEPS.search(HOME.read_text(encoding="utf-8"))
