"""The execution plan: what every rank runs in one training iteration (frozen dataclasses, no I/O).

A plan is a mesh of ranks, the layers the text formats name, and programs: ordered operations
with dependencies. Ranks that run the same program share it; the groups a collective spans and
the peer a transfer talks to are written relative to the rank (`over` a set of mesh axes,
`along` an axis by an offset), so a 4096-rank plan holds one program, not 4096 copies, and
`Plan.ops(rank)` resolves them to concrete group ids and peers. A layout's programs are built
when read, one stage at a time (plan/programs.py).

    plan.mesh           Mesh((Axis(TENSOR, 4), Axis(DATA, 2)))    fastest-varying axis first
    plan.programs[0]    (Compute(layer=0, step=FWD, ...), Collective(..., over={TENSOR}), ...)
    plan.groups()       [CommGroup(1, "tensor", (0, 1, 2, 3)), ...]    ids > 0, as ASTRA-sim wants
    plan.preset         Preset(Policy.HYBRID_TRANSFORMER)    the keyword preset that built it, or
    plan.layout         LayoutFacts(schedule=Schedule.ONE_F_ONE_B, micro_batches=8, ...)    the layout

The plan holds no file format's header: the writers derive theirs (plan/text.py's `header`, the
SimAI header in plan/simai.py) from the mesh and these typed facts, and the .meta.json reports them.

Times are integers in the ticks of the plan's cost model (exact: the cost models round once,
per layer and phase); sizes are bytes.
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from modtrans.comm import CommType, Policy
from modtrans.plan.programs import outline


class Purpose(str):
    """What a mesh axis (and the communicator groups along it) is for: a name, one object per name
    (`Purpose("context") is Purpose("context")`), so that axes compare by identity as enum members
    do. The set is open: each parallel degree declares its axis's purpose in its own module and
    registers it (strategy/llm/degrees.py), and the plan lists none of them. The constants below
    are the axes the keyword presets and the file formats' fields name (ASTRA-sim's DATA and MODEL
    columns, SimAI's TP, EP, PP and DP)."""

    __slots__ = ()
    _made: ClassVar[dict[str, Purpose]] = {}
    DATA: ClassVar[Purpose]
    TENSOR: ClassVar[Purpose]
    PIPELINE: ClassVar[Purpose]
    EXPERT: ClassVar[Purpose]

    def __new__(cls, name: str) -> Purpose:
        made = cls._made.get(name)
        if made is None:
            made = cls._made[name] = super().__new__(cls, name)
        return made

    @property
    def value(self) -> str:
        """The name, as a StrEnum's value gives it."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Purpose({str.__repr__(self)})"


Purpose.DATA = Purpose("data")
Purpose.TENSOR = Purpose("tensor")
Purpose.PIPELINE = Purpose("pipeline")
Purpose.EXPERT = Purpose("expert")


class Schedule(enum.StrEnum):
    """The order a pipeline runs its micro-batches in."""

    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"
    ZB_H1 = "zb-h1"  # zero bubble (Qi et al. 2024): 1F1B with each backward's weight gradient deferred
    DUALPIPE = "dualpipe"  # DeepSeek-V3's bidirectional pipeline: micro-batches fed from both ends
    DUALPIPE_V = "dualpipev"  # DualPipe cut in half: one direction, a V of 2P stages on P ranks


class Recompute(enum.StrEnum):
    """What the backward pass computes again of the forward."""

    NONE = "none"
    SELECTIVE = "selective"  # the attention core (Korthikanti et al. 2022)
    FULL = "full"  # every block's forward, before its backward


class Step(enum.StrEnum):
    """The part of a training iteration an operation belongs to."""

    FWD = "fwd"
    INPUT_GRAD = "input_grad"
    WEIGHT_GRAD = "weight_grad"
    RECOMPUTE = "recompute"  # a checkpointed segment's forward, run again before its backward
    UPDATE = "update"  # the optimizer step: once per iteration, after the gradients' reductions
    # once per iteration, the kernels over a data-parallel bucket's gradients before its
    # collective (Megatron's Bucket.start_grad_sync: strategy/llm/buckets.py)
    GRAD_SYNC = "grad_sync"

    @property
    def modelled(self) -> bool:
        """Whether this step's FLOPs are the model's, the ones MFU and TFLOP/s per GPU count: every
        step's but a recomputed forward's. PaLM's MFU leaves rematerialisation out (Chowdhery et
        al. 2022, appendix B; Korthikanti et al. 2022, arXiv 2205.05198, reports both and calls
        the count with it hardware FLOPs utilisation, HFU),
        and so does the TFLOP/s Megatron-LM reports (NVIDIA/Megatron-LM 001b00c,
        megatron/training/training.py, num_floating_point_operations: each GEMM 3 times, forward,
        wgrad and dgrad, whatever --recompute-granularity)."""
        return self is not Step.RECOMPUTE


@dataclass(frozen=True, slots=True)
class Axis:
    purpose: Purpose
    size: int


@dataclass(frozen=True)
class Mesh:
    """Ranks as coordinates on axes; axis 0 varies fastest (rank = sum of coordinate x stride)."""

    axes: tuple[Axis, ...]

    @property
    def size(self) -> int:
        return math.prod(a.size for a in self.axes)

    def index(self, purpose: Purpose) -> int:
        for i, axis in enumerate(self.axes):
            if axis.purpose is purpose:
                return i
        raise KeyError(f"the mesh has no {purpose} axis")

    def coords(self, rank: int) -> tuple[int, ...]:
        out = []
        for axis in self.axes:
            rank, c = divmod(rank, axis.size)
            out.append(c)
        return tuple(out)

    def along(self, axis: int) -> tuple[int, ...]:
        """Every rank's coordinate on one axis, in rank order (coords(r)[axis] for each rank r):
        each coordinate `stride` times, the pattern once per combination of the slower axes."""
        stride = math.prod(a.size for a in self.axes[:axis])
        size = self.axes[axis].size
        return tuple(c for c in range(size) for _ in range(stride)) * (self.size // (stride * size))

    def rank(self, coords: tuple[int, ...]) -> int:
        r, stride = 0, 1
        for c, axis in zip(coords, self.axes, strict=True):
            r += c * stride
            stride *= axis.size
        return r

    def extent(self, purpose: Purpose) -> int:
        """The ranks along one axis (1 when the mesh has no such axis)."""
        return next((a.size for a in self.axes if a.purpose is purpose), 1)

    def span(self, over: frozenset[Purpose]) -> int:
        """How many ranks a group over these axes holds (asked once per operation of a plan)."""
        spans = self._spans
        if over not in spans:
            spans[over] = math.prod(a.size for a in self.axes if a.purpose in over)
        return spans[over]

    @cached_property
    def _spans(self) -> dict[frozenset[Purpose], int]:
        return {}

    def key(self, rank: int, over: frozenset[Purpose]) -> tuple[int, ...]:
        """What the ranks of one group over `over` share: their coordinates on the other axes."""
        return tuple(c for c, a in zip(self.coords(rank), self.axes, strict=True) if a.purpose not in over)

    def members(self, rank: int, over: frozenset[Purpose]) -> tuple[int, ...]:
        """The ranks of `rank`'s group over these axes, in rank order."""
        coords = list(self.coords(rank))
        free = [i for i, a in enumerate(self.axes) if a.purpose in over]
        out = []
        for combo in itertools.product(*(range(self.axes[i].size) for i in free)):
            for i, c in zip(free, combo, strict=True):
                coords[i] = c
            out.append(self.rank(tuple(coords)))
        return tuple(sorted(out))

    def peer(self, rank: int, along: Purpose, offset: int) -> int | None:
        coords = list(self.coords(rank))
        i = self.index(along)
        coords[i] += offset
        if not 0 <= coords[i] < self.axes[i].size:
            return None
        return self.rank(tuple(coords))


