"""The quick check of text the canonical writer made from a workload, instead of reading it back.

What the full check (validate.py: parse, then every check) can find in such a text is of two
kinds. What the workload's values say (a required SimAI key missing, a size SimAI's int cannot
hold) is the same in the text as in the workload it was written from: the checks run on that
workload, without parsing (a test holds the parsed and the written workload equal on real
translations). What the bytes alone can get wrong is their form: a layer name with a blank in it
(one more field: every later column shifted), a number past its field, a line count that is not
the number of layer lines. That is checked line by line with the reader's own fast-path regex
(parse.clean_layer_line; a line whose fields after the name are those of a line read already, as
the copies of identical blocks and micro-batches are, by its name alone: clean_layer_name), and
the header read back by the reader's fast paths (parse.clean_header) must be the workload's; no
grammar is built and lark is not imported. `clean` says only yes or no: where it says no, the
caller runs the full check, whose diagnostics point into the text.
"""

from __future__ import annotations

from modtrans.workload.checks import run_checks
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.parse import clean_header, clean_layer_line, clean_layer_name

_INT32 = 2**31  # a layer count: C++ int in SimAI and ASTRA-sim (stoi, atoi)


def clean(text: str, workload: Workload, dialect: Dialect) -> bool:
    """Whether `text`, written from `workload` for `dialect`, passes the full check with no
    finding: its form is the canonical one (LF line ends, a final one, no blank line, the count
    line equal to the number of layer lines and to the workload's), its header one the reader's
    fast paths read as the workload's, each layer line one the reader takes without a finding
    (and names the workload's layer), and the workload's checks find nothing."""
    lines = text.split("\n")
    layers = workload.layers
    if len(lines) != len(layers) + 3 or lines[-1] or "\r" in text or not text.isascii():
        return False
    if lines[1] != str(len(layers)) or len(layers) >= _INT32:
        return False
    if clean_header(lines[0]) != workload.header:
        return False
    names = iter(layers)
    tails: set[str] = set()  # the lines' fields after the name, read clean once each
    for line in lines[2:-1]:
        name = next(names).name
        if not line.startswith(name + "\t"):
            return False
        tail = line[len(name) :]
        if tail in tails:  # the same fields after another name: the name alone is new
            if not clean_layer_name(name):
                return False
        elif clean_layer_line(line):
            tails.add(tail)
        else:
            return False
    return not run_checks(workload, dialect)
