"""An output and its `.meta.json` name each other: the metadata records the output's file name and
the SHA-256 of its bytes, and readers of a file that has a `.meta.json` beside it check the pair.

Two renames cannot be made one, so a run killed between them (or a user who edits the workload,
or copies an older one over it) can leave a workload beside another run's metadata. Nothing then
looked wrong; now `validate` and `diff` say F006 (a warning) naming both files. Metadata written
before this field existed, or a sidecar that is not ModTrans's, is not judged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modtrans import digest
from modtrans.diagnostics import Diagnostic, diagnostic

SUFFIX = ".meta.json"
_MAX_SIDECAR = 16 << 20  # a translation's metadata is kilobytes; never read a stray huge file


def describe(output: str | Path, content: str | bytes) -> dict[str, str]:
    """The metadata's `output` entry for `content` written to `output`."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    return {"file": Path(output).name, "sha256": hashlib.sha256(data).hexdigest()}


def check(path: str | Path) -> Diagnostic | None:
    """F006 when `path`'s `.meta.json` records another output's digest; None when it matches, when
    there is none, or when it is not a translation's metadata with an `output` entry."""
    meta = Path(f"{path}{SUFFIX}")
    recorded = _recorded(meta)
    if recorded is None:
        return None
    try:
        actual = _sha256(Path(path))
    except OSError:
        return None
    if actual == recorded:
        return None
    return diagnostic(
        "F006",
        f"{meta.name} describes another output: it records SHA-256 {recorded[:12]}..., this file's is "
        f"{actual[:12]}... (a later edit, a copy, or a run killed between writing the two)",
        path=str(path),
        hint=f"translate again to write both, or delete {meta}",
    )


def read(meta: Path) -> dict[str, Any]:
    """A `.meta.json`'s object, or {} without a readable one (absent, another tool's, not a regular
    file: a FIFO would block, or over 16 MiB)."""
    try:
        if not meta.is_file() or meta.stat().st_size > _MAX_SIDECAR:
            return {}
        data: Any = json.loads(meta.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def parallel_of(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata's `parallel` section (npus, mesh, the LLM layout's `llm`), or {}."""
    found = meta.get("parallel")
    return found if isinstance(found, dict) else {}


def _recorded(meta: Path) -> str | None:
    data = read(meta)
    if data.get("format") != "modtrans-translation":
        return None
    output = data.get("output")
    digest = output.get("sha256") if isinstance(output, dict) else None
    return digest if isinstance(digest, str) else None


def _sha256(path: Path) -> str:
    if not os.path.isfile(path):  # a FIFO or device would block or never end
        raise OSError("not a regular file")
    return digest.sha256(path)