class Place(enum.StrEnum):
    """Where in a unit's program a collective is issued (program.py orders them; each one blocks
    what follows unless noted):

    BEFORE_FWD  before the forward compute (SP all-gather, ZeRO-3 parameter all-gather)
    AFTER_FWD   after it (MODEL's all-gather, TP all-reduce or SP reduce-scatter, EP all-to-all)
    BEFORE_BWD  before the weight-gradient compute (SP all-gather of the output gradient, EP
                all-to-all of gradients, ZeRO-3 all-gather)
    AFTER_WG    after the weight-gradient compute, left to overlap (the keywords' data-parallel
                all-reduce; ZeRO-3 reduce-scatter)
    AFTER_IG    after the input-gradient compute (TP all-reduce or SP reduce-scatter)
    TAIL        once per iteration after the unit's last micro-batch, left to overlap (the
                layout's data parallelism: all-reduce, or ZeRO-1/2 reduce-scatter then all-gather)
    AFTER_STEP  once per iteration after the optimizer step, the iteration's end waiting for it:
                the distributed optimizer's parameter all-gather (Megatron's default: the updated
                parameters gathered synchronously in step_with_ready_grads)
    NEXT_FWD    once per iteration, waited for by the unit's first forward and issued when the one
                before it is waited for (the first before the first forward): Megatron's
                --overlap-param-gather, the distributed optimizer's parameter all-gather of the
                previous step, bucket by bucket beside the forward (strategy/llm/buckets.py)
    """

    BEFORE_FWD = "before_fwd"
    AFTER_FWD = "after_fwd"
    BEFORE_BWD = "before_bwd"
    AFTER_WG = "after_wg"
    AFTER_IG = "after_ig"
    TAIL = "tail"
    AFTER_STEP = "after_step"
    NEXT_FWD = "next_fwd"


