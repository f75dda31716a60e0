"""Chakra trace bytes -> nodes, with a positioned T702 instead of an exception for bad bytes.

    trace = read(data, "run.3.et")
    trace.rank          3 (from the name PREFIX.<rank>.et), or None
    trace.nodes[0]      TraceNode(index=0, offset=57, id=0, name="COMP_NODE_conv1_FWD", ...)
    trace.problem       a Diagnostic when the bytes stop being a trace (the nodes before it kept)

Attribute values are kept with the oneof field that held them (`("int64_val", 37632)`), since
ASTRA-sim's older feeder reads each attribute through one field type only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.fileio import what_is
from modtrans.integers import decoded_or_none

_RANK = re.compile(r"\.(\d+)\.et$")


def rank_of(path: str) -> int | None:
    """The rank a file name PREFIX.<rank>.et gives."""
    found = _RANK.search(path)
    return int(found.group(1)) if found else None


def prefix_of(path: str) -> str | None:
    found = _RANK.search(path)
    return path[: found.start()] if found else None


def is_trace_spec(path: Path) -> bool:
    """A trace file (`*.et`) or the prefix of a set (PREFIX.0.et exists)."""
    if path.suffix == ".et":
        return True
    try:
        return not path.exists() and Path(f"{path}.0.et").exists()
    except OSError:  # a name too long for the file system: whatever it is, reading it says so
        return False


@dataclass(slots=True)
class TraceNode:
    """A node as read; not frozen, as nothing changes it: a frozen class's fields are each set
    through object.__setattr__, 1.4 us a node where this takes 0.2 (a trace of Llama-3-70B's
    stages, 3,030 nodes: 17.7 -> 14.4 ms to read for the self-check's sample)."""

    index: int  # the node's place in the file (0: the first after the metadata)
    offset: int  # of its length prefix, in bytes
    id: int
    name: str
    type: int
    data_deps: tuple[int, ...]
    ctrl_deps: tuple[int, ...]
    duration: int  # duration_micros
    attrs: dict[str, tuple[str | None, Any]]

    def where(self) -> str:
        return where(self.id, self.name, self.index)

    def value(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, (None, default))[1]


@dataclass
class Trace:
    path: str
    rank: int | None
    metadata: dict[str, tuple[str | None, Any]] = field(default_factory=dict)
    nodes: list[TraceNode] = field(default_factory=list)
    problem: Diagnostic | None = None


def where(id: int, name: str, index: int) -> str:
    """How findings name a node: `node 12 (COMM_COLL_NODE_fc_ALLREDUCE, #12)`."""
    return f"node {id} ({name or 'unnamed'}, #{index})"


def attributes(message: Any, only: Collection[str] | None = None) -> dict[str, tuple[str | None, Any]]:
    """A message's attributes, name -> (the oneof field holding the value, the value); the first
    of a name wins, as ASTRA-sim's feeder finds it. `only`: these names, the others skipped."""
    out: dict[str, tuple[str | None, Any]] = {}
    for a in message.attr:
        if only is not None and a.name not in only:
            continue
        kind = a.WhichOneof("value")
        value = None if kind is None else getattr(a, kind)
        if kind is not None and kind.endswith("_list"):
            value = list(getattr(a, kind).values)
        out.setdefault(a.name, (kind, value))
    return out


@functools.lru_cache(maxsize=1 << 16)
def _node(body: bytes) -> tuple[Any, ...]:
    """A node's fields from its bytes. Ranks of one set mostly hold byte-identical nodes (the
    same compute, the same ids), so each distinct node is decoded once."""
    from modtrans.chakra.schema import schema

    return _fields(schema().Node(), body)


def _fields(node: Any, body: bytes | memoryview) -> tuple[Any, ...]:
    """A node's fields from its bytes, decoded into `node` (a Node message: ParseFromString
    clears it first, and what is returned is copied out of it, so one message serves a trace)."""
    node.ParseFromString(body)
    return node.id, node.name, node.type, *_deps(node), node.duration_micros, attributes(node)


def _bare(node: Any, body: bytes | memoryview) -> tuple[Any, ...]:
    """A node's fields from its bytes, its attributes decoded (protobuf checks them) but not read
    out ({}): what the graph checks need (validate.structure), a fifth of `_fields`'s cost."""
    node.ParseFromString(body)
    return node.id, node.name, node.type, *_deps(node), node.duration_micros, {}


def _deps(node: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A node's data and control dependencies, as tuples: a repeated field's slice (a list) made
    a tuple, and an empty field tested first, each about half what tuple() of the field costs
    (upb's containers; a node of a Llama-3-70B stage 0.8 us of some 6)."""
    control = node.ctrl_deps
    return tuple(node.data_deps[:]), (tuple(control[:]) if control else ())


def _what(index: int) -> str:
    return "the metadata" if index < 0 else f"node #{index}"


def read(data: bytes, path: str, *, alone: bool = False, bare: bool = False) -> Trace:
    """Decode a whole trace; decoding stops at the first record that is not one (T702). `alone`:
    no other rank's trace is read beside it (a sample of a set), so its nodes, all distinct, are
    not kept for them: GPT 1T's 65,536 kept nodes held 400 MB. `bare`: alone, and each node's
    attributes left out of it (_bare)."""
    from google.protobuf.message import DecodeError

    from modtrans.chakra.schema import schema

    pb = schema()
    # alone, each node is decoded into one message, its bytes not copied out of `data`
    message, view = (pb.Node(), memoryview(data)) if bare or alone else (None, None)
    fields = _bare if bare else _fields
    trace = Trace(path, rank_of(path))
    at, index = 0, -1
    if not data:
        trace.problem = diagnostic("T702", "the file is empty (a trace starts with its metadata)", path=path)
        return trace
    kind = what_is(data[:512])
    if kind is not None:
        trace.problem = diagnostic("T702", f"{kind}, not a Chakra trace", path=path)
        return trace
    end = len(data)
    nodes = trace.nodes
    while at < end:
        head = decoded_or_none(data, at)  # the length prefix
        if head is None or head[1] + head[0] > end:
            cut = (
                "its length prefix is cut"
                if head is None
                else f"it needs {head[0]} bytes, {end - head[1]} are left"
            )
            trace.problem = diagnostic("T702", f"byte {at}: {_what(index)} is truncated ({cut})", path=path)
            return trace
        length, body = head
        try:
            if index < 0:
                metadata = pb.GlobalMetadata()
                metadata.ParseFromString(data[body : body + length])
                trace.metadata = attributes(metadata)
            else:
                stop = body + length
                made = _node(data[body:stop]) if view is None else fields(message, view[body:stop])
                nodes.append(TraceNode(index, at, *made))
        except DecodeError:
            trace.problem = diagnostic(
                "T702", f"byte {at}: {_what(index)} does not decode as a Chakra message", path=path
            )
            return trace
        at, index = body + length, index + 1
    return trace
