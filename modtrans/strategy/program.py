"""The one program builder: every unit of a rank's pipeline stage, micro-batch by micro-batch in
the schedule's order, with the transfers between stages and the collectives the techniques
attached at each Place. The keyword presets (one stage, one micro-batch) and the LLM layout are
built here alike.

Order and dependencies (the rank runs one compute at a time, in program order):
    forward of a chunk: receive the activation from the previous virtual stage; per unit its
        before_fwd collectives, compute, after_fwd collectives; send the activation on
    backward of a chunk: receive the gradient from the next virtual stage; per unit, last first:
        what is recomputed before it (Rerun: the forwards of a checkpointed segment or of a
        block, with their forward collectives; or the unit's attention core), its before_bwd
        collectives, weight-gradient compute, after_wg collectives (overlapped), input-gradient
        compute (not the model's first unit: its inputs are model inputs), after_ig collectives;
        send the gradient back
    before the first step: the first unit's next-forward gathers (Place.NEXT_FWD: the previous
        optimizer step's parameters, Megatron's --overlap-param-gather); a unit's first forward
        waits for its own and issues the next unit's, which wait for them in turn
    after the last step: every unit's tail collectives, each waiting for its last weight gradient
        (and, under Pipeline.reduce_after_send on a stage but the first, for its chunk's last
        backward send; under Pipeline.chunk_reduction, the interleaved schedule's, for the later
        backward or the last one Megatron launches its chunk's reduction after), then its swaps
        with other stages (tied weights; DualPipe's mirrored
        copies); then, where the rank has trained units (a keyword preset, a layout), the
        optimizer step of its units as one compute waiting for all of them (Megatron-LM steps
        once the gradients are reduced: megatron/core/optimizer/optimizer.py,
        MixedPrecisionOptimizer.step), under Megatron's frameworks after its unscaling and
        gradient-norm kernels, each followed by its all-reduce of one number (StageProgram's
        `finish`: strategy/llm/clipping.py); then the units' after-step collectives (the distributed
        optimizer's parameter all-gathers), each waiting for the one before
    an overlapped pair (DualPipe's F&B: schedule.paired): the forward's and the backward's
        operations, each chain waiting only for its own, interleaved compute by compute
Collectives at one place run one after the other; the next compute waits for the last. A
collective reads and writes its whole buffer, but an all-gather reads one rank's part and a
reduce-scatter writes one (the group's size from the mesh). Receives
are posted where the schedule reaches them; sends and overlapped collectives are waited for by
nothing on the rank, but where the framework blocks on its sends (Pipeline.blocking) the next
compute waits for the send; where it scatters a boundary over the tensor ranks (Pipeline.gather)
each rank sends its share and all-gathers what it received over the tensor group; where the
interleaved schedule exchanges once per forward-backward pair (Pipeline.exchange_after_backward)
a steady-state forward's output leaves after the backward that follows it. Tensors are the unit's
(tensors.py), suffixed per micro-batch (#m0, #m1r for a recomputation) so that every write has its
own name; tags are unique per (micro-batch, boundary, direction) and identical on both ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest

from modtrans import heap
from modtrans.comm import CommType
from modtrans.cost import CostModel, PhaseTimes
from modtrans.ir.document import Flops, Kind, needs_input_grad
from modtrans.ir.document import Layer as IRLayer
from modtrans.plan.model import (
    Collective,
    Compute,
    Direction,
    Mesh,
    Op,
    Place,
    Purpose,
    Schedule,
    Step,
    Tensor,
    Transfer,
)
from modtrans.strategy.draft import Comm
from modtrans.strategy.frameworks import Launch
from modtrans.strategy.groups import Group, group_times
from modtrans.strategy.schedule import (
    BWD,
    FWD,
    WGRAD,
    holders,
    paired,
    stage_of,
    virtual_stage,
    virtual_stages,
)
from modtrans.strategy.schedule import Step as ScheduleStep
from modtrans.strategy.tensors import Io

_TENSOR = frozenset({Purpose.TENSOR})


@dataclass(frozen=True)
class Exchange:
    """A unit's gradient swapped with the same unit's copy `offset` pipeline stages away, once per
    iteration after the unit's tail collectives: a send and a receive of `bytes` each way (the
    all-reduce of two ranks; tags `tag` towards the higher stage, `tag + 1` back). `offset` None:
    the copy on the mirror stage, P - 1 - s (DualPipe's two copies of every stage)."""

    offset: int | None
    bytes: int
    tag: int


@dataclass(frozen=True)
class Costed:
    """A unit's per-micro-batch work as this rank does it."""

    index: int
    name: str
    times: PhaseTimes
    flops: Flops
    tensors: Sequence[Io]  # every unit's, by index (tensors.Ios: made when a program first reads one)
    comms: Mapping[Place, Sequence[Comm]]
    core: tuple[int, int] = (0, 0)  # the attention core's forward (ticks, FLOPs): selective recompute
    exchanges: tuple[Exchange, ...] = ()  # once-per-iteration swaps with other stages (tied weights)
    model: Flops | None = None  # the model's share of `flops` where not all of it (model_share)

    def model_of(self, step: Step) -> int:
        """The model's FLOPs of the unit's `step` on this rank where they are not its FLOPs (-1)."""
        model = self.model
        if model is None:
            return -1
        phases = {
            Step.FWD: model.forward,
            Step.INPUT_GRAD: model.input_grad,
            Step.WEIGHT_GRAD: model.weight_grad,
        }
        return phases.get(step, -1)

    @property
    def io(self) -> Io:
        """The tensors the unit's operations read and write."""
        return self.tensors[self.index]

    @property
    def first(self) -> bool:
        """The model's first unit: its owner reads model inputs, its input gradient is needed by
        nobody (what the text's first layer writes, unexecuted: LayerInfo)."""
        return self.index == 0

    @property
    def input_grad_runs(self) -> bool:
        """Whether back-propagation runs this unit's input-gradient step: every unit's; the first
        unit's only where layers folded into it need theirs (group_times and `costed`, by
        needs_input_grad: OLMo-1B's first LayerNorm, which has no parameters, VGG-16's first
        ReLU), whose backward autograd runs before the owner's weight gradient (a ReLU's
        threshold_backward feeds the first convolution's weight gradient), or where the cost
        model computes the first layer's (first_input_grad: ASTRA-sim's reference convention)."""
        return not self.first or self.times.input_grad > 0 or self.flops.input_grad > 0


def costed(
    index: int,
    share: Group,
    comms: Mapping[Place, Sequence[Comm]],
    tensors: Sequence[Io],
    cost: CostModel,
    inputs: frozenset[str],
    *,
    core: bool = False,
    reruns: frozenset[str] | None = None,
) -> Costed:
    """Unit `index` as a rank runs it: `share` is what it computes (share.rank_share), costed;
    `tensors`: every unit's, by index (strategy/tensors.py); `core`: also time what selective
    recomputation reruns of it, its attention core or, given `reruns`, those of its layers
    (torchtitan's op policy: strategy/llm/selective.py)."""
    members = share.members
    fl = Flops(
        sum(m.flops.forward for m in members),
        sum(m.flops.input_grad for m in members if needs_input_grad(m, inputs)),
        sum(m.flops.weight_grad for m in members),
    )
    times = group_times(share, cost, inputs)
    again = (0, 0)
    if core:
        which = in_attention_core if reruns is None else (lambda m: m.name in reruns)
        again = rerun(members, cost, which)
    return Costed(index, share.owner.name, times, fl, tensors, comms, again)


def model_share(
    run: Costed, share: Group, whole: Sequence[bool], tp: int, inputs: frozenset[str], bias: Flops
) -> Costed:
    """`run` with the model's share of its FLOPs: of each part every one of the `tp` tensor ranks
    computes whole (`whole`, share.replicated; `share` the rank's Group, as costed), 1/tp. The T
    ranks together run such a part T times and the model once (and a row-parallel unit's whole
    bias, `bias`, share.row_bias): MFU and TFLOP/s per GPU count
    the model's FLOPs (PaLM's MFU, Chowdhery et al. 2022, appendix B: the model's FLOPs per
    token; NVIDIA/Megatron-LM 001b00c, megatron/training/training.py,
    num_floating_point_operations: the whole model's FLOPs per iteration, over the iteration
    time and world_size for the TFLOP/s per GPU, never a rank's replicas). Without it GPT-2's
    model FLOPs at --tp 4 (no SP) were 0.14 % over --tp 1's."""
    parts = [m for m, replicated in zip(share.members, whole, strict=True) if replicated]
    if tp < 2 or not (parts or bias.total):
        return run
    extra = Flops(
        sum(m.flops.forward for m in parts) + bias.forward,
        sum(m.flops.input_grad for m in parts if needs_input_grad(m, inputs)),
        sum(m.flops.weight_grad for m in parts) + bias.weight_grad,
    )
    f = run.flops
    model = Flops(
        f.forward - extra.forward + extra.forward // tp,
        f.input_grad - extra.input_grad + extra.input_grad // tp,
        f.weight_grad - extra.weight_grad + extra.weight_grad // tp,
    )
    return replace(run, model=model) if model != f else run


@dataclass(frozen=True)
class Pipeline:
    """The pipeline a program runs in: one stage and one micro-batch for the keyword presets."""

    stages: int = 1
    virtual: int = 1  # chunks per stage (interleaved)
    micro_batches: int = 1
    schedule: Schedule = Schedule.ONE_F_ONE_B
    # how the framework hands a boundary on (strategy/frameworks.py, P2P): `blocking`, the next
    # compute waits for a send as for a receive; `gather` > 1, each tensor rank sends 1/gather of
    # the boundary and the receivers all-gather it over the tensor group
    blocking: bool = False
    gather: int = 1
    # the interleaved schedule's steady state sends a forward's output after the backward that
    # follows it, with that backward's gradient (Megatron-LM v3.0, schedules.py,
    # forward_backward_pipelining_with_interleaving: forward_step_helper, backward_step_helper,
    # then one send_forward_backward_recv_forward_backward)
    exchange_after_backward: bool = False
    # on every stage but the first, each chunk's tail section (its gradients' reductions and
    # swaps) waits for the chunk's last backward send as well as for its weight gradients:
    # Megatron's schedules launch them after that send (frameworks.py, reduces_after_sends)
    reduce_after_send: bool = False
    # under the interleaved schedule, when each chunk's tail section launches: after a later
    # backward of the rank or after its last one (frameworks.py, chunk_reductions)
    chunk_reduction: Launch = Launch.READY

    @property
    def chunks(self) -> int:
        """Virtual pipeline stages: P x V, DualPipe's P, DualPipeV's 2P (schedule.virtual_stages)."""
        return virtual_stages(self.schedule, self.stages, self.virtual)

    def stage_of(self, virtual: int, micro: int) -> int:
        """The stage running virtual stage `virtual` for micro-batch `micro`."""
        return stage_of(self.schedule, virtual, self.stages, micro, self.micro_batches)


@dataclass(frozen=True)
class Rerun:
    """What the backward computes again before a unit's own backward (activation recomputation)."""

    forwards: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # unit -> units re-forwarded
    selective: bool = False  # each unit's attention core (Korthikanti et al. 2022)
    # a re-forwarded unit gathers its parameters again (parameter_gather); False: FSDP's, whose
    # backward gathered them before the recomputation (strategy/llm/fsdp.py)
    regathers: bool = True


def parameter_gather(c: Comm) -> bool:
    """A data-parallel all-gather of a unit's parameters (FSDP's, ZeRO-3's before a forward), not
    an activation's (sequence or context parallelism's: over the tensor or context ranks)."""
    return c.comm is CommType.ALLGATHER and Purpose.DATA in c.over


class StageProgram:
    def __init__(
        self,
        stage: int,
        chunks: Sequence[Sequence[Costed]],
        mesh: Mesh,
        *,
        pipeline: Pipeline = Pipeline(),
        rerun: Rerun = Rerun(),
        boundary_bytes: Sequence[int] = (0,),
        outline: bool = False,
        finish: Callable[[Iterable[int]], tuple[Comm, ...]] | None = None,
    ):
        self.stage, self.pipeline, self.rerun, self.mesh = stage, pipeline, rerun, mesh
        self.finish = finish  # the kernels and all-reduces before the step (llm/clipping.py)
        self.outline = outline  # communication only (plan/programs.py): no tensors, no dependencies
        self.shared: dict[tuple[int, Step, Place | None, int], Op] = {}  # an outline's ops, by place
        self.steps: dict[tuple[str, int], tuple[list[Op], int | None, list[tuple[int, int]]]] = {}
        self.chunks = chunks  # per virtual stage (all P x V), the units
        self.units = {u.index: u for chunk in chunks for u in chunk}
        self.virtual_of = {u.index: v for v, chunk in enumerate(chunks) for u in chunk}
        self.sent: dict[int, int] = {}  # per virtual stage: its latest backward send (reduce_after_send)
        # the rank's backwards in order: virtual stage, the op its compute ends at, its send
        self.backs: list[tuple[int, int | None, int | None]] = []
        self.boundary = boundary_bytes  # per virtual stage: bytes it sends forward
        self.ops: list[Op] = []
        self.chain: int | None = None  # the last op the next compute waits for
        self.tagged: dict[tuple[str, int, str], Tensor] = {}  # (name, bytes, tag) -> the tensor
        self.named: dict[tuple[int, Place], list[tuple[Comm, str, int, int]]] = {}  # _named
        self.kept: dict[int, frozenset[str]] = {}  # per unit: its parameters' names
        self.grads: dict[int, list[tuple[str, int]]] = {}  # per unit: its gradients' names, less the tag
        self.pending: tuple[Costed, Direction, int, int, int, bool] | None = None  # a deferred send
        # Place.NEXT_FWD: the units whose first forward waits for parameter gathers, in forward
        # order (unit index: the model's order, each chunk's before the next's); the op each waits
        # for. The stage's own chunks' alone: each pipeline rank's distributed optimizer gathers
        # the buffers of the model chunks it holds (megatron/core/optimizer/distrib_optimizer.py at
        # core_r0.8.0, DistributedOptimizer.__init__: per_model_buffers of its model_chunks)
        held = {u.index for v, chunk in enumerate(chunks) if stage in self._holders(v) for u in chunk}
        synced = (u for u in self.units.values() if u.comms.get(Place.NEXT_FWD) and u.index in held)
        self.syncs = sorted(synced, key=lambda u: u.index)
        self.synced = 0  # the syncs issued so far
        self.awaiting: dict[int, int] = {}  # unit index -> its last gather's op
        self.waits: tuple[int, ...] = ()  # what the next compute waits for besides the chain
        self.finals: set[tuple[str, int, int]] = set()  # each chunk's last weight gradients' step (_finals)

    def _holders(self, virtual: int) -> tuple[int, ...]:
        return holders(self.pipeline.schedule, virtual, self.pipeline.stages)

    def _suffix(
        self, tensors: Sequence[Tensor], tag: str, keep: frozenset[str] = frozenset()
    ) -> tuple[Tensor, ...]:
        """The tensors of one micro-batch (`tag`), but those in `keep`. One object per name: a
        unit's inputs are read by its forward, its recomputation and its weight gradient, and a
        280-micro-batch pipeline's programs hold millions of tensors."""
        out = []
        tagged = self.tagged
        for t in tensors:
            name = t.name
            if name not in keep:
                key = (name, t.bytes, tag)
                named = tagged.get(key)
                if named is None:
                    named = tagged[key] = Tensor(f"{name}#{tag}", t.bytes)
                t = named
            out.append(t)
        return tuple(out)

    def _params(self, u: Costed) -> frozenset[str]:
        """The names of the unit's parameters: one tensor for every micro-batch."""
        keep = self.kept.get(u.index)
        if keep is None:
            keep = self.kept[u.index] = frozenset(t.name for t in u.io.params)
        return keep

    def emit(self, op: Op) -> int:
        self.ops.append(op)
        return len(self.ops) - 1

    def _deps(self) -> tuple[int, ...]:
        return () if self.chain is None else (self.chain,)

    def _tag(self, micro: int, virtual: int, backward: bool) -> int:
        return 1 + (micro * self.pipeline.chunks + virtual) * 2 + int(backward)

    def collectives(
        self,
        u: Costed,
        place: Place,
        step: Step,
        tag: str,
        *,
        blocking: bool = True,
        also: tuple[int, ...] = (),
        skip: bool = False,
    ) -> None:
        """The unit's collectives at `place`, one after the other; the next compute waits for the
        last when they are blocking. `tag` names the micro-batch ("": once per iteration); the
        first waits for `also` too; `skip`: not its parameter gathers (Rerun.regathers)."""
        comms = u.comms.get(place)
        if not comms:  # most places of most units: nothing to issue, the chain as it was
            return
        previous = self.chain
        if self.outline:
            for n, c in enumerate(comms):
                if (skip and parameter_gather(c)) or not c.comm.moves_data:  # NONE: kernels alone
                    continue
                key = (u.index, step, place, n)
                op = self.shared.get(key)
                if op is None:
                    op = self.shared[key] = Collective(u.index, step, c.comm, c.bytes, c.over, place=place)
                previous = self.emit(op)
            if blocking:
                self.chain = previous
            return
        for c, name, read, wrote in self._named(u, place, comms):
            if (skip and parameter_gather(c)) or not c.comm.moves_data:  # NONE: kernels alone
                continue
            label = f"{name}#{tag}" if tag else name
            deps = () if previous is None else (previous,)
            if also:
                deps, also = tuple(sorted({*deps, *also})), ()
            sent, written = Tensor(f"{label}.in", read), Tensor(label, wrote)
            op = Collective(u.index, step, c.comm, c.bytes, c.over, (sent,), (written,), deps, place)
            previous = self.emit(op)
        if blocking:
            self.chain = previous

    def _named(self, u: Costed, place: Place, comms: Sequence[Comm]) -> list[tuple[Comm, str, int, int]]:
        """The unit's collectives at `place` with what names their buffers (the micro-batch's tag
        aside) and the bytes each reads and writes: the whole buffer, but an all-gather's input and
        a reduce-scatter's output, one rank's share of it."""
        key = (u.index, place)
        if key not in self.named:
            out = []
            for n, c in enumerate(comms):
                part = -(-c.bytes // self.mesh.span(c.over))
                read = part if c.comm is CommType.ALLGATHER else c.bytes
                wrote = part if c.comm is CommType.REDUCESCATTER else c.bytes
                out.append((c, f"{u.name}.{place}.{c.comm}.{n}", read, wrote))
            self.named[key] = out
        return self.named[key]

    def compute(
        self,
        u: Costed,
        step: Step,
        time: int,
        flops: int,
        inputs: tuple[Tensor, ...],
        outputs: tuple[Tensor, ...],
    ) -> int:
        chain = self.chain
        deps = () if chain is None else (chain,)
        if self.waits:
            deps, self.waits = tuple(sorted({*deps, *self.waits})), ()
        ops = self.ops
        ops.append(Compute(u.index, step, time, flops, inputs, outputs, deps, u.model_of(step)))
        self.chain = len(ops) - 1
        return self.chain

    def _sync(self, after: int | None) -> None:
        """The next unit's parameter gathers (Place.NEXT_FWD), issued after op `after` (None: the
        program's start), one after the other, left to overlap until that unit's forward."""
        if self.synced == len(self.syncs):
            return
        u = self.syncs[self.synced]
        self.synced += 1
        chain, self.chain = self.chain, after
        self.collectives(u, Place.NEXT_FWD, Step.FWD, "", blocking=False)
        self.awaiting[u.index] = len(self.ops) - 1
        self.chain = chain

    def _mark(self, u: Costed, step: Step, time: int, flops: int) -> int:
        """An outline's compute: the unit's step with its time and FLOPs, no tensors, one object
        for every micro-batch's."""
        key = (u.index, step, None, 0)
        op = self.shared.get(key)
        if op is None:
            op = self.shared[key] = Compute(u.index, step, time, flops, (), (), (), u.model_of(step))
        self.chain = self.emit(op)
        return self.chain

    def forward(self, u: Costed, micro: int, step: Step = Step.FWD) -> None:
        tag = f"m{micro}" + ("r" if step is Step.RECOMPUTE else "")
        waited = self.awaiting.pop(u.index, None) if step is Step.FWD else None
        if waited is not None:  # Megatron's pre-hook: wait for this gather, issue the next
            self._sync(waited)
            self.waits = () if self.outline else (waited,)
        comms = u.comms
        if comms.get(Place.BEFORE_FWD):  # most units at most places: no call to issue nothing
            again = step is Step.RECOMPUTE and not self.rerun.regathers
            self.collectives(u, Place.BEFORE_FWD, step, tag, skip=again)
        if self.outline:
            self._mark(u, step, u.times.forward, u.flops.forward)
        else:
            keep, io = self._params(u), u.io
            outputs = self._suffix(io.outputs, tag)
            self.compute(
                u,
                step,
                u.times.forward,
                u.flops.forward,
                self._suffix(io.inputs, f"m{micro}", keep) + io.params,  # parameters: never suffixed
                outputs,
            )
        if comms.get(Place.AFTER_FWD):
            self.collectives(u, Place.AFTER_FWD, step, tag)

    def backward(self, u: Costed, micro: int, *, weight: bool = True, last: bool = False) -> int:
        """The unit's backward: its input gradient, and its weight gradient unless ZB-H1 runs that
        as a step of its own (`weight` False); `last`: the iteration's last (weight_grad). Returns
        the index of what the unit's tail collectives wait for (-1: not here)."""
        tag = f"m{micro}"
        comms = u.comms
        if comms.get(Place.BEFORE_BWD):  # activation-gradient traffic
            self.collectives(u, Place.BEFORE_BWD, Step.INPUT_GRAD, tag)
        wg = self.weight_grad(u, tag, last) if weight else -1
        if u.input_grad_runs and self.outline:
            self._mark(u, Step.INPUT_GRAD, u.times.input_grad, u.flops.input_grad)
            self.collectives(u, Place.AFTER_IG, Step.INPUT_GRAD, tag)
        elif u.input_grad_runs:
            io = u.io
            self.compute(
                u,
                Step.INPUT_GRAD,
                u.times.input_grad,
                u.flops.input_grad,
                self._suffix(io.grads_in, tag) + io.params,  # parameters: never suffixed
                self._suffix(io.grads_out, tag),
            )
            if comms.get(Place.AFTER_IG):
                self.collectives(u, Place.AFTER_IG, Step.INPUT_GRAD, tag)
        return wg

    def weight_grad(self, u: Costed, tag: str, last: bool = False) -> int:
        """The unit's weight gradient, and at the iteration's `last` the kernels its tail
        collectives wait for (_sync_kernels). Returns the index of what those wait for."""
        if self.outline:
            wg = self._mark(u, Step.WEIGHT_GRAD, u.times.weight_grad, u.flops.weight_grad)
            self.collectives(u, Place.AFTER_WG, Step.WEIGHT_GRAD, tag, blocking=False)
            return self._sync_kernels(u, (), wg) if last else wg
        io = u.io
        named = self.grads.get(u.index)
        if named is None:  # each parameter's gradient named once a unit, suffixed per micro-batch
            named = self.grads[u.index] = [(f"grad:{p.name}@{u.name}#", p.bytes) for p in io.trainable]
        grads = tuple([Tensor(name + tag, size) for name, size in named])
        wg = self.compute(
            u,
            Step.WEIGHT_GRAD,
            u.times.weight_grad,
            u.flops.weight_grad,
            self._suffix(io.grads_in + io.inputs, tag),
            grads,
        )
        if u.comms.get(Place.AFTER_WG):
            self.collectives(u, Place.AFTER_WG, Step.WEIGHT_GRAD, tag, blocking=False)
        return self._sync_kernels(u, grads, wg) if last else wg

    def _sync_kernels(self, u: Costed, grads: tuple[Tensor, ...], wg: int) -> int:
        """The kernels the unit's tail collectives wait for (Comm.kernel: a data-parallel bucket's
        scale and NaN check, strategy/llm/buckets.py), one compute of their time after its last
        weight gradient, on the chain, as Megatron runs them from the gradient's hook before the
        rest of the backward: the compute stream's next kernels queue behind them
        (Step.GRAD_SYNC: the text formats write it in the update column, the fast tier's
        per-micro-batch links leave it out). They read the gradients and write them scaled.
        Returns its index, or `wg` where there are none."""
        kernel = sum(c.kernel for c in u.comms.get(Place.TAIL, ()) if c.comm.moves_data)
        if not kernel:
            return wg
        if self.outline:
            return self._mark(u, Step.GRAD_SYNC, kernel, 0)
        scaled = tuple(Tensor(f"{t.name}.scaled", t.bytes) for t in grads)
        return self.compute(u, Step.GRAD_SYNC, kernel, 0, grads, scaled)

    def _alone_kernels(self, u: Costed) -> None:
        """A bucket's kernels over one data rank (a Comm of CommType.NONE: strategy/llm/buckets.py):
        no collective waits for them, and Megatron runs them after the schedule, before the step
        (finalize_model_grads -> finish_grad_sync without --overlap-grad-reduce; Megatron-LM 2022's
        reduce_model_grads after forward_backward_func), so here in the tail section, after the
        unit's last weight gradient, where the step waits for them; `self.chain` stays that
        gradient's."""
        kernel = sum(c.kernel for c in u.comms.get(Place.TAIL, ()) if not c.comm.moves_data)
        if not kernel:
            return
        chain = self.chain
        if self.outline:
            self._mark(u, Step.GRAD_SYNC, kernel, 0)
        else:
            self.compute(u, Step.GRAD_SYNC, kernel, 0, (), ())
        self.chain = chain

    def transfer(
        self, u: Costed, direction: Direction, micro: int, here: int, boundary: int, backward: bool
    ) -> None:
        """One micro-batch's activation (backward: its gradient) across the boundary between
        virtual stages `boundary` and `boundary + 1`; `here` is this chunk's, the peer the other."""
        peer = boundary if here == boundary + 1 else boundary + 1
        offset = self.pipeline.stage_of(peer, micro) - self.stage
        if offset == 0:  # DualPipeV's turn: both virtual stages on this rank, nothing crosses a link
            return
        step = Step.INPUT_GRAD if backward else Step.FWD
        tag, size = self._tag(micro, boundary, backward), self.boundary[boundary]
        gather = self.pipeline.gather if size else 1
        sent = -(-size // gather)
        op = Transfer(u.index, step, direction, Purpose.PIPELINE, offset, tag, sent, self._deps())
        index = self.emit(op)
        if direction is Direction.SEND and backward:
            self.sent[here] = index
        if direction is Direction.RECV or self.pipeline.blocking:
            self.chain = index
        if direction is Direction.RECV and gather > 1:  # the received shards gathered
            place, name = Place.BEFORE_BWD if backward else Place.BEFORE_FWD, f"{u.name}.p2p#{tag}"
            pieces, whole = (
                ((Tensor(f"{name}.in", sent),), (Tensor(name, size),)) if not self.outline else ((), ())
            )
            gathered = Collective(
                u.index, step, CommType.ALLGATHER, size, _TENSOR, pieces, whole, (index,), place
            )
            self.chain = self.emit(gathered)

    def build(self) -> tuple[Op, ...]:
        with heap.paused():  # a 280-micro-batch program is some 10^5 operations, none in a cycle
            return self._build()

    def _build(self) -> tuple[Op, ...]:
        pipe, p = self.pipeline, self.pipeline.stages
        last_wg: dict[int, tuple[Costed, int]] = {}
        self._sync(None)  # the previous step's first parameter gather, before the first forward
        steps, pairs = paired(pipe.schedule, self.stage, p, pipe.micro_batches, pipe.virtual)
        self.finals = _finals(steps, pipe.schedule, self.stage, p)
        for i, step in enumerate(steps):
            if i - 1 in pairs:
                continue
            if i in pairs:
                self._overlapped(step, steps[i + 1], last_wg)
            else:
                later = pipe.exchange_after_backward and i + 1 < len(steps) and steps[i + 1][0] == BWD
                self._step(step, last_wg, defer=later and step[0] == FWD)
        tail = len(self.ops)
        for u, wg in sorted(last_wg.values(), key=lambda item: -item[1]):
            self.chain, after = wg, self._after_send(u)
            self._alone_kernels(u)
            self.collectives(u, Place.TAIL, Step.WEIGHT_GRAD, "", blocking=False, also=after)
            final = after if self.outline or pipe.chunk_reduction is Launch.READY else self._launch(-1)
            for x in u.exchanges:  # a tied embedding's: finalize_model_grads', after the schedule
                self._exchange(u, x, final)
        if last_wg:  # every program ends with the optimizer step (a keyword preset's, a layout's)
            self._optimizer(list(last_wg.values()), tail)
        for u in sorted((u for u, _ in last_wg.values()), key=lambda u: u.index):  # forward order
            self.collectives(u, Place.AFTER_STEP, Step.WEIGHT_GRAD, "")
        self.tagged.clear()
        return tuple(self.ops)

    def _after_send(self, u: Costed) -> tuple[int, ...]:
        """What the unit's tail section waits for besides its last weight gradient: under
        Pipeline.reduce_after_send, on a stage but the first, its chunk's last backward send
        (Megatron's schedules launch the reduction after it, as the bubble begins; without the edge
        a bucket ready at the chunk's first weight gradient took the lane before that send, and
        the previous stages waited out its reduce-scatter: 20 ms on Llama-3-8B at T 8, P 2);
        under the interleaved schedule, what Pipeline.chunk_reduction says (_launch)."""
        if self.outline:
            return ()
        if self.pipeline.chunk_reduction is not Launch.READY:
            return self._launch(self.virtual_of[u.index])
        if not self.pipeline.reduce_after_send or self.stage == 0:
            return ()
        sent = self.sent.get(self.virtual_of[u.index])
        return () if sent is None else (sent,)

    def _launch(self, virtual: int) -> tuple[int, ...]:
        """Under the interleaved schedule, what a chunk's tail section waits for (Pipeline.
        chunk_reduction): Launch.DELAYED, the compute of the rank's backward `stage` backwards
        after the chunk's last (Megatron's backward_step_helper calls grad_sync_func after
        backward_step, before the step's send: the send, numbered first, takes the lane first),
        or past the end, the rank's last backward send (its compute on the first stage, which
        sends none); Launch.AFTER, that last one always (frameworks.py, chunk_reductions);
        `virtual` -1: that last one too (finalize_model_grads' embedding all-reduce)."""
        backs = self.backs
        last = max((k for k, (v, _, _) in enumerate(backs) if v == virtual), default=None)
        if not backs or (last is None and virtual >= 0):
            return ()
        lag = self.stage if self.pipeline.chunk_reduction is Launch.DELAYED else len(backs)
        last = len(backs) if last is None else last
        if last + lag < len(backs):
            end = backs[last + lag][1]
            return () if end is None else (end,)
        _, end, sent = backs[-1]
        after = sent if sent is not None else end
        return () if after is None else (after,)

    def _optimizer(self, last: Sequence[tuple[Costed, int]], tail: int) -> None:
        """The optimizer step of the rank's units, one compute after every gradient is final: each
        unit's last weight gradient and what was issued since `tail` (the reductions and swaps).
        It reads the parameters and writes them updated; the plan charges it to the first unit."""
        units = [u for u, _ in last]
        final = {wg for _, wg in last if wg >= 0}
        deps = sorted(
            final | self._reductions(min(final, default=tail), tail) | set(range(tail, len(self.ops)))
        )
        # a tied parameter (a keyword preset's GPT-2 wte and lm_head) is updated once
        params = () if self.outline else tuple({p.name: p for u in units for p in u.io.trainable}.values())
        updated = tuple(Tensor(f"{p.name}#updated", p.bytes) for p in params)
        first = min(u.index for u in units)
        time = sum(u.times.update for u in units)
        if self.finish is not None:
            deps = list(self._finish(first, self.finish(u.index for u in units), tuple(deps)))
        self.chain = self.emit(Compute(first, Step.UPDATE, time, 0, params, updated, tuple(deps)))

    def _finish(self, first: int, comms: Sequence[Comm], deps: tuple[int, ...]) -> tuple[int, ...]:
        """Before the step, Megatron's unscaling and gradient-norm kernels over the main gradients,
        each followed by its all-reduce of one number, which the host waits for (`.item()`):
        one after the other, the first waiting for what the step waits for (strategy/llm/
        clipping.py). Charged to the step's unit, as Step.UPDATE (the text formats' update
        column). Returns what the step waits for."""
        for k, c in enumerate(comms):
            if c.kernel:
                deps = (self.emit(Compute(first, Step.UPDATE, c.kernel, 0, (), (), deps)),)
            if c.comm.moves_data and self.mesh.span(c.over) > 1:
                tensors = () if self.outline else (Tensor(f"clip.{k}.in", c.bytes),)
                written = () if self.outline else (Tensor(f"clip.{k}", c.bytes),)
                op = Collective(first, Step.UPDATE, c.comm, c.bytes, c.over, tensors, written, deps)
                deps = (self.emit(op),)
        return deps

    def _reductions(self, start: int, end: int) -> set[int]:
        """The gradient reductions issued beside the last backward (AFTER_WG: FSDP's and ZeRO-3's
        reduce-scatters, the keywords' all-reduces). The step waits for them as the frameworks do:
        FSDP's post-backward final callback waits on its reduce-scatter stream
        (torch/distributed/fsdp/_runtime_utils.py, _post_backward_final_callback), DeepSpeed's
        stage 3 synchronizes its reduction stream before the step (runtime/zero/stage3.py,
        independent_gradient_partition_epilogue)."""
        return {
            i
            for i in range(start, end)
            if isinstance(op := self.ops[i], Collective) and op.place is Place.AFTER_WG
        }

    def _step(
        self, step: ScheduleStep, last_wg: dict[int, tuple[Costed, int]], *, defer: bool = False
    ) -> None:
        """One step of the schedule: a chunk's forward, backward (whole, or its input gradient
        alone) or deferred weight gradients, with the chunk's transfers; `defer`: the forward's
        send waits for the next backward's compute (Pipeline.exchange_after_backward)."""
        direction, micro, chunk = step
        pipe = self.pipeline
        virtual = virtual_stage(pipe.schedule, self.stage, pipe.stages, chunk)
        units, last_virtual = self.chunks[virtual], pipe.chunks - 1
        if direction == WGRAD:  # the weight gradients of an input-gradient-only backward before
            self._units(direction, micro, virtual, last_wg)
            return
        if direction == FWD:
            if virtual > 0:
                self.transfer(units[0], Direction.RECV, micro, virtual, virtual - 1, False)
            self._units(direction, micro, virtual, last_wg)
            if virtual < last_virtual:
                send = (units[-1], Direction.SEND, micro, virtual, virtual, False)
                if defer:
                    self.pending = send
                else:
                    self.transfer(*send)
            return
        if virtual < last_virtual:
            self.transfer(units[-1], Direction.RECV, micro, virtual, virtual, True)
        self._units(direction, micro, virtual, last_wg)  # B, or I: the input gradient alone
        end, sent = self.chain, len(self.ops)
        if virtual > 0:
            self.transfer(units[0], Direction.SEND, micro, virtual, virtual - 1, True)
        self.backs.append((virtual, end, sent if len(self.ops) > sent else None))
        if self.pending is not None:  # the forward's output, after this gradient (_communicate's order)
            pending, self.pending = self.pending, None
            self.transfer(*pending)

    def _units(
        self, direction: str, micro: int, virtual: int, last_wg: dict[int, tuple[Costed, int]]
    ) -> None:
        """A step's work on its chunk's units: forwards (F); backwards (B, or the input gradients
        alone, I) last unit first; or the deferred weight gradients (W). An outline's steps of one
        direction and chunk hold the same operations, so it copies the first one's (a step's
        transfers, the only ones that differ by micro-batch, are outside)."""
        last = (direction, micro, virtual) in self.finals
        key = (direction + "!" * last, virtual)
        if self.outline and key in self.steps:
            ops, chain, wgs = self.steps[key]
            base = len(self.ops)
            self.ops.extend(ops)
            if chain is not None:
                self.chain = base + chain
            for index, wg in wgs:
                last_wg[index] = (self.units[index], base + wg)
            return
        start, units = len(self.ops), self.chunks[virtual]
        made: list[tuple[int, int]] = []  # (unit, its weight gradient's index)
        if direction == FWD:
            for u in units:
                self.forward(u, micro)
        elif direction == WGRAD:
            made = [(u.index, self.weight_grad(u, f"m{micro}", last)) for u in reversed(units)]
        else:
            whole = direction == BWD
            for u in reversed(units):
                self._recompute(u, micro)
                wg = self.backward(u, micro, weight=whole, last=last)
                if whole:
                    made.append((u.index, wg))
        for index, wg in made:
            last_wg[index] = (self.units[index], wg)
        if self.outline:
            moved = self.chain is not None and self.chain >= start
            self.steps[key] = (
                self.ops[start:],
                self.chain - start if moved and self.chain is not None else None,
                [(index, wg - start) for index, wg in made],
            )

    def _overlapped(
        self, forward: ScheduleStep, backward: ScheduleStep, last_wg: dict[int, tuple[Costed, int]]
    ) -> None:
        """DualPipe's F&B: a forward and another micro-batch's backward, each waiting only for its
        own operations (and both for what ran before them), interleaved compute by compute, so
        that one's collectives run while the other computes (DeepSeek-V3 report, figure 4: the
        all-to-all and pipeline communication of each hidden behind the other's compute). The
        rank still runs one compute at a time (ASTRA-sim 2.x HardwareResource: one GPU compute
        in flight) and one collective at a time."""
        start, before = len(self.ops), self.chain
        self._step(forward, last_wg)
        middle, forward_end = len(self.ops), self.chain
        self.chain = before
        self._step(backward, last_wg)
        merged = [
            i
            for pair in zip_longest(
                _segments(self.ops, start, middle), _segments(self.ops, middle, len(self.ops))
            )
            for seg in pair
            if seg
            for i in seg
        ]
        new = {old: start + k for k, old in enumerate(merged)}
        if self.outline:  # its operations keep no dependencies to renumber
            self.ops[start:] = [self.ops[old] for old in merged]
        else:
            self.ops[start:] = [
                replace(self.ops[old], deps=tuple(new.get(d, d) for d in self.ops[old].deps))
                for old in merged
            ]
        for index, (u, wg) in list(last_wg.items()):
            last_wg[index] = (u, new.get(wg, wg))
        ends = [new.get(c, c) for c in (forward_end, self.chain) if c is not None]
        self.chain = max(ends) if ends else None

    def _exchange(self, u: Costed, x: Exchange, after: tuple[int, ...] = ()) -> None:
        """Send this stage's gradient to the peer and receive the peer's, posted together, both
        after `after` too (_after_send)."""
        p = self.pipeline.stages
        offset = x.offset if x.offset is not None else p - 1 - 2 * self.stage
        if x.offset is not None and self.pipeline.schedule is Schedule.DUALPIPE and self.stage >= p // 2:
            offset = -offset  # the mirror half holds the mirrored copies: the peer is mirrored too
        out, back = (x.tag, x.tag + 1) if offset > 0 else (x.tag + 1, x.tag)
        deps = tuple(sorted({*self._deps(), *after}))  # the receive does not wait for the send
        self.emit(
            Transfer(u.index, Step.WEIGHT_GRAD, Direction.SEND, Purpose.PIPELINE, offset, out, x.bytes, deps)
        )
        self.chain = self.emit(
            Transfer(u.index, Step.WEIGHT_GRAD, Direction.RECV, Purpose.PIPELINE, offset, back, x.bytes, deps)
        )

    def _recompute(self, u: Costed, micro: int) -> None:
        if self.rerun.selective and u.core[0] > 0 and self.outline:
            self._mark(u, Step.RECOMPUTE, u.core[0], u.core[1])
        elif self.rerun.selective and u.core[0] > 0:
            outputs = (Tensor(f"{u.name}.attention_core#m{micro}r", 0),)
            self.compute(
                u, Step.RECOMPUTE, u.core[0], u.core[1], self._suffix(u.io.inputs, f"m{micro}"), outputs
            )
        for index in self.rerun.forwards.get(u.index, ()):
            self.forward(self.units[index], micro, Step.RECOMPUTE)


def _finals(
    steps: Sequence[ScheduleStep], schedule: Schedule, stage: int, stages: int
) -> set[tuple[str, int, int]]:
    """Per virtual stage the step (direction, micro-batch, virtual stage) of its iteration's last
    weight gradients: its last whole backward (B) or deferred weight gradients (W)."""
    last: dict[int, tuple[str, int, int]] = {}
    for direction, micro, chunk in steps:
        if direction in (BWD, WGRAD):
            virtual = virtual_stage(schedule, stage, stages, chunk)
            last[virtual] = (direction, micro, virtual)
    return set(last.values())


def _segments(ops: Sequence[Op], start: int, end: int) -> list[list[int]]:
    """ops[start:end] cut before each compute but the first: what leads up to the first compute
    and each compute with the collectives and transfers after it."""
    out: list[list[int]] = [[]]
    computed = False
    for i in range(start, end):
        if isinstance(ops[i], Compute):
            if computed:
                out.append([])
            computed = True
        out[-1].append(i)
    return out


def in_attention_core(m: IRLayer) -> bool:
    """Whether a layer is of an attention core: its score and context matmuls, the softmax between."""
    return m.kind is Kind.MATMUL or m.op_type == "Softmax"


def rerun(members: Sequence[IRLayer], cost: CostModel, which: Callable[[IRLayer], bool]) -> tuple[int, int]:
    """Forward ticks and FLOPs of the unit's layers that recomputation reruns (`which`)."""
    again = [m for m in members if which(m)]
    return sum(cost.times(m).forward for m in again), sum(m.flops.forward for m in again)
