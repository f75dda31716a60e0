"""A program's nodes as Chakra wire bytes: the template its ranks share (chakra/patch.py).

What each node holds, and why, is chakra/write.py's to say (the trace contract); this module makes
a program's nodes once: the node ids and dependencies of `passes` iterations, each compute's whole
microseconds (`durations`), each collective's type, size and network dimensions, each transfer's
bytes less its ends, each tensor's string list entry once.

    nodes = Nodes(plan, passes, dims, tick_ns)
    nodes.made(p)      # program p's template pieces: bytes, Ends and Group
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

from modtrans import heap
from modtrans.chakra import wire
from modtrans.chakra.patch import Ends, Group, Piece
from modtrans.integers import ONE_BYTE
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

_PHASE = {
    Step.FWD: "FWD",
    Step.INPUT_GRAD: "BWD_IG",
    Step.WEIGHT_GRAD: "BWD_WG",
    Step.RECOMPUTE: "FWD_RECOMPUTE",
    Step.UPDATE: "UPDATE",
    Step.GRAD_SYNC: "GRAD_SYNC",
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


def _deps(deps: Sequence[int]) -> bytes:
    """A node's data_deps field (5, packed varints; none when empty), as wire.fields writes it."""
    if not deps:
        return b""
    listed = wire.varint(deps[0]) if len(deps) == 1 else b"".join([wire.varint(d) for d in deps])
    return b"*" + wire.varint(len(listed)) + listed