@dataclass(frozen=True, slots=True)
class Tensor:
    name: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Compute:
    layer: int  # index into Plan.layers
    step: Step
    time: int  # ticks of the plan's unit
    flops: int
    inputs: tuple[Tensor, ...]  # read: activations, parameters, gradients
    outputs: tuple[Tensor, ...]  # written
    deps: tuple[int, ...] = ()  # indices of earlier operations of the same program
    model: int = -1  # the model's FLOPs of it where they are not `flops` (-1): replicated parts 1/T

    @property
    def model_flops(self) -> int:
        """The FLOPs MFU counts of this operation: the model's share of its own (`model`: a part
        every tensor rank computes whole counted once over the T ranks, strategy/program.py
        model_share), none of a recomputed forward's (Step.modelled)."""
        if not self.step.modelled:
            return 0
        return self.flops if self.model < 0 else self.model

    @property
    def bytes(self) -> int:
        """Memory traffic: every tensor read and written once (a loop: the trace encoder asks each
        compute of a 512-micro-batch pipeline, a million of them, and a sum over generators took
        three times as long)."""
        total = 0
        for t in self.inputs:
            total += t.bytes
        for t in self.outputs:
            total += t.bytes
        return total


@dataclass(frozen=True, slots=True)
class Collective:
    layer: int
    step: Step
    comm: CommType
    # the whole buffer: the all-reduce's tensor, the reduce-scatter's input, the all-gather's
    # output, the all-to-all's send buffer; each writer converts it to what its consumer reads
    # (plan/sizes.py: ASTRA-sim reads an all-gather's size as one rank's contribution)
    bytes: int
    over: frozenset[Purpose]  # the group: the ranks that differ from this one only on these axes
    inputs: tuple[Tensor, ...] = ()
    outputs: tuple[Tensor, ...] = ()
    deps: tuple[int, ...] = ()
    place: Place | None = None  # where in its unit's program it is issued (None: a plan made by hand)


class Direction(enum.StrEnum):
    SEND = "send"
    RECV = "recv"


@dataclass(frozen=True, slots=True)
class Transfer:
    """A point-to-point send or receive with the rank `offset` steps along one axis."""

    layer: int
    step: Step
    direction: Direction
    along: Purpose
    offset: int
    tag: int
    bytes: int
    deps: tuple[int, ...] = ()


Op = Compute | Collective | Transfer
Program = tuple[Op, ...]


@dataclass(frozen=True, slots=True)
class LayerInfo:
    """A layer as the text formats name it, and what only they carry."""

    name: str
    update: int  # the optimizer's time for the layer (the text's 12th column; no trace runs it)
    policy: Policy | None = None  # HYBRID_CUSTOMIZED: the layer's own keyword
    unexecuted_input_grad: int = 0  # the first layer's input-gradient time: written, run by nobody
    # once an iteration, the kernels before its data-parallel collectives (draft.Comm.kernel: a
    # Megatron bucket's scale and NaN check), which the traces run as a compute of their own
    kernels: int = 0

    @property
    def update_column(self) -> int:
        """What the text formats write in the layer's update field, each run once an iteration:
        the optimizer step and the bucket kernels (which the traces run before the bucket's
        collective, ASTRA-sim 1.0 after it: the same compute, its collective issued earlier)."""
        return self.update + self.kernels


@dataclass(frozen=True, slots=True)
class CommGroup:
    id: int  # > 0: the `pg_name` of ASTRA-sim 2.x and the key of its group file; 0: every rank
    purpose: str  # the axes' purposes joined by "+", e.g. "tensor" or "tensor+data"
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ResolvedCollective:
    op: Collective
    group: CommGroup


@dataclass(frozen=True, slots=True)
class ResolvedTransfer:
    op: Transfer
    src: int
    dst: int


