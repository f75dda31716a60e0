"""Plan -> Chakra execution traces for ASTRA-sim 2.x: one `PREFIX.<rank>.et` per rank, and
`PREFIX.comm_groups.json` to pass as `--comm-group-configuration`.

Each trace is a GlobalMetadata message, then the nodes of `passes` iterations of the rank's
program (plan order; node ids from 0 in every file). What ASTRA-sim master reads, node by node
(../shared/reference/chakra-contract.md; Workload.cc, FeederV3, LocalMemUsageTracker):

    COMP_NODE       duration_micros (replay mode); num_ops int64 (the FLOPs) and tensor_size
                    uint64 (bytes read + written) for roofline mode; is_cpu_op false
    COMM_COLL_NODE  comm_type, comm_size (bytes, as ASTRA-sim reads them: an all-gather's is one
                    rank's part, plan/sizes.py) int64; pg_name = the group id, absent for a
                    group of every rank (ASTRA-sim reads "" as all ranks); involved_dim with
                    --network-dims
    COMM_SEND/RECV  comm_src, comm_dst, comm_tag int32, comm_size int64: identical on both ends
    every node      inputs / outputs: string lists alternating tensor name and byte size
                    (track-local-mem), every written name written once per trace

A node of zero FLOPs that moves bytes gets num_ops 1, so roofline mode times it by its memory
traffic (1 / min(bw / bytes, peak) = bytes / bw) instead of dividing 0 by 0. A collective over a
group of one rank moves nothing and is left out (dependencies pass through it).

Units: `duration_micros` holds whole microseconds and ASTRA-sim 2.x multiplies it by 1000. The
plan is in ticks of `tick_ns` nanoseconds. No node is rounded on its own: the rounding is carried
from node to node in file order (each node gets the whole microseconds its end adds to the
running total), so every trace's durations sum to the plan's compute time within 1 us.

Passes: iteration k+1 repeats the program; a layer's forward there also waits for that layer's
weight-gradient work of iteration k (its collectives, or the compute when it has none).

The nodes are encode.py's, once per program; here each rank's trace is its metadata and its
program's template filled in (patch.py), made in this process or, for a big set, checked and
written by the workers that own its program (ahead.py).
"""

from __future__ import annotations

import json
import math
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modtrans import limits
from modtrans.chakra import ahead, wire
from modtrans.chakra.encode import ChakraError, Nodes, collective_type, dim_masks, durations
from modtrans.chakra.patch import PEER, RANK, Template
from modtrans.fileio import Part, Slot
from modtrans.plan.model import Plan

if TYPE_CHECKING:
    from modtrans.diagnostics import Diagnostic

__all__ = [
    "ChakraError",
    "checked",
    "collective_type",
    "dim_masks",
    "durations",
    "files",
    "group_file",
    "groups_json",
    "write",
]

SCHEMA = "1.0.2-chakra.1.0.0"


class _Header:
    """Each trace's GlobalMetadata: the schema, and the set's metadata as JSON with the trace's rank
    and pipeline stage, the JSON made once and the two numbers put in per rank (as pieces: some
    40 KB of group names a trace, not copied again for each)."""

    _MARKS = ("\ue000rank", "\ue000stage")  # in no metadata: json.dumps escapes them to ASCII

    def __init__(self, metadata: dict[str, Any]) -> None:
        self.metadata = metadata
        self.schema = wire.delimited(2, wire.delimited(1, b"schema") + wire.delimited(29, SCHEMA.encode()))
        rank, stage = (json.dumps(mark) for mark in self._MARKS)
        text = json.dumps({**metadata, "rank": self._MARKS[0], "stage": self._MARKS[1]}, sort_keys=True)
        parts = text.split(rank)
        if len(parts) != 2 or parts[1].count(stage) != 1:
            self.parts: list[bytes] = []  # a mark in the metadata after all: each rank's JSON made whole
        else:
            self.parts = [parts[0].encode(), *(part.encode() for part in parts[1].split(stage))]

    def encoded(self, rank: int, stage: int) -> list[bytes]:
        """The framed GlobalMetadata, as pieces to join or write in order."""
        if self.parts:
            before, between, after = self.parts
            numbers = (str(rank).encode(), str(stage).encode())
            text = [before, numbers[0], between, numbers[1], after]
        else:
            text = [json.dumps({**self.metadata, "rank": rank, "stage": stage}, sort_keys=True).encode()]
        size = sum(map(len, text))
        value = wire.delimited(1, b"modtrans") + _STRING + wire.varint(size)
        info = len(value) + size
        message = self.schema + _ATTR + wire.varint(info) + value
        return [wire.varint(len(message) + size), message, *text]


_ATTR = wire.varint(2 << 3 | 2)  # GlobalMetadata's attr (2), length-delimited
_STRING = wire.varint(29 << 3 | 2)  # AttributeProto's string_val (29), length-delimited


