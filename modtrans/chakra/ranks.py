"""Trace bytes -> what the checks across ranks read of each rank, a rank at a time, decoding each
distinct node once: how `modtrans validate` streams a large set.

    scanner = Scanner(per_trace)       # per_trace(Trace) -> the findings on one trace alone
    rank, found = scanner.scan(data, "run.3.et")
    rank.nodes[5]                      # Node(id=5, name=..., type=7, pg=129, key=(0, 1048576), ...)

The ranks of one set hold mostly the same bytes: a pipeline stage runs one program, and its ranks
differ only in the group ids (`pg_name`) and peers (`comm_src`, `comm_dst`) of some nodes, and
in their metadata. Three things follow:

* A rank's nodes are compared, as bytes, with those of an earlier rank of the same length (one
  per length is kept). When no byte of a length prefix differs, the two split into records at
  the same offsets, so only the records holding a differing byte are looked at; the others are
  the earlier rank's nodes. Anything else is split record by record. The differing bytes are
  found by halving (`_stretches`: slices compared with memcmp), then by numpy once a set has
  compared more bytes than importing numpy costs (`PURE_BYTES`).
* Each distinct node's bytes are decoded once, into what the checks across ranks read.
* The checks on one trace alone run once per *shape*: the node sequence with the values of
  `pg_name`, `comm_src`, `comm_dst` and `comm_tag` blanked, which those checks never read (they
  test that the attributes are there). A rank of a shape already checked gets that shape's
  findings on its own path.

A rank whose bytes stop being a trace is read whole by read.py and checked on its own, so the
findings are those of checking every rank whole.
"""

from __future__ import annotations

import dataclasses
from array import array
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from modtrans.chakra.read import Trace, attributes, rank_of, read, where
from modtrans.diagnostics import Diagnostic
from modtrans.fileio import what_is
from modtrans.integers import decoded, decoded_or_none

SEND, RECV, COLL = 5, 6, 7
READ = frozenset({"comm_type", "comm_size", "pg_name", "comm_src", "comm_dst", "comm_tag"})
BLANKED = frozenset({"pg_name", "comm_src", "comm_dst", "comm_tag"})
# numpy finds differing bytes at 0.2 ms/MiB and halving at 1.25 ms/MiB, but importing numpy costs
# 70 ms (2 idle cores; 170-190 ms on a loaded 2-core VM): a set compares its first 64 MiB
# (80 ms) without it. Measured on an 8-rank Llama-3-8B set, 2.6 MB compared; see bench_startup.py.
PURE_BYTES = 64 << 20
LEAF = 64  # halving stops at stretches this long (16-256 measured within 30 % of each other)


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """What the checks across ranks read of one node (shared by every rank holding its bytes)."""

    id: int
    name: str
    type: int
    attrs: dict[str, tuple[str | None, Any]]  # the READ attributes it has (the first of a name)
    pg: int  # the group a collective names: 0 every rank, -1 not a group id
    key: tuple[Any, Any]  # (comm_type, comm_size): what the ranks of a collective agree on

    def where(self, index: int) -> str:
        return where(self.id, self.name, index)

    def value(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, (None, default))[1]


def node(id: int, name: str, type: int, attrs: dict[str, tuple[str | None, Any]]) -> Node:
    kept = {k: v for k, v in attrs.items() if k in READ}
    text = str(kept.get("pg_name", (None, ""))[1]).strip()  # "", "0" or none: every rank (ASTRA-sim)
    pg = int(text) if text.isdigit() else (0 if text == "" else -1)
    key = (kept.get("comm_type", (None, None))[1], kept.get("comm_size", (None, None))[1])
    return Node(id, name, type, kept, pg, key)


@dataclass(slots=True)
class Rank:
    """One trace as the checks across ranks see it."""

    path: str
    rank: int | None
    whole: bool  # decoded to its end (a cut trace is left out of the matching: it would add noise)
    nodes: Sequence[Node]
    collectives: Sequence[int]  # the indices of its collectives
    transfers: Sequence[int]  # of its sends and receives


def from_trace(trace: Trace) -> Rank:
    """A trace read whole, as the checks across ranks see it."""
    nodes = [node(n.id, n.name, n.type, n.attrs) for n in trace.nodes]
    return Rank(trace.path, trace.rank, trace.problem is None, nodes, *_positions(nodes))


def _positions(nodes: Sequence[Node]) -> tuple[list[int], list[int]]:
    types = [n.type for n in nodes]
    return [i for i, t in enumerate(types) if t == COLL], [
        i for i, t in enumerate(types) if t in (SEND, RECV)
    ]


@dataclass(frozen=True, slots=True)
class _Split:
    """A rank's node records: the bytes after its metadata, where each record's length prefix and
    body start, its nodes and their shapes."""

    region: bytes
    starts: array[int]  # 'q'
    bodies: array[int]
    nodes: list[Node]
    shapes: list[int]


@dataclass(frozen=True, slots=True)
class _Checked:
    path: str  # of the first rank of the shape
    found: list[Diagnostic]
    collectives: list[int]
    transfers: list[int]


