"""Extraction, step 0: rewrite an ONNX file's protobuf bytes without tensor payloads.

onnx.load copies every weight byte into Python objects (VGG16: 553 MB, 0.6 s, 1.1 GB RSS) although
translation needs only names, dtypes and dims. This module walks the protobuf wire format of the
ModelProto (over an mmap, so untouched bytes are never read into memory), copies every field except
the data fields of large tensors, and returns the few kilobytes onnx can then parse. It is the only
part of extraction written by hand; everything else uses the onnx package.

Only the messages that can hold tensors are descended into (onnx.proto field numbers):

    ModelProto       graph=7  training_info=20  functions=25
    GraphProto       node=1  initializer=5  sparse_initializer=15
    NodeProto        attribute=5
    AttributeProto   t=5  g=6  tensors=10  graphs=11  sparse_tensor=22  sparse_tensors=23
    TensorProto      data: float=4 int32=5 string=6 int64=7 raw=9 double=10 uint64=11
    SparseTensorProto values=1 indices=2
    TrainingInfoProto initialization=1 algorithm=2
    FunctionProto    node=7

A tensor keeps its data when the payload is at most KEEP_BYTES (shape operands of Reshape, Expand,
Slice ... are needed by shape inference); otherwise the data fields are dropped and the tensor is
recorded in `Stripped.tensors` with the payload size it had.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from modtrans import dtypes
from modtrans.integers import decoded, varint

KEEP_BYTES = 4096
"""Tensors whose payload is at most this many bytes keep their values (shape operands, scales)."""

KEEP_INTEGER_BYTES = 1 << 16
"""Integer tensors up to this size keep their values too: they are indices, shapes and buffers such
as BERT's position ids, which shape inference may need to follow a Slice or an Expand."""


Buffer = bytes | memoryview | mmap.mmap

_TENSOR_DATA = frozenset({4, 5, 6, 7, 9, 10, 11})
_TENSOR_NAME = 8


class WireError(ValueError):
    """The bytes are not a well-formed protobuf message (truncated, or not ONNX at all)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at byte {offset}")
        self.offset = offset


@dataclass
class Stripped:
    """The model's bytes without large tensor payloads, and what was left out."""

    data: bytes
    tensors: dict[str, int] = field(default_factory=dict)
    """Tensor name -> payload bytes that were skipped (embedded data only)."""

    @property
    def skipped_bytes(self) -> int:
        return sum(self.tensors.values())


