"""Resources: the one place that knows where grammar/ and schemas/ live, and the cache folder.

In a checkout (and an editable install) they are the top-level folders beside modtrans/; in a
wheel the build maps them into modtrans/_data/ (see [tool.hatch.build.targets.wheel.force-include]
in pyproject.toml).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent
_CANDIDATES = (_PACKAGE / "_data", _PACKAGE.parent)


@functools.cache
def resource_dir(name: str) -> Path:
    """The folder `name` ("grammar" or "schemas"), wherever this installation keeps it."""
    for base in _CANDIDATES:
        folder = base / name
        if folder.is_dir():
            return folder
    raise FileNotFoundError(f"modtrans is installed without its {name}/ folder")


def install_hint(extra: str) -> str:
    """How to install an extra from where this modtrans runs: a checkout (editable install) or
    an installed package."""
    root = _PACKAGE.parent
    if (root / "pyproject.toml").is_file() and (root / "grammar").is_dir():
        return f"pip install -e '{root}[{extra}]'"
    return f"pip install 'modtrans[{extra}]'"


def cache_dir() -> Path:
    """MODTRANS_CACHE, else $XDG_CACHE_HOME/modtrans, else ~/.cache/modtrans (fetched models,
    SCALE-Sim results)."""
    if os.environ.get("MODTRANS_CACHE"):
        return Path(os.environ["MODTRANS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "modtrans"


def grammar_path() -> Path:
    return resource_dir("grammar") / "workload.lark"


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped with modtrans, e.g. schema("workload")."""
    path = resource_dir("schemas") / f"{name}.schema.json"
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded
