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
import io
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from modtrans import heap, limits
from modtrans.chakra import wire
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


@dataclass(frozen=True, slots=True)
class _Gap:
    """A transfer in a program's template: its node less comm_src and comm_dst, which each rank
    fills in with itself and its peer `offset` steps along the axis."""

    head: bytes
    tail: bytes
    along: Purpose
    offset: int
    send: bool


class _Encoder:
    """Encodes the nodes of ranks; nodes that do not depend on the rank are encoded once."""

    def __init__(self, plan: Plan, passes: int, dims: Sequence[int] | None, tick_ns: float) -> None:
        from modtrans.chakra.schema import schema

        self.plan, self.passes, self.tick_ns = plan, passes, tick_ns
        self.pb = schema()
        self.masks = dim_masks(plan.mesh, dims)
        self.cache: dict[tuple[Any, ...], bytes] = {}  # collectives whose group differs by rank
        self.templates: dict[int, list[Any]] = {}  # by program, until its last rank is made
        self.entries: dict[tuple[str, int, str], bytes] = {}  # a template's tensors, encoded
        self.last = {p: r for r, p in enumerate(plan.program_of)}  # program -> its last rank

    def _durations(self, program: Sequence[Any]) -> list[list[int]]:
        """Per pass, per operation: whole microseconds, the rounding carried in file order. In
        integers: a tick is n / d ns exactly (the float's own ratio), so the running total in
        units of 1 / d ns is an integer and floor(ns / 1000) is that total // (1000 d)."""
        n, d = Fraction(self.tick_ns).as_integer_ratio()
        per_micro = 1000 * d
        elapsed, out = 0, []
        for _ in range(self.passes):
            row = []
            for op in program:
                before = elapsed // per_micro
                if isinstance(op, Compute):
                    elapsed += op.time * n
                row.append(elapsed // per_micro - before)
            out.append(row)
        return out

    def trace(self, rank: int, metadata: dict[str, Any]) -> bytes:
        from modtrans.chakra.schema import encode

        pb = self.pb
        out = io.BytesIO()
        info = {**metadata, "rank": rank, "stage": self.plan.program_of[rank]}
        attrs = [
            pb.AttributeProto(name="schema", string_val=SCHEMA),
            pb.AttributeProto(name="modtrans", string_val=json.dumps(info, sort_keys=True)),
        ]
        encode(out, pb.GlobalMetadata(attr=attrs))
        out.write(b"".join(self._nodes(rank)))
        program = self.plan.program_of[rank]
        if self.last[program] == rank:  # made in rank order, a program's ranks are consecutive
            self.templates.pop(program, None)
        return out.getvalue()

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

    def _nodes(self, rank: int) -> list[bytes]:
        """The rank's encoded nodes: its program's template, the group ids and peers filled in."""
        p = self.plan.program_of[rank]
        peers: dict[tuple[Purpose, int], int | None] = {}
        groups: dict[frozenset[Purpose], int] = {}
        chunks = []
        for piece in self._template(p):
            if isinstance(piece, bytes):
                chunks.append(piece)
            elif isinstance(piece, _Gap):
                where = (piece.along, piece.offset)
                if where not in peers:
                    peers[where] = self.plan.mesh.peer(rank, piece.along, piece.offset)
                peer = peers[where]
                src, dst = (rank, peer) if piece.send else (peer, rank)
                ends = wire.integer("comm_src", src, 7) + wire.integer("comm_dst", dst, 7)
                chunks.append(wire.framed(piece.head + ends + piece.tail))
            else:
                k, i, node_id, deps = piece
                op = self.plan.programs[p][i]
                gid = groups.get(op.over)
                if gid is None:
                    gid = groups[op.over] = self.plan.group_id(rank, op.over)
                key = (p, k, i, gid)
                if key not in self.cache:
                    self.cache[key] = self._encode(node_id, op, rank, gid, list(deps), k, 0)
                chunks.append(self.cache[key])
        return chunks

    def _template(self, p: int) -> list[Any]:
        """Program p's nodes as every rank running it shares them: runs of encoded nodes joined,
        a transfer's bytes less its ends (_Gap), and the slot of a collective whose group differs
        between the program's ranks (a data-parallel group, say). Kept until the program's last
        rank is made (trace), so a set's memory holds one program's template, not every one."""
        if p not in self.templates:
            self.templates[p] = self._make_template(p)
        return self.templates[p]

    def _make_template(self, p: int) -> list[Any]:
        try:
            with heap.paused():  # bytes, tuples and lists, none in a cycle
                return self._pieces(p)
        finally:
            self.entries.clear()  # a program's tensors are its own (suffixed by micro-batch)

    def _pieces(self, p: int) -> list[Any]:
        program = self.plan.programs[p]
        durations = self._durations(program)
        ranks = [r for r, q in enumerate(self.plan.program_of) if q == p]
        gids: dict[frozenset[Purpose], set[int]] = {}
        pieces: list[Any] = []
        run: list[bytes] = []
        for k, i, node_id, deps in self._slots(p):
            op = program[i]
            piece: Any = None
            if isinstance(op, Transfer):
                head, tail = self._transfer(node_id, op, list(deps), k)
                piece = _Gap(head, tail, op.along, op.offset, op.direction is Direction.SEND)
            elif isinstance(op, Collective):
                if op.over not in gids:
                    gids[op.over] = {self.plan.group_id(r, op.over) for r in ranks}
                if len(gids[op.over]) > 1:
                    piece = (k, i, node_id, deps)
                else:
                    run.append(self._encode(node_id, op, ranks[0], min(gids[op.over]), list(deps), k, 0))
            else:
                run.append(self._encode(node_id, op, ranks[0], None, list(deps), k, durations[k][i]))
            if piece is not None:
                if run:
                    pieces.append(b"".join(run))
                    run = []
                pieces.append(piece)
        if run:
            pieces.append(b"".join(run))
        return pieces

    def _collective(self, name: str, c: Collective, group: int) -> tuple[str, list[bytes]]:
        """A COMM_COLL_NODE's name and attributes: type, size as ASTRA-sim reads it, its dimension
        mask and group."""
        size = written(c.comm, c.bytes, self.plan.mesh.span(c.over), Consumer.ASTRA_SIM)
        attrs = [
            wire.integer("comm_type", collective_type(self.pb, c.comm)),
            wire.integer("comm_size", size),
        ]
        if self.masks is not None:
            present = frozenset(a.purpose for a in self.plan.mesh.axes)  # ZeRO-3 names absent axes too
            attrs.append(wire.booleans("involved_dim", self.masks[c.over & present]))
        if group > 0:
            attrs.append(wire.text("pg_name", str(group)))
        attrs.append(_CPU)
        return f"COMM_COLL_NODE_{name}_{c.comm.value}", attrs

    def _encode(
        self, node_id: int, op: Any, rank: int, variant: Any, deps: list[int], k: int, micros: int
    ) -> bytes:
        """One framed node (chakra/wire.py writes the bytes protobuf would)."""
        pb = self.pb
        name = self.plan.layers[op.layer].name
        suffix = f"@pass{k}" if k else ""
        duration = 0
        if isinstance(op, Compute):
            kind, title, duration = pb.COMP_NODE, f"COMP_NODE_{name}_{_PHASE[op.step]}", micros
            size = op.bytes
            ops = op.flops if op.flops > 0 or size == 0 else 1
            attrs = [_CPU, wire.integer("num_ops", ops), wire.integer("tensor_size", size, 13)]
            inputs, outputs = op.inputs, op.outputs
        elif isinstance(op, Collective):
            kind = pb.COMM_COLL_NODE
            title, attrs = self._collective(name, op, variant)
            inputs, outputs = op.inputs, op.outputs
        else:
            raise TypeError(f"a transfer is encoded by _transfer, not {op!r}")
        attrs.append(self._strings("inputs", inputs, suffix))
        attrs.append(self._strings("outputs", outputs, suffix))
        return wire.framed(wire.fields(node_id, title, kind, deps, duration) + b"".join(attrs))

    def _strings(self, name: str, tensors: Sequence[Tensor], suffix: str) -> bytes:
        """The tensors as the string list of names and byte sizes track-local-mem reads; each
        tensor encoded once (its writer and its readers name it alike)."""
        entries = self.entries
        parts = []
        for t in tensors:
            key = (t.name, t.bytes, suffix)
            encoded = entries.get(key)
            if encoded is None:
                encoded = entries[key] = wire.entry(t.name + suffix) + wire.entry(str(t.bytes))
            parts.append(encoded)
        return wire.string_list(name, b"".join(parts))

    def _transfer(self, node_id: int, t: Transfer, deps: list[int], k: int) -> tuple[bytes, bytes]:
        """A COMM_SEND/RECV_NODE's message before comm_src and comm_dst, and after them: the
        same on every rank running the program (the ends differ)."""
        pb = self.pb
        name = self.plan.layers[t.layer].name
        suffix = f"@pass{k}" if k else ""
        send = t.direction is Direction.SEND
        label = "SEND" if send else "RECV"
        kind = pb.COMM_SEND_NODE if send else pb.COMM_RECV_NODE
        head = wire.fields(node_id, f"COMM_{label}_NODE_{name}_{_PHASE[t.step]}", kind, deps, 0)
        tensor = (Tensor(f"{name}.{t.step}.p2p.{t.tag}" + (".sent" if send else ".received"), t.bytes),)
        inputs, outputs = (tensor, ()) if send else ((), tensor)
        tail = [
            wire.integer("comm_tag", t.tag, 7),
            wire.integer("comm_size", t.bytes),
            _CPU,
            self._strings("inputs", inputs, suffix),
            self._strings("outputs", outputs, suffix),
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
    bytes; `lazy`: with a function making each trace's bytes instead (fileio.write_all calls it
    when it writes the file, so the traces never sit in memory together); `made`: the folder is
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
    encoder = _Encoder(plan, passes, dims, tick_ns)
    info = metadata or {}
    traces = [
        (
            prefix.with_name(f"{prefix.name}.{rank}.et"),
            functools.partial(encoder.trace, rank, info) if lazy else encoder.trace(rank, info),
        )
        for rank in range(npus)
    ]
    return [*traces, (group_file(prefix), groups_json(plan).encode())]


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
