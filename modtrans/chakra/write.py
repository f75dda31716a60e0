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
"""

from __future__ import annotations

import functools
import json
import math
import weakref
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from modtrans import heap, limits
from modtrans.chakra import ahead, wire
from modtrans.chakra.patch import PEER, RANK, Ends, Group, Piece, Template
from modtrans.plan.model import (
    Collective,
    Compute,
    Direction,
    Mesh,
    Plan,
    Purpose,
    Step,
    Tensor,
    Transfer,
)
from modtrans.plan.sizes import Consumer, written
from modtrans.workload.model import CommType

SCHEMA = "1.0.2-chakra.1.0.0"
_PHASE = {
    Step.FWD: "FWD",
    Step.INPUT_GRAD: "BWD_IG",
    Step.WEIGHT_GRAD: "BWD_WG",
    Step.RECOMPUTE: "FWD_RECOMPUTE",
    Step.UPDATE: "UPDATE",
}


class ChakraError(RuntimeError):
    """The traces cannot be written (network dims that do not fit, a folder that is not there)."""


def collective_type(pb: Any, comm: CommType) -> int:
    base = comm.value.split("_")[0]  # ALLREDUCE_EP -> ALLREDUCE: the group says which ranks
    return int(
        {
            "ALLREDUCE": pb.ALL_REDUCE,
            "ALLGATHER": pb.ALL_GATHER,
            "REDUCESCATTER": pb.REDUCE_SCATTER,
            "ALLTOALL": pb.ALL_TO_ALL,
            "ALLREDUCEALLTOALL": pb.ALL_REDUCE,
        }[base]
    )


def dim_masks(mesh: Mesh, dims: Sequence[int] | None) -> dict[frozenset[Purpose], tuple[bool, ...]] | None:
    """The network dimensions each axis set spans (`involved_dim`): every mesh axis must be a run
    of consecutive dims, fastest first, as ASTRA-sim 1.0's decode_involved_dimensions splits them
    (workload-format spec, section 8). None without `dims` (ASTRA-sim 2.x then uses every dim)."""
    if not dims:
        return None
    owner: list[Purpose] = []
    d = 0
    for axis in mesh.axes:
        product = 1
        while product < axis.size and d < len(dims):
            product *= dims[d]
            owner.append(axis.purpose)
            d += 1
        if product != axis.size:
            what = (
                f"model_parallel_NPU_group {axis.size}"
                if axis.purpose is Purpose.TENSOR
                else f"the {axis.purpose} axis of {axis.size} NPUs"
            )
            raise ChakraError(f"{what} is not a product of consecutive network dims {list(dims)}")
    owner += [mesh.axes[-1].purpose] * (len(dims) - d)  # dims of size 1 left over
    sets = {frozenset(s) for s in _subsets([a.purpose for a in mesh.axes])}
    return {over: tuple(p in over for p in owner) for over in sets}


def _subsets(items: list[Purpose]) -> Iterator[list[Purpose]]:
    for mask in range(1 << len(items)):
        yield [x for i, x in enumerate(items) if mask >> i & 1]


_CPU = wire.boolean("is_cpu_op", False)


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


def _deps(deps: Sequence[int]) -> bytes:
    """A node's data_deps field (5, packed varints; none when empty), as wire.fields writes it."""
    if not deps:
        return b""
    listed = wire.varint(deps[0]) if len(deps) == 1 else b"".join([wire.varint(d) for d in deps])
    return b"*" + wire.varint(len(listed)) + listed


