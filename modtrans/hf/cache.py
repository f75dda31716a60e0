"""The IR of a configuration kept by its digest, so that a second read costs what the hand-written
path costs: no torch, no transformers, one JSON file read.

The key is the SHA-256 of the configuration's bytes, the micro-batch and the token counts, with
the versions of modtrans and of the transformers installed (its version read from the package's
metadata, not imported): a new transformers may build the same configuration differently; and
READING, the reading's own revision: modtrans has no release between two changes of the IR a read
gives (a recurrent scan's steps one layer each, then one pass: scans.py). The
files live in the cache folder of modtrans's other caches (resources.cache_dir: fetched models,
SCALE-Sim results), under hf/, written atomically; an unreadable or stale one is built again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from importlib import metadata
from pathlib import Path

from modtrans._version import __version__
from modtrans.ir import document
from modtrans.ir.document import ModelIR

READING = 13
"""The revision of the IR a read through transformers gives; one more where a change to hf/ gives
another IR for a configuration read before (2: a scan's loop recorded as one pass, scans.py; 3: a
mixture's routers and experts as mixture.moe marks them, a leaf experts module a layer a GEMM; 4: a
multimodal model's towers outside the blocks, towers.py; 5: the plan's keys anchored at the text
model's path, library.anchored; 6: a mixture's experts as the model runs and holds them: a bmm over
the experts each expert's GEMM, an [E x f, h] weight 1 / E an expert's run, attention experts the
attention's, a router's own MLP the router's, heads per layer: mixture.py, blocks.py, layers.py;
7: an experts module that runs every expert on every token read as the routed run, mixture.routed;
8: each attention's sliding window, blocks._windows; 9: the windows of a model whose forward masks
every layer by its configuration's sliding_window, library._masks; 10: an attention the model's
class runs op by op marked Heads.eager, blocks.eager_only; 11: that class is one without SDPA,
transformers' default implementation; 12: an addmm's bias add counted in its linear's FLOPs,
layers._bias_added; a functional linear's product and its bias add one layer, named after its
weight, layers._bias_add; 13: a norm without parameters computes no weight gradient,
flops.norm's affine)."""


def key(digest: str, batch: int, sequence: int, targets: int | None, remote: bool = False) -> str:
    """The cache key of a configuration's IR at these inputs (`remote`: built by the code its
    auto_map names: kept apart, so that a read without --trust-remote-code is refused again)."""
    try:
        library = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        library = ""
    text = f"{digest} {batch} {sequence} {targets} {__version__} {READING} {library}"
    text += " remote" if remote else ""
    return hashlib.sha256(text.encode()).hexdigest()


def folder() -> Path:
    from modtrans.resources import cache_dir

    return cache_dir() / "hf"


def load(name: str, file: str) -> tuple[ModelIR, dict[str, str]] | None:
    """The cached IR under `name` and the model's tensor-parallel plan (None: none, or
    unreadable), its provenance naming `file`."""
    try:
        data = json.loads((folder() / f"{name}.json").read_text(encoding="utf-8"))
        ir = document.from_dict(data["ir"])
        plan = {str(k): str(v) for k, v in data["base_model_tp_plan"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return dataclasses.replace(ir, provenance=dataclasses.replace(ir.provenance, file=file)), plan


def store(name: str, ir: ModelIR, plan: dict[str, str]) -> None:
    """Kept for the next run with the model's tensor-parallel plan; a cache that cannot be written
    is left alone (the IR stands)."""
    from modtrans.fileio import write_atomic

    text = json.dumps({"ir": document.to_dict(ir), "base_model_tp_plan": plan})
    try:
        folder().mkdir(parents=True, exist_ok=True)
        write_atomic(folder() / f"{name}.json", text)
    except OSError:
        return
