"""A seeded mutation fuzzer over everything ModTrans parses: workload text, workload JSON, ONNX.

Each `*_cases(seed, n)` yields n mutated inputs made from real files in fixtures/; each `check_*`
runs one input through the same code paths the commands use and returns the violations found:
an exception escaping, a diagnostic without a position or outside its file, a clean file that does
not round-trip losslessly, a canonical form that is not idempotent or has findings the input does
not, a clean text whose JSON form reads back different. tests/test_fuzz.py runs a CI-sized
campaign; bench/fuzz.py a larger one and prints the counts.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modtrans.diagnostics import Diagnostic, DiagnosticError, Severity
from modtrans.workload import jsonform
from modtrans.workload.load import Loaded, load
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.parse import parse
from modtrans.workload.validate import check_parsed
from modtrans.workload.write import write

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
HEAD_LINES = 40  # seeds are cut to their first lines: mutations matter, not length


def _seeds() -> list[str]:
    texts = []
    for path in sorted((FIXTURES / "workloads").rglob("*.txt")):
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.splitlines(keepends=True)
        texts.append("".join(lines[:HEAD_LINES]))
    return texts


# -- text mutations ---------------------------------------------------------------------------------

NUMBERS = [
    *("18446744073709551616", "1e400", "-0", "0x10", "9" * 5000, "-2147483649", "+7", "007", "1_000"),
    # over int()'s 4,300-digit limit whatever their value: leading zeros, a sign, a small value
    *("4" + "0" * 4300, "0" * 5000 + "4", "-" + "0" * 4400 + "1", "+" + "0" * 4400),
]
ODD = ["\ufeff", "\0", "\u200f", "\uff11\uff12", "\r", "\r\n", "\f", "\v", "\u00a0", "\U0001f600", "\x85"]


def _tokens(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, c in enumerate(text):
        if c.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _flip(r: random.Random, text: str) -> str:
    data = bytearray(text.encode("utf-8", "surrogateescape"))
    for _ in range(r.randint(1, 4)):
        if data:
            data[r.randrange(len(data))] ^= 1 << r.randrange(8)
    return data.decode("utf-8", "surrogateescape")


def _truncate(r: random.Random, text: str) -> str:
    cuts = [i for i, c in enumerate(text) if c in " \t\n"] or [len(text)]
    at = r.choice([r.randrange(len(text) + 1), r.choice(cuts), r.choice(cuts) + 1])
    return text[:at]


def _swap(r: random.Random, text: str) -> str:
    spans = _tokens(text)
    if len(spans) < 2:
        return text
    a, b = sorted(r.sample(spans, 2))
    return text[: a[0]] + text[b[0] : b[1]] + text[a[1] : b[0]] + text[a[0] : a[1]] + text[b[1] :]


def _duplicate(r: random.Random, text: str) -> str:
    spans = _tokens(text)
    if not spans:
        return text + text
    s, e = r.choice(spans)
    if r.random() < 0.5:
        return text[:e] + " " + text[s:e] + text[e:]
    lines = text.split("\n")
    i = r.randrange(len(lines))
    lines.insert(r.randrange(len(lines) + 1), lines[i])
    return "\n".join(lines)


def _number(r: random.Random, text: str) -> str:
    spans = [(s, e) for s, e in _tokens(text) if text[s:e].lstrip("+-").isdigit()] or _tokens(text)
    if not spans:
        return r.choice(NUMBERS)
    s, e = r.choice(spans)
    return text[:s] + r.choice(NUMBERS) + text[e:]


def _odd(r: random.Random, text: str) -> str:
    at = r.randrange(len(text) + 1)
    choice = r.random()
    if choice < 0.15:
        return text.replace("\n", "\r")  # CR-only line ends
    if choice < 0.3:
        return "".join(c + ("\r\n" if r.random() < 0.5 else "") if c == "\n" else c for c in text)
    return text[:at] + r.choice(ODD) + text[at:]


def _long_line(r: random.Random, text: str) -> str:
    lines = text.split("\n")
    i = r.randrange(len(lines))
    lines[i] += " " + "x" * (1 << 20) if r.random() < 0.5 else "9" * (1 << 20)
    return "\n".join(lines)


def _delete_line(r: random.Random, text: str) -> str:
    lines = text.split("\n")
    del lines[r.randrange(len(lines))]
    return "\n".join(lines)


def _respace(r: random.Random, text: str) -> str:
    return re.sub(r"[ \t]+", lambda _: r.choice([" ", "\t", "  ", " \t", "\t\t"]), text)


def _crlf(r: random.Random, text: str) -> str:
    return text.replace("\n", "\r\n") if r.random() < 0.5 else text.rstrip("\n")


def _renumber(r: random.Random, text: str) -> str:
    lines = text.split("\n")
    candidates = [i for i in range(2, len(lines)) if len(lines[i].split()) >= 12]
    if not candidates:
        return text
    i = r.choice(candidates)
    fields = lines[i].split()
    at = r.choice([2, 4, 5, 7, 8, 10, 11])
    fields[at] = r.choice([str(r.randrange(10 ** r.randint(1, 12))), "007", "+5"])
    lines[i] = "\t".join(fields)
    return "\n".join(lines)


def _blank(r: random.Random, text: str) -> str:
    lines = text.split("\n")
    lines.insert(r.randrange(2, max(len(lines), 3)), r.choice(["", "  ", "\t"]))
    return "\n".join(lines)


# Mutations that mostly keep a file clean (or with warnings only): they exercise the round trips.
BENIGN: list[Callable[[random.Random, str], str]] = [_respace, _crlf, _renumber, _blank]

TEXT_MUTATORS: list[Callable[[random.Random, str], str]] = [
    _flip,
    _truncate,
    _swap,
    _duplicate,
    _number,
    _odd,
    _delete_line,
]


def text_cases(seed: int, count: int) -> Iterator[bytes]:
    r = random.Random(seed)
    seeds = _seeds()
    for index in range(count):
        text = r.choice(seeds)
        if index % 500 == 499:
            text = _long_line(r, text)  # a few 1 MB lines: costly, so rare
        mutators = BENIGN if r.random() < 0.3 else TEXT_MUTATORS
        for _ in range(r.choice((1, 1, 1, 2, 3))):
            text = r.choice(mutators)(r, text)
        yield text.encode("utf-8", "surrogateescape")


# -- checks -----------------------------------------------------------------------------------------


def _positioned(found: list[Diagnostic], lines: list[tuple[str, str]], where: str) -> list[str]:
    """Every diagnostic has a span inside the file (the empty line after a final newline counts)."""
    problems = []
    count = len(lines) + (1 if not lines or lines[-1][1] else 0)

    def width(line: int) -> int:
        return len(lines[line - 1][0]) if line <= len(lines) else 0

    for d in found:
        if d.code in ("F001", "F002", "F007"):
            continue  # whole-file: not a text file at all, or an empty one
        span = d.span
        if span is None:
            problems.append(f"{where}: {d.code} has no position: {d.message[:80]}")
            continue
        inside = 1 <= span.line <= span.end_line <= count
        inside = inside and 1 <= span.column <= width(span.line) + 1
        inside = inside and 1 <= span.end_column <= width(span.end_line) + 1
        inside = inside and (span.line, span.column) <= (span.end_line, span.end_column)
        if not inside:
            problems.append(f"{where}: {d.code} at {span} is outside the file ({count} lines)")
    return problems


def _guarded(check: Callable[[], list[str]]) -> list[str]:
    try:
        return check()
    except Exception:
        return [
            "exception: "
            + traceback.format_exc(limit=6).strip().splitlines()[-1][:200]
            + "\n"
            + traceback.format_exc(limit=6)
        ]


def check_text(data: bytes, scratch: Path) -> list[str]:
    """Read `data` as `modtrans validate` reads a file; round-trip it when it is clean."""
    path = scratch / "case.txt"
    path.write_bytes(data)
    return _guarded(lambda: _check_text(path))


def _read(path: Path, kind: str) -> tuple[Loaded, list[Diagnostic], list[str], Workload | None]:
    """A file read as the commands read it: what was loaded, its findings, the misplaced ones,
    and the workload when it is clean (no errors)."""
    loaded = load(path)
    found = check_parsed(loaded.result, path=loaded.path)
    workload = loaded.result.workload
    clean = None if any(d.severity is Severity.ERROR for d in found) else workload
    return loaded, found, _positioned(found, loaded.lines, kind), clean


def _canonical(workload: Workload) -> str | None:
    """The canonical text of the workload's dialect; None when that dialect cannot say it (D310)."""
    try:
        return write(workload, workload.dialect or Dialect.ASTRA_SIM)
    except DiagnosticError as error:
        if all(d.code == "D310" for d in error.diagnostics):
            return None
        raise


