"""Workload <-> JSON document (schemas/workload.schema.json), for `modtrans convert` and scripts.

The JSON form carries meaning only: converting text -> JSON -> text yields the canonical text.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Sequence
from typing import Any

from modtrans import jsonsource, schema
from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Diagnostic, DiagnosticError, Span, diagnostic
from modtrans.workload import vocabulary
from modtrans.workload.model import PHASE_WORDS, Dialect, Header, Layer, Phase, Workload

_HEADER_INTS = tuple(k.field for k in vocabulary.HEADER_KEYS if k.kind == "int")
_HEADER_LISTS = tuple(k.field for k in vocabulary.LISTS)


def to_dict(workload: Workload) -> dict[str, Any]:
    document = _head(workload)
    document["layers"] = [_layer_dict(layer) for layer in workload.layers]
    return document


def _head(workload: Workload) -> dict[str, Any]:
    """The document without its layers."""
    header = workload.header
    head: dict[str, Any] = {"policy": header.policy.value}
    for key in _HEADER_INTS:
        if getattr(header, key) is not None:
            head[key] = getattr(header, key)
    for key in _HEADER_LISTS:
        if getattr(header, key) is not None:
            head[key] = list(getattr(header, key))
    if header.extra:
        head["extra"] = list(header.extra)
    document: dict[str, Any] = {"format": "modtrans-workload", "version": 1}
    if workload.dialect is not None:
        document["dialect"] = workload.dialect.value
    document["header"] = head
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
    return "".join(chunks(workload))


def chunks(workload: Workload) -> Iterator[str]:
    """`json.dumps(to_dict(workload), indent=2) + "\n"`, layer by layer. json's indented encoder
    is the pure-Python one: it holds every token of the document at once (550 MB for 100,000
    layers), where one layer's dict and text at a time are a few hundred bytes."""
    head = json.dumps(_head(workload), indent=2)
    if not workload.layers:
        yield head[:-2] + ',\n  "layers": []\n}\n'
        return
    yield head[:-2] + ',\n  "layers": [\n'
    last = len(workload.layers) - 1
    for index, layer in enumerate(workload.layers):
        text = json.dumps(_layer_dict(layer), indent=2).replace("\n", "\n    ")
        yield f"    {text}{'' if index == last else ','}\n"
    yield "  ]\n}\n"


def loads(text: str, *, path: str | None = None) -> tuple[Workload | None, list[Diagnostic]]:
    """Read a workload JSON document. Syntax and schema problems are S401/S402 at the line and
    column of the value concerned; a document the text format cannot say as it stands (a name
    with a blank, an extra header token that is a key) is S402 too, so every workload read here
    converts to text that reads back equal."""
    try:
        data = jsonsource.loads(text)
    except jsonsource.JSONSyntaxError as error:
        message = f"invalid JSON: {error.message}"
        return None, [diagnostic("S401", message, path=path, span=Span.at(error.line, error.column))]
    source = jsonsource.SourceMap(text)
    if isinstance(data, dict) and data.get("format") != "modtrans-workload":
        other = (
            "translation metadata (a .meta.json)" if data.get("format") == "modtrans-translation" else None
        )
        other = other or (
            "a ModTrans IR document (`modtrans extract` output)" if "provenance" in data else None
        )
        if other is not None:
            message = f"this is {other}, not a workload"
            return None, [
                diagnostic("S402", message, path=path, span=Span.at(1, 1), hint="validate the workload file")
            ]
    problems = schema.check(data, "workload", path=path, describe=describe, locate=source.span)
    if problems:
        return None, problems
    workload = from_dict(data, source)
    problems = list(_inexpressible(workload, source, path))
    return (None, problems) if problems else (workload, [])


def _inexpressible(
    workload: Workload, source: jsonsource.SourceMap, path: str | None
) -> Iterator[Diagnostic]:
    """What the text writer cannot express: write the workload, read it back, compare."""
    from modtrans.workload.parse import parse
    from modtrans.workload.write import write

    try:
        text = write(workload, workload.dialect or Dialect.ASTRA_SIM)
    except DiagnosticError:
        try:
            text = write(workload, Dialect.SIMAI)  # the most the text can say
        except DiagnosticError:
            return  # Chakra-only policies etc.: convert --to text says D310 itself
    back = parse(text).workload
    if back is None or back.header != workload.header:
        reread = "" if back is None else f" (reads back as `{' '.join(_header_words(back.header))}`)"
        yield diagnostic(
            "S402",
            f"header: the text format cannot say this header{reread}",
            path=path,
            span=source.span(["header"]),
            hint="extra tokens must not be header keys or numbers a list would absorb",
        )
        return
    for index, (mine, theirs) in enumerate(zip(workload.layers, back.layers, strict=False)):
        if mine != theirs:
            yield diagnostic(
                "S402",
                f"layer {index}: the text format cannot say this layer (its name `{mine.name}`?)",
                path=path,
                span=source.span(["layers", index]),
            )
            return


def _header_words(header: Header) -> list[str]:
    from modtrans.workload.write import header_tokens

    return header_tokens(header, Dialect.SIMAI)


def from_dict(data: dict[str, Any], source: jsonsource.SourceMap | None = None) -> Workload:
    """Build a Workload from a schema-valid document (with spans, given its source map)."""
    head = data["header"]
    header = Header(
        policy=Policy(head["policy"]),
        extra=tuple(head.get("extra", ())),
        span=source.span(["header"]) if source else None,
        **{key: head.get(key) for key in _HEADER_INTS},
        **_lists(head),
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
            span=source.span(["layers", index]) if source else None,
            field_span=functools.partial(_field, source, index) if source else None,
        )
        for index, entry in enumerate(data["layers"])
    )
    dialect = Dialect(data["dialect"]) if "dialect" in data else None
    return Workload(header, layers, dialect=dialect)


def _lists(head: dict[str, Any]) -> dict[str, Any]:
    return {key: tuple(head[key]) for key in _HEADER_LISTS if key in head}


# The text's field order (checks name fields by their column) -> the JSON path inside a layer.
_FIELD_PATHS = tuple(c.path for c in vocabulary.COLUMNS)


def _field(source: jsonsource.SourceMap, index: int, field: int) -> Span | None:
    where = _FIELD_PATHS[field] if field < len(_FIELD_PATHS) else ()
    return source.span(["layers", index, *where])


_COMM_TYPES = {c.value: c for c in CommType}  # a dict lookup: calling the enum costs 1 us


def _phase(entry: dict[str, Any]) -> Phase:
    return Phase(entry["compute_time"], _COMM_TYPES[entry["comm_type"]], entry["comm_size"])


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
            if len(name) > 40 or not name.isprintable():
                name = ""
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
