"""What a command reads, in words, and the one refusal of an input file that holds nothing.

A model reader (translate, extract) takes MODEL, a workload reader (validate, fmt, convert)
WORKLOAD, and inspect and diff, which read either, EITHER. An empty file is none of them, whatever
its name: every reader refuses it with one message naming what its command takes (F007, exit 2),
not a reader's own ("not an ONNX model", "invalid JSON").
"""

from __future__ import annotations

from pathlib import Path

from modtrans.diagnostics import Diagnostic, diagnostic

MODEL = "an ONNX model or a Hugging Face config.json"
WORKLOAD = "a workload (text or JSON)"
EITHER = "an ONNX model, a Hugging Face config.json or a workload"

_BLANK = b"\xef\xbb\xbf \t\r\n"  # a UTF-8 byte-order mark and JSON's white space
_HEAD = 1 << 12  # bytes read to tell: a file with more than this is not blank


def refused(name: str, takes: str) -> Diagnostic:
    """The F007 for an input `name` that holds nothing but white space."""
    return diagnostic("F007", f"empty file: expected {takes}", path=name)


def blank(text: str) -> bool:
    """Whether text read from an input holds nothing but white space (or a byte-order mark)."""
    return not text.strip(_BLANK.decode("utf-8", errors="ignore") + "\ufeff")


def is_empty(path: str | Path) -> bool:
    """Whether `path` is a regular file holding nothing but white space (a file that cannot be
    read is not: its reader says why)."""
    from modtrans.fileio import read_head

    head = read_head(path, _HEAD + 1)
    return head is not None and len(head) <= _HEAD and not head.strip(_BLANK)


def empty(path: str | Path, takes: str) -> Diagnostic | None:
    """F007 when `path` is an empty file (is_empty), None otherwise."""
    return refused(str(path), takes) if is_empty(path) else None
