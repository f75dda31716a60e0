"""Checks on a set of Chakra traces, across ranks, for what makes ASTRA-sim 2.x abort, hang or
report wrong numbers (codes T701-T714; ../shared/reference/chakra-contract.md).

    found = check_set({"run.0.et": data0, "run.1.et": data1}, groups_json_bytes)

Per trace: decoding (T702), duplicate ids (T703), dependencies on missing nodes (T704), cycles
(T705), collectives ASTRA-sim cannot run (T712), point-to-point nodes without their attributes
(T713), attributes the shipped roofline / memory-tracking configurations need (T709), sizes that
look like element counts (T710), all-gather sizes that are the gathered result (T715), all-zero
durations (T711). Across ranks: missing rank files
(T701), unmatched sends and receives (T706), collectives whose participants disagree (T707),
groups (T708, T714).
"""

from __future__ import annotations

import glob
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modtrans import heap
from modtrans.chakra.ranks import Node, Rank, Scanner
from modtrans.chakra.read import Trace, TraceNode, prefix_of, rank_of, read
from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.fileio import read_binary, utf8
from modtrans.progress import task as progress_task

COMP, SEND, RECV, COLL = 4, 5, 6, 7
RUNNABLE = {0: "ALL_REDUCE", 2: "ALL_GATHER", 5: "BROADCAST", 6: "ALL_TO_ALL", 7: "REDUCE_SCATTER"}
NAMES = {1: "REDUCE", 3: "GATHER", 4: "SCATTER", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER", **RUNNABLE}


@dataclass(frozen=True)
class Groups:
    path: str | None
    members: dict[int, tuple[int, ...]]


def check_set(
    traces: Mapping[Any, bytes],
    groups: bytes | str | None = None,
    groups_path: str | None = None,
    *,
    complete: bool = True,
) -> list[Diagnostic]:
    """Every finding on the traces (path -> bytes) and their group file (None: no file);
    `complete=False`: the traces are a sample of a set, checked one by one, not across ranks,
    each read when its turn comes and dropped after (`traces` may make them on demand)."""
    with heap.paused():  # a set's summaries are millions of small objects in no cycle
        if not complete:  # the collector's passes over a trace's 34,000 nodes took a fifth of reading it
            return [d for path in traces for d in one_trace(read(traces[path], str(path), alone=True))]
        scanner = Scanner(one_trace)
        found: list[Diagnostic] = []
        ranks = []
        for path, data in traces.items():
            rank, alone = scanner.scan(data, str(path))
            found += alone
            ranks.append(rank)
        return found + (across(ranks, groups, groups_path) if complete else [])


def one_trace(trace: Trace) -> list[Diagnostic]:
    """The findings on one trace alone: its decoding, its graph, its nodes."""
    return [*structure(trace), *_nodes(trace)]


def structure(trace: Trace) -> list[Diagnostic]:
    """The findings on one trace's decoding and graph (ids, dependencies, cycles), its nodes'
    attributes not read (read(bare=True) suffices): what a translation's quick self-check of a
    big set asks of each trace it samples."""
    return [*([trace.problem] if trace.problem else []), *_graph(trace)]


def across(ranks: Sequence[Rank], groups: bytes | str | None, groups_path: str | None) -> list[Diagnostic]:
    """The findings across the ranks of a set, each cause before what it brings about: missing
    ranks (T701) and the group file (T714, T708), then the collectives (T708, T707), then the
    transfers (T706), which a rank that issues other collectives than its peers leaves unmatched
    (a pipeline's stages cut differently, say)."""
    found: list[Diagnostic] = []
    ranked = {r.rank: r for r in ranks if r.rank is not None}
    if ranked:
        missing = [r for r in range(max(ranked) + 1) if r not in ranked]
        if missing:
            some = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
            first = next(iter(ranked.values())).path
            found.append(
                diagnostic(
                    "T701",
                    f"{len(missing)} rank file(s) missing from 0..{max(ranked)}: rank {some}",
                    path=first,
                    hint="ASTRA-sim stops: `workload file: PREFIX.N.et does not exist`",
                )
            )
    table = _groups(groups, groups_path, ranked, found)
    whole = {r: t for r, t in ranked.items() if t.whole}  # a cut trace would only add noise
    found += _collectives(whole, table, set(ranked))
    found += _transfers(whole)
    return found


# ----------------------------------------------------------------------------------- one trace


def _graph(trace: Trace) -> list[Diagnostic]:
    found = []
    by_id: dict[int, TraceNode] = {}
    for node in trace.nodes:
        if node.id in by_id:
            found.append(
                diagnostic(
                    "T703", f"{node.where()}: id {node.id} is also {by_id[node.id].where()}", path=trace.path
                )
            )
        else:
            by_id[node.id] = node
    reported = 0
    for node in trace.nodes:
        for kind, deps in (("data", node.data_deps), ("control", node.ctrl_deps)):
            for dep in deps:
                if dep not in by_id and reported < 20:
                    reported += 1
                    found.append(
                        diagnostic(
                            "T704",
                            f"{node.where()}: {kind} dependency on node {dep}, which the trace does not have",
                            path=trace.path,
                        )
                    )
    cycle = _cycle(by_id)
    if cycle:
        names = " -> ".join(by_id[i].where() for i in cycle[:4]) + (" -> ..." if len(cycle) > 4 else "")
        found.append(
            diagnostic("T705", f"{len(cycle)} node(s) wait for each other: {names}", path=trace.path)
        )
    return found


def _cycle(by_id: Mapping[int, TraceNode]) -> list[int]:
    """The nodes that never become free (Kahn's algorithm; dependencies on missing nodes ignored)."""
    waiting = {
        i: {d for d in (*n.data_deps, *n.ctrl_deps) if d in by_id and d != i} for i, n in by_id.items()
    }
    selfish = [i for i, n in by_id.items() if i in (*n.data_deps, *n.ctrl_deps)]
    dependents: dict[int, list[int]] = defaultdict(list)
    for i, deps in waiting.items():
        for d in deps:
            dependents[d].append(i)
    count = {i: len(deps) for i, deps in waiting.items()}
    free = [i for i, c in count.items() if c == 0 and i not in selfish]
    done = 0
    while free:
        i = free.pop()
        done += 1
        for j in dependents[i]:
            count[j] -= 1
            if count[j] == 0 and j not in selfish:
                free.append(j)
    if done == len(by_id):
        return []
    return sorted(i for i, c in count.items() if c > 0 or i in selfish)


def _nodes(trace: Trace) -> list[Diagnostic]:
    found = []
    no_ops, no_io, computes, durations = [], [], 0, 0
    elements: list[str] = []
    gathered: list[str] = []
    verdicts: dict[tuple[int, int], tuple[str | None, str | None]] = {}
    for node in trace.nodes:
        if node.type == COMP:
            computes += 1
            durations += node.duration
            if "num_ops" not in node.attrs or "tensor_size" not in node.attrs:
                no_ops.append(node)
        if node.type in (COMP, SEND, RECV, COLL) and (
            "inputs" not in node.attrs or "outputs" not in node.attrs
        ):
            no_io.append(node)
        found += _unrunnable(node, trace.path)
        key = (node.type, id(node.attrs))  # nodes of identical bytes share their attrs (read._node)
        if key not in verdicts:
            verdicts[key] = (_elements(node), _gathered(node))
        for kind, why in zip((elements, gathered), verdicts[key], strict=True):
            if why is not None:
                kind.append(f"{node.where()}: {why}")
    for code, reasons in (("T710", elements), ("T715", gathered)):
        if reasons:
            more = f" ({len(reasons) - 1} more node(s) like it)" if len(reasons) > 1 else ""
            found.append(diagnostic(code, reasons[0] + more, path=trace.path))
    if no_ops:
        found.append(
            diagnostic(
                "T709",
                f"{len(no_ops)} compute node(s) without num_ops / tensor_size, first {no_ops[0].where()}: "
                "roofline configurations (hgx_h100_*gpu.json) abort",
                path=trace.path,
            )
        )
    if no_io:
        found.append(
            diagnostic(
                "T709",
                f"{len(no_io)} node(s) without inputs / outputs, first {no_io[0].where()}: "
                "track-local-mem configurations (hgx_h100_*gpu.json) abort",
                path=trace.path,
            )
        )
    if computes and durations == 0:
        found.append(
            diagnostic("T711", f"all {computes} compute node(s) have duration_micros 0", path=trace.path)
        )
    return found


def _unrunnable(node: TraceNode, path: str | None) -> list[Diagnostic]:
    """A collective ASTRA-sim cannot run (T712), a send or receive without its attributes (T713)."""
    if node.type == COLL:
        kind = node.value("comm_type")
        if not isinstance(kind, int) or kind not in RUNNABLE:  # a list: a mis-typed attribute
            what = NAMES.get(kind, "no comm_type") if isinstance(kind, int) else "no comm_type"
            return [diagnostic("T712", f"{node.where()}: {what}", path=path)]
    if node.type in (SEND, RECV):
        peer = "comm_dst" if node.type == SEND else "comm_src"
        absent = [a for a in (peer, "comm_tag", "comm_size") if a not in node.attrs]
        if absent:
            return [diagnostic("T713", f"{node.where()}: no {', '.join(absent)}", path=path)]
    return []


def _io_bytes(node: TraceNode, name: str) -> int | None:
    values = node.value(name)
    if not isinstance(values, list) or len(values) % 2:
        return None
    try:
        return sum(map(int, values[1::2]))
    except ValueError:
        return None


def _elements(node: TraceNode) -> str | None:
    """Why the node's size looks like an element count (None when it does not)."""
    if node.type == COMP:
        size, field = node.value("tensor_size"), "tensor_size"
        declared = [_io_bytes(node, "inputs"), _io_bytes(node, "outputs")]
        total = None if None in declared else sum(x for x in declared if x is not None)
    elif node.type in (COLL, SEND, RECV):
        size, field = node.value("comm_size"), "comm_size"
        total = _io_bytes(node, "inputs") or _io_bytes(node, "outputs")
    else:
        return None
    if not isinstance(size, int) or not total or size <= 0 or size == total:
        return None
    for width in (2, 4):
        if size * width == total:
            return f"{field} {size} is 1/{width} of the {total} bytes its inputs/outputs list"
    return None


def _gathered(node: TraceNode) -> str | None:
    """Why an all-gather's comm_size looks like the gathered result (None when it does not)."""
    if node.type != COLL or node.value("comm_type") != 2:
        return None
    size, part, whole = node.value("comm_size"), _io_bytes(node, "inputs"), _io_bytes(node, "outputs")
    if not isinstance(size, int) or not part or not whole or size != whole or whole <= part or whole % part:
        return None
    return (
        f"ALL_GATHER comm_size {size} is its gathered output ({whole // part} x its {part}-byte input): "
        f"ASTRA-sim reads it as each rank's part and moves {whole // part}x the bytes"
    )


# --------------------------------------------------------------------------------- across ranks


def _groups(
    groups: bytes | str | None, path: str | None, ranked: Mapping[int, Rank], found: list[Diagnostic]
) -> Groups | None:
    if groups is None:
        return None
    where = path or "comm_groups.json"
    if isinstance(groups, bytes):
        text, reason = utf8(groups)  # json.loads would guess UTF-16 from the first bytes
        if text is None:
            found.append(diagnostic("F002", f"cannot read the group file {where}: {reason}", path=where))
            return Groups(path, {})
        groups = text
    try:
        raw = json.loads(groups)
    except ValueError as error:
        found.append(diagnostic("T714", f"not JSON: {error}", path=where))
        return Groups(path, {})
    members: dict[int, tuple[int, ...]] = {}
    if not isinstance(raw, dict):
        found.append(diagnostic("T714", "the file holds no object of group id -> ranks", path=where))
        return Groups(path, {})
    for key, ranks in raw.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) > 0):
            found.append(diagnostic("T714", f"group id {key!r}: ids are decimal integers > 0", path=where))
            continue
        if not isinstance(ranks, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in ranks
        ):
            found.append(
                diagnostic("T714", f"group {key}: its value must be a list of rank numbers", path=where)
            )
            continue
        if len(set(ranks)) != len(ranks):
            found.append(diagnostic("T714", f"group {key} lists a rank twice", path=where))
        last = max(ranked, default=-1)
        absent = [r for r in ranks if not 0 <= r <= last]  # gaps below the last rank are T701
        if ranked and absent:
            found.append(
                diagnostic("T708", f"group {key} lists rank(s) {absent[:8]} that have no trace", path=where)
            )
        members[int(key)] = tuple(ranks)
    return Groups(path, members)


