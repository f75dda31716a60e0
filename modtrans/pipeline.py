"""Pipelines: model (ONNX file or built-in name) -> IR -> strategy + cost -> Workload.

    ir = modtrans.extract("resnet50")                          # a built-in, or a path to an .onnx
    result = pipeline.translate_checked("model.onnx", options)  # options: pipeline.Options

The functions named `*_checked` return (value, diagnostics) and never raise on bad input; the
public `extract` returns the value or raises DiagnosticError. `modtrans.translate` (api.py) takes
every option of the command line and writes every format; `api.workload` the workload alone.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modtrans import cost, formats, inputs, sidecar, zoo
from modtrans._version import __version__
from modtrans.cost.attention import masked
from modtrans.diagnostics import Diagnostic, DiagnosticError, Severity, diagnostic, has_errors
from modtrans.digest import Digest
from modtrans.formats import Format
from modtrans.ir import core, document
from modtrans.ir.document import ModelIR
from modtrans.ir.precision import PRECISIONS
from modtrans.ir.precision import cast as precision_cast
from modtrans.plan import Plan, ProjectionError
from modtrans.plan.text import header as text_header
from modtrans.strategy import Parallelism, Params, StrategyError, plan
from modtrans.workload.model import Dialect, Workload
from modtrans.workload.parse import LineCache

if TYPE_CHECKING:
    from modtrans.fileio import Content


@dataclass(frozen=True)
class Options:
    """Everything `translate` can be told; the CLI's flags map onto these one to one."""

    parallel: Parallelism = field(default_factory=Parallelism)  # strategy, NPUs, group, checkpoints
    params: Params = Params.TRAINABLE
    batch: int | None = None
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    input_values: Mapping[str, float] = field(default_factory=dict)  # an If on them folds (X513)
    dtype_bytes: int | None = None
    precision: str | None = None  # fp32, fp16, bf16, fp8: the dtype training computes in (ir/precision.py)
    compute: str = "gpu"
    cost: cost.Settings = field(default_factory=cost.Settings)  # device, array, dataflow, clock ...
    dialect: Dialect = Dialect.ASTRA_SIM  # with format, the output written (formats/registry.py)
    format: str = Format.TEXT  # a registered --format: text, json, chakra-et ...
    allow_unknown: bool = False  # keep layers whose FLOPs are unknown (0), listed in the metadata
    full_hash: bool = False  # the provenance's SHA-256 of a file above 64 MiB too (digest.py)
    per_layer_times: Path | None = None  # measured times in (cost/measured.py)
    per_expert: bool = False  # a node per routed expert (default: one grouped GEMM, llm/build.py)
    trust_remote_code: bool = False  # run the code a configuration's auto_map names (hf/)


@dataclass(frozen=True)
class Translation:
    """What a translation made. `modtrans.translate` fills in all of it; `translate_checked` the
    first five."""

    workload: Workload | None  # the plan as a workload file holds it (None if it cannot; traces: None)
    ir: ModelIR | None
    diagnostics: tuple[Diagnostic, ...]
    metadata: dict[str, Any]  # the provenance (.meta.json) of what is written
    plan: Plan | None = None  # what each rank computes and communicates, whatever the format
    text: str | None = None  # the workload text or JSON (format text / json), checked
    files: tuple[tuple[Path, Content], ...] = ()  # every file to write: output, traces, .meta.json
    written: tuple[Path, ...] = ()  # those written (all or none)
    folder: Path | None = None  # made when the files are written: -o DIR/ naming no folder yet
    notes: tuple[str, ...] = ()  # said on the way: what --like took, options ignored and why


def inputs_of(model: str | Path) -> list[str]:
    """The files a model argument reads (no output may overwrite them): the path, or the
    built-in's / fetched model's file too."""
    resolved = model_file(model)
    return [str(model)] if resolved is None else [str(model), str(resolved)]


