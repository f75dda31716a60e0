"""Numeric fields: what each consumer makes of a token, as a value or a diagnostic message.

ASTRA-sim 1.0 and SimAI read numbers with C++ `>>` (libstdc++ num_get); Chakra with Python int().
The messages say how each one misreads a bad token (workload-format.md sections 10 and 14.11).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from modtrans.integers import INTEGER as INTEGER  # the digit-run rule, shared with JSON and options
from modtrans.integers import MAX_DIGITS as MAX_DIGITS
from modtrans.integers import integer as integer
from modtrans.integers import shown as shown

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


class Kind(enum.Enum):
    """The C++ type a field is read into, which sets its range and whether it may be negative."""

    INT32 = "int"  # reserved field, layer count, header integers (std::stoi in SimAI)
    UINT64 = "uint64"  # compute times (Tick), comm sizes, update time


@dataclass(frozen=True, slots=True)
class Reading:
    """A token read as a number: the value, or the code and message explaining why not."""

    value: int | None
    code: str | None = None
    message: str | None = None


_CANONICAL = re.compile(r"-?(0|[1-9][0-9]*)")


def read(token: str, kind: Kind, what: str) -> Reading:
    """Read `token` as the field `what` of type `kind`."""
    if INTEGER.fullmatch(token):
        value = integer(token)
        if value is None:
            limit = INT32_MAX if kind is Kind.INT32 else UINT64_MAX
            return Reading(
                None,
                "V204",
                f"{what} {shown(token)} does not fit a C++ {kind.value} (at most {limit}); the stream "
                "fails there and every later field is garbage",
            )
        if value < 0 and kind is Kind.UINT64:
            return Reading(
                None,
                "V203",
                f"{what} is negative ({token}): ASTRA-sim and SimAI read it as unsigned, {value % 2**64}",
            )
        limit = INT32_MAX if kind is Kind.INT32 else UINT64_MAX
        if value > limit or value < -INT32_MAX - 1:
            return Reading(
                None,
                "V204",
                f"{what} {token} does not fit a C++ {kind.value} (at most {limit}); the stream "
                "fails there and every later field is garbage",
            )
        if not _CANONICAL.fullmatch(token):
            return Reading(value, "V205", f"{what} is written `{shown(token)}`; canonical form is `{value}`")
        return Reading(value)
    return Reading(None, "V202", f"{what} is `{shown(token)}`, not an integer: {_misreading(token)}")


def _misreading(token: str) -> str:
    digits = re.match(r"[+-]?[0-9]*", token)
    prefix = digits.group(0) if digits else ""
    if not prefix.strip("+-"):
        return (
            "ASTRA-sim's and SimAI's stream fails here and every later field is garbage; "
            "Chakra rejects the line"
        )
    rest = token[len(prefix) :]
    head = integer(prefix)
    read_as = shown(prefix) if head is None else str(head)
    if "_" in token and rest.replace("_", "").isdigit():
        whole = integer(token.replace("_", ""))
        chakra = "a number too long for it" if whole is None else str(whole)
        return f"ASTRA-sim and SimAI read {read_as} and shift the rest; Chakra reads {chakra}"
    return (
        f"ASTRA-sim and SimAI read {read_as} and take `{shown(rest)}` as the next field, shifting every "
        "later field; Chakra rejects the line"
    )