def _check_text(path: Path) -> list[str]:
    loaded, found, problems, workload = _read(path, "text")
    if workload is None:
        return problems
    text = "".join(c + e for c, e in loaded.lines)
    if write(workload) != text:
        problems.append("lossless: a clean file does not write back byte for byte")
    canonical = _canonical(workload)
    if canonical is None:
        return problems
    dialect = workload.dialect or Dialect.ASTRA_SIM
    again = parse(canonical)
    if again.workload is None or write(again.workload, dialect) != canonical:
        problems.append("fmt: the canonical form is not idempotent")
    added = Counter(d.code for d in check_parsed(again)) - Counter(d.code for d in found)
    if added:
        problems.append(f"fmt: the canonical form adds {sorted(added)}")
    back, json_found = jsonform.loads(jsonform.dumps(workload))
    if back != workload or json_found:
        problems.append(f"json: a clean text does not come back from JSON ({[d.code for d in json_found]})")
    elif write(back, dialect) != canonical:
        problems.append("json: the text from JSON differs from the canonical text")
    return problems


# -- workload JSON ------------------------------------------------------------------------------------


def _json_seeds() -> list[dict[str, Any]]:
    documents = []
    for text in _seeds():
        workload = parse(text).workload
        if workload is not None:
            documents.append(jsonform.to_dict(workload))
    return documents