class _Set:
    """A set's traces, rank by rank: each program's nodes encoded once (encode.Nodes) as a template
    that its ranks fill in with their peers and groups (patch.Template), behind each rank's
    GlobalMetadata. Above ahead.RANKS ranks, forked workers (ahead.py) check and write the traces
    of the programs each owns, straight into the temporaries fileio made: the templates, and the
    bytes, never come back to this process (fileio.Batch)."""

    def __init__(
        self, plan: Plan, passes: int, dims: Sequence[int] | None, tick_ns: float, metadata: dict[str, Any]
    ) -> None:
        self.plan = plan
        self.nodes = Nodes(plan, passes, dims, tick_ns)
        self.header = _Header(metadata)
        self.templates: dict[int, Template] = {}  # by program, until its last rank is made
        self.last = {p: r for r, p in enumerate(plan.program_of)}  # program -> its last rank
        self.workers: ahead.Workers | None = None
        self.started = False
        self.ahead: list[int] = []  # per worker, answers to its templates made ahead, not yet received

    def trace(self, rank: int) -> bytes:
        """The rank's whole trace: its metadata, then its program's nodes."""
        return b"".join(self._made(rank))

    def pieces(self, rank: int) -> list[bytes]:
        """The rank's trace as pieces to write in order (fileio writes them with os.writev), its
        own (a template's buffer is copied: the caller may hold them past the next rank)."""
        return [bytes(piece) for piece in self._made(rank)]

    def _made(self, rank: int) -> list[bytes | bytearray]:
        """The rank's trace (_fill); made in rank order, a program's template is dropped after
        its last rank."""
        program = self.plan.program_of[rank]
        data = self._fill(rank, self._template(program))
        if self.last[program] == rank:
            self.templates.pop(program, None)
        return data

    def _fill(self, rank: int, template: Template) -> list[bytes | bytearray]:
        """The rank's metadata and nodes (Template.fill: valid until the template's next fill)."""
        values = [self._value(rank, key) for key in template.keys]
        return template.fill(values, self.header.encoded(rank, self.plan.program_of[rank]))

    def _value(self, rank: int, key: Any) -> bytes:
        """What the rank fills in for a template's key (patch.RANK, PEER, GROUP)."""
        if key == RANK:
            return wire.varint(rank)
        if key[0] == PEER:
            peer = self.plan.mesh.peer(rank, key[1], key[2])
            if peer is None:
                raise ChakraError(f"rank {rank} has no peer {key[2]:+d} along {key[1]} for its transfers")
            return wire.varint(peer)
        gid = self.plan.group_id(rank, key[1])
        return str(gid).encode() if gid > 0 else b""  # group 0 (every rank): no pg_name

    def _template(self, p: int) -> Template:
        """Program p's template, made once and kept until its ranks are written."""
        template = self.templates.get(p)
        if template is None:
            template = self.templates[p] = Template(self.nodes.made(p))
        return template

    def check(self, places: Sequence[tuple[int, str]], full: bool) -> list[Diagnostic]:
        """The traces of these ranks (rank, path) checked alone, each by the process that will
        write its program (the template made for the check serves the write): decoded and their
        graphs checked (validate.structure), or `full`, as `modtrans validate` checks one trace
        (validate.one_trace: each node's attributes too). The checks' modules are imported here,
        before the workers are forked, once rather than in each of them."""
        from modtrans.chakra import validate  # noqa: F401

        return self._run("full" if full else "check", places)

    def write(self, places: Sequence[tuple[int, Slot]], advance: Callable[[int], None]) -> None:
        """fileio.Batch: each rank's trace written into its slot, a program's ranks counted once
        they are."""
        self._run("write", places, advance)

    def _run(
        self, what: str, places: Sequence[tuple[int, Any]], advance: Callable[[int], None] | None = None
    ) -> list[Diagnostic]:
        """The job for each program's places, in its owner worker (ahead.Workers: program p's is
        worker p % count) or here; the findings of every job, in program order (`advance` told
        how many places each job did)."""
        by_program: dict[int, list[tuple[int, Any]]] = {}
        for rank, path in places:
            by_program.setdefault(self.plan.program_of[rank], []).append((rank, path))
        workers = self._workers()
        count = advance or (lambda done: None)
        found = []
        if workers is None:
            for p, its in sorted(by_program.items()):
                found += self._job((what, p, its))
                count(len(its))
            return found
        try:
            for p, its in sorted(by_program.items()):
                workers.send(p % workers.count, (what, p, its))
            if what != "write":
                self._make_ahead(workers, set(by_program))
            else:
                self._received_ahead(workers)
            for p, its in sorted(by_program.items()):
                found += workers.receive(p % workers.count)
                count(len(its))
        except BaseException:  # a failure, or a signal: no worker writes on once the caller cleans up
            self.workers = None
            workers.close()
            raise
        if what == "write":  # a set is written once: whatever else is asked is made here
            self.workers = None
            workers.close()
        return found

    def _make_ahead(self, workers: ahead.Workers, checked: set[int]) -> None:
        """After a check's jobs, each worker asked to make the template of the first program it
        owns that the check did not: made while this process gets the set's files ready to write
        (Llama-3-70B's 1,026: their names, the check across ranks, the metadata), a time the
        workers otherwise wait. One a worker: each holds at most one template more than the
        check left it."""
        owned: dict[int, int] = {}
        for p in sorted(set(self.plan.program_of) - checked):
            owned.setdefault(p % workers.count, p)
        if not self.ahead:
            self.ahead = [0] * workers.count
        for worker, p in owned.items():
            workers.send(worker, ("make", p, []))
            self.ahead[worker] += 1

    def _received_ahead(self, workers: ahead.Workers) -> None:
        """The answers to the templates made ahead (nothing, or the failure that stops the set)."""
        for worker, waiting in enumerate(self.ahead):
            for _ in range(waiting):
                workers.receive(worker)
        self.ahead = []

    def _job(self, request: tuple[str, int, list[tuple[int, Any]]]) -> list[Diagnostic]:
        """Check or write a program's places (`_run`), or make its template ahead ("make"),
        wherever it runs; a write drops the template."""
        what, p, places = request
        template = self._template(p)
        if what == "make":
            return []
        if what == "write":
            for rank, slot in places:
                slot.write(self._fill(rank, template))
            self.templates.pop(p, None)
            return []
        from modtrans.chakra.read import read
        from modtrans.chakra.validate import one_trace, structure

        full = what == "full"
        found = []
        for rank, path in places:
            trace = read(b"".join(self._fill(rank, template)), path, alone=True, bare=not full)
            found += one_trace(trace) if full else structure(trace)
        return found

    def _workers(self) -> ahead.Workers | None:
        """Forked workers for a set above ahead.RANKS ranks, started at the first job (the group
        index made first, so they inherit it); None below, or where workers do not pay."""
        if not self.started:
            self.started = True
            if self.plan.npus > ahead.RANKS:
                count = min(ahead.cores(), ahead.WORKERS, len(set(self.plan.program_of)))
                if count > 1:
                    self.plan.overs()
                self.workers = ahead.start(self._job, count)
                if self.workers is not None:  # a set dropped before it is written stops its workers
                    weakref.finalize(self, self.workers.close)
        return self.workers


