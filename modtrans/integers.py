"""Integers as every reader reads them: a digit run in text (workload text, JSON, options), and
protobuf's varint in wire bytes (Chakra traces written and read, chakra/wire.py and
simulate/fusion.py; ONNX files stripped, extraction/wire.py).

Generic: no domain module (workload/, cli/, ...) is imported here; workload/numbers.py builds the
consumers' readings (ranges, messages) on top of it.

    varint(150)                  b"\x96\x01"
    decoded(b"\x96\x01", 0)      (150, 2): the value and where the next field starts
"""

from __future__ import annotations

import re
from typing import Protocol

INTEGER = re.compile(r"[+-]?[0-9]+")
"""A token any integer reader takes: an optional sign and decimal digits."""
# More significant digits than any 64-bit value has: such a token is out of range without being
# converted (Python refuses int() of over 4,300 digits, and is quadratic below that).
MAX_DIGITS = 24


def integer(token: str) -> int | None:
    """`token` ([+-]?[0-9]+) as an int, or None when it has more significant digits than any C++
    integer. The one reading of a digit run for every reader (text fast paths and lark, options):
    leading zeros are dropped before int(), which refuses over 4,300 digits whatever their value."""
    sign = token[:1] if token[:1] in "+-" else ""
    digits = token[len(sign) :].lstrip("0")
    if len(digits) > MAX_DIGITS:
        return None
    return int(sign + (digits or "0"))


def shown(token: str, limit: int = 32) -> str:
    """A token as messages quote it: at most `limit` characters, elided in the middle."""
    if len(token) <= limit:
        return token
    return f"{token[: limit // 2]}...{token[-(limit // 2) + 3 :]} ({len(token)} characters)"


def varint(value: int) -> bytes:
    """The base-128 varint; a negative value as its 64-bit two's complement."""
    if 0 <= value < 0x80:
        return ONE_BYTE[value]
    if 0 < value < 0x4000:  # a node id, a name's length: two bytes without a loop
        return bytes((value & 0x7F | 0x80, value >> 7))
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


ONE_BYTE = [bytes((n,)) for n in range(0x80)]
"""Each value below 128 as its varint, one byte: a table, not a call, in the writers' loops."""


class Indexed(Protocol):
    """Bytes read one at a time: bytes, a memoryview, an mmap."""

    def __getitem__(self, index: int, /) -> int: ...


def decoded(data: Indexed, at: int) -> tuple[int, int]:
    """The varint at `at` and the offset after it. IndexError where the bytes end inside it,
    ValueError where it runs past ten bytes. One and two bytes (most fields, a node's length)
    without the loop: simulate's fusion reads a varint per record of every rank."""
    byte = data[at]
    if byte < 0x80:
        return byte, at + 1
    if data[at + 1] < 0x80:
        return byte & 0x7F | data[at + 1] << 7, at + 2
    value = shift = 0
    while shift < 64:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7
    raise ValueError(f"a varint of more than ten bytes ends at byte {at}")


def decoded_or_none(data: Indexed, at: int) -> tuple[int, int] | None:
    """`decoded`, or None where the varint is cut or too long (a reader that reports it)."""
    try:
        return decoded(data, at)
    except (IndexError, ValueError):
        return None
