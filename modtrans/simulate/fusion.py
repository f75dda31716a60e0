"""A trace set as ASTRA-sim 2.x is given it by `modtrans simulate`: each chain of computes one
node, the same simulated time. Its feeder (FeederV3, et_feeder.cpp: build_index_dependancy_cache)
keeps an index entry and three dependency-graph entries for every node of every rank before it
runs, so its memory and its start grow with the nodes of the whole set (GPT 175B at 64 ranks:
1.55 million nodes, 1.95 GB; fused 0.68 million, 0.89 GB; bench/bench_table5.py).

The rule is chakra/fuse.py's, read off the trace bytes (simulate takes any trace set, of any
writer): a compute joins the compute before it in the file where it waits for that one alone
(data and control dependencies), is all that waits for it, both take time (ASTRA-sim runs a node
of 0 us for 1 ns) and both run on the same processor (is_cpu_op). ASTRA-sim runs one compute at
a time (HardwareResource::is_available) and issues a node the moment it is free
(Workload::issue_dep_free_nodes), so the second starts as the first ends, unless another compute
is free then and goes first: the pair joins only where no other can be, every compute before the
first being one it waits for and every compute after the second one that waits for it (checked
through any path of dependencies; a node's computes waited for are held as the run from the first
and a few more, so a doubtful pair stays apart). The joined node is the chain's first, its
duration the chain's whole microseconds summed; what waited for the chain's last waits for it.
A rank whose dependencies name a node not before them, or that does not read as a trace, is
passed on as written (linked, as is a rank with nothing to join): the simulator says what it finds.
"""

from __future__ import annotations

import functools
import itertools
import os
from dataclasses import dataclass
from pathlib import Path

from modtrans.chakra import wire
from modtrans.chakra.wire import COMP_NODE
from modtrans.integers import decoded

_CPU_NAME = b"\n\tis_cpu_op"  # an AttributeProto's name field for is_cpu_op


@dataclass(frozen=True)
class Fused:
    """What fusing a set did: its prefix for the simulator, the nodes before and after."""

    prefix: str
    nodes: int
    kept: int


@dataclass(frozen=True, slots=True)
class _Node:
    """What the chains are found from: a node's id, whether it computes, its data and control
    dependencies, duration (us), is_cpu_op (None: not given)."""

    id: int
    compute: bool
    data: tuple[int, ...]
    ctrl: tuple[int, ...]
    duration: int
    cpu: bool | None


@functools.lru_cache(maxsize=1 << 16)
def _node(body: bytes) -> _Node:
    """A node's fields the rule reads, from its protobuf bytes (et_def.proto's Node: id 1, type 3,
    ctrl_deps 4, data_deps 5, duration_micros 7, attr 10), the other fields skipped. Ranks of
    one set hold mostly byte-identical nodes: each is read once."""
    node_id = kind = duration = 0
    deps: dict[int, list[int]] = {4: [], 5: []}
    cpu: bool | None = None
    at, end = 0, len(body)
    while at < end:
        key, at = decoded(body, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, at = decoded(body, at)
            if number == 1:
                node_id = value
            elif number == 3:
                kind = value
            elif number == 7:
                duration = value
            elif number in deps:  # a repeated id not packed
                deps[number].append(value)
        elif wire_type == 2:
            size, at = decoded(body, at)
            stop = at + size
            if number in deps:
                while at < stop:
                    value, at = decoded(body, at)
                    deps[number].append(value)
            elif number == 10 and cpu is None and body.startswith(_CPU_NAME, at):
                cpu = body[stop - 1] == 1  # bool_val (27), the attribute's last byte
            at = stop
        elif wire_type in (1, 5):
            at += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"wire type {wire_type}")
    return _Node(node_id, kind == COMP_NODE, tuple(deps[5]), tuple(deps[4]), duration, cpu)


def _frames(data: bytes) -> list[tuple[int, int]]:
    """Each record's body (start, end); the first is the global metadata."""
    out, at, end = [], 0, len(data)
    while at < end:
        size, at = decoded(data, at)
        if at + size > end:
            raise ValueError("a record is cut")
        out.append((at, at + size))
        at += size
    return out


def _chains(nodes: list[_Node]) -> dict[int, list[int]]:
    """The chains to fuse, by the index of their first node: the indices of their members (none
    where a dependency names a node not before it)."""
    where: dict[int, int] = {}
    parents: list[list[int]] = []
    children: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        if node.id in where:
            return {}
        found = []
        for dep in set(node.data) | set(node.ctrl):
            k = where.get(dep)
            if k is None:
                return {}
            found.append(k)
            children[k].append(i)
        parents.append(found)
        where[node.id] = i
    computes = [i for i, node in enumerate(nodes) if node.compute]
    waits, awaited = _ordered(nodes, parents)
    chains: dict[int, list[int]] = {}
    head_of: dict[int, int] = {}
    for k, (a, b) in enumerate(itertools.pairwise(computes)):
        first, second = nodes[a], nodes[b]
        head_of.setdefault(a, a)
        if (
            parents[b] == [a]
            and children[a] == [b]
            and first.duration > 0
            and second.duration > 0
            and first.cpu == second.cpu
            and waits[k]
            and awaited[k + 1]
        ):
            head = head_of[b] = head_of[a]
            chains.setdefault(head, [head]).append(b)
    return chains


_EXTRA = 16
"""The computes a node waits for beyond its unbroken run from the first, kept each: past this
many, the latest are let go (a lower bound: fewer chains joined, never a wrong one)."""