WEIRD: list[object]  # mixed, so mypy cannot infer the element type
WEIRD = [None, True, 1.0, -1, 2**64, 1e400, "", "a b", "a\n", "ep:", [], {}, [[[]]], "\u200f", 10**30]


def _mutate_value(r: random.Random, document: object) -> object:
    """Replace one value somewhere in `document` by a weird one (or drop / add a key)."""
    paths: list[tuple[dict[Any, Any] | list[Any], Any]] = []
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            paths += [(item, k) for k in item]
            stack += list(item.values())
        elif isinstance(item, list):
            paths += [(item, i) for i in range(len(item))]
            stack += item
    if not paths:
        return _weird(r)
    container, key = r.choice(paths)
    choice = r.random()
    if choice < 0.1 and isinstance(container, dict):
        del container[key]
    elif choice < 0.2 and isinstance(container, dict):
        container[r.choice(["extra", "dlrm_last_bottom_layer", "policy", "x"])] = _weird(r)
    else:
        container[key] = _weird(r)
    return document


def _weird(r: random.Random) -> object:
    """A fresh copy: a shared list put into the document twice could be made to contain itself."""
    return copy.deepcopy(r.choice(WEIRD))


def json_cases(seed: int, count: int) -> Iterator[bytes]:
    r = random.Random(seed)
    seeds = _json_seeds()
    for index in range(count):
        document = json.loads(json.dumps(r.choice(seeds)))
        kind = index % 10
        if kind < 6:
            for _ in range(r.randint(1, 3)):
                document = _mutate_value(r, document)
            text = json.dumps(document, indent=r.choice([None, 2]))
        elif kind < 9:
            text = r.choice(TEXT_MUTATORS)(r, json.dumps(document, indent=2))
        else:
            depth = r.choice([70, 1000, 100_000])
            text = r.choice(["[", '{"a":']) * depth + "1" + "]" * depth
        yield text.encode("utf-8", "surrogateescape")