def _collectives(ranked: Mapping[int, Rank], table: Groups | None, present: set[int]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    sequences: dict[int, dict[int, list[tuple[int, Node]]]] = defaultdict(dict)  # group -> rank -> nodes
    unknown: Counter[tuple[str, str]] = Counter()
    for rank, trace in sorted(ranked.items()):
        mine: dict[int, list[tuple[int, Node]]] = {}  # group -> its collectives on this rank
        nodes = trace.nodes
        for index in trace.collectives:
            node = nodes[index]
            sequence = mine.get(node.pg)
            if sequence is None:  # the first of its group on this rank, or one that cannot run
                pg = node.pg
                if pg < 0:
                    message = f"{node.where(index)}: pg_name {node.value('pg_name')!r} is no group id"
                    found.append(diagnostic("T708", message, path=trace.path))
                    continue
                if pg > 0:
                    why = _unknown(pg, table)
                    if why is not None:
                        unknown[(trace.path, why)] += 1
                        continue
                    if table is not None and rank not in table.members[pg]:
                        message = f"{node.where(index)}: rank {rank} is not a member of group {pg}"
                        found.append(diagnostic("T708", message, path=trace.path))
                        continue
                sequence = mine[pg] = sequences[pg][rank] = []
            sequence.append((index, node))
    for (path, why), count in unknown.items():
        found.append(
            diagnostic(
                "T708",
                f"{count} collective(s) name a communicator group, but {why}",
                path=path,
                hint="ASTRA-sim aborts: `communicator group N not found`; pass --comm-groups FILE",
            )
        )
    for pg, by_rank in sorted(sequences.items()):
        members = table.members[pg] if pg and table is not None else tuple(sorted(present))
        found += _agree(pg, [r for r in members if r in ranked], by_rank, ranked)
    return found


def _unknown(pg: int, table: Groups | None) -> str | None:
    """Why group `pg` cannot be found (None: it is in the group file)."""
    if table is None:
        return "no group file"
    return None if pg in table.members else f"group {pg} is not in {table.path or 'the group file'}"


def _agree(
    pg: int,
    members: Iterable[int],
    by_rank: Mapping[int, list[tuple[int, Node]]],
    ranked: Mapping[int, Rank],
) -> list[Diagnostic]:
    members = list(members)
    if not members:
        return []
    lead = members[0]
    reference = by_rank.get(lead, [])
    keys = [node.key for _, node in reference]
    group = f"group {pg}" if pg else "the group of every rank"
    found = []
    for rank in members[1:]:
        mine = by_rank.get(rank, [])
        if [node.key for _, node in mine] == keys:  # most ranks: nothing to tell
            continue
        for i, ((ia, a), (ib, b)) in enumerate(zip(reference, mine, strict=False)):
            if a.key != b.key:
                found.append(
                    diagnostic(
                        "T707",
                        f"{b.where(ib)}: collective {i + 1} of {group} is {_show(b.key)} here and "
                        f"{_show(a.key)} on rank {lead} ({a.where(ia)})",
                        path=ranked[rank].path,
                    )
                )
                break
        else:
            found.append(
                diagnostic(
                    "T707",
                    f"rank {rank} issues {len(mine)} collective(s) in {group}, rank {lead} {len(reference)}",
                    path=ranked[rank].path,
                )
            )
    return found


def _show(key: tuple[object, object]) -> str:
    kind, size = key
    return f"{NAMES.get(kind, kind) if isinstance(kind, int) else kind} of {size} bytes"


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


_Sent = tuple[Rank, int, Node, tuple[Any, Any, Any, Any]]  # the rank, the node's index, the node, its key


def _transfers(ranked: Mapping[int, Rank]) -> list[Diagnostic]:
    sends: dict[tuple[Any, ...], list[_Sent]] = defaultdict(list)
    recvs: dict[tuple[Any, ...], list[_Sent]] = defaultdict(list)
    for rank, trace in ranked.items():
        for index in trace.transfers:
            node = trace.nodes[index]
            src = node.value("comm_src", rank)
            dst = node.value("comm_dst", rank)
            key = (node.value("comm_tag", -1), src, dst, node.value("comm_size", 0))
            (sends if node.type == SEND else recvs)[tuple(map(_hashable, key))].append(
                (trace, index, node, key)
            )
    found = []
    for mine, theirs, what, partner in ((sends, recvs, "send", "receive"), (recvs, sends, "receive", "send")):
        for items in mine.values():
            first = items[0][3]
            extra = len(items) - len(theirs.get(tuple(map(_hashable, first)), []))
            for trace, index, node, key in items[len(items) - extra :] if extra > 0 else []:
                tag, src, dst, size = key
                here = tuple(map(_hashable, key))
                close = [k for k in theirs if k[1:3] == here[1:3] and k != here]
                hint = (
                    f"the {partner}s from {src} to {dst} have (tag, size) {[(k[0], k[3]) for k in close[:3]]}"
                    if close
                    else None
                )
                found.append(
                    diagnostic(
                        "T706",
                        f"{node.where(index)}: {what} of {size} bytes, {src} -> {dst}, tag {tag}, "
                        f"has no matching {partner}",
                        path=trace.path,
                        hint=hint,
                    )
                )
    return found


# ------------------------------------------------------------------------------------- files


def expand(paths: Iterable[Path]) -> dict[str, list[Path]]:
    """Trace files grouped by set prefix (a prefix given alone brings every PREFIX.<n>.et)."""
    sets: dict[str, list[Path]] = {}
    for path in paths:
        if path.suffix == ".et":
            prefix = prefix_of(str(path)) or str(path)
            sets.setdefault(prefix, []).append(path)
        else:
            try:
                found = list(path.parent.glob(f"{glob.escape(path.name)}.*.et"))
            except OSError:
                found = []
            members = sorted(found, key=lambda p: rank_of(str(p)) or 0)
            sets.setdefault(str(path), []).extend(p for p in members if rank_of(str(p)) is not None)
    return sets


def validate_paths(paths: Iterable[Path], comm_groups: Path | None = None) -> tuple[list[Diagnostic], int]:
    """Every finding on the trace sets the paths name, and how many files were checked."""
    found: list[Diagnostic] = []
    checked = 0
    for prefix, members in expand(paths).items():
        with heap.paused():  # its passes took a fifth of a 1,024-rank validation, finding nothing
            in_set, count = _validate_set(prefix, members, comm_groups)
        found += in_set
        checked += count
    return found, checked


def _validate_set(prefix: str, members: list[Path], comm_groups: Path | None) -> tuple[list[Diagnostic], int]:
    """One set, its files read one at a time: a rank's bytes are dropped once the scanner has
    taken what the checks across ranks need (ranks.py)."""
    found: list[Diagnostic] = []
    scanner = Scanner(one_trace)
    ranks = []
    paths = list(dict.fromkeys(members))
    with progress_task(f"checking {Path(prefix).name}", total=len(paths)) as advance:
        for path in paths:
            advance()
            data, problem = read_binary(path)
            if data is None:
                found += [problem] if problem else []
                continue
            rank, alone = scanner.scan(data, str(path))
            found += alone
            ranks.append(rank)
    groups_path = comm_groups or Path(f"{prefix}.comm_groups.json")
    groups = None
    if comm_groups is not None or _exists(groups_path):
        groups, problem = read_binary(groups_path)
        found += [problem] if problem else []
    return found + across(ranks, groups, str(groups_path)), len(ranks)


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False