class _Encoder:
    """Encodes the nodes of ranks: each program's once, as a template (chakra/patch.py) that each
    of its ranks fills in with its peers and groups."""

    def __init__(
        self, plan: Plan, passes: int, dims: Sequence[int] | None, tick_ns: float, metadata: dict[str, Any]
    ) -> None:
        from modtrans.chakra.schema import schema

        self.plan, self.passes, self.tick_ns = plan, passes, tick_ns
        self.pb = schema()
        self.masks = dim_masks(plan.mesh, dims)
        self.header = _Header(metadata)
        self.templates: dict[int, Template] = {}  # by program, until its last rank is made
        self.entries: dict[Any, bytes] = {}  # a template's tensors, encoded, by id (and pass)
        self.titles: dict[tuple[int, Step], str] = {}
        self.names: dict[tuple[int, Step], bytes] = {}  # a compute's name and type fields
        self.counts: dict[tuple[int, int], bytes] = {}  # is_cpu_op, num_ops and tensor_size
        self.sizes: dict[int, bytes] = {}  # a tensor size's string list entry
        self.fixed: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}  # a collective's name, attributes
        self.collectives: dict[tuple[Any, ...], tuple[str, bytes]] = {}
        self.last = {p: r for r, p in enumerate(plan.program_of)}  # program -> its last rank
        self.ahead: ahead.Ahead | None = None  # a big set's programs made in workers (ahead.py)
        self.started = False

    def _durations(self, program: Sequence[Any]) -> list[list[int]]:
        return durations(program, self.tick_ns, self.passes)

    def trace(self, rank: int) -> bytes:
        """The rank's whole trace: its metadata, then its program's nodes."""
        return b"".join(self.pieces(rank))

    def pieces(self, rank: int) -> list[bytes]:
        """The rank's trace as pieces to write in order (fileio writes them with os.writev)."""
        program = self.plan.program_of[rank]
        template = self._template(program)
        values = [self._value(rank, key) for key in template.keys]
        data = template.fill(values, self.header.encoded(rank, program))
        if self.last[program] == rank:  # made in rank order, a program's ranks are consecutive
            self.templates.pop(program, None)
        return data

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

    def _slots(self, program_index: int) -> list[tuple[int, int, int, tuple[int, ...]]]:
        """(pass, operation, node id, dependencies) of every node of a program (read once, by
        _template, which keeps what it needs): the same for every rank running it (a group over
        the same axes has the same size everywhere)."""
        program = self.plan.programs[program_index]
        mesh = self.plan.mesh
        slots = []
        next_id = 0
        carried: dict[int, list[int]] = {}  # layer -> what its forward of the next pass waits for
        for k in range(self.passes):
            node_of: list[list[int]] = []  # per operation: the node ids standing for it
            wg_compute: dict[int, int] = {}
            wg_comms: dict[int, list[int]] = {}
            for i, op in enumerate(program):
                deps = {d for j in op.deps for d in node_of[j]}
                if k and isinstance(op, Compute) and op.step is Step.FWD:
                    deps.update(carried.get(op.layer, []))
                if isinstance(op, Collective) and mesh.span(op.over) < 2:
                    node_of.append(sorted(deps))  # nothing to communicate: dependents wait for its deps
                    continue
                slots.append((k, i, next_id, tuple(sorted(deps))))
                node_of.append([next_id])
                if op.step is Step.WEIGHT_GRAD:
                    if isinstance(op, Compute):
                        wg_compute[op.layer] = next_id
                    else:
                        wg_comms.setdefault(op.layer, []).append(next_id)
                next_id += 1
            carried = {layer: wg_comms.get(layer) or [c] for layer, c in wg_compute.items()}
        return slots

    def _template(self, p: int) -> Template:
        """Program p's nodes as every rank running it shares them (chakra/patch.py). Kept until the
        program's last rank is made (trace), so a set's memory holds one program's template, not
        every one."""
        if p not in self.templates:
            if not self.started:
                self.started = True
                self.ahead = self._start()
            made_ahead = self.ahead is not None and p not in self.ahead.done  # else asked again
            pieces = self.ahead.get(p) if made_ahead and self.ahead is not None else self._made(p)
            self.templates[p] = Template(pieces)
        return self.templates[p]

    def _start(self) -> ahead.Ahead | None:
        """Workers making the programs ahead, for a set above ahead.RANKS ranks: in the order their
        first ranks come, two in flight or waiting a worker (each waiting template holds a
        program's bytes). The group ids are made here first, so the workers inherit them."""
        if self.plan.npus <= ahead.RANKS:
            return None
        workers = min(ahead.cores(), ahead.WORKERS)
        if workers > 1:
            self.plan.overs()  # the group index, made once before the fork
        order = list(dict.fromkeys(self.plan.program_of))
        made = ahead.start(self._made, order, workers, 2 * workers)
        if made is not None:  # an encoder dropped before its last program stops its workers
            weakref.finalize(self, made.close)
        return made

    def _made(self, p: int) -> list[Piece]:
        """Program p's template pieces (_pieces), the collector paused."""
        try:
            with heap.paused():  # bytes, tuples and lists, none in a cycle
                return self._pieces(p)
        finally:
            self.entries.clear()  # a program's tensors are its own (suffixed by micro-batch)

    def _pieces(self, p: int) -> list[Piece]:
        """Runs of encoded nodes joined, a transfer's bytes less its ends (Ends), and a collective's
        less its group (Group) where the group differs between the program's ranks."""
        program = self.plan.programs[p]
        durations = self._durations(program)
        ranks = [r for r, q in enumerate(self.plan.program_of) if q == p]
        gids: dict[frozenset[Purpose], set[int]] = {}
        pieces: list[Piece] = []
        run: list[bytes] = []
        for k, i, node_id, deps in self._slots(p):
            op = program[i]
            piece: Piece | None = None
            if isinstance(op, Transfer):
                head, tail = self._transfer(node_id, op, deps, k)
                piece = Ends(head, tail, op.along, op.offset, op.direction is Direction.SEND)
            elif isinstance(op, Collective):
                if op.over not in gids:
                    gids[op.over] = {self.plan.group_id(r, op.over) for r in ranks}
                if len(gids[op.over]) > 1:
                    piece = Group(*self._body(node_id, op, None, deps, k, 0), op.over)
                else:
                    run.append(self._collective_node(node_id, op, min(gids[op.over]), deps, k))
            else:
                run.append(self._compute(node_id, op, deps, k, durations[k][i]))
            if piece is not None:
                if run:
                    pieces.append(b"".join(run))
                    run = []
                pieces.append(piece)
        if run:
            pieces.append(b"".join(run))
        return pieces

    def _collective(self, c: Collective) -> tuple[str, bytes]:
        """A COMM_COLL_NODE's name and attributes before its group: type, size as ASTRA-sim reads
        it and its dimension mask; made once per layer, type, size and axes (every micro-batch
        issues the same)."""
        key = (c.layer, c.comm, c.bytes, c.over)
        made = self.collectives.get(key)
        if made is not None:
            return made
        size = written(c.comm, c.bytes, self.plan.mesh.span(c.over), Consumer.ASTRA_SIM)
        attrs = [
            wire.integer("comm_type", collective_type(self.pb, c.comm)),
            wire.integer("comm_size", size),
        ]
        if self.masks is not None:
            present = frozenset(a.purpose for a in self.plan.mesh.axes)  # ZeRO-3 names absent axes too
            attrs.append(wire.booleans("involved_dim", self.masks[c.over & present]))
        name = self.plan.layers[c.layer].name
        made = self.collectives[key] = (f"COMM_COLL_NODE_{name}_{c.comm.value}", b"".join(attrs))
        return made

    def _body(
        self, node_id: int, op: Any, group: int | None, deps: Sequence[int], k: int, micros: int
    ) -> tuple[bytes, bytes]:
        """A node's message, in two parts around where a collective's pg_name goes: in the first
        for a group id over 0, left out for group 0 (every rank) and for None (the rank's group,
        which each rank fills in: patch.Group)."""
        suffix = f"@pass{k}" if k else ""
        inputs, read = self._strings("inputs", op.inputs, suffix)
        outputs, written_ = self._strings("outputs", op.outputs, suffix)
        if isinstance(op, Compute):
            size = read + written_  # Compute.bytes: every tensor read and written once
            ops = op.flops if op.flops > 0 or size == 0 else 1
            head = wire.fields(node_id, self._title(op), self.pb.COMP_NODE, deps, micros)
            counts = wire.integer("num_ops", ops) + wire.integer("tensor_size", size, 13)
            return head, _CPU + counts + inputs + outputs
        if not isinstance(op, Collective):
            raise TypeError(f"a transfer is encoded by _transfer, not {op!r}")
        title, first = self._collective(op)
        if group:
            first += wire.text("pg_name", str(group))
        head = wire.fields(node_id, title, self.pb.COMM_COLL_NODE, deps, 0)
        return head + first, _CPU + inputs + outputs

    def _compute(self, node_id: int, op: Compute, deps: Sequence[int], k: int, micros: int) -> bytes:
        """A framed COMP_NODE (wire.fields, then is_cpu_op, num_ops, tensor_size, inputs, outputs)
        in one join, its name and counts made once per layer and step: most of a big set's nodes."""
        suffix = f"@pass{k}" if k else ""
        inputs, read = self._strings("inputs", op.inputs, suffix)
        outputs, written_ = self._strings("outputs", op.outputs, suffix)
        size = read + written_  # Compute.bytes: every tensor read and written once
        ops = op.flops if op.flops > 0 or size == 0 else 1
        key = (op.layer, op.step)
        name = self.names.get(key)
        if name is None:
            kind = b"\x18" + wire.varint(self.pb.COMP_NODE)  # type (3)
            name = self.names[key] = wire.delimited(2, self._title(op).encode()) + kind
        counts = self.counts.get((ops, size))
        if counts is None:
            counts = wire.integer("num_ops", ops) + wire.integer("tensor_size", size, 13)
            counts = self.counts[(ops, size)] = _CPU + counts
        varint = wire.varint
        body = b"".join(
            (
                b"\x08" + varint(node_id) if node_id else b"",
                name,
                _deps(deps),
                b"8" + varint(micros) if micros else b"",  # duration_micros (7)
                counts,
                inputs,
                outputs,
            )
        )
        return varint(len(body)) + body

    def _collective_node(
        self, node_id: int, op: Collective, group: int, deps: Sequence[int], k: int
    ) -> bytes:
        """A framed COMM_COLL_NODE of the same group on every rank of its program (wire.fields,
        then _collective's attributes, its pg_name, is_cpu_op, inputs, outputs) in one join, all
        but its id, dependencies and tensors made once per layer, type, size, axes and group."""
        suffix = f"@pass{k}" if k else ""
        inputs = self._strings("inputs", op.inputs, suffix)[0]
        outputs = self._strings("outputs", op.outputs, suffix)[0]
        key = (op.layer, op.comm, op.bytes, op.over, group)
        fixed = self.fixed.get(key)
        if fixed is None:
            title, first = self._collective(op)
            if group:
                first += wire.text("pg_name", str(group))
            kind = b"\x18" + wire.varint(self.pb.COMM_COLL_NODE)  # type (3)
            fixed = self.fixed[key] = (wire.delimited(2, title.encode()) + kind, first + _CPU)
        varint = wire.varint
        body = b"".join(
            (b"\x08" + varint(node_id) if node_id else b"", fixed[0], _deps(deps), fixed[1], inputs, outputs)
        )
        return varint(len(body)) + body

    def _title(self, op: Compute) -> str:
        """A compute node's name, COMP_NODE_<layer>_<phase>: one per layer and step."""
        key = (op.layer, op.step)
        title = self.titles.get(key)
        if title is None:
            title = self.titles[key] = f"COMP_NODE_{self.plan.layers[op.layer].name}_{_PHASE[op.step]}"
        return title

    def _strings(self, name: str, tensors: Sequence[Tensor], suffix: str) -> tuple[bytes, int]:
        """The tensors as the string list of names and byte sizes track-local-mem reads
        (wire.strings), and their bytes in all; each tensor encoded once (its writer and its
        readers name it alike), each size once. The tensors are the program's (_pieces holds it):
        an object's id names it while it is encoded, a cheaper key than its name and size."""
        entries, sizes = self.entries, self.sizes
        parts = []
        total = 0
        for t in tensors:
            size = t.bytes
            total += size
            key: Any = id(t) if not suffix else (id(t), suffix)
            encoded = entries.get(key)
            if encoded is None:
                counted = sizes.get(size)
                if counted is None:
                    counted = sizes[size] = wire.entry(str(size))
                encoded = entries[key] = wire.entry(t.name + suffix) + counted
            parts.append(encoded)
        return wire.string_list(name, b"".join(parts)), total

    def _transfer(self, node_id: int, t: Transfer, deps: Sequence[int], k: int) -> tuple[bytes, bytes]:
        """A COMM_SEND/RECV_NODE's message before comm_src and comm_dst, and after them: the
        same on every rank running the program (the ends differ)."""
        pb = self.pb
        name = self.plan.layers[t.layer].name
        suffix = f"@pass{k}" if k else ""
        send = t.direction is Direction.SEND
        label = "SEND" if send else "RECV"
        kind = pb.COMM_SEND_NODE if send else pb.COMM_RECV_NODE
        head = wire.fields(node_id, f"COMM_{label}_NODE_{name}_{_PHASE[t.step]}", kind, deps, 0)
        label = f"{name}.{t.step}.p2p.{t.tag}" + (".sent" if send else ".received") + suffix
        tensor = wire.entry(label) + wire.entry(str(t.bytes))  # a name of its own: no other node's
        inputs, outputs = (tensor, b"") if send else (b"", tensor)
        tail = [
            wire.integer("comm_tag", t.tag, 7),
            wire.integer("comm_size", t.bytes),
            _CPU,
            wire.string_list("inputs", inputs),
            wire.string_list("outputs", outputs),
        ]
        return head, b"".join(tail)


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
    bytes; `lazy`: with a function making each trace instead, as the pieces to write in order
    (fileio.write_all calls it when it writes the file, so the traces never sit in memory
    together, and writes the pieces with os.writev, never joined); `made`: the folder is
    made before they are written (-o DIR/), not checked here."""
    npus = plan.npus
    too_many = limits.at_most("--passes", passes, limits.PASSES, "iterations in a trace")
    if too_many or passes < 1:
        raise ChakraError(too_many or f"--passes {passes} must be at least 1")
    if dims and math.prod(dims) != npus:
        raise ChakraError(f"the network dims {list(dims)} hold {math.prod(dims)} NPUs, not --npus {npus}")
    folder = prefix.parent if str(prefix.parent) else Path(".")
    if not made and not folder.is_dir():
        raise ChakraError(f"the folder {folder} does not exist")
    encoder = _Encoder(plan, passes, dims, tick_ns, metadata or {})
    traces = [
        (
            prefix.with_name(f"{prefix.name}.{rank}.et"),
            functools.partial(encoder.pieces, rank) if lazy else encoder.trace(rank),
        )
        for rank in range(npus)
    ]
    return [*traces, (group_file(prefix), groups_json(plan).encode())]


def durations(program: Sequence[Any], tick_ns: float, passes: int = 1) -> list[list[int]]:
    """Per pass, per operation of `program`: the duration_micros its node gets, whole
    microseconds, the rounding carried in file order. In integers: a tick is n / d ns exactly (the
    float's own ratio), so the running total in units of 1 / d ns is an integer and
    floor(ns / 1000) is that total // (1000 d)."""
    n, d = Fraction(tick_ns).as_integer_ratio()
    per_micro = 1000 * d
    elapsed, out = 0, []
    for _ in range(passes):
        row = []
        for op in program:
            before = elapsed // per_micro
            if isinstance(op, Compute):
                elapsed += op.time * n
            row.append(elapsed // per_micro - before)
        out.append(row)
    return out


def group_file(prefix: Path) -> Path:
    return prefix.with_name(f"{prefix.name}.comm_groups.json")


def write(plan: Plan, prefix: Path, **options: Any) -> list[Path]:
    """Write every rank's trace and the group file, all or nothing."""
    from modtrans.fileio import write_all

    outputs = files(plan, prefix, **options)
    try:
        write_all(outputs)
    except OSError as error:
        raise ChakraError(f"cannot write the traces: {error.strerror or error}") from None
    return [target for target, _ in outputs]