def check_json(data: bytes, scratch: Path) -> list[str]:
    path = scratch / "case.json"
    path.write_bytes(data)
    return _guarded(lambda: _check_json(path))


def _check_json(path: Path) -> list[str]:
    _, _, problems, workload = _read(path, "json")
    text = None if workload is None else _canonical(workload)
    if workload is not None and text is not None:
        again = parse(text)
        if again.workload != workload or any(d.severity is Severity.ERROR for d in check_parsed(again)):
            problems.append("json: a clean document converts to text that reads back different or broken")
    return problems


# -- ONNX ---------------------------------------------------------------------------------------------


def _flip_bits(r: random.Random, data: bytes) -> bytes:
    """`data` with one to eight random bits flipped."""
    flipped = bytearray(data)
    for _ in range(r.randint(1, 8)):
        flipped[r.randrange(len(flipped))] ^= 1 << r.randrange(8)
    return bytes(flipped)


def _onnx_seeds() -> list[bytes]:
    return [p.read_bytes() for p in sorted((FIXTURES / "onnx").glob("*.onnx")) if p.stat().st_size < 100_000]


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _mutate_varint(r: random.Random, data: bytes) -> bytes:
    """Set one varint field (anywhere in the first level or a nested message) to an odd value."""
    from modtrans.extraction import wire

    try:
        fields = wire._fields(data, 0, len(data))
        nested = [f for f in fields if f.wire == 2]
        if nested and r.random() < 0.7:
            outer = r.choice(nested)
            inner = wire._fields(data, outer.body, outer.end)
            targets = [f for f in inner if f.wire == 0]
        else:
            targets = [f for f in fields if f.wire == 0]
    except Exception:
        targets = []
    if not targets:
        return data
    field = r.choice(targets)
    value = r.choice([-1, 2**63 - 1, 2**64 - 1, 0, 2**31, -(2**31)])
    tag_end = field.body
    return data[:tag_end] + _varint(value) + data[field.end :]


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _deep(depth: int) -> bytes:
    """A model whose If -> then_branch -> If ... nesting is `depth` deep, built on the wire
    (protobuf's own encoder refuses past 100 levels, which is the point)."""
    from onnx import TensorProto, helper

    leaf = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "leaf",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    condition = helper.make_tensor_value_info("c", TensorProto.BOOL, []).SerializeToString()
    result = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1]).SerializeToString()
    graph = leaf.SerializeToString()
    for _ in range(depth):
        attribute = _field(1, b"then_branch") + _field(6, graph) + _varint(20 << 3) + _varint(5)
        node = _field(1, b"c") + _field(2, b"y") + _field(4, b"If") + _field(5, attribute)
        graph = _field(1, node) + _field(2, b"g") + _field(11, condition) + _field(12, result)
    opset = _varint(2 << 3) + _varint(17)
    return _varint(1 << 3) + _varint(8) + _field(8, opset) + _field(7, graph)


def _external(location: str) -> bytes:
    from onnx import TensorProto, helper

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.0] * 16)
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", location
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        [weight],
    )
    return bytes(helper.make_model(graph).SerializeToString())


def onnx_cases(seed: int, count: int) -> Iterator[bytes]:
    r = random.Random(seed)
    seeds = _onnx_seeds()
    special = [
        _deep(200),
        _deep(20),
        *(_external(p) for p in ("../../etc/passwd", "/etc/passwd", "a/../../b")),
    ]
    for index in range(count):
        if index < len(special):
            yield special[index]
            continue
        data = r.choice(seeds)
        kind = r.random()
        if kind < 0.35:
            data = _flip_bits(r, data)
        elif kind < 0.55:
            data = data[: r.randrange(len(data))]
        else:
            for _ in range(r.randint(1, 3)):
                data = _mutate_varint(r, data)
        yield data


