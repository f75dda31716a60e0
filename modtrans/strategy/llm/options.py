"""The layout of an LLM training run: how many ranks each kind of parallelism takes, the rank
order, and the batch, schedule and memory-saving choices, with the rules that make a combination
sensible. One frozen object, validated once when made (as torchtitan's ParallelDims validates in
__post_init__: torchtitan/distributed/parallel_dims.py); the mesh and every group's axes derive
from it.

    layout = Layout(npus=1024, tp=8, pp=8, ep=1, sp=True, zero=1, micro_batch=1, global_batch=1024)
    layout.data_ranks, layout.micro_batches      16, 64       (D = N / (T·C·P); GA = B / (M·D))

Degrees: tensor T (tp), context C (cp), expert E (ep), expert-tensor (etp), data D (dp), pipeline
P (pp), virtual stages V (vpp). Ranks are numbered in ORDER, the first the fastest, as Megatron-Core
numbers them (megatron/core/parallel_state.py: initialize_model_parallel's order="tp-cp-ep-dp-pp",
RankGenerator). The "dp" axis of the mesh holds D / E ranks, the expert-data ranks: experts are
carved from the data ranks, so one dense data-parallel group spans ep x dp (D ranks) and one
expert's data-parallel group the dp axis alone (Megatron-Core's expert RankGenerator, order
"tp-ep-dp-pp" with dp = D / E). HSDP's R replicas (dp_replicate, hsdp.py) are carved from D too,
on an axis of their own just slower than dp, which then holds a shard group's D / R ranks
(torchtitan's mesh: dp_replicate slower than dp_shard).

Rules (each broken one is a one-line usage error naming it):
    T·C·P·D = N;  E divides D;  M·D divides B;  interleaved needs V >= 2 and GA a multiple of P
    (Megatron's rule for its interleaved schedule), the other schedules V = 1;  DualPipe needs an
    even P and an even GA >= 2P, DualPipeV GA >= 2P (their step()'s asserts);  --sp needs T > 1;
    ZeRO 0-3;  then each degree's own, from its module (context.py: Megatron-LM only, no experts).
The degrees of ORDER are read from their modules' registrations (degrees.py): the mesh, span(),
the factors of N beside D, the gradient ranks and the sequence's shards follow from what each
declares, so a new degree names itself nowhere here but in ORDER and its field.
Defaults: D = N / (T·C·P); B = M·D·P (GA = P: the fewest micro-batches that fill a 1F1B pipeline;
2P under DualPipe and DualPipeV, the fewest they run).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from modtrans import limits
from modtrans.plan.model import Axis, Mesh, Purpose, Recompute, Schedule  # the plan's own: it reports them
from modtrans.strategy import frameworks
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import checkpoints, modules
from modtrans.strategy.llm.degrees import Degree, degrees, product
from modtrans.strategy.schedule import virtual_stages

__all__ = ["ORDER", "Layout", "LayoutError", "Recompute", "Schedule", "ordered", "span"]

ORDER = "tp-cp-ep-dp-dp_replicate-pp"
"""The rank order, fastest first (Megatron-Core's default: parallel_state.py, with HSDP's replicas
after dp); each token a degree
that its module registers (degrees.py: its axis, and how the rules below count it)."""

_BIDIRECTIONAL = (Schedule.DUALPIPE, Schedule.DUALPIPE_V)  # two chunks a stage, 2P micro-batches at least


def span(tokens: str) -> frozenset[Purpose]:
    """The mesh axes a group spans, named as Megatron-Core's RankGenerator.get_ranks names them:
    span("cp-ep-dp") is the dense gradients' data-parallel group with context parallelism."""
    return frozenset(d.purpose for d in degrees(tokens.split("-")))


@functools.cache
def ordered(kind: str = "") -> tuple[Degree, ...]:
    """The degrees of ORDER, fastest first; those whose flag `kind` is set (beside_data, replica,
    sequence, shards, data), where given. Asked by every Layout's properties: made once."""
    return tuple(d for d in degrees(ORDER.split("-")) if not kind or getattr(d, kind))


def _named(layout: Layout, chosen: tuple[Degree, ...]) -> str:
    """The degrees as the rules' messages name them: --tp 2 x --cp 2 x --pp 4 (an optional one
    only where given)."""
    return " x ".join(
        f"--{d.token} {d.ranks(layout)}" for d in chosen if not d.optional or d.ranks(layout) > 1
    )


class LayoutError(ValueError):
    """A combination that makes no sense (one line, naming the rule)."""


@dataclass(frozen=True)
class Layout:
    npus: int
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    ep: int = 1
    sp: bool = False
    zero: int = 0
    micro_batch: int = 1
    global_batch: int | None = None
    schedule: Schedule = Schedule.ONE_F_ONE_B
    vpp: int = 1
    recompute: Recompute = Recompute.NONE
    stages: tuple[int, ...] | None = None  # blocks per pipeline stage (x vpp chunks), in order
    etp: int | None = None  # experts split over this many tensor ranks (None: T, Megatron-Core's default)
    framework: Framework = Framework.MEGATRON  # whose data parallelism and ZeRO (strategy/frameworks.py)
    overlap_grad_reduce: bool = False  # Megatron's --overlap-grad-reduce: gradient buckets (buckets.py)
    overlap_param_gather: bool = False  # Megatron's --overlap-param-gather: gathers in the next forward
    tp_comm_overlap: bool = False  # Megatron-Core's --tp-comm-overlap: TE's userbuffers (userbuffers.py)
    compiled: bool = False  # --compile: torch.compile of each block (frameworks.py, compiles)
    vocab_divisor: int = 128  # Megatron's --make-vocab-size-divisible-by (x T: vocabulary_multiple)
    cp: int = 1  # Megatron's --context-parallel-size: the sequence split over C ranks (context.py)
    capacity_factor: float | None = None  # Megatron's --moe-expert-capacity-factor (expert.py)
    pad_to_capacity: bool = False  # Megatron's --moe-pad-expert-input-to-capacity
    # the kernel: flash, flash2, cudnn, flash1, triton, efficient, sdpa (no s x s tensor) or eager
    attention: str = "flash"
    dp_replicate: int = 1  # HSDP: the D data ranks as R replicas of D / R sharded ranks (hsdp.py)
    recompute_fraction: float = 1.0  # full recomputation of this fraction of the blocks (checkpoints.py)
    recompute_method: str | None = None  # Megatron's --recompute-method: uniform or block (checkpoints.py)
    recompute_num_layers: int | None = None  # Megatron's --recompute-num-layers N
    recompute_modules: tuple[str, ...] | None = None  # Megatron-Core's --recompute-modules (modules.py)
    fp8: bool = False  # --precision fp8: Transformer Engine's FP8 linears (strategy/llm/fp8.py)

    @property
    def vocabulary_multiple(self) -> int:
        """What Megatron-LM pads a configuration's vocabulary to a multiple of: its
        --make-vocab-size-divisible-by (default 128) x T, so that each tensor rank's shard of the
        embedding and the output layer is whole and GPU-friendly (megatron/core/tokenizers/utils/
        build_tokenizer.py, vocab_size_with_padding; arguments.py: default=128). DeepSpeed and FSDP
        train the vocabulary as the model has it."""
        return self.vocab_divisor * self.tp if self.framework.family is Framework.MEGATRON else 1

    def recompute_segments(self, chunk: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """Under --recompute full, the segments one model chunk's blocks (indices from 0, in
        order) are checkpointed in: each keeps its input and runs its forward again before its
        backward, the blocks in none of them as without recomputation (checkpoints.py: Megatron's
        uniform and block, fms-fsdp's spread); () under the other modes."""
        if self.recompute is not Recompute.FULL:
            return ()
        try:
            return checkpoints.segments(chunk, self.placement)
        except checkpoints.PlacementError as error:
            raise LayoutError(str(error)) from None

    @property
    def modules(self) -> tuple[str, ...]:
        """What --recompute selective reruns under Megatron-Core (modules.py): its
        --recompute-modules, core_attn where not given (Korthikanti's, every other framework's)."""
        return self.recompute_modules if self.recompute_modules is not None else modules.DEFAULT

    @property
    def placement(self) -> checkpoints.Placement:
        """Where full recomputation checkpoints (checkpoints.py): Megatron's --recompute-method
        and --recompute-num-layers, fms-fsdp's --recompute-fraction, or every block alone."""
        if self.recompute_method is not None:
            return checkpoints.Placement(self.recompute_method, self.recompute_num_layers or 1)
        if self.recompute_fraction < 1:
            return checkpoints.Placement(checkpoints.SPREAD, fraction=self.recompute_fraction)
        return checkpoints.Placement()

    @property
    def expert_tp(self) -> int:
        """Megatron-Core's --expert-tensor-parallel-size: T unless given (arguments.py)."""
        return self.tp if self.etp is None else self.etp

    @functools.cached_property
    def data_ranks(self) -> int:
        """D: the data-parallel replicas, --dp or N / (T x C x P): N over every degree beside D."""
        return self.dp if self.dp is not None else self.npus // self.beside_data

    @functools.cached_property
    def beside_data(self) -> int:
        """The ranks of the degrees that multiply with D to N: T x C x P."""
        return product(self, ordered("beside_data"))

    def sharding(self) -> tuple[int, ...]:
        """The ranks of each degree that shards the layers (T, C, E: degrees.py), in ORDER."""
        return tuple(d.ranks(self) for d in ordered("shards"))

    @functools.cached_property
    def sequence_shards(self) -> int:
        """The parts every micro-batch's sequence is split into by the degrees that split it (C):
        each rank computes, stores and sends one part (context.py)."""
        return product(self, ordered("sequence"))

    @functools.cached_property
    def expert_data_ranks(self) -> int:
        """D / E: the ranks holding the same experts (the mesh's "dp" axis)."""
        return self.data_ranks // self.ep

    @functools.cached_property
    def gradient_ranks(self) -> int:
        """The ranks a dense gradient is reduced over: D x C, every replica degree's axis
        (degrees.dense_data; with context parallelism each context rank's gradients cover its
        own part of the sequence)."""
        return product(self, ordered("replica"))

    @functools.cached_property
    def shard_ranks(self) -> int:
        """The ranks a dense unit's sharded state (ZeRO's, FSDP's) is split over: its gradients'
        D x C, or under HSDP a shard group's D / R (hsdp.py: each of the R replicas holds it whole)."""
        return self.gradient_ranks // self.dp_replicate

    @functools.cached_property
    def expert_gradient_ranks(self) -> int:
        """The ranks an expert's gradients are reduced over (expert.py): the D / E expert-data
        ranks, times T when experts are not split over the tensor ranks (ETP 1)."""
        return self.expert_data_ranks * (self.tp if self.expert_tp == 1 else 1)

    def sizes(self) -> dict[str, int]:
        """Each axis of ORDER and its ranks."""
        return {d.token: d.ranks(self) for d in ordered()}

    def mesh(self) -> Mesh:
        """The ranks as coordinates on the axes of ORDER, the first the fastest."""
        return Mesh(
            tuple(Axis(d.purpose, d.ranks(self)) for d in ordered() if not d.optional or d.ranks(self) > 1)
        )

    @functools.cached_property
    def batch(self) -> int:
        """--global-batch, by default P micro-batches per data-parallel replica (2P under DualPipe
        and DualPipeV: the fewest their step() runs)."""
        if self.global_batch is not None:
            return self.global_batch
        return self.micro_batch * self.data_ranks * self.pp * (2 if self.schedule in _BIDIRECTIONAL else 1)

    @functools.cached_property
    def micro_batches(self) -> int:
        """GA: micro-batches per data-parallel replica per iteration, B / (M x D)."""
        return self.batch // (self.micro_batch * self.data_ranks)

    @property
    def chunks(self) -> int:
        """Virtual pipeline stages: P x V; DualPipe's P, DualPipeV's 2P (strategy/schedule.py)."""
        return virtual_stages(self.schedule, self.pp, self.vpp)

    def __post_init__(self) -> None:
        """Every rule, once: a Layout that exists is a sensible one (LayoutError otherwise)."""
        given = [d.token for d in ordered() if not d.data]  # D is None where not given
        for name in ("npus", *given, "micro_batch", "vpp"):
            if getattr(self, name) < 1:
                raise LayoutError(f"--{name.replace('_', '-')} must be at least 1")
        for name in (*given, "dp", "npus"):  # counts of ranks; the given ones named first
            value = getattr(self, name)
            too_many = value is not None and limits.at_most(f"--{name}", value, limits.NPUS, "NPUs")
            if too_many:
                raise LayoutError(too_many)
        too_large = limits.at_most("--micro-batch", self.micro_batch, limits.DIM, "sequences")
        if too_large:
            raise LayoutError(too_large)
        self._check_capacity()
        if self.dp is not None and self.dp < 1:
            raise LayoutError("--dp must be at least 1")
        beside = ordered("beside_data")
        if self.dp is None and self.npus % self.beside_data:
            raise LayoutError(f"{_named(self, beside)} must divide --npus {self.npus}")
        if self.beside_data * self.data_ranks != self.npus:
            raise LayoutError(
                f"{_named(self, beside)} x --dp {self.data_ranks} must equal --npus {self.npus}"
            )
        if self.data_ranks % self.ep:
            raise LayoutError(
                f"--ep {self.ep} must divide --dp {self.data_ranks} (experts are carved from the data ranks)"
            )
        if self.batch < 1 or self.batch % (self.micro_batch * self.data_ranks):
            raise LayoutError(
                f"--global-batch {self.batch} must be a multiple of "
                f"--micro-batch {self.micro_batch} x --dp {self.data_ranks}"
            )
        if self.micro_batches > limits.MICRO_BATCHES:
            raise LayoutError(
                f"--global-batch {self.batch:,} makes {self.micro_batches:,} micro-batches per iteration, "
                f"more than modtrans plans for: at most {limits.MICRO_BATCHES:,}"
            )
        if self.sp and self.tp == 1:
            raise LayoutError("--sp shards the sequence over the tensor-parallel ranks: it needs --tp > 1")
        if self.etp is not None and self.etp not in (1, self.tp):
            raise LayoutError(
                f"--etp {self.etp}: experts are split over 1 or all --tp {self.tp} tensor ranks "
                "(Megatron-Core's --expert-tensor-parallel-size; other sizes are not modelled)"
            )
        if self.vocab_divisor < 1:
            raise LayoutError("--make-vocab-size-divisible-by must be at least 1")
        too_large = limits.at_most("--make-vocab-size-divisible-by", self.vocab_divisor, limits.DIM, "rows")
        if too_large:
            raise LayoutError(too_large)
        if self.zero not in (0, 1, 2, 3):
            raise LayoutError("--zero is 0, 1, 2 or 3")
        self._check_framework()
        self._check_recompute()
        self._check_modules()
        self._check_pipeline()
        for d in ordered():
            if d.rules is not None:
                d.rules(self)

    def _check_framework(self) -> None:
        """What each framework's data parallelism allows."""
        if self.framework is Framework.DEEPSPEED and self.zero >= 2 and self.pp > 1:
            raise LayoutError(
                f"--framework deepspeed --zero {self.zero} with --pp {self.pp}: DeepSpeed's pipeline engine "
                "runs ZeRO-1 at most (deepspeed/runtime/pipe/engine.py: ZeRO-2 and ZeRO-3 are "
                "incompatible with pipeline parallelism)"
            )
        if self.overlap_grad_reduce and (self.framework.family is not Framework.MEGATRON or self.zero == 3):
            raise LayoutError(
                "--overlap-grad-reduce buckets Megatron-LM's gradient buffers: it needs --framework "
                "megatron and --zero 0, 1 or 2"
            )
        if self.overlap_param_gather and not (self.overlap_grad_reduce and self.zero in (1, 2)):
            # megatron/training/arguments.py at core_r0.8.0, validate_args: "--overlap-param-gather
            # only supported with distributed optimizer", "--overlap-grad-reduce should be turned
            # on when using --overlap-param-gather"
            raise LayoutError(
                "--overlap-param-gather gathers the distributed optimizer's buckets: it needs "
                "--overlap-grad-reduce and --zero 1 or 2"
            )
        if self.overlap_param_gather and self.framework.zero_broadcast:
            # torch/distributed/optim/zero_redundancy_optimizer.py, step: _sync_params waits for
            # every broadcast before it returns (overlap_with_ddp False in flash-attention's yamls)
            raise LayoutError(
                "--overlap-param-gather gathers Megatron's distributed optimizer's buckets in the next "
                "forward: flash-attn's ZeroRedundancyOptimizer broadcasts its parameters in its step"
            )
        te = frameworks.named(lambda f: f.transformer_engine)
        if self.tp_comm_overlap and not (self.sp and self.framework.transformer_engine):
            # megatron/training/arguments.py at core_r0.8.0, validate_args: "Tensor parallel
            # communication/GEMM overlap can happen only when sequence parallelism is enabled";
            # Transformer Engine's userbuffers are Megatron-Core's (not Megatron-LM 2022's)
            raise LayoutError(
                "--tp-comm-overlap runs Megatron-Core's sequence-parallel collectives inside the GEMMs: "
                f"it needs --sp (so --tp > 1) and --framework {te}"
            )
        if self.framework is Framework.NEMO and self.zero != 1:
            # nemo/core/optim/distributed_adam.py (r2.0.0rc1), MegatronDistributedFusedAdam: Apex's
            # DistributedFusedAdam over the data (and context) ranks, contiguous_grad_buffer
            raise LayoutError(
                f"--framework nemo --zero {self.zero}: NeMo's distributed_fused_adam shards the optimizer "
                "state and keeps the gradient buffer whole, Megatron's --zero 1: give --zero 1"
            )
        if self.framework is Framework.FLASH_ATTN and self.zero > 1:
            raise LayoutError(
                f"--framework flash-attn --zero {self.zero}: its training scripts run DDP (--zero 0) or "
                "PyTorch's ZeroRedundancyOptimizer (--zero 1)"
            )
        if self.compiled and not self.framework.compiles:
            raise LayoutError(
                "--compile is torch.compile of each transformer block as torchtitan applies it: "
                f"--framework {frameworks.named(lambda f: f.compiles)}, not {self.framework}"
            )
        if self.framework.family is Framework.FSDP and self.zero == 1:
            raise LayoutError(
                "--framework fsdp has no ZeRO-1: --zero 0 (NO_SHARD), 2 (SHARD_GRAD_OP) or 3 (FULL_SHARD)"
            )

    def _check_capacity(self) -> None:
        """Megatron-LM's rules (arguments.py, validate_args): the padding needs a capacity factor."""
        factor = self.capacity_factor
        if factor is not None and not 0 < factor <= limits.DIM:
            raise LayoutError(
                f"--moe-expert-capacity-factor {factor:g}: a positive factor (1.0: balanced routing's load)"
            )
        if self.pad_to_capacity and factor is None:
            raise LayoutError(
                "--moe-pad-expert-input-to-capacity pads each expert's tokens to its capacity: it needs "
                "--moe-expert-capacity-factor"
            )

    def _check_dualpipe(self) -> None:
        """DualPipe.step's and DualPipeV.step's asserts (deepseek-ai/DualPipe: dualpipe.py,
        `num_ranks % 2 == 0`, `num_chunks % 2 == 0 and num_chunks >= num_ranks * 2`; dualpipev.py,
        `num_chunks >= num_ranks * 2`)."""
        name = self.schedule.value
        if self.pp < 2 or (self.schedule is Schedule.DUALPIPE and self.pp % 2):
            even = (
                " (an even count: half the stages mirror the other half)"
                if self.schedule is Schedule.DUALPIPE
                else ""
            )
            raise LayoutError(f"--schedule {name} needs --pp of 2 or more{even}")
        ga = self.micro_batches
        if ga < 2 * self.pp or (self.schedule is Schedule.DUALPIPE and ga % 2):
            even = "an even count, " if self.schedule is Schedule.DUALPIPE else ""
            raise LayoutError(
                f"--schedule {name} runs {ga} micro-batches per replica; it needs {even}at least "
                f"2 x --pp = {2 * self.pp} (--global-batch)"
            )

    def _check_recompute(self) -> None:
        """--recompute-fraction's range, Megatron's --recompute-method and --recompute-num-layers
        (transformer_config.py at core_r0.14.0, TransformerConfig.__post_init__: full needs both,
        selective neither), and the mode they place."""
        fraction, method, count = self.recompute_fraction, self.recompute_method, self.recompute_num_layers
        if not 0 < fraction <= 1:
            raise LayoutError(
                f"--recompute-fraction {fraction:g}: a fraction of the blocks, above 0 and at most 1"
            )
        if fraction < 1 and self.recompute is not Recompute.FULL:
            raise LayoutError(
                f"--recompute-fraction {fraction:g} checkpoints that fraction of the blocks whole: it needs "
                f"--recompute full, not {self.recompute.value}"
            )
        if method is None and count is None:
            return
        if self.recompute is not Recompute.FULL:
            raise LayoutError(
                "--recompute-method and --recompute-num-layers place full recomputation: they need "
                f"--recompute full, not {self.recompute.value} (Megatron: selective takes every layer)"
            )
        if method not in checkpoints.METHODS or count is None or count < 1:
            raise LayoutError(
                "--recompute full places its checkpoints by --recompute-method uniform|block and "
                "--recompute-num-layers N >= 1 together (Megatron-Core's TransformerConfig needs both)"
            )
        if self.framework.family is not Framework.MEGATRON:
            raise LayoutError(
                f"--recompute-method {method} is Megatron-LM's placement of full recomputation: it needs "
                f"--framework megatron, not {self.framework}"
            )
        if fraction < 1:
            raise LayoutError(
                f"--recompute-fraction {fraction:g} and --recompute-method {method} both place full "
                "recomputation's checkpoints (fms-fsdp's spread, Megatron's): give one"
            )

    def _check_modules(self) -> None:
        """Megatron-Core's --recompute-modules (TransformerConfig.__post_init__ at core_r0.14.0):
        its seven choices, under --recompute-granularity selective (full reruns whole layers)."""
        chosen = self.recompute_modules
        if chosen is None:
            return
        unknown = [m for m in chosen if m not in modules.MODULES]
        if unknown:
            raise LayoutError(
                f"--recompute-modules {unknown[0]}: not one of {', '.join(modules.MODULES)} (Megatron-Core's)"
            )
        if self.recompute is not Recompute.SELECTIVE:
            raise LayoutError(
                "--recompute-modules names what selective recomputation reruns: it needs --recompute "
                f"selective, not {self.recompute.value}"
            )
        if self.framework is not Framework.MEGATRON:
            raise LayoutError(
                f"--recompute-modules is Megatron-Core's (core_r0.12.0 on): it needs --framework megatron, "
                f"not {self.framework}"
            )

    def _check_pipeline(self) -> None:
        """The schedule's rules and the --stages list's length."""
        if self.schedule is Schedule.INTERLEAVED:
            if self.vpp < 2 or self.pp < 2:
                raise LayoutError("--schedule interleaved needs --pp > 1 and --vpp V >= 2 chunks per rank")
            if self.micro_batches % self.pp:
                count = f"the {self.micro_batches} micro-batches"
                raise LayoutError(f"--schedule interleaved needs {count} to be a multiple of --pp {self.pp}")
        elif self.vpp != 1:
            raise LayoutError(f"--vpp {self.vpp} needs --schedule interleaved")
        if self.schedule in _BIDIRECTIONAL:
            self._check_dualpipe()
        if (
            self.framework.family is Framework.DEEPSPEED
            and self.pp > 1
            and self.schedule is not Schedule.ONE_F_ONE_B
        ):
            # deepspeed/runtime/pipe/engine.py, train_batch: `sched = schedule.TrainSchedule(...)`,
            # its one training schedule (pipe/schedule.py: TrainSchedule, 1F1B-like)
            raise LayoutError(
                f"--framework deepspeed --schedule {self.schedule}: DeepSpeed's pipeline engine runs one "
                "schedule, TrainSchedule (1f1b)"
            )
        if self.stages is not None and len(self.stages) != self.chunks:
            raise LayoutError(
                f"--stages lists {len(self.stages)} chunk{'s' * (len(self.stages) != 1)}; "
                f"the pipeline has {self.chunks} (P x V)"
            )