def groups_json(plan: Plan) -> str:
    """The communicator groups, as ASTRA-sim's --comm-group-configuration reads them."""
    return json.dumps({str(g.id): list(g.ranks) for g in plan.groups()}, indent=1) + "\n"


def files(
    plan: Plan,
    prefix: Path,
    *,
    passes: int = 1,
    metadata: dict[str, Any] | None = None,
    dims: Sequence[int] | None = None,
    tick_ns: float = 1000.0,
    lazy: bool = False,
    made: bool = False,
) -> list[tuple[Path, Any]]:
    """`<prefix>.<rank>.et` for every rank and `<prefix>.comm_groups.json` (last), with their
    bytes; `lazy`: with a fileio.Part for each trace instead, made when it is written (so the
    traces never sit in memory together): fileio.write_all has the set write its traces into
    their temporaries (in workers above ahead.RANKS ranks), and a call makes a trace's pieces
    here, to write in order (os.writev, never joined); `made`: the folder is made before they are
    written (-o DIR/), not checked here."""
    npus = plan.npus
    too_many = limits.at_most("--passes", passes, limits.PASSES, "iterations in a trace")
    if too_many or passes < 1:
        raise ChakraError(too_many or f"--passes {passes} must be at least 1")
    if dims and math.prod(dims) != npus:
        raise ChakraError(f"the network dims {list(dims)} hold {math.prod(dims)} NPUs, not --npus {npus}")
    folder = prefix.parent if str(prefix.parent) else Path(".")
    if not made and not folder.is_dir():
        raise ChakraError(f"the folder {folder} does not exist")
    made_set = _Set(plan, passes, dims, tick_ns, metadata or {})
    traces = [
        (prefix.with_name(f"{prefix.name}.{rank}.et"), Part(made_set, rank) if lazy else made_set.trace(rank))
        for rank in range(npus)
    ]
    return [*traces, (group_file(prefix), groups_json(plan).encode())]


def checked(
    traces: Sequence[tuple[Path, Any]], ranks: Sequence[int], *, full: bool = False
) -> list[Diagnostic]:
    """The traces of these ranks, of those files(lazy=True) made, each checked alone by the
    process that will write it (a worker, above ahead.RANKS ranks): its decoding and graph, or
    `full`, its nodes too (_Set.check)."""
    made_set = traces[0][1].batch if isinstance(traces[0][1], Part) else None
    if not isinstance(made_set, _Set):
        raise TypeError("checked() takes the traces of files(lazy=True)")
    return made_set.check([(rank, str(traces[rank][0])) for rank in ranks], full)


def group_file(prefix: Path) -> Path:
    return prefix.with_name(f"{prefix.name}.comm_groups.json")


def write(plan: Plan, prefix: Path, **options: Any) -> list[Path]:
    """Write every rank's trace and the group file, all or nothing; each trace made as it is
    written (files(lazy=True): by the workers, for a big set)."""
    from modtrans.fileio import write_all

    outputs = files(plan, prefix, lazy=True, **options)
    try:
        write_all(outputs)
    except OSError as error:
        raise ChakraError(f"cannot write the traces: {error.strerror or error}") from None
    return [target for target, _ in outputs]
