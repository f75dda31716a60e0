"""Semantic checks on a parsed workload, each registered under its stable code.

A check is a generator over (workload, dialect) yielding Diagnostics. `dialect` is the consumer
the file is checked for: the one the user named, else the one detected from the file. Checks
that only concern one consumer say so with `dialects=`.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Diagnostic, Severity, Span, diagnostic
from modtrans.workload import numbers, vocabulary
from modtrans.workload.dialects import CHAKRA_POLICIES, chakra_phases, phase_kinds, stray_policy
from modtrans.workload.model import PHASE_WORDS, Dialect, Header, Layer, Workload, layer_tokens

CheckFn = Callable[[Workload, Dialect], Iterator[Diagnostic]]


@dataclass(frozen=True, slots=True)
class Check:
    code: str
    function: CheckFn
    dialects: frozenset[Dialect]


REGISTRY: dict[str, Check] = {}


def check(code: str, *, dialects: tuple[Dialect, ...] = tuple(Dialect)) -> Callable[[CheckFn], CheckFn]:
    """Register a check under `code` (one function may yield only that code)."""

    def register(function: CheckFn) -> CheckFn:
        REGISTRY[code] = Check(code, function, frozenset(dialects))
        return function

    return register


def run_checks(
    workload: Workload, dialect: Dialect, *, path: str | None = None, ignore: frozenset[str] = frozenset()
) -> list[Diagnostic]:
    """Run every registered check that applies to `dialect`, in code order."""
    found: list[Diagnostic] = []
    for code in sorted(REGISTRY):
        entry = REGISTRY[code]
        if code in ignore or dialect not in entry.dialects:
            continue
        for d in entry.function(workload, dialect):
            found.append(d if d.path is not None else _with_path(d, path))
    return found


def _with_path(d: Diagnostic, path: str | None) -> Diagnostic:
    return Diagnostic(d.code, d.severity, d.message, path, d.span, d.hint)


def _field_span(layer: Layer, index: int) -> Span | None:
    """Span of field `index` of a parsed layer line (from its layout), else the whole line."""
    if layer.span is None:
        return None
    layout = layer.layout
    if layout is None:
        located = layer.field_span(index) if layer.field_span is not None else None
        return located or layer.span
    seps = layout.separators
    tokens = layout.tokens or tuple(layer_tokens(layer))
    if index >= len(tokens):
        return layer.span
    column = 1 + sum(len(s) for s in seps[: index + 1]) + sum(len(t) for t in tokens[:index])
    return Span(layer.span.line, column, layer.span.line, column + len(tokens[index]))


_PHASE_FIELDS = {phase: columns[1:] for phase, columns in vocabulary.PHASE_COLUMNS.items()}  # type, size


# -- the file's structure --------------------------------------------------------------------------


@check("V201")
def layer_count_matches(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    layout = workload.layout
    if layout is None or layout.declared_count == layout.layer_lines:
        return
    declared, present = layout.declared_count, layout.layer_lines
    span = None
    if workload.header.span is not None:
        line = workload.header.span.line + 1 + len(layout.count.before)
        width = len(layout.count.tokens[0]) if layout.count.tokens else len(str(declared))
        span = Span.at(line, 1 + len(layout.count.separators[0]), width)
    effect = (
        "build the missing layers from uninitialised memory"
        if declared > present
        else f"silently ignore the last {present - declared} lines"
    )
    severity = Severity.WARNING if dialect is Dialect.CHAKRA else None
    yield diagnostic(
        "V201",
        f"line 2 declares {declared} layers but {present} layer lines follow; "
        f"ASTRA-sim and SimAI read {declared} and {effect}",
        span=span,
        hint=f"write {present}",
        severity=severity,
    )


# -- layers ------------------------------------------------------------------------------------------


_MOVES = frozenset(c for c in CommType if c.moves_data)


@check("V211")
def none_with_size(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    none = CommType.NONE
    if (none, False) not in phase_kinds(workload.layers):
        return
    for layer in workload.layers:
        f, i, w = layer.fwd, layer.input_grad, layer.weight_grad  # the common case in one test
        if not (
            (f.comm_size and f.comm_type is none)
            or (i.comm_size and i.comm_type is none)
            or (w.comm_size and w.comm_type is none)
        ):
            continue
        for phase_name, phase in layer.phases:
            if phase.comm_type is CommType.NONE and phase.comm_size != 0:
                yield diagnostic(
                    "V211",
                    f"{PHASE_WORDS[phase_name]} comm type is NONE but its size is {phase.comm_size} bytes",
                    span=_field_span(layer, _PHASE_FIELDS[phase_name][1]),
                )


@check("V212")
def collective_of_size_zero(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    moves = _MOVES
    if not any(zero and kind in moves for kind, zero in phase_kinds(workload.layers)):
        return
    for layer in workload.layers:
        f, i, w = layer.fwd, layer.input_grad, layer.weight_grad  # the common case in one test
        if not (
            (not f.comm_size and f.comm_type in moves)
            or (not i.comm_size and i.comm_type in moves)
            or (not w.comm_size and w.comm_type in moves)
        ):
            continue
        for phase_name, phase in layer.phases:
            if phase.comm_type.moves_data and phase.comm_size == 0:
                yield diagnostic(
                    "V212",
                    f"{PHASE_WORDS[phase_name]} {phase.comm_type} moves 0 bytes",
                    span=_field_span(layer, _PHASE_FIELDS[phase_name][1]),
                    hint="write `NONE 0` if there is no collective",
                )


@check("V220")
def policy_field_without_customized(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    if workload.header.policy is Policy.HYBRID_CUSTOMIZED:
        return
    for layer in workload.layers:
        if layer.policy is not None:
            message, hint = stray_policy(layer.name, layer.policy, workload.header.policy)
            yield diagnostic("V220", message, span=_field_span(layer, 12), hint=hint)


@check("V221")
def policy_field_missing(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    if workload.header.policy is not Policy.HYBRID_CUSTOMIZED:
        return
    for layer in workload.layers:
        if layer.policy is None:
            span = layer.span and Span.at(layer.span.line, layer.span.end_column)
            yield diagnostic(
                "V221",
                f"layer `{layer.name}` has no 13th field; HYBRID_CUSTOMIZED needs each layer's parallelism",
                span=span,
                hint="append DATA, MODEL, HYBRID_DATA_MODEL or HYBRID_MODEL_DATA",
            )


@check("V223")
def meaningless_layer_policy(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    if workload.header.policy is not Policy.HYBRID_CUSTOMIZED:
        return
    for layer in workload.layers:
        if layer.policy is not None and layer.policy.is_transformer:
            yield diagnostic(
                "V223",
                f"per-layer {layer.policy} has no model-parallel group under HYBRID_CUSTOMIZED",
                span=_field_span(layer, 12),
            )


@check("V230")
def duplicate_names(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    """One finding per repeated name, at its second occurrence (SimAI repeats names 1344 times)."""
    names = list(map(operator.attrgetter("name"), workload.layers))
    if len(set(names)) == len(names):
        return  # the usual file, in one pass in C
    seen: dict[str, Layer] = {}
    reported: set[str] = set()
    counts = Counter(names)
    for layer in workload.layers:
        first = seen.setdefault(layer.name, layer)
        if first is layer or layer.name in reported:
            continue
        reported.add(layer.name)
        at = f" (first on line {first.span.line})" if first.span else ""
        yield diagnostic(
            "V230",
            f"layer name `{layer.name}` is used {counts[layer.name]} times{at}",
            span=_field_span(layer, 0),
        )


# -- header ------------------------------------------------------------------------------------------


def _lists(header: Header) -> list[tuple[str, tuple[int, ...] | None]]:
    """(`checkpoints:`, its indices), (`checkpoint_initiates:`, ...): each list key and its value."""
    return [(key.key, getattr(header, key.field)) for key in vocabulary.LISTS]


@check("V240")
def header_parameters_present(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    header = workload.header
    span = header.span
    if header.policy.is_transformer and header.model_parallel_group is None:
        yield diagnostic(
            "V240",
            f"{header.policy} has no `{vocabulary.GROUP.key}`; ASTRA-sim "
            "1.0 (since 2020-10-29) then reads the next header token as the group "
            "size and misparses the file",
            span=span,
            hint=f"{header.policy} {vocabulary.GROUP.key} <g> ...",
        )
    if header.policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        for key, value in _lists(header):
            if value is None:
                yield diagnostic(
                    "V240",
                    f"{header.policy} has no `{key}` list",
                    span=span,
                    hint=f"write `{key} 0` for none",
                )
    if header.policy.is_dlrm and header.dlrm_last_bottom_layer is None:
        yield diagnostic(
            "V240",
            f"{header.policy} needs the index of the last bottom-MLP layer",
            span=span,
            hint=f"{header.policy} <index>  (0-based)",
        )


@check("V242")
def header_parameters_consistent(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    header, n = workload.header, len(workload.layers)
    span = header.span
    for key, indices in _lists(header):
        for index in indices or ():
            if not 0 <= index < n:
                yield diagnostic("V242", f"`{key}` index {index} is outside the layers 0..{n - 1}", span=span)
    last = header.dlrm_last_bottom_layer
    if last is not None and not 0 <= last < n:
        yield diagnostic("V242", f"last bottom-MLP layer {last} is outside the layers 0..{n - 1}", span=span)
    group = header.model_parallel_group
    if group is not None and group < 1:
        yield diagnostic("V242", f"model-parallel group {group} must be at least 1", span=span)


# -- dialect compatibility ---------------------------------------------------------------------------


@check("D301", dialects=(Dialect.CHAKRA,))
def chakra_keyword(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    policy = workload.header.policy
    if policy not in CHAKRA_POLICIES:
        yield diagnostic(
            "D301",
            f'Chakra\'s text converter rejects {policy} ("Unsupported parallelism type")',
            span=workload.header.span,
        )


@check("D302")
def header_form(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    header, span = workload.header, workload.header.span
    if dialect is Dialect.ASTRA_SIM and header.simai_parameters:
        keys = " ".join(f"{k}:" for k in header.simai_parameters)
        yield diagnostic(
            "D302",
            f"ASTRA-sim 1.0 reads header parameters by position and misreads SimAI's {keys}",
            span=span,
            hint="check with --dialect simai, or drop them",
        )
    layout = header.layout
    keyed_dlrm = layout is not None and vocabulary.DLRM.key in layout.line.tokens
    if header.policy.is_dlrm and header.dlrm_last_bottom_layer is not None:
        if dialect is Dialect.SIMAI and not keyed_dlrm:
            yield diagnostic(
                "D302",
                "SimAI reads the last bottom layer only from "
                "`DLRM_LAST_BOTTOM_LAYER: <n>`; `HYBRID_DLRM <n>` leaves it unset",
                span=span,
            )
        if dialect is not Dialect.SIMAI and keyed_dlrm:
            yield diagnostic(
                "D302",
                "ASTRA-sim 1.0 and Chakra read `HYBRID_DLRM <n>`, not `DLRM_LAST_BOTTOM_LAYER: <n>`",
                span=span,
            )


@check("D303")
def changed_comm_types(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    policy = workload.header.policy
    chakra = dialect is Dialect.CHAKRA
    odd = frozenset(c for c in CommType if _changed(dialect, c, False, 0) is not None)
    if not chakra and not any(kind in odd for kind, _ in phase_kinds(workload.layers)):
        return
    for index, layer in enumerate(workload.layers):
        if not chakra and not (
            layer.fwd.comm_type in odd
            or layer.input_grad.comm_type in odd
            or layer.weight_grad.comm_type in odd
        ):
            continue  # nothing this consumer reads otherwise (checked once per comm type above)
        emitted = chakra_phases(policy, index, layer) if chakra else ()
        for phase_name, phase in layer.phases:
            message = _changed(dialect, phase.comm_type, phase_name in emitted, phase.comm_size)
            if message:
                yield diagnostic(
                    "D303",
                    f"{PHASE_WORDS[phase_name]} {phase.comm_type}: {message}",
                    span=_field_span(layer, _PHASE_FIELDS[phase_name][0]),
                )


def _changed(dialect: Dialect, comm: CommType, emitted: bool, size: int) -> str | None:
    if dialect is Dialect.CHAKRA:
        if (emitted and not comm.is_portable) or (emitted and comm is CommType.NONE):
            return f"Chakra emits an ALL_REDUCE of {size} bytes here"
        return None
    if comm is CommType.BROADCAST:
        return "read as no collective (ASTRA-sim and SimAI have no broadcast)"
    if comm is CommType.ALLREDUCEALLTOALL:
        if dialect is Dialect.SIMAI:
            return "SimAI reads it as ALLREDUCE"
        return 'ASTRA-sim 1.0 panics ("no known collective operation") when it issues it'
    if dialect is Dialect.ASTRA_SIM and comm.is_simai_only:
        return "ASTRA-sim 1.0 reads it as no collective (SimAI-only group suffix)"
    return None


@check("D304", dialects=(Dialect.CHAKRA,))
def chakra_blank_lines(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    layout = workload.layout
    if layout is None:
        return
    blanks = [
        (layer.span.line - len(layer.layout.before), len(layer.layout.before))
        for layer in workload.layers
        if layer.layout and layer.layout.before and layer.span
    ]
    if layout.trailing and workload.layers and workload.layers[-1].span:
        blanks.append((workload.layers[-1].span.line + 1, len(layout.trailing)))
    for line, count in blanks:
        yield diagnostic(
            "D304",
            f"{count} blank line{'s' * (count > 1)}: Chakra's converter raises "
            '"Cannot parse the following layer"',
            span=Span.at(line, 1),
            hint="delete the blank lines",
        )


@check("D305", dialects=(Dialect.ASTRA_SIM, Dialect.SIMAI))
def micro_first_layer_only(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    if workload.header.policy is Policy.MICRO and len(workload.layers) > 1:
        yield diagnostic(
            "D305",
            f"MICRO with {len(workload.layers)} layers: ASTRA-sim 1.0 and SimAI simulate only the first",
            span=workload.header.span,
            severity=Severity.INFO,
        )


@check("D306", dialects=(Dialect.SIMAI,))
def simai_checkpoint_lists(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    header = workload.header
    for key, indices in _lists(header):
        if indices is not None and len(indices) > 1:
            yield diagnostic(
                "D306",
                f"SimAI records only the first of the {len(indices)} `{key}` indices",
                span=header.span,
            )


@check("D307", dialects=(Dialect.SIMAI,))
def simai_header_keys(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    header = workload.header
    if not header.policy.is_transformer:
        return
    missing = [k.key for k in vocabulary.HEADER_KEYS if k.required and getattr(header, k.field) is None]
    if missing:
        yield diagnostic(
            "D307",
            f'SimAI leaves {", ".join(missing)} uninitialised and warns "Input workload format mismatch"',
            span=header.span,
            hint="regenerate with a current AICB, or add the keys",
        )


@check("D314", dialects=(Dialect.SIMAI,))
def simai_keyword(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    header = workload.header
    if header.policy.is_transformer:
        return
    yield diagnostic(
        "D314",
        f"SimAI reads its header's keys only under the transformer keywords: under {header.policy} "
        "its analytical report divides by an uninitialised tensor x pipeline size (Layer::report) "
        "and aborts (SIGFPE) after the pass",
        span=header.span,
        hint="write this keyword in the ASTRA-sim 1.0 dialect (--dialect astra-sim)",
    )


@check("D311", dialects=(Dialect.SIMAI,))
def simai_repeated_gradient_reduction(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    ga = workload.header.ga or 1
    if ga < 2:
        return
    copies: dict[tuple[str, CommType, int], list[Layer]] = {}
    for layer in workload.layers:
        wg = layer.weight_grad
        if wg.comm_type in (CommType.ALLREDUCE, CommType.ALLREDUCE_DP_EP) and wg.comm_size > 0:
            key = (_MICRO_COPY.sub("", layer.name), wg.comm_type, wg.comm_size)
            copies.setdefault(key, []).append(layer)
    repeated = [(key, layers) for key, layers in copies.items() if len(layers) >= ga]
    if repeated:
        (name, comm, size), layers = repeated[0]
        more = f" ({len(repeated) - 1} more layer(s) like it)" if len(repeated) > 1 else ""
        yield diagnostic(
            "D311",
            f"the data-parallel {comm} of {name} ({size:,} B) is in {len(layers)} micro-batch copies "
            f"(ga: {ga}); SimAI runs every line once, so it moves {len(layers)}x the bytes the "
            f"framework sends once per iteration (right only for DeepSpeed's ZeRO-2, which reduces "
            f"every micro-batch){more}",
            span=_field_span(layers[1], _PHASE_FIELDS["weight_grad"][0]),
            hint="keep the weight-gradient all-reduce in one copy (modtrans translate writes it so)",
        )


@check("D312", dialects=(Dialect.SIMAI,))
def simai_parameter_gather_in_forward(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    if not workload.header.policy.is_transformer:
        return
    for layer in workload.layers:
        pair = (
            layer.fwd.comm_type is CommType.ALLGATHER
            and layer.weight_grad.comm_type is CommType.REDUCESCATTER
        )
        if pair and layer.fwd.comm_size > 0:
            yield diagnostic(
                "D312",
                f"{layer.name}: a forward ALLGATHER of {layer.fwd.comm_size:,} B beside a weight-gradient "
                "REDUCESCATTER (the distributed optimizer's parameter gather): SimAI runs a forward "
                "collective over the tensor-parallel group, not the data-parallel one",
                span=_field_span(layer, _PHASE_FIELDS["fwd"][0]),
                hint="move the ALLGATHER to the weight-gradient column of a line of its own",
            )


_MICRO_COPY = re.compile(r"\.mb\d+$")  # modtrans's copy suffix; AICB repeats the names as they are


@check("D313", dialects=(Dialect.ASTRA_SIM,))
def astra_sim_update_after_a_collective(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    for layer in workload.layers:
        if layer.update_time == 0 and any(p.comm_type is not CommType.NONE for _, p in layer.phases):
            yield diagnostic(
                "D313",
                f"layer {layer.name} has a collective and an update time of 0: ASTRA-sim 1.0 aborts",
                span=_field_span(layer, 11),
                hint="write 1 (a tick): the end of each collective is an event that many ticks later",
            )


@check("D315", dialects=(Dialect.ASTRA_SIM,))
def astra_sim_int_size(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    found = [
        (layer, name, phase)
        for layer in workload.layers
        for name, phase in layer.phases
        if phase.comm_type is not CommType.NONE and phase.comm_size > numbers.INT32_MAX
    ]
    if not found:
        return
    layer, name, phase = found[0]
    more = f" ({len(found) - 1} more like it)" if len(found) > 1 else ""
    yield diagnostic(
        "D315",
        f"{layer.name}: a {PHASE_WORDS[name]} {phase.comm_type} of {phase.comm_size:,} B, over "
        f"2^31 - 1: ASTRA-sim 1.0 holds a collective's size in a 32-bit int, which wraps it to "
        f"{_wrapped(phase.comm_size):,} B (below 0 the run aborts){more}",
        span=_field_span(layer, _PHASE_FIELDS[name][1]),
        hint="write Chakra traces (--format chakra-et) or --dialect simai, which hold the size whole",
    )


def _wrapped(size: int) -> int:
    """A size as a C++ int holds it (two's complement, 32 bits)."""
    return (size + 2**31) % 2**32 - 2**31


@check("D308", dialects=(Dialect.CHAKRA,))
def chakra_int64(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    for layer in workload.layers:
        for phase_name, phase in layer.phases:
            if phase.comm_size > numbers.INT64_MAX:
                yield diagnostic(
                    "D308",
                    f"{PHASE_WORDS[phase_name]} comm size {phase.comm_size} exceeds Chakra's int64",
                    span=_field_span(layer, _PHASE_FIELDS[phase_name][1]),
                )


@check("D309", dialects=(Dialect.CHAKRA,))
def chakra_ignores_count(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    layout = workload.layout
    if layout is not None and layout.declared_count != layout.layer_lines:
        yield diagnostic(
            "D309",
            f"Chakra ignores the declared {layout.declared_count} and converts "
            f"all {layout.layer_lines} layer lines",
            span=workload.header.span,
        )