def model_file(spec: str | Path) -> Path | None:
    """The file a model argument names: the path itself, a built-in's packaged file or a fetched
    model's cached file; None when it names nothing."""
    path = Path(spec)
    if _is_file(path):
        return path
    entry = zoo.get(str(spec))
    if entry is not None:
        return entry.path
    from modtrans import fetch  # a fetched model's: not a built-in's

    return fetch.cached(str(spec))


def _config_file(path: Path) -> Path | None:
    """`path` when it is a transformers configuration (a JSON object with a model_type)."""
    if path.suffix.lower() != ".json":
        return None
    from modtrans import llm  # only for a .json: an ONNX file's translation never needs it
    from modtrans.fileio import read_head

    head = read_head(path, 1 << 16)
    return path if head is not None and llm.is_config(head) else None


def _regular(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # a name too long for the file system, a loop of links
        return True  # exists or not, reading it reports why (F001)


def _values_refused(spec: str | Path, input_values: Mapping[str, float]) -> Diagnostic:
    """X501: input values set an ONNX model's scalar inputs; a configuration has none."""
    given = ", ".join(input_values)
    message = f"input values ({given}) set an ONNX model's inputs; a configuration has none"
    return diagnostic("X501", message, path=str(spec), hint="give --seq-len or --input-shape")


def _precision_refused(spec: str | Path, precision: str) -> Diagnostic:
    """X501: a training precision ir/precision.py does not know."""
    message = f"precision {precision!r} is not one of {', '.join(PRECISIONS)}"
    return diagnostic("X501", message, path=str(spec), hint="give --precision fp32, fp16, bf16 or fp8")


def extract_checked(
    spec: str | Path,
    *,
    batch: int | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    input_values: Mapping[str, float] | None = None,
    file_hash: bool = True,
    full_hash: bool = False,
    vocabulary_multiple: int = 1,
    per_expert: bool = False,
    trust_remote_code: bool = False,
    takes: str = inputs.MODEL,
    tensor: int = 1,
    precision: str | None = None,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """The IR of an ONNX file or a built-in architecture (looked up when `spec` is not a file).
    `input_values`: an ONNX model's scalar inputs taken as constants, so that an If on them takes
    one branch (extraction/load.apply_values); a configuration has no such inputs (X501).
    `takes`: what the command reads, named when the file is empty (inputs.py).
    `per_expert`: a configuration's routed experts a layer each (an ONNX export's always are).
    `trust_remote_code`: run the code a configuration's auto_map names beside it (hf/).
    `tensor`: the layout's tensor-parallel ranks (hf/plans.py: a model without a plan takes one).
    `full_hash`: the SHA-256 of a file above 64 MiB too, not its sampled digest (digest.py).
    `vocabulary_multiple`: a configuration's vocabulary padded to a multiple of it (ONNX: as exported).
    `precision`: every floating parameter and activation in this training dtype (ir/precision.py;
    None: the model's own)."""
    if precision is not None and precision not in PRECISIONS:
        return None, [_precision_refused(spec, precision)]
    ir, found = _extracted(
        spec,
        batch=batch,
        input_shapes=input_shapes,
        input_values=input_values,
        file_hash=file_hash,
        full_hash=full_hash,
        vocabulary_multiple=vocabulary_multiple,
        per_expert=per_expert,
        trust_remote_code=trust_remote_code,
        takes=takes,
        tensor=tensor,
    )
    if ir is None:
        return None, found
    # each attention core marked, whichever reader built the IR (ir/core.py)
    return precision_cast(replace(ir, layers=tuple(core.mark(ir.layers))), precision), found


def _extracted(
    spec: str | Path,
    *,
    batch: int | None,
    input_shapes: Mapping[str, tuple[int, ...]] | None,
    input_values: Mapping[str, float] | None,
    file_hash: bool,
    full_hash: bool,
    vocabulary_multiple: int,
    per_expert: bool,
    trust_remote_code: bool,
    takes: str,
    tensor: int,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """extract_checked's IR in the model's own dtypes."""
    path = Path(spec)
    if _is_file(path) and (nothing := inputs.empty(path, takes)) is not None:
        return None, [nothing]
    config = _config_file(path) if _is_file(path) else None
    entry = zoo.get(str(spec)) if config is None and not _is_file(path) else None
    if config is not None or (entry is not None and entry.path.suffix == ".json"):
        if input_values:
            return None, [_values_refused(spec, input_values)]
        from modtrans import llm  # a transformer configuration: no onnx

        return llm.extract(
            config or (entry.path if entry else path),
            batch=batch,
            input_shapes=dict(input_shapes or {}),
            display_name=entry.name if entry else None,
            vocabulary_multiple=vocabulary_multiple,
            per_expert=per_expert,
            trust_remote_code=trust_remote_code,
            tensor=tensor,
        )
    if _is_file(path):
        # the hash starts before onnx is imported: it runs beside the import and the extraction
        digest = Digest(path, full=full_hash) if file_hash and _regular(path) else None
        from modtrans.extraction import extract as extract_file  # imports onnx: only when needed

        return extract_file(
            path,
            batch=batch,
            input_shapes=input_shapes,
            input_values=input_values,
            file_hash=file_hash,
            digest=digest,
        )
    from modtrans import fetch
    from modtrans.extraction import extract as extract_file

    entry = zoo.get(str(spec))
    fetched = fetch.cached(str(spec))
    if entry is None and fetched is not None:
        return extract_file(
            fetched,
            batch=batch,
            input_shapes=input_shapes,
            input_values=input_values,
            display_name=str(spec),
            file_hash=file_hash,
            full_hash=full_hash,
        )
    if entry is None:
        return None, [_unknown_model(str(spec))]
    shapes = tuple(sorted((input_shapes or {}).items()))
    ir, found = _built_in(entry.name, batch, shapes, tuple(sorted((input_values or {}).items())), file_hash)
    return ir, list(found)


@functools.lru_cache(maxsize=8)
def _built_in(
    name: str,
    batch: int | None,
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...],
    input_values: tuple[tuple[str, float], ...],
    file_hash: bool,
) -> tuple[ModelIR | None, tuple[Diagnostic, ...]]:
    """A built-in ONNX architecture's IR, once a process for each batch and input binding: its file
    ships with the package and never changes, and the IR is immutable (frozen dataclasses). A sweep's
    finalists, the language server and a script translating many layouts of one model read it once
    (GPT-2's extraction, shape inference and folding: about 0.15 s each time)."""
    from modtrans.extraction import extract as extract_file

    entry = zoo.get(name)
    assert entry is not None, name
    ir, found = extract_file(
        entry.path,
        batch=batch,
        input_shapes=dict(input_shapes) or None,
        input_values=dict(input_values) or None,
        display_name=entry.name,
        file_hash=file_hash,
        defaults=entry.defaults,
    )
    return ir, tuple(found)


_UNCOSTED = frozenset({"X510", "X514"})  # the codes of layers whose FLOPs are unknown


def _measured(path: Path, ir: ModelIR, model: cost.CostModel) -> tuple[cost.CostModel, list[str]]:
    """The model with the measured times of `path` projected onto each rank's share."""
    from modtrans.cost import measured
    from modtrans.fileio import read_binary, utf8

    data, problem = read_binary(path)
    if data is None:
        why = problem.message if problem else "unreadable"
        raise cost.CostError(f"cannot read --per-layer-times {path}: {why}")
    if data[:2] == b"\x1f\x8b":  # gzip: a profiler trace as TensorBoard's plugin writes it (.json.gz)
        data = _gunzip(data, path)
    text, reason = utf8(data)
    if text is None:
        raise cost.CostError(f"--per-layer-times {path}: {reason}")
    try:
        table, warnings = measured.parse(text, ir, model)
    except cost.CostError as error:
        raise cost.CostError(f"--per-layer-times {path}: {error}") from None
    return measured.Measured(model, {x.name: x for x in ir.layers}, table), warnings


def _gunzip(data: bytes, path: Path) -> bytes:
    import zlib

    from modtrans.limits import UNPACKED_BYTES

    unpack = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = unpack.decompress(data, UNPACKED_BYTES)
    except zlib.error as error:
        raise cost.CostError(f"--per-layer-times {path}: a broken gzip file ({error})") from None
    if unpack.unconsumed_tail:
        raise cost.CostError(f"--per-layer-times {path}: unpacks to more than {UNPACKED_BYTES >> 30} GiB")
    if not unpack.eof:
        raise cost.CostError(f"--per-layer-times {path}: a gzip file cut short")
    return out


def _unknown_model(spec: str) -> Diagnostic:
    """F001 for a MODEL that is no file, no built-in and not fetched, with the closest name."""
    import difflib

    from modtrans import fetch

    known = ", ".join(zoo.names())
    names = [*zoo.names(), *(item.name for item in fetch.remotes())]
    close = difflib.get_close_matches(spec, names, n=1, cutoff=0.75)
    hint = f"did you mean `{close[0]}`?" if close else "`modtrans zoo list` describes them"
    message = f"no such file, and not a built-in model (built-ins: {known})"
    return diagnostic("F001", message, path=spec, hint=hint)


def _ticks(output: formats.Output, options: Options, spec: str | Path) -> list[Diagnostic]:
    """X508 where the output's consumer reads compute times in a unit other than the ticks'."""
    reads, unit = output.ticks, options.cost.clock.unit
    if reads is None or unit is reads.unit:
        return []
    message = f"compute times are in {unit.value} ticks; {reads.why}"
    return [diagnostic("X508", message, path=str(spec), hint=reads.hint)]


def translate_checked(spec: str | Path, options: Options = Options()) -> Translation:
    layout = options.parallel.layout if options.parallel is not None else None
    ir, found = extract_checked(
        spec,
        batch=options.batch,
        input_shapes=options.input_shapes,
        input_values=options.input_values,
        full_hash=options.full_hash,
        vocabulary_multiple=layout.vocabulary_multiple if layout is not None else 1,
        per_expert=options.per_expert,
        trust_remote_code=options.trust_remote_code,
        tensor=layout.tp if layout is not None else 1,
        precision=options.precision,
    )
    if ir is not None:
        options, said = own_attention(options, ir, spec)
        found += said
    # A layer whose FLOPs are unknown would be a silent 0 (or one loop iteration) in the workload:
    # an error here, where extract only warns (an unknown dimension no cost needs stays a warning).
    if not options.allow_unknown:
        found = [replace(d, severity=Severity.ERROR) if d.code in _UNCOSTED else d for d in found]
    uncosted = [x.name for x in ir.layers if not x.flops_known] if ir is not None else []
    if ir is None or has_errors(found):
        return Translation(None, ir, tuple(found), {})
    try:
        model = cost.get(options.compute, options.cost)
        if options.per_layer_times is not None:
            model, warnings = _measured(options.per_layer_times, ir, model)
            found += [diagnostic("X515", w, path=str(options.per_layer_times)) for w in warnings]
    except cost.CostError as error:
        found.append(diagnostic("X501", str(error), path=str(spec)))
        return Translation(None, ir, tuple(found), {})
    output = formats.get(options.format, options.dialect)
    found += _ticks(output, options, spec)
    try:
        the_plan = plan(ir, model, options.parallel, params=options.params, dtype_bytes=options.dtype_bytes)
    except (StrategyError, cost.CostError) as error:
        found.append(diagnostic("X501", str(error), path=str(spec)))
        return Translation(None, ir, tuple(found), {})
    described = model.describe()
    capacity = described.get("memory_bytes")
    if isinstance(capacity, int):
        from modtrans.strategy.llm.memory import fits

        found += [diagnostic("X516", line, path=str(spec)) for line in fits(the_plan.memory, capacity)]
    workload: Workload | None = None
    if output.project is not None:  # traces are written from the plan: nothing to project
        try:
            reason = output.refuse(the_plan)
            if reason is not None:
                raise ProjectionError(reason)
            workload = output.project(the_plan, options.parallel)
        except ProjectionError as error:
            found.append(diagnostic("D310", str(error), path=str(spec)))
            return Translation(None, ir, tuple(found), {}, the_plan)
    metadata = _metadata(ir, the_plan, options, described, uncosted, workload)
    return Translation(workload, ir, tuple(found), metadata, the_plan)


def own_attention(options: Options, ir: ModelIR, spec: str | Path) -> tuple[Options, list[Diagnostic]]:
    """`options` with cost.OWN_ATTENTION settled for the model read: eager where its implementation
    runs an attention op by op (Heads.eager, hf/blocks.eager_only), said in an M807; else PyTorch's
    SDPA, transformers' default implementation where the class has it, whose first backend on a
    GPU is FlashAttention-2 (flash2; torch's default priority order: FLASH_ATTENTION,
    EFFICIENT_ATTENTION, MATH, CUDNN_ATTENTION, torch._C._get_sdp_priority_order at 2.13; the
    torchtitan convention, frameworks.py). Not modelled: on Hopper and Blackwell a CUDA build whose
    runtime cuDNN is above 9.15 puts CUDNN_ATTENTION first (aten/src/ATen/native/transformers/cuda/
    sdp_utils.cpp at pytorch 001f694, check_prefer_cudnn_attention, unless
    TORCH_CUDNN_SDPA_DEPRIORITIZED): such a run is --attention cudnn's. Where transformers hands
    SDPA a mask or a bias for some attention (a sliding window, T5's position bias: cost/gpu.py,
    masked), FlashAttention refuses it and the memory-efficient kernel runs that attention: sdpa,
    the choice per attention, said in an M808. Other options as given."""
    if options.cost.attention != cost.OWN_ATTENTION:
        return options, []
    attentions = [x.block.heads for x in ir.layers if x.block and x.block.heads]
    eager = any(h.eager for h in attentions)
    mask = next((h for h in attentions if masked(h)), None)
    kernel = "eager" if eager else "flash2" if mask is None else "sdpa"
    parallel = options.parallel
    if parallel.layout is not None:
        parallel = replace(parallel, layout=replace(parallel.layout, attention=kernel))
    settled = replace(options, cost=replace(options.cost, attention=kernel), parallel=parallel)
    if eager:
        said = (
            f"{ir.provenance.graph} has no SDPA in transformers, whose default then is eager "
            "attention: its attention is charged op by op, as the framework runs the model's own "
            "code (--attention to choose a kernel)"
        )
        return settled, [diagnostic("M807", said, path=str(spec))]
    if mask is None:
        return settled, []
    why = "a sliding window's mask" if mask.window is not None else "a per-head position bias"
    said = (
        f"{ir.provenance.graph}: transformers hands PyTorch's SDPA {why} (attn_mask), which its "
        "FlashAttention backend refuses: those attentions are charged as its memory-efficient kernel "
        "runs them, dense with the mask's bytes, the others as FlashAttention-2 (--attention to "
        "choose a kernel)"
    )
    return settled, [diagnostic("M808", said, path=str(spec))]


def _metadata(
    ir: ModelIR,
    the_plan: Plan,
    options: Options,
    compute: dict[str, Any],
    uncosted: list[str],
    workload: Workload | None,
) -> dict[str, Any]:
    """The provenance of a translation (its .meta.json, less what each format adds; sidecar.py).
    `parallel.policy` is the written workload's header policy, or the keyword preset's for its
    traces; a layout's traces have none (no policy built them)."""
    if workload is not None:
        policy: dict[str, str] = {"policy": workload.header.policy.value}
    else:
        policy = {"policy": options.parallel.policy.value} if the_plan.layout is None else {}
    return {
        "format": "modtrans-translation",
        "version": sidecar.VERSION,
        "tool": f"modtrans {__version__}",
        "model": document.provenance_dict(ir.provenance),
        "parallel": {
            **policy,
            "npus": options.parallel.npus,
            # the header's, or the option's where the header holds none (HYBRID_DATA_MODEL):
            # what `--like` gives a keyword preset's translation again (request._preset_like)
            "model_parallel_group": text_header(the_plan).model_parallel_group or options.parallel.group,
            "mesh": {a.purpose.value: a.size for a in the_plan.mesh.axes},
            **({"llm": sidecar.layout(the_plan.mesh, facts)} if (facts := the_plan.layout) else {}),
            **({"memory": sidecar.memory(the_plan.memory) or None} if the_plan.preset else {}),
        },
        # the consumer a text or JSON workload was written for: Chakra's text reads as ASTRA-sim
        # 1.0's in microseconds, which the file alone cannot say (request._recorded_like)
        **({"dialect": options.dialect.value} if workload is not None else {}),
        "params": options.params.value,
        "dtype_bytes": options.dtype_bytes,
        **({"precision": options.precision} if options.precision is not None else {}),
        "compute": compute,
        "layers": {"workload": len(the_plan.layers), "ir": len(ir.layers)},
        "folded": {owner: list(names) for owner, names in the_plan.folds},
        **({"unknown_flops": uncosted} if uncosted else {}),
    }


def extract(
    spec: str | Path,
    *,
    batch: int | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    input_values: Mapping[str, float] | None = None,
) -> ModelIR:
    """The IR of an ONNX file or built-in model; raises DiagnosticError when it cannot be read."""
    ir, found = extract_checked(spec, batch=batch, input_shapes=input_shapes, input_values=input_values)
    if ir is None or has_errors(found):
        raise DiagnosticError(found)
    return ir


@dataclass(frozen=True)
class Side:
    """One input of `diff`: a workload read from a file, or translated from a model."""

    workload: Workload | None
    diagnostics: tuple[Diagnostic, ...]
    line: Callable[[int], str | None]  # the input's text by line number (for showing diagnostics)


def reads_as_workload(spec: str) -> bool:
    """Whether `diff` and `inspect` read `spec` as a workload file (standard input, or a file
    neither named .onnx nor a transformers configuration) rather than a model to translate. An
    empty file is read as one too, refused there in words naming both (inputs.EITHER)."""
    if spec == "-":
        return True
    path = Path(spec)  # a transformers config.json is a model, not workload JSON
    if not _is_file(path):
        return False
    model = path.suffix.lower() == ".onnx" or _config_file(path) is not None
    return not model or inputs.is_empty(path)


def workload_or_model(spec: str, options: Options, *, cache: LineCache | None = None) -> Side:
    """A workload file (text or JSON) as read, or an ONNX file / built-in model translated.
    `cache`: shared by the two sides of a diff, so the second side's lines that the first has
    (where they were, or moved by lines inserted or deleted above them) are not parsed again:
    two versions of a file share most lines."""
    from modtrans.workload.load import load  # the text path never needs onnx

    path = Path(spec)
    if reads_as_workload(spec):
        loaded = load(path, cache=cache, takes=inputs.EITHER)
        binary = any(d.code == "F002" for d in loaded.result.diagnostics)  # an ONNX file named otherwise
        if not binary:
            return Side(loaded.result.workload, loaded.result.diagnostics, loaded.line)
    result = translate_checked(spec, options)
    return Side(result.workload, result.diagnostics, lambda _: None)