class Nodes:
    """Encodes the nodes of programs: each program's once, as a template (chakra/patch.py) that each
    of its ranks fills in with its peers and groups."""

    def __init__(self, plan: Plan, passes: int, dims: Sequence[int] | None, tick_ns: float) -> None:
        from modtrans.chakra.schema import schema

        self.plan, self.passes, self.tick_ns = plan, passes, tick_ns
        self.pb = schema()
        self.masks = dim_masks(plan.mesh, dims)
        self.entries: dict[Any, bytes] = {}  # a template's tensors, encoded, by id (and pass)
        self.titles: dict[tuple[int, Step], str] = {}
        self.names: dict[tuple[int, Step, int, int, int], tuple[bytes, bytes]] = {}  # _compute_fixed
        self.counts: dict[tuple[int, int, int], bytes] = {}  # is_cpu_op, num_ops, tensor_size, model_ops
        self.sizes: dict[int, bytes] = {}  # a tensor size's string list entry
        self.frames: dict[str, dict[int, bytes]] = {"inputs": {}, "outputs": {}}  # _strings
        self.fixed: dict[tuple[Any, ...], tuple[bytes, bytes]] = {}  # a collective's name, attributes
        self.collectives: dict[tuple[Any, ...], tuple[str, bytes]] = {}

    def _durations(self, program: Sequence[Any]) -> list[list[int]]:
        return durations(program, self.tick_ns, self.passes)

    def _slots(self, program_index: int) -> list[tuple[int, int, int, tuple[int, ...]]]:
        """(pass, operation, node id, dependencies) of every node of a program (read once, by
        _pieces, which keeps what it needs): the same for every rank running it (a group over
        the same axes has the same size everywhere)."""
        program = self.plan.programs[program_index]
        mesh = self.plan.mesh
        alone: dict[frozenset[Purpose], bool] = {}  # per axes: a group of one rank (no node)
        wgrad = Step.WEIGHT_GRAD
        slots = []
        next_id = 0
        carried: dict[int, list[int]] = {}  # layer -> what its forward of the next pass waits for
        for k in range(self.passes):
            node_of: list[tuple[int, ...]] = []  # per operation: the node ids standing for it, sorted
            wg_compute: dict[int, int] = {}
            wg_comms: dict[int, list[int]] = {}
            for i, op in enumerate(program):
                carries = k and isinstance(op, Compute) and op.step is Step.FWD and op.layer in carried
                if len(op.deps) == 1 and not carries:  # most operations: one, its nodes sorted already
                    ordered = node_of[op.deps[0]]
                else:
                    deps = {d for j in op.deps for d in node_of[j]}
                    if carries:
                        deps.update(carried[op.layer])
                    ordered = tuple(sorted(deps))
                if isinstance(op, Collective):
                    single = alone.get(op.over)
                    if single is None:
                        single = alone[op.over] = mesh.span(op.over) < 2
                    if single:
                        node_of.append(ordered)  # nothing to communicate: dependents wait for its deps
                        continue
                slots.append((k, i, next_id, ordered))
                node_of.append((next_id,))
                if op.step is wgrad:
                    if isinstance(op, Compute):
                        wg_compute[op.layer] = next_id
                    else:
                        wg_comms.setdefault(op.layer, []).append(next_id)
                next_id += 1
            carried = {layer: wg_comms.get(layer) or [c] for layer, c in wg_compute.items()}
        return slots

    def made(self, p: int) -> list[Piece]:
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
            if type(op) is Compute:  # most nodes: never a piece of their own
                run.append(self._compute(node_id, op, deps, k, durations[k][i]))
                continue
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
            counts = wire.integer("num_ops", ops) + wire.integer("tensor_size", size, 13) + _model(op)
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
        in one join, its name and counts made once per layer, step and counts: most of a big set's
        nodes."""
        suffix = f"@pass{k}" if k else ""
        inputs, read = self._strings("inputs", op.inputs, suffix)
        outputs, written_ = self._strings("outputs", op.outputs, suffix)
        size = read + written_  # Compute.bytes: every tensor read and written once
        flops = op.flops
        ops = flops if flops > 0 or size == 0 else 1
        key = (op.layer, op.step, ops, size, op.model)
        fixed = self.names.get(key)
        if fixed is None:
            fixed = self.names[key] = self._compute_fixed(op, ops, size)
        name, counts = fixed
        varint = wire.varint
        if len(deps) == 1:  # most nodes: data_deps (5) of one varint
            listed = varint(deps[0])
            deps_field = b"*" + ONE_BYTE[len(listed)] + listed
        else:
            deps_field = _deps(deps)
        body = b"".join(
            (
                b"\x08" + varint(node_id) if node_id else b"",
                name,
                deps_field,
                b"8" + varint(micros) if micros else b"",  # duration_micros (7)
                counts,
                inputs,
                outputs,
            )
        )
        n = len(body)
        return (ONE_BYTE[n] if n < 0x80 else varint(n)) + body

    def _compute_fixed(self, op: Compute, ops: int, size: int) -> tuple[bytes, bytes]:
        """A COMP_NODE's name and type fields, and its is_cpu_op, num_ops and tensor_size."""
        kind = b"\x18" + wire.varint(self.pb.COMP_NODE)  # type (3)
        name = wire.delimited(2, self._title(op).encode()) + kind
        counts = self.counts.get((ops, size, op.model))
        if counts is None:
            counts = wire.integer("num_ops", ops) + wire.integer("tensor_size", size, 13) + _model(op)
            counts = self.counts[(ops, size, op.model)] = _CPU + counts
        return name, counts

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
        readers name it alike), each size once, and the list's framing once per name and length
        (wire.string_list's, a dictionary's look-up here: two of every three nodes frame two
        lists). The tensors are the program's (_pieces holds it): an object's id names it while
        it is encoded, a cheaper key than its name and size."""
        entries = self.entries
        if len(tensors) == 1:  # most nodes' outputs, a third of their inputs: no join
            t = tensors[0]
            total = t.bytes
            key: Any = id(t) if not suffix else (id(t), suffix)
            listed = entries.get(key)
            if listed is None:
                listed = self._entry(key, t, suffix)
        else:
            parts = []
            total = 0
            for t in tensors:
                total += t.bytes
                key = id(t) if not suffix else (id(t), suffix)
                encoded = entries.get(key)
                parts.append(self._entry(key, t, suffix) if encoded is None else encoded)
            listed = b"".join(parts)
        frames = self.frames[name]
        head = frames.get(len(listed))
        if head is None:
            n = len(listed)
            head = frames[n] = wire.string_list(name, bytes(n))[: -n or None]
        return head + listed, total

    def _entry(self, key: Any, t: Tensor, suffix: str) -> bytes:
        """A tensor's string list entries, its name and its size (each size encoded once), kept
        by `key` for the program's other nodes that name it."""
        counted = self.sizes.get(t.bytes)
        if counted is None:
            counted = self.sizes[t.bytes] = wire.entry(str(t.bytes))
        encoded = self.entries[key] = wire.entry(t.name + suffix, counted)
        return encoded

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


MODEL_OPS = "model_ops"
"""A compute node's attribute where the model's FLOPs of it are not its num_ops (Compute.model: a
part every tensor rank computes whole, counted 1/T); read by chakra/summary.node_flops."""


def _model(op: Compute) -> bytes:
    """The node's model_ops attribute, or nothing where the model's FLOPs are its num_ops."""
    return wire.integer(MODEL_OPS, op.model) if op.model >= 0 and op.model != op.flops else b""
