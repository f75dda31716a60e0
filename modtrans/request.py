"""What a translation is asked for, and the rules that turn it into pipeline.Options.

A `Request` holds every option `modtrans translate` takes, typed; None means "not given" (the
default applies, or --like fills it in). `prepare` applies the rules the options obey: the LLM
layout (--tp/--pp/--dp/...), --packages, --like's conventions, --per-layer files, the trace
limits, and which options a translation ignores. The command line and `modtrans.translate` both
build a Request: the rules are here once, the CLI only parses and prints.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from modtrans import cost, formats, rules, table
from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.formats import Output
from modtrans.ir.precision import FP8
from modtrans.pipeline import Options
from modtrans.strategy import Parallelism, Params
from modtrans.strategy.frameworks import Framework, named
from modtrans.strategy.llm.options import Layout, LayoutError, Recompute, Schedule, ordered
from modtrans.workload.model import Dialect, Workload

MAX_TRACES = 4096
"""--format chakra-et writes one file per NPU; more than this many need --force."""


class UsageError(ValueError):
    """An option value or combination the translation refuses: one line naming the rule (the
    command line's exit 2). `diagnostic`: the F001 of a file an option names that cannot be read."""

    def __init__(self, message: str, diagnostic: Diagnostic | None = None) -> None:
        super().__init__(message)
        self.diagnostic = diagnostic


_T = TypeVar("_T")


@dataclass(frozen=True)
class Request:
    """Every option of a translation, one field per row of the option table (table.py, whose
    rows say each one's type, default and rule; a test holds the two equal). Typed here, not
    made from the table, so that the type checker reads every `request.tp`. None: not given."""

    model: str
    output: str | None = None  # a file, or for chakra-et a DIR/ or DIR/PREFIX; None or "-": none
    parallel: str | None = None  # the keyword (default DATA)
    npus: int | None = None  # default 1, or T x P x D of the LLM layout
    model_parallel_group: int | None = None
    packages: int | None = None  # or the group as npus / packages
    checkpoint_every: int | None = None
    checkpoints: Sequence[int] | None = None
    checkpoint_initiates: Sequence[int] | None = None
    per_layer: Mapping[str, str] | str | Path | None = None  # pattern -> keyword, or a file of them
    timeline: Path | None = None  # the plan's schedule as a picture, FILE.svg or FILE.png (picture.py)
    per_layer_times: Path | None = None  # measured compute times (cost/measured.py)
    per_expert: bool = False  # a layer per routed expert (llm/build.py; default grouped)
    trust_remote_code: bool = False  # run the code a configuration's auto_map names (hf/)
    dialect: str | None = None  # astra-sim (default), simai, chakra
    params: str | None = None  # trainable (default) or weights
    batch: int | None = None
    input_shape: Mapping[str, tuple[int, ...]] | None = None  # each input's whole shape, by name
    input_value: Mapping[str, float] | None = None  # scalar inputs as constants
    dtype_bytes: int | None = None
    precision: str | None = None  # fp32, fp16, bf16, fp8 (default: the model's own dtype)
    compute: str | None = None  # gpu (default), roofline, astra-sim-reference, scalesim-v3, scalesim
    device: str | None = None
    array: tuple[int, int] | None = None
    dataflow: str | None = None
    bytes_per_cycle: float | None = None
    efficiency: str | None = None  # the gpu model's rates scaled: "0.9" or "gemm=0.8,memory=0.95"
    attention: str | None = None  # the gpu model's attention: flash (default) or eager
    time_unit: str | None = None  # ns (default), us, cycles
    clock_ghz: float = 1.0
    format: str = formats.Format.TEXT  # a registered output's (formats/registry.py)
    passes: int = 1
    network_dims: Sequence[int] | None = None
    meta: str | Path | None = None
    like: str | Path | None = None
    force: bool = False
    check: str = "quick"  # how a text output is checked: quick (workload/quick.py) or full (read back)
    strict: bool = False
    allow_unknown: bool = False
    full_hash: bool = False
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    etp: int | None = None  # experts split over 1 or T tensor ranks (default T)
    cp: int | None = None  # context-parallel ranks (strategy/llm/context.py)
    dp_replicate: int | None = None  # HSDP's replicas R (strategy/llm/hsdp.py)
    sp: bool | None = None  # None: not given (--like may fill it); --no-sp says False
    zero: int | None = None
    micro_batch: int | None = None
    global_batch: int | None = None
    schedule: str | None = None  # gpipe, 1f1b, interleaved, ...
    vpp: int | None = None
    recompute: str | None = None  # none, selective, full
    recompute_fraction: float | None = None  # full recomputation of a fraction of the blocks
    recompute_method: str | None = None  # Megatron's --recompute-method: uniform or block
    recompute_num_layers: int | None = None  # Megatron's --recompute-num-layers
    recompute_modules: Sequence[str] | None = None  # Megatron-Core's --recompute-modules
    seq_len: int | None = None  # input_ids' sequence dimension (Megatron's --seq-length)
    framework: str | None = None  # megatron (default), megatron-2022, deepspeed, fsdp, torchtitan ...
    overlap_grad_reduce: bool = False  # Megatron's --overlap-grad-reduce (strategy/llm/buckets.py)
    overlap_param_gather: bool = False  # Megatron's --overlap-param-gather (strategy/llm/buckets.py)
    tp_comm_overlap: bool = False  # Megatron-Core's --tp-comm-overlap (strategy/llm/userbuffers.py)
    compile: bool = False  # torch.compile of each block (strategy/frameworks.py, compiles)
    make_vocab_size_divisible_by: int | None = None  # Megatron's; None: its default, 128
    moe_expert_capacity_factor: float | None = None  # Megatron's (strategy/llm/expert.py)
    moe_pad_expert_input_to_capacity: bool = False  # Megatron's: each expert's tokens padded to capacity
    stages: Sequence[int] | None = None


def request_of(model: str | Path, options: Mapping[str, Any], caller: str = "translate") -> Request:
    """The Request of `model` and `options` (by the table's names), each by its rule: a value the
    rule refuses is a UsageError naming the option, a name not in the table a TypeError."""
    try:
        values = table.values_of(options, caller)
    except rules.OptionError as error:
        raise UsageError(str(error)) from None
    return Request(model=str(model), **values)


@dataclass(frozen=True)
class Prepared:
    """A request with its rules applied: what the pipeline is given, and the lines said on the way."""

    request: Request
    options: Options
    notes: tuple[str, ...]

    @property
    def output(self) -> Output:
        """The registered output the request's format and dialect name (formats/registry.py)."""
        return formats.get(self.options.format, self.options.dialect)


Say = Callable[[str], None]


def prepare(request: Request, say: Say | None = None) -> Prepared:
    """The pipeline options `request` describes; raises UsageError for what the options' rules
    refuse. Each note (what --like took, an option ignored and why) is passed to `say` as made."""
    notes: list[str] = []

    def note(line: str) -> None:
        notes.append(line)
        if say is not None:
            say(line)

    policy = Policy(request.parallel or Policy.DATA)
    dialect = Dialect(request.dialect or Dialect.ASTRA_SIM)
    params = Params(request.params or Params.TRAINABLE)
    compute = request.compute or "gpu"
    if request.timeline is not None and Path(request.timeline).suffix.lower() not in (".svg", ".png"):
        raise UsageError(f"--timeline {request.timeline}: a picture is FILE.svg or FILE.png")
    if request.output == "" and not _traces(request):
        raise UsageError("--output is empty: give a file, or - for standard output")
    if request.like is not None:
        request, policy, dialect, params, compute = _like(request, policy, dialect, note)
    if request.precision == FP8:
        _fp8_runs(request, compute)
    if request.compute is None and compute == "gpu" and not _calibrated(request.device):
        compute = "roofline"
        note(f"--device {request.device}: no kernel calibration for the gpu model; the roofline at its peak")
    try:
        formats.get(request.format, dialect)
    except formats.UnknownOutput as error:
        raise UsageError(str(error)) from None
    unit = _unit(request, dialect)
    for line in (*_not_applicable(request, policy, compute), *_unmeasured(request, compute)):
        note(line)
    settings = _settings(request, unit)
    parallel = _parallelism(request, policy)
    batch = request.batch
    if parallel.layout is not None and request.micro_batch is not None:
        batch = request.micro_batch  # the IR is one micro-batch
    options = Options(
        parallel=parallel,
        params=params,
        batch=batch,
        input_shapes=_shapes(request, batch),
        input_values=dict(request.input_value or {}),
        dtype_bytes=request.dtype_bytes,
        precision=_precision(request, parallel),
        compute=compute,
        cost=settings,
        dialect=dialect,
        format=request.format,
        allow_unknown=request.allow_unknown,
        full_hash=request.full_hash,
        per_layer_times=None if request.per_layer_times is None else Path(request.per_layer_times),
        per_expert=request.per_expert,
        trust_remote_code=request.trust_remote_code,
    )
    return Prepared(request, options, tuple(notes))


def _fp8_runs(request: Request, compute: str) -> None:
    """UsageError where --precision fp8 cannot run: Transformer Engine's FP8 linears are
    Megatron-Core's alone, Megatron-LM's and NeMo's (cost/fp8.py; DeepSpeed, FSDP and Megatron-LM
    of 2022 train without them), costed by the gpu model (its FP8 GEMM rates and TE's casts), on a
    device with FP8 tensor cores and a measured FP8 GEMM rate (devices.json: the H100, H200, B200;
    the A100 and V100 have no FP8 tensor cores)."""
    from modtrans.cost import CostError
    from modtrans.cost.fp8 import FORWARD
    from modtrans.cost.roofline import device as profile

    framework = _framework(request.framework or Framework.MEGATRON)
    if framework is not None and not framework.transformer_engine:
        runs = named(lambda f: f.transformer_engine)
        raise UsageError(
            f"--precision fp8 runs Transformer Engine's FP8 linears, which only --framework {runs} "
            f"(Megatron-Core) runs, not {framework}: give --precision bf16"
        )
    try:
        found = profile(request.device or "a100")
    except CostError:
        found = None  # the gpu model says why it cannot read it
    if found is not None and FORWARD not in found.peak_flops:
        raise UsageError(f"--precision fp8: the {found.name} has no FP8 tensor cores (Hopper and later do)")
    if found is not None and FORWARD not in (found.kernels or {}).get("matmul_efficiency", {}):
        raise UsageError(f"--precision fp8: no measured FP8 GEMM rate in the {found.name}'s profile")
    if compute != "gpu":
        raise UsageError(
            f"--precision fp8 is the gpu model's (FP8 GEMM rates, TE's casts), not --compute {compute}"
        )


def _traces(request: Request) -> bool:
    """Whether the request's format writes one trace per rank (formats/registry.py); UsageError
    for a format no output registers."""
    try:
        return formats.get(request.format, request.dialect).traces
    except formats.UnknownOutput as error:
        raise UsageError(str(error)) from None


def _calibrated(device: str | None) -> bool:
    """Whether the device profile (default a100) carries the gpu model's kernel calibration; an
    unreadable one is True, so that the gpu model says why it cannot read it."""
    from modtrans.cost import CostError
    from modtrans.cost.roofline import device as profile

    try:
        return profile(device or "a100").kernels is not None
    except CostError:
        return True


def _unmeasured(request: Request, compute: str) -> list[str]:
    """A note where the gpu model's attention kernel, asked for or the framework's (flash2, cudnn,
    flash1, triton, efficient), has no measurement on the device: its newest fused kernel's rate
    stands in (cost/gpu.py); under sdpa, FlashAttention-2's for the memory-efficient kernel."""
    from modtrans.cost import CostError
    from modtrans.cost.gpu import ALTERNATIVES
    from modtrans.cost.roofline import device as profile

    attention, device = _attention(request), request.device or "a100"
    if compute != "gpu" or attention not in (*ALTERNATIVES, "sdpa"):
        return []
    try:
        kernels = profile(device).kernels
    except CostError:
        return []
    if kernels is not None and attention == "sdpa" and "attention_efficient" not in kernels:
        return [  # SDPA's FlashAttention-2, and its memory-efficient kernel where handed a mask
            f"--attention sdpa: the {device} profile has no measurement of the memory-efficient kernel; "
            "the rate it charges FlashAttention-2 stands in for it"
        ]
    if kernels is None or attention == "sdpa" or f"attention_{attention}" in kernels:
        return []
    return [
        f"--attention {attention}: the {device} profile has no measurement of that kernel; "
        "its newest fused kernel's rate stands in"
    ]


def _efficiency(text: str | None) -> tuple[tuple[str, float], ...]:
    """--efficiency F (every kernel class) or CLASS=F,CLASS=F (gemm, attention, memory)."""
    if text is None:
        return ()
    found = []
    for part in text.split(","):
        name, _, value = part.strip().rpartition("=")
        try:
            factor = float(value)
        except ValueError:
            pairs = "CLASS=FACTOR pairs (gemm=0.8,attention=0.9,memory=0.95)"
            raise UsageError(f"--efficiency {text}: a factor (0.9) or {pairs}") from None
        found.append((name.strip() or "all", factor))
    return tuple(found)


def _precision(request: Request, parallel: Parallelism) -> str | None:
    """--precision, else the LLM layout's framework's own (frameworks.py, Framework.precision:
    torchtitan, llm-foundry, fms-fsdp and NeMo train in bf16 whatever the checkpoint's dtype), else
    None: the model's own dtype."""
    if request.precision is not None or parallel.layout is None:
        return request.precision
    return parallel.layout.framework.precision


def _shapes(request: Request, batch: int | None) -> dict[str, tuple[int, ...]]:
    """--input-shape, with --seq-len S as input_ids=BxS, B the `batch` (--batch's, or --micro-batch's
    under the layout; 1 where neither is given). Every input sharing a named dimension with
    input_ids follows it (extraction/load.apply_inputs): GPT-2's attention_mask is [batch, sequence]."""
    shapes = dict(request.input_shape or {})
    if request.seq_len is None:
        return shapes
    if request.seq_len < 1:
        raise UsageError("--seq-len must be at least 1")
    if "input_ids" in shapes:
        raise UsageError("--seq-len and --input-shape input_ids=... both set the sequence: give one")
    shapes["input_ids"] = (batch or 1, request.seq_len)
    return shapes


def _unit(request: Request, dialect: Dialect) -> cost.Unit:
    """The tick unit; traces are computed in ns and written in whole microseconds with the carry.
    A text's default is its consumer's: ns for ASTRA-sim 1.0 and SimAI, us for the Chakra dialect,
    whose text converter copies each time into duration_micros, read as microseconds by ASTRA-sim
    2.x (reference/chakra-contract.md, Units; astra-sim#207)."""
    if not _traces(request):
        ticks = formats.get(request.format, dialect).ticks  # the unit its consumer reads
        default = cost.Unit.NS if ticks is None else ticks.unit
        return cost.Unit(request.time_unit or default)
    if request.output in (None, "-"):
        raise UsageError("--format chakra-et writes files: give -o DIR/PREFIX")
    if request.time_unit is not None and cost.Unit(request.time_unit) is not cost.Unit.US:
        raise UsageError(
            f"--time-unit {cost.Unit(request.time_unit).value}: a Chakra trace holds microseconds "
            "(duration_micros, which ASTRA-sim 2.x reads as such); the traces are computed in ns and "
            "written in us without rounding each node"
        )
    return cost.Unit.NS  # exact; chakra/write.py writes whole microseconds with the carry


def _parallelism(request: Request, policy: Policy) -> Parallelism:
    """The keyword's NPUs, group and checkpoints, or the LLM layout (--packages resolved)."""
    npus = request.npus or 1
    group = request.model_parallel_group
    if request.packages is not None:
        if group is not None or npus % request.packages:
            raise UsageError("--packages must divide --npus, and replaces --model-parallel-group")
        group = npus // request.packages
    layout = _layout(request, policy, npus)
    if layout is not None:
        npus = layout.npus
    if _traces(request) and npus > MAX_TRACES and not request.force:
        given = f"--npus {npus}" if layout is None else f"T x P x D = {npus} NPUs"
        raise UsageError(f"{given} writes {npus} trace files (over {MAX_TRACES}); pass --force")
    return Parallelism(
        policy=policy,
        npus=npus,
        group=group,
        checkpoints=_tuple(request.checkpoints),
        checkpoint_initiates=_tuple(request.checkpoint_initiates),
        checkpoint_every=request.checkpoint_every,
        per_layer=_rules(request.per_layer),
        layout=layout,
    )


def _tuple(values: Sequence[_T] | None) -> tuple[_T, ...] | None:
    return None if values is None else tuple(values)


def _layout(request: Request, policy: Policy, npus: int) -> Layout | None:
    """The LLM layout the options describe (None when none of them is given)."""
    r = request
    if not _lays_out(r):
        return None
    if r.parallel is not None and not policy.is_transformer:
        raise UsageError(f"--tp/--pp/--dp/--ep/... lay out a transformer; --parallel {policy} is not one")
    if r.model_parallel_group is not None:
        raise UsageError("--model-parallel-group is --tp for the LLM layout: give one of them")
    # every degree's option (degrees.py), 1 where not given; D None: it follows from N
    sizes: dict[str, Any] = {d.token: getattr(r, d.token) or (None if d.data else 1) for d in ordered()}
    beside = math.prod(sizes[d.token] for d in ordered("beside_data"))  # T x C x P
    data = math.prod(sizes[d.token] or 1 for d in ordered("data"))
    interleaved = r.vpp is not None and r.vpp > 1
    default = Schedule.INTERLEAVED if interleaved else Schedule.ONE_F_ONE_B
    try:
        return Layout(
            npus=r.npus if r.npus is not None else beside * data,
            **sizes,
            etp=r.etp,
            framework=Framework(r.framework or Framework.MEGATRON),
            sp=bool(r.sp),
            overlap_grad_reduce=r.overlap_grad_reduce,
            overlap_param_gather=r.overlap_param_gather,
            tp_comm_overlap=r.tp_comm_overlap,
            compiled=r.compile,
            vocab_divisor=r.make_vocab_size_divisible_by or 128,
            zero=r.zero or 0,
            micro_batch=r.micro_batch or 1,
            global_batch=r.global_batch,
            schedule=Schedule(r.schedule) if r.schedule is not None else default,
            vpp=r.vpp or 1,
            recompute=Recompute(r.recompute or Recompute.NONE),
            recompute_fraction=1.0 if r.recompute_fraction is None else r.recompute_fraction,
            recompute_method=r.recompute_method,
            recompute_num_layers=r.recompute_num_layers,
            recompute_modules=_tuple(r.recompute_modules),
            stages=_tuple(r.stages),
            capacity_factor=r.moe_expert_capacity_factor,
            pad_to_capacity=r.moe_pad_expert_input_to_capacity,
            attention=_attention(r),
            fp8=r.precision == FP8,
        )
    except LayoutError as error:
        raise UsageError(str(error)) from None


def _settings(request: Request, unit: cost.Unit) -> cost.Settings:
    """What the cost model reads of the request."""
    return cost.Settings(
        request.device,
        request.array,
        request.dataflow,
        request.bytes_per_cycle,
        cost.Clock(unit, request.clock_ghz),
        _efficiency(request.efficiency),
        _attention(request),
        _norms(request.framework),
        request.compile,
        _loss(request.framework),
        request.precision == FP8,
    )


def _attention(r: Request) -> str:
    """The attention kernel: --attention, else the framework's (frameworks.py, attention), else,
    under a framework that runs the module it is handed (wraps_module), the model's own
    (cost.OWN_ATTENTION, settled once the model is read: pipeline.own_attention), else the
    device's newest fused kernel."""
    if r.attention is not None:
        return r.attention
    framework = _framework(r.framework)
    if framework is None:
        return "flash"
    return framework.attention or (cost.OWN_ATTENTION if framework.wraps_module else "flash")


def _norms(framework: str | None) -> str:
    """The gpu model's RMSNorm, rotary and SwiGLU under the framework's conventions (frameworks.py,
    eager_norms); --compile's blocks apart (Settings.compiled)."""
    known = _framework(framework)
    return "eager" if known is not None and known.eager_norms else "fused"


def _loss(framework: str | None) -> str:
    """The gpu model's loss under the framework's conventions (frameworks.py, Framework.loss)."""
    known = _framework(framework)
    return known.loss if known is not None else "torch"


def _framework(name: str | None) -> Framework | None:
    """The framework --framework names; None for none or a name the layout refuses later."""
    return Framework(name) if name is not None and name in {f.value for f in Framework} else None


def _lays_out(r: Request) -> bool:
    """Whether any option of the LLM layout (table.LAYOUT_FIELDS) is given: not its default (a
    flag set; --no-sp, whose default is None, given too)."""
    rows = (table.BY_NAME[name] for name in table.LAYOUT_FIELDS)
    return any(getattr(r, row.name) is not None and getattr(r, row.name) is not row.default for row in rows)


def _not_applicable(request: Request, policy: Policy, compute: str) -> list[str]:
    """A warning for each option given that this translation does not use, and why."""
    to = request.format
    systolic = compute in ("scalesim-v3", "scalesim")
    checkpointed = policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD
    only_traces = None if _traces(request) else f"only --format {formats.Format.CHAKRA_ET} uses it, not {to}"
    not_checkpointed = (
        None if checkpointed else f"only HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoints, not {policy}"
    )
    unused = {
        "dataflow": (request.dataflow, None if systolic else f"--compute {compute} has no dataflow"),
        "attention": (
            request.attention,
            None
            if compute == "gpu" or _lays_out(request)  # the layout's activation memory reads it too
            else f"only --compute gpu fuses it, not {compute}",
        ),
        "efficiency": (
            request.efficiency,
            None if compute == "gpu" else f"only --compute gpu has one, not {compute}",
        ),
        "per_layer": (
            request.per_layer,
            None if policy is Policy.HYBRID_CUSTOMIZED else f"only HYBRID_CUSTOMIZED reads it, not {policy}",
        ),
        "checkpoint_every": (request.checkpoint_every, not_checkpointed),
        "checkpoints": (request.checkpoints, not_checkpointed),
        "checkpoint_initiates": (request.checkpoint_initiates, not_checkpointed),
        "network_dims": (request.network_dims, only_traces),
        "passes": (None if request.passes == 1 else request.passes, only_traces),
        "check": (
            None if request.check == "quick" else request.check,
            None
            if formats.get(to, request.dialect).check is not None
            else f"only a text output has a quick and a full check, not --format {to}",
        ),
        "model_parallel_group": (
            request.model_parallel_group,
            f"{policy} has no model-parallel group" if policy in (Policy.DATA, Policy.MODEL) else None,
        ),
    }
    return [
        f"modtrans: warning: --{name.replace('_', '-')} is ignored: {reason}"
        for name, (value, reason) in unused.items()
        if value is not None and reason is not None
    ]


def _like(
    request: Request, policy: Policy, dialect: Dialect, note: Say
) -> tuple[Request, Policy, Dialect, Params, str]:
    """The options the reference workload implies, for those the request does not give."""
    from modtrans.strategy.parallel import SUPPORTED
    from modtrans.workload.load import load

    reference = Path(str(request.like))
    loaded = load(reference)
    unreadable = next((d for d in loaded.result.diagnostics if d.code in ("F001", "F007")), None)
    if unreadable is not None:
        raise unreadable_option("--like", reference, unreadable.message)
    workload = loaded.result.workload
    if workload is None:
        raise UsageError(f"--like {reference}: not a workload file ({loaded.result.diagnostics[0].message})")
    given = request.npus
    request, taken = _preset_like(request, reference, workload)
    if request.dialect is not None:  # given, or recorded in its .meta.json
        dialect = Dialect(request.dialect)
    if request.npus == given:  # no keyword preset's own NPUs taken: a transformer reference's layout
        request, laid = _layout_like(request, workload)
        taken += laid
    if not _lays_out(request) and request.parallel is None and workload.header.policy in SUPPORTED:
        policy = workload.header.policy
        taken.append(f"--parallel {policy.value}")
    if request.dialect is None and workload.dialect is not None:
        dialect = workload.dialect
        taken.append(f"--dialect {dialect.value}")
    params, compute, implied = conventions_of(workload, request.params, request.compute)
    taken += implied
    note(f"--like {reference}: {' '.join(taken) or 'nothing to take'}")
    return request, policy, dialect, params, compute


def _preset_like(request: Request, path: Path, reference: Workload) -> tuple[Request, list[str]]:
    """What ModTrans recorded of a reference it wrote (its .meta.json, the pair's SHA-256 matching:
    sidecar.py), for the options the request does not give: the parameter convention it was
    written with (--params: the file's sizes cannot tell a bias-free layer's), and for a keyword
    preset (the metadata names the policy and no layout) its NPUs and group, so that the keyword
    is followed (_like) as it was written. Read as the layout --tp G instead (_layout_like), GPT-2
    under HYBRID_TRANSFORMER 8/4 came back with Megatron's one data-parallel bucket in place of the
    preset's per-layer all-reduces, and `diff gpt2 FILE --like`, which takes no keyword, called
    ModTrans's own file different in 75 of 78 layers. The second list: whether a preset was taken."""
    from modtrans import sidecar

    meta = sidecar.read(Path(f"{path}{sidecar.SUFFIX}"))
    if meta.get("format") != "modtrans-translation" or sidecar.check(path) is not None:
        return request, []
    taken: dict[str, Any] = {}
    if request.params is None and meta.get("params") in {p.value for p in Params}:
        taken["params"] = meta["params"]
    parallel = sidecar.parallel_of(meta)
    npus, group = parallel.get("npus"), parallel.get("model_parallel_group")
    given = request.parallel, request.model_parallel_group, request.packages, request.npus
    preset = parallel.get("policy") == reference.header.policy.value and "llm" not in parallel
    if preset and not _lays_out(request) and all(v is None for v in given) and isinstance(npus, int):
        taken["npus"] = npus
        if isinstance(group, int):
            taken["model_parallel_group"] = group
    taken.update(_recorded_like(request, meta, reference))
    words = [_said(k, v) for k, v in taken.items()]
    if words:
        words[-1] += " (its .meta.json)"
    return dataclasses.replace(request, **taken), words


def _recorded_like(request: Request, meta: Mapping[str, Any], reference: Workload) -> dict[str, Any]:
    """What the reference's metadata records and its text cannot say, for the options not given:
    its dialect (Chakra's text is ASTRA-sim 1.0's lines in microseconds: read from the text alone
    it is ASTRA-sim's, whose ticks are nanoseconds, and `diff resnet50 R.txt --like` of ResNet-50's
    own Chakra text called all 107 layers different, each phase's compute total 933 to 980 times
    the reference's); its tick unit where it is not the dialect's own (`--time-unit us` of an
    ASTRA-sim text; a file written before the metadata named its dialect); and its sequence,
    input_ids' last dimension (Megatron's --seq-length: GPT-2 at --seq-len 256 against the
    built-in's 128 tokens differed in 52 of 78 layers)."""
    taken: dict[str, Any] = {}
    recorded = meta.get("dialect")
    if request.dialect is None and recorded in {d.value for d in Dialect}:
        taken["dialect"] = recorded
    compute = meta.get("compute")
    unit = compute.get("unit") if isinstance(compute, dict) else None
    if request.time_unit is None and not _traces(request) and unit in {u.value for u in cost.Unit}:
        dialect = Dialect(request.dialect or taken.get("dialect") or reference.dialect or Dialect.ASTRA_SIM)
        ticks = formats.get(request.format, dialect).ticks
        if unit != (cost.Unit.NS if ticks is None else ticks.unit).value:
            taken["time_unit"] = unit
            clock = compute.get("clock_ghz") if isinstance(compute, dict) else None
            if unit == cost.Unit.CYCLES and isinstance(clock, int | float) and clock > 0:
                taken["clock_ghz"] = float(clock)
    model = meta.get("model")
    shapes = model.get("input_shapes") if isinstance(model, dict) else None
    ids = shapes.get("input_ids") if isinstance(shapes, dict) else None
    given = request.seq_len is not None or "input_ids" in (request.input_shape or {})
    if not given and isinstance(ids, list) and len(ids) == 2 and isinstance(ids[1], int) and ids[1] > 0:
        taken["seq_len"] = ids[1]
    return taken


def _layout_like(request: Request, reference: Workload) -> tuple[Request, list[str]]:
    """A transformer reference's layout, field by field for those the request does not give
    (what is given wins, whatever else is given): its model_parallel_NPU_group is --tp (the
    HYBRID_TRANSFORMER keyword is the layout --tp G), and SimAI's keys pp, ep and all_gpus --pp,
    --ep and the data-parallel ranks, ga the micro-batches (--global-batch M x D x ga); a
    forward or input-gradient REDUCESCATTER says --sp, its absence --no-sp (sequence_parallel);
    a weight-gradient REDUCESCATTER the distributed optimizer, --zero 1; data-parallel lines
    under a header without all_gpus (AICB's older files), --dp 2, SimAI's sizes being the same
    for any D. A keyword or group given
    (--parallel, --model-parallel-group, --packages) chooses the keyword instead: nothing is taken."""
    header = reference.header
    group = header.model_parallel_group
    keyword = request.parallel is not None or request.model_parallel_group is not None
    if keyword or request.packages is not None or not header.policy.is_transformer or not group or group < 1:
        return request, []  # a group of 0 or less says nothing (validate reports it)
    pp = max(header.pp or 1, 1)
    found: dict[str, int] = {"tp": group}
    if pp > 1:
        found["pp"] = pp
    if header.ep and header.ep > 1:
        found["ep"] = header.ep
    if header.all_gpus and header.all_gpus % (group * pp) == 0:
        found["dp"] = header.all_gpus // (group * pp)
    data = [
        layer.weight_grad.comm_type for layer in reference.layers if layer.weight_grad.comm_type.moves_data
    ]
    if CommType.REDUCESCATTER in data:  # the distributed optimizer (AICB's grad_norm / grad_param_comm)
        found["zero"] = 1
    assumed = "dp" not in found and bool(data)
    if assumed:  # an old header: data-parallel lines but no all_gpus. SimAI's sizes do not depend on D
        found["dp"] = 2
    if request.npus is not None:
        found.pop("dp", None)  # D follows from the NPUs given
    taken: dict[str, Any] = {k: v for k, v in found.items() if getattr(request, k) is None}
    if header.ga and header.ga > 1 and request.global_batch is None:
        ranks = request.dp or taken.get("dp", 1)
        taken["global_batch"] = (request.micro_batch or 1) * ranks * header.ga
    if request.sp is None and (request.tp or group) > 1:
        taken["sp"] = sequence_parallel(reference)
    words = [_said(k, v) for k, v in taken.items()]
    if assumed and "dp" in taken:
        words[list(taken).index("dp")] += " (its header gives no all_gpus)"
    return dataclasses.replace(request, **taken), words


def _said(field: str, value: Any) -> str:
    """An option taken, as it would be typed: `--tp 4`, `--sp`, `--no-sp`."""
    option = f"--{field.replace('_', '-')}"
    if isinstance(value, bool):
        return option if value else f"--no-{option[2:]}"
    return f"{option} {value}"


def sequence_parallel(reference: Workload) -> bool:
    """Whether a transformer workload's tensor-parallel layers run under sequence parallelism:
    a forward or input-gradient REDUCESCATTER. Megatron's SP turns a row-parallel layer's forward
    all-reduce into a reduce-scatter and a column-parallel layer's input-gradient all-reduce into
    one (Korthikanti et al. 2022, "Reducing Activation Recomputation", section 4.2.2: g and g-bar);
    without SP the tensor group only all-reduces. Whether the matching all-gather shares the line
    (AICB's files) or has a line of its own (ModTrans's `.pre1` / `.post1`), the reduce-scatters
    are there. The distributed optimizer's and ZeRO's reduce-scatters are weight-gradient ones."""
    scatter = CommType.REDUCESCATTER
    return any(scatter in (layer.fwd.comm_type, layer.input_grad.comm_type) for layer in reference.layers)


def conventions_of(
    reference: Workload, params: str | None, compute: str | None
) -> tuple[Params, str, list[str]]:
    """The --params and --compute a reference workload implies, for those not given (None), and
    the options taken (for `translate --like` and `diff --like` alike)."""
    from modtrans.diff import conventions

    seen = conventions.detect(reference)
    taken = []
    if params is None:
        params = seen.params
        taken.append(f"--params {Params(params).value}")
    if compute is None and seen.reference_compute:
        compute = "astra-sim-reference"
        taken.append(f"--compute {compute}")
    return Params(params), compute or "gpu", taken


def unreadable_option(option: str, path: Path, reason: str) -> UsageError:
    """A file an option names cannot be read: the UsageError carrying the F001 that names both."""
    reason = reason.removeprefix(f"cannot read {path}: ")
    message = f"cannot read {option} {path}: {reason}"
    return UsageError(message, diagnostic("F001", message, path=str(path)))


def _rules(per_layer: Mapping[str, str] | str | Path | None) -> dict[str, Policy] | None:
    if per_layer is None:
        return None
    if isinstance(per_layer, str | Path):
        return read_per_layer(Path(per_layer))
    return {pattern: Policy(keyword) for pattern, keyword in per_layer.items()}


def read_per_layer(path: Path) -> dict[str, Policy]:
    """HYBRID_CUSTOMIZED's rules from a file of `PATTERN KEYWORD` lines (# comments)."""
    from modtrans.fileio import read_binary, utf8
    from modtrans.strategy.parallel import PER_LAYER

    data, problem = read_binary(path)
    if data is None:
        raise unreadable_option("--per-layer", path, problem.message if problem else "unreadable")
    text, reason = utf8(data)
    if text is None:
        raise unreadable_option("--per-layer", path, reason or "not UTF-8 text")
    allowed = {p.value for p in PER_LAYER}
    rules: dict[str, Policy] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 2 or fields[1] not in allowed:
            listed = ", ".join(p.value for p in PER_LAYER)
            raise UsageError(f"{path}:{number}: expected `PATTERN KEYWORD` with KEYWORD one of {listed}")
        rules[fields[0]] = Policy(fields[1])
    return rules
