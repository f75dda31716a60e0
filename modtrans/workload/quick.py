"""The quick check of text the canonical writer made from a workload, instead of reading it back.

What the full check (validate.py: parse, then every check) can find in such a text is of two
kinds. What the workload's values say (a required SimAI key missing, a size SimAI's int cannot
hold) is the same in the text as in the workload it was written from: the checks run on that
workload, without parsing (a test holds the parsed and the written workload equal on real
translations). What the bytes alone can get wrong is their form: a layer name with a blank in it
(one more field: every later column shifted), a number past its field, a line count that is not
the number of layer lines. That is checked line by line with the reader's own fast-path regex
(parse.clean_layer_line), and the header token by token; no grammar is built and lark is not
imported. `clean` says only yes or no: where it says no, the caller runs the full check, whose
diagnostics point into the text.
"""

from __future__ import annotations

from modtrans.comm import Policy
from modtrans.workload import vocabulary
from modtrans.workload.checks import run_checks
from modtrans.workload.model import Dialect, Header, Workload
from modtrans.workload.parse import clean_layer_line

_POLICIES = frozenset(p.value for p in Policy)
_INT32 = 2**31  # a header value or layer count: C++ int in SimAI and ASTRA-sim (stoi, atoi)


def clean(text: str, workload: Workload, dialect: Dialect) -> bool:
    """Whether `text`, written from `workload` for `dialect`, passes the full check with no
    finding: its form is the canonical one (LF line ends, a final one, no blank line, the count
    line equal to the number of layer lines and to the workload's), each layer line one the
    reader takes without a finding, and the workload's checks find nothing."""
    lines = text.split("\n")
    layers = workload.layers
    if len(lines) != len(layers) + 3 or lines[-1] or "\r" in text or not text.isascii():
        return False
    if lines[1] != str(len(layers)) or len(layers) >= _INT32:
        return False
    if not _header_clean(lines[0], workload.header, dialect):
        return False
    names = iter(layers)
    for line in lines[2:-1]:
        if not clean_layer_line(line) or not line.startswith(next(names).name + "\t"):
            return False
    return not run_checks(workload, dialect)


def _header_clean(line: str, header: Header, dialect: Dialect) -> bool:
    """Line 1 in the writer's form: the keyword (with ASTRA-sim's and Chakra's positional DLRM
    layer after it), then each key once with its value (a list key with its count, then that many
    values), every value a plain decimal an int holds. Unknown tokens (Header.extra) take the
    full check."""
    tokens = line.split(" ")
    if tokens[0] not in _POLICIES or tokens[0] != header.policy.value or header.extra:
        return False
    seen: set[str] = set()
    at = 1
    if header.dlrm_last_bottom_layer is not None and dialect is not Dialect.SIMAI:
        if not _decimal(tokens, 1):
            return False
        at = 2
    while at < len(tokens):
        key = vocabulary.KEY.get(tokens[at])
        if key is None or key.key in seen:
            return False
        seen.add(key.key)
        count = 1
        if key.kind == "list":
            if not _decimal(tokens, at + 1):
                return False
            count = int(tokens[at + 1]) + 1
        if not all(_decimal(tokens, at + i) for i in range(1, count + 1)):
            return False
        at += count + 1
    return True


def _decimal(tokens: list[str], at: int) -> bool:
    """Whether tokens[at] is a plain decimal (no sign, no leading zero) below 2^31."""
    if at >= len(tokens):
        return False
    token = tokens[at]
    return token.isdigit() and token.isascii() and (token == "0" or token[0] != "0") and int(token) < _INT32
