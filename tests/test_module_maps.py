"""Module maps are true: each package's docstring names exactly the modules the package holds.

A map names a module as `name.py` or a subpackage as `name/`; a path with a folder before it
(`strategy/program.py`) is a reference elsewhere, not part of the map. The root package's map is
docs/development.md's source layout (tests/test_docs.py holds it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "modtrans"

NAMED = re.compile(r"(?<![\w/.-])([a-z_][a-z0-9_]*)(\.py\b|/(?![\w*]))")
"""A bare module (`name.py`) or subpackage (`name/`) in prose; not one a path or a glob qualifies."""


def held(folder: Path) -> set[str]:
    """The modules and subpackages `folder` holds, as a map names them (private ones left out)."""
    names = {p.name for p in folder.glob("*.py") if not p.name.startswith("_")}
    names |= {p.name + "/" for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return names


def named(text: str) -> set[str]:
    """The modules and subpackages `text` names bare (`name.py`, `name/`)."""
    return {name + ("/" if end == "/" else ".py") for name, end in NAMED.findall(text)}


PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py") if p.parent != PACKAGE)
OWNED_ELSEWHERE: dict[str, str] = {}


@pytest.mark.parametrize(
    "folder",
    [
        pytest.param(
            folder,
            id=str(folder.relative_to(PACKAGE)),
            marks=[pytest.mark.xfail(reason=OWNED_ELSEWHERE[folder.name])]
            if folder.name in OWNED_ELSEWHERE
            else [],
        )
        for folder in PACKAGES
    ],
)
def test_a_packages_docstring_maps_its_modules(folder: Path) -> None:
    """A module added, removed or renamed without its package's map fails here."""
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    there, said = held(folder), named(doc)
    assert said == there, (
        f"{folder.relative_to(ROOT)}/__init__.py: not in its docstring {sorted(there - said)}, "
        f"named but absent {sorted(said - there)}"
    )


def test_the_map_reader_sees_what_a_map_names() -> None:
    """The reader takes bare names and leaves paths, globs and dotted names alone."""
    text = "ops/ (op -> facts), moe.py; strategy/program.py, configs/*.json, run.1.et, registry.REGISTRY"
    assert named(text) == {"ops/", "moe.py"}
