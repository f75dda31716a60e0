"""Built-in architectures: architecture-only ONNX files shipped with the package, and
transformer configurations (configs/*.json, read by modtrans/llm/) for the LLMs.

Each file keeps every initializer's name, dtype and dims but no weight bytes (tools/build_zoo.py
made them from torchvision / transformers; manifest.json records versions and checksums). A model
argument that is not an existing file is looked up here by name.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    name: str
    path: Path
    description: str
    source: str
    inputs: dict[str, tuple[int | str, ...]]
    defaults: dict[str, int]
    sha256: str

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """The inputs at the defaults' sizes (what `zoo list` shows; a translation binds the
        names as extraction/load.apply_inputs does, the defaults last)."""
        return {
            name: tuple(self.defaults[d] if isinstance(d, str) else d for d in dims)
            for name, dims in self.inputs.items()
        }


@functools.cache
def manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((_HERE / "manifest.json").read_text(encoding="utf-8"))
    return loaded


@functools.cache
def configs() -> dict[str, Any]:
    """The built-in transformer configurations (configs/*.json, described in configs/index.json)."""
    loaded: dict[str, Any] = json.loads((_HERE / "configs" / "index.json").read_text(encoding="utf-8"))
    return loaded


def names() -> list[str]:
    return sorted([*manifest()["models"], *configs()])


def get(name: str) -> Entry | None:
    config = configs().get(name.lower())
    if config is not None:
        return Entry(
            name=name.lower(),
            path=_HERE / "configs" / f"{name.lower()}.json",
            description=config["description"],
            source=config["source"],
            inputs={"input_ids": ("batch", "sequence")},
            defaults={"batch": 1, "sequence": 2048},
            sha256="",
        )
    data = manifest()["models"].get(name.lower())
    if data is None:
        return None
    return Entry(
        name=name.lower(),
        path=_HERE / data["file"],
        description=data["description"],
        source=data["source"],
        inputs={k: tuple(v) for k, v in data["inputs"].items()},
        defaults=dict(data["defaults"]),
        sha256=data["sha256"],
    )
