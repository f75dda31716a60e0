"""Chakra nodes as protobuf wire bytes, written directly: the trace writer's inner loop.

Building a protobuf message per node and serializing it cost some 30 us a node, most of a
280-rank pipeline's translation; these functions make the same bytes in a few. The bytes are
those protobuf writes for the messages of schema.py (the tests compare the two node for node):
fields in number order, proto3's implicit defaults (a zero id, duration or type; an empty name)
left out, a oneof member written even when zero, repeated integers packed, negative integers as
ten-byte varints (https://protobuf.dev/programming-guides/encoding/), written and read by
integers.py (generic: the ONNX stripper's too). The node types are here, so that what reads trace
bytes without protobuf (simulate/fusion.py) needs no schema.py.

    framed(fields(1, "COMP_NODE_x_FWD", COMP_NODE, [0], 3) + boolean("is_cpu_op", False) + ...)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from modtrans.integers import ONE_BYTE
from modtrans.integers import varint as varint  # the writers call wire.varint

_LEN = 2  # the wire type of a length-delimited field

NODE_TYPES = {
    "INVALID_NODE": 0,
    "METADATA_NODE": 1,
    "MEM_LOAD_NODE": 2,
    "MEM_STORE_NODE": 3,
    "COMP_NODE": 4,
    "COMM_SEND_NODE": 5,
    "COMM_RECV_NODE": 6,
    "COMM_COLL_NODE": 7,
}
"""et_def.proto's NodeType values (schema.py's enum is made of them)."""
COMP_NODE = NODE_TYPES["COMP_NODE"]


def delimited(number: int, payload: bytes) -> bytes:
    """A length-delimited field: its key, the payload's length, the payload."""
    n = len(payload)
    key = _KEYS[number] if number < len(_KEYS) else varint(number << 3 | _LEN)
    return key + (ONE_BYTE[n] if n < 0x80 else varint(n)) + payload


_KEYS = [varint(number << 3 | _LEN) for number in range(32)]


def framed(message: bytes) -> bytes:
    """Chakra's framing (protolib.encodeMessage): the message's length as a varint, then it."""
    return varint(len(message)) + message


# AttributeProto (schema.py): 1 name; the `value` oneof: int32_val 7, int64_val 9, uint64_val 13,
# bool_val 27, bool_list 28, string_val 29, string_list 30. Node's attr is its field 10.


@functools.cache
def _named(name: str) -> bytes:
    return delimited(1, name.encode())


def _attr(name: str, value: bytes) -> bytes:
    return delimited(10, _named(name) + value)


@functools.lru_cache(maxsize=1 << 16)
def integer(name: str, value: int, number: int = 9) -> bytes:
    """An integer attribute as a Node field: int64_val (9), int32_val (7) or uint64_val (13)."""
    return _attr(name, varint(number << 3) + varint(value))


@functools.cache
def boolean(name: str, value: bool) -> bytes:
    return _attr(name, varint(27 << 3) + ONE_BYTE[int(value)])


def text(name: str, value: str) -> bytes:
    return _attr(name, delimited(29, value.encode()))


@functools.cache
def integer_prefix(name: str, width: int, number: int = 9) -> bytes:
    """`integer(name, value, number)` less the value's varint at its end, for a value whose varint
    is `width` bytes long (the attribute's length counts it)."""
    value_key = varint(number << 3)
    return _KEYS[10] + varint(len(_named(name)) + len(value_key) + width) + _named(name) + value_key


@functools.cache
def text_prefix(name: str, width: int) -> bytes:
    """`text(name, value)` less the value's bytes at its end, for a value `width` bytes long."""
    value_key = _KEYS[29] + varint(width)
    return _KEYS[10] + varint(len(_named(name)) + len(value_key) + width) + _named(name) + value_key


def booleans(name: str, values: Sequence[bool]) -> bytes:
    """A bool_list attribute (BoolList: 1 repeated bool, packed)."""
    return _attr(name, delimited(28, delimited(1, bytes(int(v) for v in values)) if values else b""))


def strings(name: str, values: Iterable[str]) -> bytes:
    """A string_list attribute (StringList: 1 repeated string)."""
    return string_list(name, b"".join([entry(value) for value in values]))


def string_list(name: str, entries: bytes) -> bytes:
    """A string_list attribute of values already encoded (`entry`), joined: what
    `_attr(name, delimited(30, entries))` makes, in one concatenation (two nodes of three call it)."""
    n = len(entries)
    value = _KEYS[30] + (ONE_BYTE[n] if n < 0x80 else varint(n))
    named = _named(name)
    m = len(named) + len(value) + n
    return _KEYS[10] + (ONE_BYTE[m] if m < 0x80 else varint(m)) + named + value + entries


def entry(value: str, then: bytes = b"") -> bytes:
    """One value of a StringList (its field 1: b"\\n", the length, the UTF-8 bytes), and `then`
    (encoded entries that follow it) in the same join."""
    data = value.encode()
    n = len(data)
    if n < 0x80:
        return b"".join((b"\n", ONE_BYTE[n], data, then))
    return delimited(1, data) + then


@functools.lru_cache(maxsize=1 << 14)
def _name(name: str) -> bytes:
    """A Node's name field: one per layer and phase, repeated every micro-batch."""
    return delimited(2, name.encode())


def fields(node_id: int, name: str, node_type: int, data_deps: Sequence[int], duration: int) -> bytes:
    """A Node's fields before its attributes (field 10, made by the functions above): id 1,
    name 2, type 3, data_deps 5 (packed), duration_micros 7."""
    parts = [b"\x08" + varint(node_id)] if node_id else []
    if name:
        parts.append(_name(name))
    if node_type:
        parts.append(b"\x18" + varint(node_type))
    if data_deps:
        parts.append(delimited(5, b"".join([varint(d) for d in data_deps])))
    if duration:
        parts.append(b"\x38" + varint(duration))
    return b"".join(parts)