Resolved = Compute | ResolvedCollective | ResolvedTransfer


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """Activation checkpointing by segments (strategy/recompute.py): each segment starts at a
    layer of `starts`; its forward is computed again when the backward reaches a layer of
    `initiates` (in the order the backward reaches them)."""

    starts: tuple[int, ...]
    initiates: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Preset:
    """A plan built by a classic keyword preset: one stage, one micro-batch per iteration."""

    policy: Policy  # DATA, MODEL, the hybrids, HYBRID_CUSTOMIZED, HYBRID_TRANSFORMER(_FWD_IN_BCKWD)
    checkpoints: Checkpoints | None = None  # FWD_IN_BCKWD: the recomputed segments
    memory: tuple[StageMemory, ...] = ()  # its one rank's (strategy/llm/memory.py; empty: not modelled)


@dataclass(frozen=True, slots=True)
class Chunk:
    """One pipeline chunk of a layout: its first and last layer and its transformer blocks."""

    first: str
    last: str
    blocks: int


@dataclass(frozen=True, slots=True)
class StageMemory:
    """The memory one rank of a pipeline stage needs, in bytes (strategy/llm/memory.py)."""

    parameters: int  # elements this rank holds
    weights: int
    gradients: int
    optimizer: int
    activations: int
    # blocks PyTorch's caching allocator keeps reserved at the peak beyond the live tensors (freed
    # before it, fitting none of its requests): what torch.cuda.max_memory_reserved adds to total
    cached: int = 0

    @property
    def total(self) -> int:
        """The tensors' peak: what the rank needs (the allocator frees cached blocks before it
        fails an allocation)."""
        return self.weights + self.gradients + self.optimizer + self.activations

    @property
    def reserved(self) -> int:
        """What the caching allocator holds at the peak: max_memory_reserved, as frameworks report."""
        return self.total + self.cached


@dataclass(frozen=True, slots=True)
class LayoutFacts:
    """A plan built from a layout (--tp/--pp/--dp/--ep ...): what its mesh does not say. The
    tensor, pipeline, expert and data ranks are the mesh's axes (Mesh.extent)."""

    sequence_parallel: bool
    zero: int  # ZeRO stage 0-3
    micro_batch: int  # sequences per micro-batch
    global_batch: int  # sequences per iteration
    micro_batches: int  # per data-parallel replica per iteration (gradient accumulation, GA)
    schedule: Schedule
    virtual_stages: int  # model chunks per pipeline rank (V)
    recompute: Recompute
    boundary_bytes: int  # one stage-boundary activation transfer (0 without a pipeline)
    chunks: tuple[Chunk, ...]  # the stage cut, P x V chunks in pipeline order
    memory: tuple[StageMemory, ...] = ()  # per pipeline stage, one rank's (empty: not estimated)
    recompute_fraction: float = 1.0  # --recompute-fraction: full recomputation of these blocks alone
    recompute_method: str | None = None  # Megatron's --recompute-method uniform|block (None: every block)
    recompute_num_layers: int | None = None  # with it, Megatron's --recompute-num-layers
    recompute_modules: tuple[str, ...] | None = None  # Megatron-Core's --recompute-modules (None: not given)

    @property
    def recompute_placed(self) -> str | None:
        """The options that place full recomputation on some blocks or segments of several rather
        than on every block alone (strategy/llm/checkpoints.py), as a message names them; None
        where every block is its own checkpoint."""
        if self.recompute_fraction < 1:
            return "--recompute-fraction"
        method, layers = self.recompute_method, self.recompute_num_layers
        if method is None or (method, layers) == ("uniform", 1):
            return None
        if method == "block" and layers is not None and all(c.blocks <= layers for c in self.chunks):
            return None  # the first N >= a chunk's blocks, each its own checkpoint: every block
        return f"--recompute-method {method} --recompute-num-layers {layers}"


