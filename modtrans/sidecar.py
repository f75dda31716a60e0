"""The translation metadata (`.meta.json`): its names, its layout section, and its readers.

A text or JSON output FILE has FILE.meta.json beside it; a trace set PREFIX.<rank>.et has
PREFIX.et-meta.json. No name ends both ways, so outputs of different formats never share a
sidecar (`-o r50.txt` then `-o r50.txt --format chakra-et` keep both). A set written before
version 2 has PREFIX.meta.json, which `of_set` still finds.

Version 2 (schemas/translation.schema.json) holds typed values: `parallel.llm` numbers and
booleans, its chunks and its memory per stage as lists of objects; `parallel.policy` is the
policy of the workload written, absent for a layout's trace set; a keyword preset's plan has its
rank's memory in `parallel.memory` (null where the model's activations are not modelled).
Version 1 wrote each layout value as a string ("2", "false", "T=W+G+O+A;..."); `llm_of` reads
both as version 2.

An output and its metadata name each other: the metadata records the output's file name and
the SHA-256 of its bytes, and readers of a file that has a `.meta.json` beside it check the pair.

Two renames cannot be made one, so a run killed between them (or a user who edits the workload,
or copies an older one over it) can leave a workload beside another run's metadata: `validate`
and `diff` say so, F006 (a warning) naming both files. Metadata without the output's SHA-256, or a
sidecar that is not ModTrans's, is not judged.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modtrans import digest
from modtrans.diagnostics import Diagnostic, diagnostic

if TYPE_CHECKING:
    from modtrans.plan.model import LayoutFacts, Mesh, StageMemory

VERSION = 2
SUFFIX = ".meta.json"  # beside a text or JSON output: FILE.meta.json
SET_SUFFIX = ".et-meta.json"  # a trace set's: PREFIX.et-meta.json (never FILE + SUFFIX)
MEMORY_PARTS = ("weights", "gradients", "optimizer", "activations")
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


def of_set(prefix: str | Path) -> Path:
    """The metadata of the trace set PREFIX: PREFIX.et-meta.json, or where only a set written
    before version 2 has one, its PREFIX.meta.json (not a text output PREFIX's: that has `output`)."""
    named = Path(f"{prefix}{SET_SUFFIX}")
    old = Path(f"{prefix}{SUFFIX}")
    if not named.exists() and "output" not in (found := read(old)) and found:
        return old
    return named


def layout(mesh: Mesh, facts: LayoutFacts) -> dict[str, Any]:
    """A layout's plan as `parallel.llm` holds it: keys as the options name them, every degree's
    first (the registry's, strategy/llm/degrees.py: `dp` the layout's D, experts carved from it);
    per chunk its layers and blocks; per stage one rank's memory in bytes (strategy/llm/memory.py)."""
    from modtrans.plan.model import Purpose
    from modtrans.strategy.llm.degrees import sizes

    stages = mesh.extent(Purpose.PIPELINE)
    return {
        **sizes(lambda d: mesh.extent(d.purpose)),
        "sp": facts.sequence_parallel,
        "zero": facts.zero,
        "micro_batch": facts.micro_batch,
        "global_batch": facts.global_batch,
        "ga": facts.micro_batches,
        "schedule": facts.schedule.value,
        "vpp": facts.virtual_stages,
        "recompute": facts.recompute.value,
        # only where given: the metadata of every other layout as before the option
        **({"recompute_fraction": facts.recompute_fraction} if facts.recompute_fraction < 1 else {}),
        **(
            {"recompute_method": facts.recompute_method, "recompute_num_layers": facts.recompute_num_layers}
            if facts.recompute_method is not None
            else {}
        ),
        **(
            {"recompute_modules": list(facts.recompute_modules)}
            if facts.recompute_modules is not None
            else {}
        ),
        "pp_comm_bytes": facts.boundary_bytes,
        "chunks": [
            {"chunk": v, "stage": v % stages, "first": c.first, "last": c.last, "blocks": c.blocks}
            for v, c in enumerate(facts.chunks)
        ],
        "memory": memory(facts.memory),
    }


def memory(stages: Sequence[StageMemory]) -> list[dict[str, int]]:
    """One rank's memory per pipeline stage in bytes, each part, the total (the tensors' peak) and
    what PyTorch's caching allocator reserves at it (strategy/llm/memory.py):
    a layout's `parallel.llm.memory`, a keyword preset's `parallel.memory`."""
    return [
        {
            "stage": s,
            "total_bytes": m.total,
            **{f"{part}_bytes": getattr(m, part) for part in MEMORY_PARTS},
            "reserved_bytes": m.reserved,
        }
        for s, m in enumerate(stages)
    ]


_NUMBERS = ("zero", "micro_batch", "global_batch", "ga", "vpp")  # after the degrees'


def llm_of(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata's `parallel.llm` as version 2 writes it, from either version; {} without one.
    Version 1's strings become numbers and booleans, its `stages`, `blocks_per_chunk` and
    `memory_bytes` strings the `chunks` and `memory` lists; a value that does not read is left out,
    an optional degree it does not name (C, which came after it) is 1."""
    found = parallel_of(meta).get("llm")
    if not isinstance(found, dict):
        return {}
    if meta.get("version", 1) != 1:
        return dict(found)
    from modtrans.strategy.llm.degrees import listed

    out: dict[str, Any] = {k: v for k, v in found.items() if k in ("schedule", "recompute")}
    for key in (*(d.token for d in listed()), *_NUMBERS):
        if str(found.get(key, "")).isdigit():
            out[key] = int(found[key])
    for degree in listed():
        if degree.optional:
            out.setdefault(degree.token, 1)
    if found.get("sp") in ("true", "false"):
        out["sp"] = found["sp"] == "true"
    if str(found.get("pp_comm", "")).isdigit():
        out["pp_comm_bytes"] = int(found["pp_comm"])
    out["chunks"] = _old_chunks(found, out.get("pp", 1))
    out["memory"] = _old_memory(str(found.get("memory_bytes", "")))
    return out


def _old_chunks(found: Mapping[str, Any], stages: int) -> list[dict[str, Any]]:
    ranges = [r.split("..") for r in str(found.get("stages", "")).split(";") if r.count("..") == 1]
    blocks = [b for b in str(found.get("blocks_per_chunk", "")).split(",") if b]
    out: list[dict[str, Any]] = []
    for v, (first, last) in enumerate(ranges):
        chunk = {"chunk": v, "stage": v % max(stages, 1), "first": first, "last": last}
        if len(blocks) == len(ranges) and blocks[v].isdigit():
            chunk["blocks"] = int(blocks[v])
        out.append(chunk)
    return out


def _old_memory(text: str) -> list[dict[str, Any]]:
    """Version 1's `memory_bytes`: per stage `total=weights+gradients+optimizer+activations`, `;` between."""
    out: list[dict[str, Any]] = []
    for stage, one in enumerate(s for s in text.split(";") if s):
        numbers = one.replace("=", "+").split("+")
        if len(numbers) != 1 + len(MEMORY_PARTS) or not all(n.isdigit() for n in numbers):
            continue
        total, *parts = (int(n) for n in numbers)
        named = {f"{part}_bytes": n for part, n in zip(MEMORY_PARTS, parts, strict=True)}
        out.append({"stage": stage, "total_bytes": total, **named})
    return out


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