def check_onnx(data: bytes, scratch: Path) -> list[str]:
    path = scratch / "model" / "case.onnx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return _guarded(lambda: _check_onnx(path))


def _check_onnx(path: Path) -> list[str]:
    from modtrans import pipeline

    pipeline.extract_checked(path, file_hash=False)
    result = pipeline.translate_checked(path, pipeline.Options(batch=1))
    if result.workload is not None:
        from modtrans.workload.validate import validate

        text = write(result.workload, Dialect.ASTRA_SIM)
        errors = [d for d in validate(text) if d.severity is Severity.ERROR]
        if errors:
            return [f"onnx: the translated workload has errors {[d.code for d in errors]}"]
    return []


# -- transformer configurations --------------------------------------------------------------------

CONFIG_VALUES: list[object]  # what a hand-edited or generated config.json puts where a size belongs
CONFIG_VALUES = [
    None,
    True,
    0,
    -1,
    1,
    2,
    3,
    7,
    1.5,
    0.5,
    10**7 + 1,
    2**63,
    "",
    "8",
    [],
    {},
    [1, 2],
    "gelu",
    "gated-x",
]


def _config_seeds() -> list[dict[str, Any]]:
    return [
        json.loads(p.read_text())
        for p in sorted((FIXTURES / "configs").glob("*.json"))
        if p.name != "EXPECTED.json"
    ]


def config_cases(seed: int, count: int) -> Iterator[bytes]:
    """Real published configurations (fixtures/configs) with one to three values anywhere in them
    (nested vision and text configs too) replaced, dropped or added, from sizes of 0 or 2^63 to
    lists and strings; every tenth a text mutation of the file."""
    r = random.Random(seed)
    seeds = _config_seeds()
    for index in range(count):
        document = json.loads(json.dumps(r.choice(seeds)))
        if index % 10 == 9:
            yield r.choice(TEXT_MUTATORS)(r, json.dumps(document, indent=2)).encode(
                "utf-8", "surrogateescape"
            )
            continue
        for _ in range(r.randint(1, 3)):
            paths: list[tuple[dict[str, Any], str]] = []
            stack: list[object] = [document]
            while stack:
                item = stack.pop()
                if isinstance(item, dict):
                    paths += [(item, k) for k in item]
                    stack += list(item.values())
            container, key = r.choice(paths)
            if r.random() < 0.15:
                del container[key]
            else:
                container[key] = copy.deepcopy(r.choice(CONFIG_VALUES))
        yield json.dumps(document).encode()


def check_config(data: bytes, scratch: Path) -> list[str]:
    path = scratch / "config.json"
    path.write_bytes(data)
    return _guarded(lambda: _check_config(path))


def _check_config(path: Path) -> list[str]:
    """A configuration gives an IR, or diagnostics each of one line; an IR's parameters are whole."""
    from modtrans import pipeline

    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 64)})
    problems = [
        f"config: a diagnostic of several lines: {d.message[:80]!r}" for d in found if "\n" in d.message
    ]
    if ir is None and not found:
        problems.append("config: no IR and no diagnostic")
    if ir is not None and not (isinstance(ir.totals.params, int) and ir.totals.params > 0):
        problems.append(f"config: an IR of {ir.totals.params!r} parameters")
    return problems


# -- the language server ---------------------------------------------------------------------------

_METHODS = [
    "textDocument/hover",
    "textDocument/documentSymbol",
    "textDocument/formatting",
    "textDocument/codeAction",
    "textDocument/completion",
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didClose",
    "workspace/didChangeConfiguration",
    "no/suchMethod",
    "$/cancelRequest",
]