@dataclass(frozen=True)
class Plan:
    """Exactly one of `preset` and `layout` says what built the plan."""

    mesh: Mesh
    layers: tuple[LayerInfo, ...]
    programs: Sequence[tuple[Op, ...]]  # a tuple, or a layout's Programs (each built when read)
    program_of: tuple[int, ...]  # per rank: its index into programs
    preset: Preset | None = None
    layout: LayoutFacts | None = None
    # each IR layer owning parameters that folds the layers after it in (strategy/groups.py), with
    # their names: the provenance lists them (.meta.json's "folded")
    folds: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        if (self.preset is None) == (self.layout is None):
            raise ValueError("a plan is built by a keyword preset or by a layout: give one")

    @property
    def npus(self) -> int:
        return self.mesh.size

    @property
    def memory(self) -> tuple[StageMemory, ...]:
        """One rank's memory per pipeline stage, a layout's or a keyword preset's (empty: not modelled)."""
        built = self.layout if self.layout is not None else self.preset
        return built.memory if built is not None else ()

    @property
    def is_llm(self) -> bool:
        """Built from a layout (--tp/--pp/--dp/...), not a keyword preset."""
        return self.layout is not None

    @property
    def micro_batches(self) -> int:
        """Micro-batches per data-parallel replica per iteration (1 under a keyword preset)."""
        return self.layout.micro_batches if self.layout is not None else 1

    def program(self, rank: int) -> tuple[Op, ...]:
        return self.programs[self.program_of[rank]]

    @cached_property
    def _group_index(self) -> dict[frozenset[Purpose], tuple[int, dict[tuple[int, ...], int]]]:
        """For every axis set a collective spans: the first id and each group's offset from it."""
        index: dict[frozenset[Purpose], tuple[int, dict[tuple[int, ...], int]]] = {}
        next_id = 1
        for p in range(len(self.programs)):
            for op in self.outline(p):
                if isinstance(op, Collective) and op.over not in index:
                    if self.mesh.span(op.over) == self.npus:  # every rank: id 0, no pg_name
                        index[op.over] = (0, {self.mesh.key(0, op.over): 0})
                        continue
                    keys: dict[tuple[int, ...], int] = {}
                    for rank in range(self.npus):
                        keys.setdefault(self.mesh.key(rank, op.over), len(keys))
                    index[op.over] = (next_id, keys)
                    next_id += len(keys)
        return index

    def outline(self, p: int) -> tuple[Op, ...]:
        """Program p's communication: its outline where the programs are built when read
        (plan/programs.py), else the program."""
        return outline(self.programs, p)

    def overs(self) -> list[frozenset[Purpose]]:
        """The axis sets the plan's collectives span, in the order they first appear."""
        return list(self._group_index)

    def _purpose(self, over: frozenset[Purpose]) -> str:
        return "+".join(a.purpose.value for a in self.mesh.axes if a.purpose in over) or "self"

    def groups(self) -> list[CommGroup]:
        """Every communicator group a collective of some rank spans, ids from 1; a group of every
        rank has id 0 and is not listed (ASTRA-sim reads an absent pg_name as all ranks), nor is
        a group of one rank (no trace holds its collectives: they move nothing)."""
        return list(self._groups)

    @cached_property
    def _groups(self) -> tuple[CommGroup, ...]:
        """groups(), made once: a trace set's metadata, its group file and the check across ranks
        each read them (Llama-3-70B's 1,024 ranks: 4,096 mesh keys a time)."""
        members: dict[int, list[int]] = {}
        names: dict[int, str] = {}
        for over, (first, keys) in self._group_index.items():
            if first == 0:
                continue
            for rank in range(self.npus):
                gid = first + keys[self.mesh.key(rank, over)]
                members.setdefault(gid, []).append(rank)
                names[gid] = self._purpose(over)
        listed = (gid for gid in sorted(members) if len(members[gid]) > 1)
        return tuple(CommGroup(gid, names[gid], tuple(members[gid])) for gid in listed)

    def group_id(self, rank: int, over: frozenset[Purpose]) -> int:
        """The id of `rank`'s group over these axes (0: every rank)."""
        first, keys = self._group_index[over]
        return first + keys[self.mesh.key(rank, over)]

    def group(self, rank: int, over: frozenset[Purpose]) -> CommGroup:
        first, keys = self._group_index[over]
        gid = first + keys[self.mesh.key(rank, over)]
        return CommGroup(gid, self._purpose(over), self.mesh.members(rank, over))

    def ops(self, rank: int) -> Iterator[Resolved]:
        """The rank's operations with groups and peers made concrete (indices as in program())."""
        groups: dict[frozenset[Purpose], CommGroup] = {}
        for op in self.program(rank):
            if isinstance(op, Collective):
                if op.over not in groups:
                    groups[op.over] = self.group(rank, op.over)
                yield ResolvedCollective(op, groups[op.over])
            elif isinstance(op, Transfer):
                peer = self.mesh.peer(rank, op.along, op.offset)
                if peer is None:
                    raise ValueError(f"rank {rank} has no {op.along} peer at offset {op.offset}")
                src, dst = (rank, peer) if op.direction is Direction.SEND else (peer, rank)
                yield ResolvedTransfer(op, src, dst)
            else:
                yield op

    def compute_time(self, rank: int) -> int:
        """The ticks of compute the rank runs in one iteration."""
        return sum(op.time for op in self.program(rank) if isinstance(op, Compute))
