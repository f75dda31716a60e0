"""The program of one pipeline stage: its chunks' units, micro-batch by micro-batch in the
schedule's order, with the transfers between stages and the collectives the techniques attached.

Order and dependencies (the rank runs one compute at a time, in program order):
    forward of a chunk: receive the activation from the previous virtual stage; per unit its
        before_fwd collectives, compute, after_fwd collectives; send the activation on
    backward of a chunk: receive the gradient from the next virtual stage; per unit, last first:
        the recomputed forward (full: the block's layers and their forward collectives, when the
        backward reaches the block's last unit; selective: the unit's attention core), its
        before_bwd collectives, weight-gradient compute, after_wg collectives (overlapped),
        input-gradient compute (not the model's first unit), after_ig collectives; send the
        gradient back
    after the last step: every unit's tail collectives, each waiting for its last weight gradient
Receives are posted where the schedule reaches them; sends and overlapped collectives are waited
for by nothing on the rank. Activation transfers are micro-batch x sequence x hidden x bytes
(÷ T with SP); tags are unique per (micro-batch, boundary, direction) and identical on both ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modtrans.cost import PhaseTimes
from modtrans.ir.document import Flops, Kind
from modtrans.plan.model import Collective, Compute, Direction, Op, Purpose, Step, Tensor, Transfer
from modtrans.strategy.draft import _Io
from modtrans.strategy.llm.options import Layout, Recompute
from modtrans.strategy.llm.schedule import FWD, order


@dataclass(frozen=True)
class Costed:
    """A unit's per-micro-batch work as this rank does it."""

    index: int
    name: str
    block: int | None
    times: PhaseTimes
    flops: Flops
    core: tuple[int, int]  # the attention core's forward (ticks, FLOPs): selective recompute
    io: _Io
    comms: dict[str, list]  # type: ignore[type-arg]
    first: bool  # the model's first unit: no input gradient


def _suffix(tensors: Sequence[Tensor], tag: str, keep: frozenset[str] = frozenset()) -> tuple[Tensor, ...]:
    return tuple(t if t.name in keep else Tensor(f"{t.name}#{tag}", t.bytes) for t in tensors)