def _frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _framed(r: random.Random, body: bytes) -> tuple[bytes, bool]:
    """`body` framed as a sloppy or hostile client frames it, and whether the server receives it:
    header spellings it must accept (lower case, LF alone, a Content-Type, blank lines or junk
    before it) or frames it must skip (a Content-Length that is not a count, over the limit,
    missing or lying; a 200 KB header line before it)."""
    kind = r.random()
    if kind < 0.8:
        return _frame(body), True
    n = len(body)
    accepted = [
        b"content-length: %d\r\n\r\n%s" % (n, body),
        b"Content-Length: %d\n\n%s" % (n, body),
        b"CONTENT-LENGTH:%d\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s" % (n, body),
        b"\r\n\r\n\n" + _frame(body),
        bytes(r.randrange(256) for _ in range(r.randint(1, 300))).replace(b"\n", b" ") + _frame(body),
    ]
    refused = [
        b"Content-Length: %s\r\n\r\n%s"
        % (r.choice([b"abc", b"-5", b"1e3", b"0x10", b"", b"1 2", b"\xff"]), body),
        b"Content-Length: %s\r\n\r\n%s" % (r.choice([b"1000000000000", b"9" * 5000, b"268435457"]), body),
        b"Content-Type: text/plain\r\n\r\n" + body,
        b"X-Junk: " + b"a" * 200_000 + b"\r\n" + _frame(body),
        b"Content-Length: %d\r\n\r\n%s%s" % (n + 3, body, b"###"),  # longer than the body
        b"Content-Length: %d\r\n\r\n%s" % (max(n - 3, 1), body),  # shorter: the rest is junk
    ]
    if kind < 0.9:
        return r.choice(accepted), True
    return r.choice(refused), False


@dataclass(frozen=True)
class LspMessage:
    """One hostile message as bytes on the wire, and when the server must hold a known text
    afterwards (a well-framed didOpen or whole-document change): (uri, version, text)."""

    data: bytes
    known: tuple[str, int, str] | None = None


def lsp_messages(seed: int, count: int) -> Iterator[LspMessage]:
    """Messages a broken client might send: bad JSON, wrong types, positions far outside the text,
    edits to documents never opened, buffers replaced by mutated (garbage) workloads, and every
    framing problem of `_framed`."""
    r = random.Random(seed)
    seeds = _seeds()
    uris = ["file:///a.txt", "untitled:1", "", "file:///", "file:///" + "x" * 300]
    documents = [*uris, *(f"file:///doc{k}.txt" for k in range(20))]
    for index in range(count):
        uri = r.choice(uris)
        version = 1_000_000 + index  # unique: a published version names the text it was checked on
        position = {"line": r.choice([0, 1, 5, -1, 2**31, 2**53]), "character": r.choice([0, 3, -7, 2**40])}
        garbage = r.choice(seeds)
        for _ in range(r.randint(1, 3)):
            garbage = r.choice(TEXT_MUTATORS)(r, garbage)
        garbage = garbage.encode("utf-8", "replace").decode("utf-8")  # JSON cannot carry lone surrogates
        choice = r.randrange(9)
        params: object = [
            {"textDocument": {"uri": uri, "languageId": "x", "version": version, "text": r.choice(seeds)}},
            {"textDocument": {"uri": uri}, "position": position},
            {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": position, "end": position}, "text": r.choice(ODD)}],
            },
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": garbage}]},
            {"textDocument": {"uri": uri}, "range": {"start": position, "end": position}, "context": {}},
            None,
            [],
            "text",
            {"textDocument": 5},
        ][choice]
        method = r.choice(_METHODS)
        message: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": params}
        if r.random() < 0.5:
            message["id"] = r.choice([index + 1000, "s", None, 1.5])
        edit = r.random() < 0.3  # a well-formed open or whole-buffer change, often of garbage
        if edit:
            uri = r.choice(documents)
            text = r.choice([garbage, garbage, r.choice(seeds)])
            if r.random() < 0.4:
                item = {"uri": uri, "languageId": "x", "version": version, "text": text}
                message = {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {"textDocument": item},
                }
            else:
                change = {
                    "textDocument": {"uri": uri, "version": version},
                    "contentChanges": [{"text": text}],
                }
                message = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": change}
        body = json.dumps(message).encode()
        mutated = r.random() < 0.15
        if mutated and r.random() < 0.66:
            body = _flip(r, body.decode()).encode("utf-8", "surrogateescape")
        elif mutated:
            body = r.choice([b"[" * 5000 + b"]" * 5000, b"[1, 2]", b"5", b'"x"', b"null", b"{}", b"\xff\xfe"])
        data, delivered = _framed(r, body)
        # a change applies only when the uri is open: its version is then published, if at all
        known = (uri, version, text) if edit and delivered and not mutated else None
        yield LspMessage(data, known)


