"""Digit runs: the one reading of an integer token for every reader (workload text, JSON, options).

Generic: no domain module (workload/, cli/, ...) is imported here; workload/numbers.py builds the
consumers' readings (ranges, messages) on top of it.
"""

from __future__ import annotations

import re

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