def _varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The varint at `pos` (integers.decoded) and the offset after it, within a message that
    ends at `end`; WireError where it is cut there (at `end`) or runs past ten bytes."""
    try:
        value, after = decoded(buf, pos)
    except IndexError:
        raise WireError("truncated varint", end) from None
    except ValueError:
        raise WireError("varint longer than 10 bytes", pos + 10) from None
    if after > end:
        raise WireError("truncated varint", end)
    return value, after


STRIPPED_LOCATION = "modtrans:weights-stripped"
"""A stripped tensor is marked as external data at this location, so that onnx's checker accepts
it, onnx.load(load_external_data=True) fails with a message naming what happened, and modtrans knows
the payload is gone on purpose (never a file to look for)."""


def _string_field(number: int, text: str) -> bytes:
    raw = text.encode()
    return varint(number << 3 | 2) + varint(len(raw)) + raw


_STRIPPED_MARK = (
    varint(13 << 3 | 2)  # external_data: StringStringEntryProto {key, value}
    + varint(len(_string_field(1, "location") + _string_field(2, STRIPPED_LOCATION)))
    + _string_field(1, "location")
    + _string_field(2, STRIPPED_LOCATION)
    + varint(14 << 3 | 0)  # data_location: EXTERNAL
    + varint(1)
)


@dataclass(frozen=True, slots=True)
class _Field:
    number: int
    wire: int
    start: int  # first byte of the tag
    body: int  # first byte of the payload (after the length prefix for wire type 2)
    end: int  # one past the last byte


def _fields(buf: Buffer, start: int, end: int) -> list[_Field]:
    found = []
    pos = start
    while pos < end:
        tag_at = pos
        tag, pos = _varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise WireError("field number 0", tag_at)
        if wire == 0:
            body = pos
            _, pos = _varint(buf, pos, end)
        elif wire == 1:
            body, pos = pos, pos + 8
        elif wire == 2:
            length, body = _varint(buf, pos, end)
            pos = body + length
        elif wire == 5:
            body, pos = pos, pos + 4
        else:
            raise WireError(f"unsupported wire type {wire}", tag_at)
        if pos > end:
            raise WireError("field runs past the end of its message", tag_at)
        found.append(_Field(number, wire, tag_at, body, pos))
    return found


_Rewrite = Callable[["_Stripper", Buffer, int, int], bytes]


MAX_NESTING = 96
"""Messages nested deeper than this (graph -> node -> attribute -> graph ...) are refused, as
protobuf's own parser refuses 100; it keeps the walk far from Python's recursion limit."""


class _Stripper:
    def __init__(self, keep_bytes: int) -> None:
        self.keep_bytes = keep_bytes
        self.tensors: dict[str, int] = {}
        self.depth = 0

    def message(self, buf: Buffer, start: int, end: int, nested: dict[int, _Rewrite]) -> bytes:
        """Copy a message, rewriting the length-delimited fields listed in `nested`."""
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise WireError(f"messages nested more than {MAX_NESTING} deep", start)
            return self._message(buf, start, end, nested)
        finally:
            self.depth -= 1

    def _message(self, buf: Buffer, start: int, end: int, nested: dict[int, _Rewrite]) -> bytes:
        out = bytearray()
        copied_from = start
        for f in _fields(buf, start, end):
            rewrite = nested.get(f.number) if f.wire == 2 else None
            if rewrite is None or f.end - f.body <= self.keep_bytes:
                continue  # copied as it is: a message this short has no payload to strip
            out += buf[copied_from : f.start]
            inner = rewrite(self, buf, f.body, f.end)
            tag_end = _varint(buf, f.start, f.end)[1]
            out += buf[f.start : tag_end]
            out += varint(len(inner))
            out += inner
            copied_from = f.end
        out += buf[copied_from:end]
        return bytes(out)

    def tensor(self, buf: Buffer, start: int, end: int) -> bytes:
        fields = _fields(buf, start, end)
        payload = sum(f.end - f.body for f in fields if f.number in _TENSOR_DATA)
        dtype = next((_varint(buf, f.body, f.end)[0] for f in fields if f.number == 2 and f.wire == 0), 0)
        keep = KEEP_INTEGER_BYTES if dtype in dtypes.INDEX else self.keep_bytes
        if payload <= keep:
            return bytes(buf[start:end])
        name = ""
        out = bytearray()
        for f in fields:
            if f.number in _TENSOR_DATA:
                continue
            if f.number == _TENSOR_NAME and f.wire == 2:
                name = bytes(buf[f.body : f.end]).decode("utf-8", "replace")
            out += buf[f.start : f.end]
        out += _STRIPPED_MARK
        self.tensors[name] = self.tensors.get(name, 0) + payload
        return bytes(out)

    def graph(self, buf: Buffer, start: int, end: int) -> bytes:
        return self.message(buf, start, end, _GRAPH)

    def node(self, buf: Buffer, start: int, end: int) -> bytes:
        return self.message(buf, start, end, _NODE)

    def attribute(self, buf: Buffer, start: int, end: int) -> bytes:
        return self.message(buf, start, end, _ATTRIBUTE)

    def sparse(self, buf: Buffer, start: int, end: int) -> bytes:
        return self.message(buf, start, end, _SPARSE)

    def training(self, buf: Buffer, start: int, end: int) -> bytes:
        return self.message(buf, start, end, {1: _Stripper.graph, 2: _Stripper.graph})

    def function(self, buf: Buffer, start: int, end: int) -> bytes:
        return self.message(buf, start, end, {7: _Stripper.node})


_TENSOR: _Rewrite = _Stripper.tensor
_GRAPH: dict[int, _Rewrite] = {1: _Stripper.node, 5: _TENSOR, 15: _Stripper.sparse}
_NODE: dict[int, _Rewrite] = {5: _Stripper.attribute}
_ATTRIBUTE: dict[int, _Rewrite] = {
    5: _TENSOR,
    6: _Stripper.graph,
    10: _TENSOR,
    11: _Stripper.graph,
    22: _Stripper.sparse,
    23: _Stripper.sparse,
}
_SPARSE: dict[int, _Rewrite] = {1: _TENSOR, 2: _TENSOR}
_MODEL: dict[int, _Rewrite] = {7: _Stripper.graph, 20: _Stripper.training, 25: _Stripper.function}


def strip_bytes(data: bytes | memoryview, keep_bytes: int = KEEP_BYTES) -> Stripped:
    """`data` (a serialized ModelProto) without the payloads of tensors larger than `keep_bytes`."""
    return _strip(data, keep_bytes)


def _strip(data: Buffer, keep_bytes: int) -> Stripped:
    stripper = _Stripper(keep_bytes)
    out = stripper.message(data, 0, len(data), _MODEL)
    return Stripped(out, stripper.tensors)


def strip_file(path: Path) -> Stripped:
    """Like strip_bytes, reading `path` through an mmap so skipped payloads are never paged in."""
    with path.open("rb") as handle:
        size = path.stat().st_size
        if size == 0:
            raise WireError("empty file", 0)
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            # The mmap itself, not a memoryview of it: slicing copies only what is kept, and no
            # exported buffer outlives an exception's traceback (mmap.close would refuse then).
            return _strip(mapped, KEEP_BYTES)