def _ordered(nodes: list[_Node], parents: list[list[int]]) -> tuple[list[bool], list[bool]]:
    """Per compute (in file order), whether it waits for every compute before it, and whether
    every compute after it waits for it: what lets no other compute be free while a chain runs.
    A node's computes waited for are kept as the unbroken run from the first (its last) and the
    few others (`_EXTRA`)."""
    held: list[tuple[int, frozenset[int]]] = []  # per node: (run's last, others) it waits for or is
    waits: list[bool] = []
    missed = [0] * (sum(node.compute for node in nodes) + 1)  # a difference array over computes
    for i, node in enumerate(nodes):
        run, others = -1, frozenset[int]()
        for k in parents[i]:
            r, o = held[k]
            run, others = max(run, r), others | o
        others = frozenset(x for x in others if x > run)
        while run + 1 in others:
            run += 1
            others = others - {run}
        if node.compute:
            j = len(waits)
            waits.append(run == j - 1)
            missed[run + 1] += 1  # computes run+1 .. j-1, less `others`, are not waited for
            missed[j] -= 1
            for x in others:  # waited for after all: counted back (a range of its own)
                missed[x] -= 1
                missed[x + 1] += 1
            others = others | {j}
            while run + 1 in others:
                run += 1
                others = others - {run}
        if len(others) > _EXTRA:
            others = frozenset(sorted(others)[:_EXTRA])
        held.append((run, others))
    awaited, level = [], 0
    for j in range(len(waits)):
        level += missed[j]
        awaited.append(level == 0)
    return waits, awaited


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return wire.varint(number << 3 | wire_type) + payload


@functools.lru_cache(maxsize=1 << 14)
def _rewritten(body: bytes, data: tuple[int, ...], ctrl: tuple[int, ...], duration: int) -> bytes:
    """`body` with these dependencies and duration, framed: its other fields as they are, in field
    order."""
    kept: list[tuple[int, bytes]] = []
    at, end = 0, len(body)
    while at < end:
        start = at
        key, at = decoded(body, at)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, at = decoded(body, at)
        elif wire_type == 2:
            size, at = decoded(body, at)
            at += size
        else:
            at += 8 if wire_type == 1 else 4
        if number not in (4, 5, 7):
            kept.append((number, body[start:at]))
    for number, ids in ((4, ctrl), (5, data)):
        if ids:
            kept.append((number, wire.delimited(number, b"".join(wire.varint(i) for i in ids))))
    if duration:
        kept.append((7, _field(7, 0, wire.varint(duration))))
    kept.sort(key=lambda field: field[0])  # stable: repeated attributes keep their order
    return wire.framed(b"".join(raw for _, raw in kept))


def fused_trace(data: bytes) -> tuple[bytes | None, int, int]:
    """A rank's trace with its chains fused (None: nothing to fuse), its nodes before and after."""
    frames = _frames(data)
    nodes = tuple(_node(data[a:b]) for a, b in frames[1:])
    edits, kept = _edits(nodes)
    if kept == len(nodes):
        return None, len(nodes), kept
    out = [data[: frames[0][1]]]
    for first, last, changed in edits:  # records first..last (1: the first node) as they are, or
        if changed is None:  # one rewritten
            out.append(data[frames[first - 1][1] : frames[last][1]])
        else:
            start, stop = frames[first]
            out.append(_rewritten(data[start:stop], *changed))
    return b"".join(out), len(nodes), kept


_Edit = tuple[int, int, tuple[tuple[int, ...], tuple[int, ...], int] | None]


@functools.lru_cache(maxsize=4)
def _edits(nodes: tuple[_Node, ...]) -> tuple[list[_Edit], int]:
    """How a rank's trace becomes the fused one, and its nodes after: runs of records copied
    (first, last, None) and records rewritten (k, k, (data deps, control deps, duration)). The
    ranks of a stage hold the same nodes but for their peers and groups: one plan serves them."""
    chains = _chains(list(nodes))
    dropped: set[int] = set()
    renamed: dict[int, int] = {}  # the chain's last's id -> its first's
    for head, chain in chains.items():
        dropped.update(chain[1:])
        renamed[nodes[chain[-1]].id] = nodes[head].id
    edits: list[_Edit] = []
    for i, node in enumerate(nodes):
        if i in dropped:
            continue
        members = chains.get(i)
        data_deps = tuple(renamed.get(d, d) for d in node.data)
        ctrl_deps = tuple(renamed.get(d, d) for d in node.ctrl)
        if members is None and (data_deps, ctrl_deps) == (node.data, node.ctrl):
            if edits and edits[-1][2] is None and edits[-1][1] == i:
                edits[-1] = (edits[-1][0], i + 1, None)
            else:
                edits.append((i + 1, i + 1, None))
            continue
        duration = sum(nodes[m].duration for m in members) if members else node.duration
        edits.append((i + 1, i + 1, (data_deps, ctrl_deps, duration)))
    return edits, len(nodes) - len(dropped)


def fused_set(prefix: str, npus: int, folder: str) -> Fused:
    """The set `prefix` (PREFIX.<rank>.et) with each rank's chains fused, in `folder` (a rank with
    nothing to fuse linked); a trace that does not read as one is passed on as it is, and the
    whole set as written where a file cannot be read or the copy written (a full disk, say): the
    simulator says what it finds, as without fusion."""
    target = str(Path(folder) / "fused")
    nodes = kept = 0
    try:
        for rank in range(npus):
            source, path = Path(f"{prefix}.{rank}.et"), f"{target}.{rank}.et"
            data = source.read_bytes()
            try:
                made, before, after = fused_trace(data)
            except (ValueError, IndexError):
                made, before, after = None, 0, 0
            nodes, kept = nodes + before, kept + after
            if made is None:
                os.symlink(source.resolve(), path)
            else:
                Path(path).write_bytes(made)
    except OSError:
        return Fused(prefix, 0, 0)
    return Fused(target, nodes, kept)
