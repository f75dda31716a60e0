"""Workload <-> JSON document (schemas/workload.schema.json), for `modtrans convert` and scripts.

The JSON form carries meaning only: converting text -> JSON -> text yields the canonical text.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from modtrans import schema
from modtrans.diagnostics import Diagnostic, Span, diagnostic
from modtrans.workload.model import PHASE_WORDS, CommType, Dialect, Header, Layer, Phase, Policy, Workload

_HEADER_INTS = (
    "model_parallel_group",
    "dlrm_last_bottom_layer",
    "ep",
    "pp",
    "vpp",
    "ga",
    "all_gpus",
    "pp_comm",
)


def to_dict(workload: Workload) -> dict[str, Any]:
    header = workload.header
    head: dict[str, Any] = {"policy": header.policy.value}
    for key in _HEADER_INTS:
        if getattr(header, key) is not None:
            head[key] = getattr(header, key)
    for key in ("checkpoints", "checkpoint_initiates"):
        if getattr(header, key) is not None:
            head[key] = list(getattr(header, key))
    if header.extra:
        head["extra"] = list(header.extra)
    document: dict[str, Any] = {"format": "modtrans-workload", "version": 1}
    if workload.dialect is not None:
        document["dialect"] = workload.dialect.value
    document["header"] = head
    document["layers"] = [_layer_dict(layer) for layer in workload.layers]
    return document


def _layer_dict(layer: Layer) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": layer.name, "reserved": layer.reserved}
    for key, phase in layer.phases:
        entry[key] = {
            "compute_time": phase.compute_time,
            "comm_type": phase.comm_type.value,
            "comm_size": phase.comm_size,
        }
    entry["update_time"] = layer.update_time
    if layer.policy is not None:
        entry["policy"] = layer.policy.value
    return entry


def dumps(workload: Workload) -> str:
    return json.dumps(to_dict(workload), indent=2) + "\n"


def loads(text: str, *, path: str | None = None) -> tuple[Workload | None, list[Diagnostic]]:
    """Read a workload JSON document; schema problems come back as S40x diagnostics."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        return None, [
            diagnostic(
                "S401", f"invalid JSON: {error.msg}", path=path, span=Span.at(error.lineno, error.colno)
            )
        ]
    problems = schema.check(data, "workload", path=path, describe=describe)
    if problems:
        return None, problems
    return from_dict(data), []


def from_dict(data: dict[str, Any]) -> Workload:
    """Build a Workload from a schema-valid document."""
    head = data["header"]
    header = Header(
        policy=Policy(head["policy"]),
        checkpoints=tuple(head["checkpoints"]) if "checkpoints" in head else None,
        checkpoint_initiates=(
            tuple(head["checkpoint_initiates"]) if "checkpoint_initiates" in head else None
        ),
        extra=tuple(head.get("extra", ())),
        **{key: head.get(key) for key in _HEADER_INTS},
    )
    layers = tuple(
        Layer(
            name=entry["name"],
            fwd=_phase(entry["fwd"]),
            input_grad=_phase(entry["input_grad"]),
            weight_grad=_phase(entry["weight_grad"]),
            update_time=entry["update_time"],
            reserved=entry.get("reserved", -1),
            policy=Policy(entry["policy"]) if "policy" in entry else None,
        )
        for entry in data["layers"]
    )
    dialect = Dialect(data["dialect"]) if "dialect" in data else None
    return Workload(header, layers, dialect=dialect)


def _phase(entry: dict[str, Any]) -> Phase:
    return Phase(entry["compute_time"], CommType(entry["comm_type"]), entry["comm_size"])


def describe(where: Sequence[str | int], document: Any) -> str:
    """A JSON path in workload words: ["layers", 3, "weight_grad", "comm_size"] ->
    "layer 3 (`conv1`), weight-gradient comm size"."""
    if not where:
        return "the document"
    head, *rest = where
    if head == "layers" and rest and isinstance(rest[0], int):
        index = rest[0]
        name = ""
        with contextlib.suppress(KeyError, IndexError, TypeError):
            name = f" (`{document['layers'][index]['name']}`)"
        words = [f"layer {index}{name}"]
        fields = [str(p) for p in rest[1:]]
        if fields and fields[0] in PHASE_WORDS:
            words.append(" ".join([PHASE_WORDS[fields[0]], *(f.replace("_", " ") for f in fields[1:])]))
        elif fields:
            words.append(" ".join(f.replace("_", " ") for f in fields))
        return ", ".join(words)
    if head == "header":
        return "header" + "".join(f" {p}".replace("_", " ") for p in rest)
    return "/".join(map(str, where))