class StageProgram:
    def __init__(
        self, stage: int, layout: Layout, chunks: Sequence[Sequence[Costed]], boundary_bytes: Sequence[int]
    ):
        self.stage, self.layout = stage, layout
        self.chunks = chunks  # per virtual stage (all P x V), the units
        self.boundary = boundary_bytes  # per virtual stage: bytes it sends forward
        self.ops: list[Op] = []
        self.chain: int | None = None  # the last op the next compute waits for

    def emit(self, op: Op) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def _deps(self) -> tuple[int, ...]:
        return () if self.chain is None else (self.chain,)

    def _tag(self, micro: int, virtual: int, backward: bool) -> int:
        return 1 + (micro * self.layout.chunks + virtual) * 2 + int(backward)

    def _offset(self, virtual: int) -> int:
        return virtual % self.layout.pp - self.stage

    def collectives(self, u: Costed, place: str, step: Step, tag: str, *, blocking: bool = True) -> None:
        """The unit's collectives at `place`, one after the other; the next compute waits for the
        last when they are blocking."""
        previous = self.chain
        for n, c in enumerate(u.comms.get(place, [])):
            label = f"{u.name}.{place}.{c.comm}.{n}#{tag}"
            deps = () if previous is None else (previous,)
            sent, written = (Tensor(f"{label}.in", c.bytes),), (Tensor(label, c.bytes),)
            previous = self.emit(Collective(u.index, step, c.comm, c.bytes, c.over, sent, written, deps))
        if blocking:
            self.chain = previous

    def compute(
        self,
        u: Costed,
        step: Step,
        time: int,
        flops: int,
        inputs: tuple[Tensor, ...],
        outputs: tuple[Tensor, ...],
    ) -> int:
        self.chain = self.emit(Compute(u.index, step, time, flops, inputs, outputs, self._deps()))
        return self.chain

    def forward(self, u: Costed, micro: int, step: Step = Step.FWD) -> None:
        tag = f"m{micro}" + ("r" if step is Step.RECOMPUTE else "")
        keep = frozenset(t.name for t in u.io.params)
        self.collectives(u, "before_fwd", step, tag)
        outputs = _suffix(u.io.outputs, tag)
        self.compute(
            u,
            step,
            u.times.forward,
            u.flops.forward,
            _suffix(u.io.inputs + u.io.params, f"m{micro}", keep),
            outputs,
        )
        self.collectives(u, "after_fwd", step, tag)

    def backward(self, u: Costed, micro: int) -> int:
        tag = f"m{micro}"
        keep = frozenset(t.name for t in u.io.params)
        self.collectives(u, "before_bwd", Step.INPUT_GRAD, tag)  # activation-gradient traffic
        grads = tuple(Tensor(f"grad:{p.name}@{u.name}#{tag}", p.bytes) for p in u.io.trainable)
        wg = self.compute(
            u,
            Step.WEIGHT_GRAD,
            u.times.weight_grad,
            u.flops.weight_grad,
            _suffix(u.io.grads_in + u.io.inputs, tag),
            grads,
        )
        self.collectives(u, "after_wg", Step.WEIGHT_GRAD, tag, blocking=False)
        if not u.first:
            self.compute(
                u,
                Step.INPUT_GRAD,
                u.times.input_grad,
                u.flops.input_grad,
                _suffix(u.io.grads_in, tag) + _suffix(u.io.params, tag, keep),
                _suffix(u.io.grads_out, tag),
            )
            self.collectives(u, "after_ig", Step.INPUT_GRAD, tag)
        return wg

    def transfer(
        self, u: Costed, direction: Direction, micro: int, here: int, boundary: int, backward: bool
    ) -> None:
        """One micro-batch's activation (backward: its gradient) across the boundary between
        virtual stages `boundary` and `boundary + 1`; `here` is this chunk's, the peer the other."""
        peer = boundary if here == boundary + 1 else boundary + 1
        step = Step.INPUT_GRAD if backward else Step.FWD
        tag, size = self._tag(micro, boundary, backward), self.boundary[boundary]
        op = Transfer(u.index, step, direction, Purpose.PIPELINE, self._offset(peer), tag, size, self._deps())
        index = self.emit(op)
        if direction is Direction.RECV:
            self.chain = index

    def build(self) -> tuple[Op, ...]:
        layout, p = self.layout, self.layout.pp
        last_wg: dict[int, tuple[Costed, int]] = {}
        last_virtual = layout.chunks - 1
        for direction, micro, chunk in order(layout.schedule, self.stage, p, layout.ga, layout.vpp):
            virtual = chunk * p + self.stage
            units = self.chunks[virtual]
            if direction == FWD:
                if virtual > 0:
                    self.transfer(units[0], Direction.RECV, micro, virtual, virtual - 1, False)
                for u in units:
                    self.forward(u, micro)
                if virtual < last_virtual:
                    self.transfer(units[-1], Direction.SEND, micro, virtual, virtual, False)
                continue
            if virtual < last_virtual:
                self.transfer(units[-1], Direction.RECV, micro, virtual, virtual, True)
            for position in reversed(range(len(units))):
                u = units[position]
                self._recompute(units, position, micro)
                last_wg[u.index] = (u, self.backward(u, micro))
            if virtual > 0:
                self.transfer(units[0], Direction.SEND, micro, virtual, virtual - 1, True)
        for u, wg in sorted(last_wg.values(), key=lambda item: -item[1]):
            self.chain = wg
            made: list[int] = []
            for n, c in enumerate(u.comms.get("tail", [])):
                label = f"{u.name}.tail.{c.comm}.{n}"
                deps = (made[-1],) if made else (wg,)
                written = (Tensor(label, c.bytes),)
                made.append(
                    self.emit(
                        Collective(
                            u.index,
                            Step.WEIGHT_GRAD,
                            c.comm,
                            c.bytes,
                            c.over,
                            (Tensor(f"{label}.in", c.bytes),),
                            written,
                            deps,
                        )
                    )
                )
        return tuple(self.ops)

    def _recompute(self, units: Sequence[Costed], position: int, micro: int) -> None:
        u = units[position]
        mode = self.layout.recompute
        if mode is Recompute.SELECTIVE and u.core[0] > 0:
            outputs = (Tensor(f"{u.name}.attention_core#m{micro}r", 0),)
            self.compute(u, Step.RECOMPUTE, u.core[0], u.core[1], _suffix(u.io.inputs, f"m{micro}"), outputs)
        if mode is Recompute.FULL and u.block is not None:
            ends_block = position == len(units) - 1 or units[position + 1].block != u.block
            if ends_block:
                start = position
                while start > 0 and units[start - 1].block == u.block:
                    start -= 1
                for w in units[start : position + 1]:
                    self.forward(w, micro, Step.RECOMPUTE)


def attention_core(members: Sequence, times: Sequence[PhaseTimes]) -> tuple[int, int]:  # type: ignore[type-arg]
    """Forward ticks and FLOPs of a unit's attention core (score and context matmuls, softmax)."""
    ticks = flops = 0
    for m, t in zip(members, times, strict=True):
        if m.kind is Kind.MATMUL or m.op_type == "Softmax":
            ticks += t.forward
            flops += m.flops.forward
    return ticks, flops