def _replies(stream: bytes) -> Iterator[dict[str, Any]]:
    """The server's messages (it frames them correctly)."""
    while stream:
        header, _, rest = stream.partition(b"\r\n\r\n")
        found = re.search(rb"Content-Length: (\d+)", header)
        if found is None:
            raise ValueError(f"a header without Content-Length: {header[:80]!r}")
        length = int(found.group(1))
        yield json.loads(rest[:length])
        stream = rest[length:]


def _inside(text: str, where: dict[str, Any]) -> bool:
    """Whether an LSP range lies in `text` as a client counts it (a lone CR ends a line too;
    characters in UTF-16 code units, the default encoding)."""
    lines = re.split(r"\r\n|\r|\n", text)
    points = []
    for end in ("start", "end"):
        line, character = where[end]["line"], where[end]["character"]
        if not 0 <= line < len(lines):
            return False
        if not 0 <= character <= len(lines[line].encode("utf-16-le")) // 2:
            return False
        points.append((line, character))
    return points[0] <= points[1]


def check_lsp(seed: int, count: int) -> list[str]:
    """One server session: initialize, `count` hostile messages, then a document opened, a hover
    on it and shutdown, which must be answered; the server must exit cleanly, write nothing on
    stderr but `modtrans lsp: ` lines (no traceback), and publish every diagnostic of a known text
    inside that text."""
    import subprocess
    import sys

    def message(body: dict[str, Any]) -> bytes:
        return _frame(json.dumps(body).encode())

    opening = message({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    hostile = list(lsp_messages(seed, count))
    last = {"uri": "file:///last.txt", "languageId": "x", "version": 1, "text": "DATA\n0\n"}
    closing = message({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": last}})
    where = {"textDocument": {"uri": last["uri"]}, "position": {"line": 0, "character": 1}}
    closing += message({"jsonrpc": "2.0", "id": 3, "method": "textDocument/hover", "params": where})
    closing += message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    closing += message({"jsonrpc": "2.0", "method": "exit"})
    stream = opening + b"".join(m.data for m in hostile) + closing
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "lsp"], input=stream, capture_output=True, timeout=600, check=False
    )
    problems = []
    stderr = done.stderr.decode(errors="replace")
    if "Traceback" in stderr:
        problems.append("lsp: a traceback on stderr: " + stderr[stderr.index("Traceback") :][:400])
    strays = [line for line in stderr.splitlines() if not line.startswith("modtrans lsp: ")]
    if strays:
        problems.append(f"lsp: {len(strays)} stderr lines are not one-line reports, e.g. {strays[0][:200]!r}")
    if done.returncode != 0:
        problems.append(f"lsp: the server exited with {done.returncode}: {stderr.strip().splitlines()[-3:]}")
    try:
        replies = list(_replies(done.stdout))
    except (ValueError, IndexError) as error:
        return [*problems, f"lsp: the server's output is not framed JSON ({error})"]
    by_id = {r["id"]: r for r in replies if "id" in r and "method" not in r}
    if by_id.get(2, {}).get("result", "missing") is not None:
        problems.append("lsp: shutdown was not answered after the hostile messages")
    if not by_id.get(3, {}).get("result"):
        problems.append("lsp: a hover after the hostile messages was not answered")
    known = {(m.known[0], m.known[1]): m.known[2] for m in hostile if m.known is not None}
    for reply in replies:
        if reply.get("method") != "textDocument/publishDiagnostics":
            continue
        params = reply["params"]
        text = known.get((params["uri"], params.get("version")))
        if text is None:
            continue
        for diagnostic in params["diagnostics"]:
            if not _inside(text, diagnostic["range"]):
                problems.append(
                    f"lsp: {diagnostic['code']} at {diagnostic['range']} is outside version "
                    f"{params['version']} of {params['uri'][:40]}"
                )
    return problems


# -- Chakra traces -----------------------------------------------------------------------------------


@functools.cache
def _trace_seeds() -> list[bytes]:
    from modtrans import chakra, pipeline
    from modtrans.comm import Policy
    from modtrans.strategy import Parallelism

    seeds = []
    for model, policy, group in (("resnet50", Policy.DATA, None), ("gpt2", Policy.HYBRID_TRANSFORMER, 2)):
        options = pipeline.Options(parallel=Parallelism(policy, 2, group), format="chakra-et")
        plan = pipeline.translate_checked(model, options).plan
        assert plan is not None
        seeds += [data for _, data in chakra.files(plan, Path("t"), tick_ns=1.0)]
    return seeds


def trace_cases(seed: int, count: int) -> Iterator[bytes]:
    """Trace sets (two ranks and a group file, joined by a marker) with flipped bits, cuts and
    varints set to extremes (ids, dependencies, lengths, attribute values)."""
    r = random.Random(seed)
    seeds = _trace_seeds()
    pairs = [seeds[0:3], seeds[3:6]]
    for _ in range(count):
        parts = list(r.choice(pairs))
        which = r.randrange(len(parts))
        data = parts[which]
        kind = r.random()
        if kind < 0.35:
            data = _flip_bits(r, data)
        elif kind < 0.5:
            data = data[: r.randrange(len(data) + 1)]
        elif kind < 0.6 and which == 2:
            data = r.choice([b"{", b"[]", b'{"0": [1]}', b'{"1": [0, 0, 99]}', b'{"x": "y"}', b"\xff"])
        else:
            at = r.randrange(max(len(data) - 4, 1))
            data = data[:at] + _varint(r.choice([0, 1, 2**31, 2**63 - 1, 2**64 - 1])) + data[at + 1 :]
        parts[which] = data
        yield b"\0MODTRANS-PART\0".join(parts)


def check_trace(data: bytes, scratch: Path) -> list[str]:
    return _guarded(lambda: _check_trace(data))


def _check_trace(data: bytes) -> list[str]:
    from modtrans.chakra.validate import check_set

    *ranks, groups = data.split(b"\0MODTRANS-PART\0")
    found = check_set({f"t.{i}.et": part for i, part in enumerate(ranks)}, groups, "t.comm_groups.json")
    return [f"trace: a diagnostic without its file ({d.code})" for d in found if not d.path]


CAMPAIGNS: dict[str, tuple[Callable[[int, int], Iterator[bytes]], Callable[[bytes, Path], list[str]]]] = {
    "text": (text_cases, check_text),
    "json": (json_cases, check_json),
    "onnx": (onnx_cases, check_onnx),
    "trace": (trace_cases, check_trace),
    "config": (config_cases, check_config),
}


def campaign(
    kind: str, seed: int, count: int, scratch: Path, *, slow: float | None = None
) -> tuple[int, list[str]]:
    """Run `count` cases of one kind; the number run and every violation (with its case index).
    With `slow`, a case that takes longer than that many seconds is a violation too (a hang or
    a quadratic path: bench/fuzz.py sets it; the tests time nothing)."""
    import time

    cases, check = CAMPAIGNS[kind]
    violations = []
    run = 0
    for index, data in enumerate(cases(seed, count)):
        run += 1
        start = time.perf_counter()
        found = check(data, scratch)
        seconds = time.perf_counter() - start
        if slow is not None and seconds > slow:
            found.append(f"took {seconds:.1f} s ({len(data)} bytes)")
        violations += [f"{kind} #{index} (seed {seed}): {v}" for v in found]
    return run, violations