class Scanner:
    """Reads the traces of one set, remembering what its earlier ranks decoded."""

    def __init__(self, per_trace: Callable[[Trace], list[Diagnostic]]) -> None:
        from modtrans.chakra.schema import schema

        self.pb = schema()
        self.per_trace = per_trace
        self.nodes: dict[bytes, tuple[Node, int]] = {}  # node bytes -> the node, its shape
        self.shapes: dict[bytes, int] = {}
        self.checked: dict[tuple[int, ...], _Checked] = {}  # per shape sequence
        self.earlier: dict[int, _Split] = {}  # by the length of the bytes after the metadata
        self.compared = 0  # bytes compared by halving: past PURE_BYTES, numpy compares

    def scan(self, data: bytes, path: str) -> tuple[Rank, list[Diagnostic]]:
        """The rank's summary and the findings on its trace alone."""
        split = self._split(data)
        if split is None:  # not a plain trace: read it whole, as read.py reports it
            trace = read(data, path)
            return from_trace(trace), self.per_trace(trace)
        key = tuple(split.shapes)
        seen = self.checked.get(key)
        if seen is None:
            seen = self.checked[key] = _Checked(
                path, self.per_trace(read(data, path)), *_positions(split.nodes)
            )
        found = seen.found
        if seen.path != path:  # the findings on a trace alone are all on its path
            found = [dataclasses.replace(d, path=path) for d in found]
        return Rank(path, rank_of(path), True, split.nodes, seen.collectives, seen.transfers), found

    def _split(self, data: bytes) -> _Split | None:
        """The rank's records, decoded; None when the bytes are not a whole trace whose every
        record decodes (read.py then says where and why)."""
        from google.protobuf.message import DecodeError

        if not data or what_is(data[:512]) is not None:
            return None
        head = decoded_or_none(data, 0)
        if head is None or sum(head) > len(data):
            return None
        try:
            self.pb.GlobalMetadata().ParseFromString(data[head[1] : sum(head)])
            region = data[sum(head) :]
            earlier = self.earlier.get(len(region))
            split = self._like(region, earlier) if earlier is not None else None
            split = split or self._records(region)
            if split is not None:  # the next rank of this length is compared with this one
                self.earlier[len(region)] = split
        except DecodeError:
            return None
        return split

    def _like(self, region: bytes, earlier: _Split) -> _Split | None:
        """The records of `region`, split where those of an earlier rank of the same length are:
        None when a length prefix differs."""
        if region == earlier.region:
            return dataclasses.replace(earlier, region=region)
        starts, bodies, old = earlier.starts, earlier.bodies, earlier.region
        touched = sorted(self._touched(region, old, starts))  # may hold a record that is the same
        ends = [starts[i + 1] if i + 1 < len(starts) else len(region) for i in touched]
        if any(region[starts[i] : bodies[i]] != old[starts[i] : bodies[i]] for i in touched):
            return None
        nodes, shapes = list(earlier.nodes), list(earlier.shapes)
        for i, end in zip(touched, ends, strict=True):
            body = region[bodies[i] : end]
            if body != old[bodies[i] : end]:
                nodes[i], shapes[i] = self._node(body)
        return _Split(region, starts, bodies, nodes, shapes)

    def _touched(self, region: bytes, old: bytes, starts: array[int]) -> set[int]:
        """The indices of the records holding a byte where `region` and `old` differ (and of some
        of their neighbours, by halving)."""
        if self.compared < PURE_BYTES:
            self.compared += len(region)
            touched: set[int] = set()
            for lo, hi in _stretches(region, old):
                touched.update(range(bisect_right(starts, lo) - 1, bisect_right(starts, hi - 1)))
            return touched
        import numpy as np  # 70 ms: only once halving has cost as much (PURE_BYTES)

        differ = np.flatnonzero(np.frombuffer(region, np.uint8) != np.frombuffer(old, np.uint8))
        return set(np.unique(np.searchsorted(np.frombuffer(starts, np.int64), differ, "right") - 1).tolist())

    def _records(self, region: bytes) -> _Split | None:
        nodes: list[Node] = []
        shapes: list[int] = []
        starts: list[int] = []
        bodies: list[int] = []
        known = self.nodes.get
        end = len(region)
        at = 0
        while at < end:
            starts.append(at)
            try:
                length, start = decoded(region, at)  # the length prefix
            except (IndexError, ValueError):
                return None
            bodies.append(start)
            at = start + length
            if at > end:
                return None
            body = region[start:at]
            entry = known(body) or self._node(body)
            nodes.append(entry[0])
            shapes.append(entry[1])
        return _Split(region, array("q", starts), array("q", bodies), nodes, shapes)

    def _node(self, body: bytes) -> tuple[Node, int]:
        """A node's bytes decoded (raises DecodeError), with its shape."""
        entry = self.nodes.get(body)
        if entry is not None:
            return entry
        message = self.pb.Node()
        message.ParseFromString(body)
        comm = message.type in (SEND, RECV, COLL)
        decoded = node(message.id, message.name, message.type, attributes(message, READ) if comm else {})
        shape = body
        if decoded.attrs.keys() & BLANKED:
            for a in message.attr:
                kind = a.WhichOneof("value") if a.name in BLANKED else None
                if kind is not None:
                    a.ClearField(kind)
            shape = message.SerializeToString()
        entry = self.nodes[body] = (decoded, self.shapes.setdefault(shape, len(self.shapes)))
        return entry


def _stretches(a: bytes, b: bytes) -> list[tuple[int, int]]:
    """Stretches of at most LEAF bytes, in order, that hold every byte where `a` and `b` (of one
    length) differ: halves compared as slices, the equal ones dropped."""
    found: list[tuple[int, int]] = []
    todo = [(0, len(a))]
    while todo:
        lo, hi = todo.pop()
        if a[lo:hi] == b[lo:hi]:
            continue
        if hi - lo <= LEAF:
            found.append((lo, hi))
            continue
        mid = (lo + hi) // 2
        todo += ((mid, hi), (lo, mid))
    return found
