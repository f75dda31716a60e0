"""What the language server answers, as plain data (no LSP types: server.py converts).

Positions here are 0-based lines and code points of the reader's lines (`split_lines`: the one
definition of a line); positions.py turns them into the client's lines and code units. Workload
diagnostics carry 1-based, end-exclusive spans (diagnostics.Span), converted in `to_range`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Diagnostic, Span
from modtrans.workload import dialects, vocabulary
from modtrans.workload.model import PHASE_WORDS, Dialect, Layer, Workload
from modtrans.workload.parse import ParseResult, parse, split_lines
from modtrans.workload.write import write

Range = tuple[int, int, int, int]  # start line, start character, end line, end character (0-based)

_TOKEN = re.compile(r"\S+")
_SUGGESTION = re.compile(r"did you mean `([^`]+)`")


def to_range(span: Span | None) -> Range:
    if span is None:
        return (0, 0, 0, 0)
    return (span.line - 1, span.column - 1, span.end_line - 1, span.end_column - 1)


def _lines(text: str) -> list[str]:
    return [content for content, _ in split_lines(text)]


def looks_like_workload(text: str) -> bool:
    """A cheap sniff, so a client that sends every .txt file gets nothing for other text: the first
    non-blank line starts with a parallelism keyword (or a near miss of one), or the second line is
    a layer count followed by a line of 12 or more fields."""
    lines = _lines(text[:65536].lstrip("\ufeff"))[:3]
    first = next((line.split() for line in lines if line.strip()), [])
    if not first:
        return False
    keyword = first[0]
    if keyword in Policy.__members__ or keyword.upper().startswith(("HYBRID", "DATA", "MODEL", "MICRO")):
        return True
    return len(lines) >= 3 and lines[1].strip().isdigit() and len(lines[2].split()) >= 12


# ------------------------------------------------------------------------------------------ hover

_FIELDS = tuple((c.title, c.meaning) for c in vocabulary.COLUMNS)
_TICKS = (
    "1 tick = 1 ns in ASTRA-sim 1.0 and SimAI; Chakra copies it into duration_micros, which "
    "ASTRA-sim 2.x multiplies by 1000"
)
_PHASE_OF_FIELD = {
    c.index: c.phase for c in vocabulary.COLUMNS if c.phase and c.unit != "ticks"
}  # type, size

KEYWORDS = {
    "DATA": "data parallelism: ASTRA-sim 1.0 issues only the weight-gradient collectives (all dims); "
    "forward and input-gradient comm fields are ignored; layer 0's input gradient is skipped",
    "MODEL": "model parallelism: forward and input-gradient collectives (not layer 0's), all dims; "
    "the weight-gradient collective is never issued",
    "HYBRID_DATA_MODEL": "model parallel within a package (dim 0: fwd, ig), data parallel between "
    "packages (dims 1..: wg)",
    "HYBRID_MODEL_DATA": "data parallel within a package (dim 0: wg), model parallel between packages "
    "(dims 1..: fwd, ig)",
    "HYBRID_TRANSFORMER": "fwd and ig collectives on the dims covering model_parallel_NPU_group NPUs, wg "
    "on the rest; Chakra's converter rejects it",
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD": "as HYBRID_TRANSFORMER, plus activation checkpointing: "
    "`checkpoints` and `checkpoint_initiates` list 0-based layers; "
    "Chakra's converter rejects it",
    "HYBRID_DLRM": "DLRM: forward ALLTOALL only where the fwd type is ALLTOALL; wg for every layer; the "
    "header's integer is the last bottom-MLP layer",
    "HYBRID_DLRM_ENHANCED": "as HYBRID_DLRM, but the wg step does not wait for the ig collective",
    "HYBRID_CUSTOMIZED": "each layer's 13th field chooses its own parallelism; Chakra rejects it",
    "MICRO": "a micro-benchmark: only the first layer's weight-gradient collective is simulated",
    "DISTRIBUTED_INFERENCE": "forward only; forward collective on all dims; Chakra rejects it",
}


@dataclass(frozen=True)
class Hover:
    markdown: str
    range: Range


def _tokens(line: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(line)]


def hover(text: str, line: int, character: int, result: ParseResult | None = None) -> Hover | None:
    lines = _lines(text)
    if not 0 <= line < len(lines):
        return None
    hit = next(
        ((i, s, e, tok) for i, (s, e, tok) in enumerate(_tokens(lines[line])) if s <= character < e), None
    )
    if hit is None:
        return None
    index, start, end, token = hit
    where = (line, start, line, end)
    result = result or parse(text)
    workload = result.workload
    if line == 0:
        if index == 0 and token.lstrip("\ufeff") in KEYWORDS:
            return Hover(f"**{token}**: {KEYWORDS[token.lstrip(chr(0xFEFF))]}", where)
        return Hover("header parameter (`modtrans validate --explain V240` for the keys)", where)
    if line == 1:
        present = len(workload.layers) if workload else "?"
        return Hover(f"**layer count**: the number of layer lines that follow (here {present})", where)
    layer = _layer_at(workload, line + 1)
    if index >= len(_FIELDS):
        return Hover("extra token: no consumer reads a 14th field", where)
    title, meaning = _FIELDS[index]
    if index == 0 and layer is not None:
        return Hover(_layer_totals(layer), where)
    text_md = f"**{title}**: {meaning}"
    if title.endswith("time"):
        text_md += f"; {_TICKS}"
    phase = _PHASE_OF_FIELD.get(index)
    if phase is not None and workload is not None and layer is not None:
        position = workload.layers.index(layer)
        issued = phase in dialects.astra_sim_phases(workload.header.policy, position, layer)
        chakra = phase in dialects.chakra_phases(workload.header.policy, position, layer)
        text_md += (
            f"\n\nUnder {workload.header.policy}: ASTRA-sim 1.0 {'issues' if issued else 'ignores'} "
            f"this {PHASE_WORDS[phase]} collective; Chakra's converter "
            f"{'emits' if chakra else 'does not emit'} it."
        )
    return Hover(text_md, where)


def _layer_at(workload: Workload | None, line_number: int) -> Layer | None:
    if workload is None:
        return None
    return next((x for x in workload.layers if x.span is not None and x.span.line == line_number), None)


def _layer_totals(layer: Layer) -> str:
    compute = sum(p.compute_time for _, p in layer.phases)
    comm = sum(p.comm_size for _, p in layer.phases if p.comm_type.moves_data)
    rows = " · ".join(
        f"{PHASE_WORDS[name]} {p.compute_time} ticks, {p.comm_type} {p.comm_size} B"
        for name, p in layer.phases
    )
    return (
        f"**{layer.name}**: {compute} compute ticks in all, {comm} bytes communicated, update "
        f"{layer.update_time} ticks\n\n{rows}"
    )


# ---------------------------------------------------------------------------------------- symbols


@dataclass(frozen=True)
class Symbol:
    name: str
    detail: str
    kind: str  # "header" or "layer"
    range: Range


def symbols(text: str, result: ParseResult | None = None) -> list[Symbol]:
    result = result or parse(text)
    workload = result.workload
    if workload is None:
        return []
    lines = _lines(text)
    header = Symbol(
        workload.header.policy.value, "header", "header", (0, 0, 0, len(lines[0]) if lines else 0)
    )
    out = [header]
    for layer in workload.layers:
        if layer.span is None:
            continue
        row = layer.span.line - 1
        width = len(lines[row]) if row < len(lines) else 0
        comm = sum(p.comm_size for _, p in layer.phases if p.comm_type.moves_data)
        out.append(Symbol(layer.name, f"{comm} B", "layer", (row, 0, row, width)))
    return out


# ------------------------------------------------------------------------------------- formatting


def formatted(text: str, dialect: Dialect | None, result: ParseResult | None = None) -> str | None:
    """The canonical text of the chosen dialect, or None when the buffer has errors or is canonical."""
    result = result or parse(text)
    if result.workload is None or any(d.severity == 1 for d in result.diagnostics):
        return None
    try:
        new = write(result.workload, dialect or result.workload.dialect or Dialect.ASTRA_SIM)
    except Exception:  # a dialect that cannot express the file (D310): nothing to format
        return None
    return None if new == text else new


# ----------------------------------------------------------------------------------- quick fixes


@dataclass(frozen=True)
class Fix:
    title: str
    code: str
    edits: tuple[tuple[Range, str], ...]
    preferred: bool = True


def fixes(text: str, diagnostic: Diagnostic) -> list[Fix]:
    """The fixes of a diagnostic that has one right fix (or a short list of them)."""
    lines = _lines(text)
    start_line, start_char, end_line, end_char = to_range(diagnostic.span)
    code = diagnostic.code
    if code == "V201" and diagnostic.hint and len(lines) > 1:
        count = diagnostic.hint.split()[-1]
        return [Fix(f"Set the layer count to {count}", code, (((1, 0, 1, len(lines[1])), count),))]
    suggestion = _SUGGESTION.search(diagnostic.hint or "")
    if code in ("V210", "P110", "V222", "P111") and suggestion and diagnostic.span is not None:
        word = suggestion.group(1)
        return [Fix(f"Replace with {word}", code, (((start_line, start_char, end_line, end_char), word),))]
    if code == "V220" and diagnostic.span is not None:
        line = lines[start_line]
        cut = len(line[:start_char].rstrip())
        return [Fix("Remove the 13th field", code, (((start_line, cut, start_line, len(line)), ""),))]
    if code == "V221" and diagnostic.span is not None:
        row = diagnostic.span.line - 1
        end = len(lines[row].rstrip())
        return [
            Fix(
                f"Append {p}",
                code,
                (((row, end, row, len(lines[row])), f" {p}"),),
                preferred=p is Policy.DATA,
            )
            for p in LAYER_POLICIES
        ]
    if code in ("V250", "D304") and diagnostic.span is not None:
        first, last = diagnostic.span.line - 1, diagnostic.span.end_line - 1
        return [Fix("Delete the blank lines", code, (((first, 0, last + 1, 0), ""),))]
    if code == "V251":
        return [Fix("Remove the byte order mark", code, (((0, 0, 0, 1), ""),))]
    return []


# ------------------------------------------------------------------------------------- completion

LAYER_POLICIES = (Policy.DATA, Policy.MODEL, Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA)
"""The per-layer parallelisms of HYBRID_CUSTOMIZED's 13th field that mean something (V221's hint;
V223: a transformer keyword there has no group)."""

_COMM_FIELDS = vocabulary.COMMS  # the comm-type fields of a layer line (0-based token index)
_POLICY_FIELD = vocabulary.POLICY


@dataclass(frozen=True)
class Completion:
    label: str
    kind: str  # "keyword" (line 1's parallelism), "key" (a header key), "comm" or "policy" (layer fields)
    detail: str
    range: Range  # the token under the cursor, which the item replaces


def policies(dialect: Dialect) -> list[Policy]:
    """The parallelism keywords `dialect` reads: Chakra's converter rejects the others (D301)."""
    if dialect is Dialect.CHAKRA:
        return [p for p in Policy if p in dialects.CHAKRA_POLICIES]
    return list(Policy)


def header_keys(policy: Policy, dialect: Dialect) -> list[str]:
    """The header keys `dialect` reads after `policy`, in the reader's order: the transformer
    group (V240) and checkpoint lists (V240, FWD_IN_BCKWD) for every consumer that runs the
    keyword; SimAI's ep/pp/vpp/ga/all_gpus/pp_comm under a transformer keyword (D307) and its
    keyed DLRM layer (D302) for SimAI alone. Chakra reads none (its keywords take no key)."""
    return [k.key for k in vocabulary.HEADER_KEYS if dialect in k.dialects and policy in k.keywords]


def comm_types(dialect: Dialect) -> list[CommType]:
    """The comm types that mean what they say to `dialect`: the portable ones everywhere, SimAI's
    expert-parallel groups (_EP, _DP_EP) for SimAI only. BROADCAST (no collective anywhere) and
    ALLREDUCEALLTOALL (ASTRA-sim panics, SimAI reads ALLREDUCE) are never offered (D303)."""
    return [
        c
        for c in CommType
        if c.is_portable or (dialect is Dialect.SIMAI and c.is_simai_only and c.moves_data)
    ]


def _comm_detail(comm: CommType) -> str:
    if not comm.moves_data:
        return "no collective"
    if comm.value.endswith("_DP_EP"):
        return "SimAI: over the data-parallel x expert-parallel group"
    if comm.value.endswith("_EP"):
        return "SimAI: over the expert-parallel group"
    return "collective over the phase's group"


def completions(
    text: str,
    line: int,
    character: int,
    dialect: Dialect | None = None,
    result: ParseResult | None = None,
) -> list[Completion]:
    """What may be typed at (line, character), as the file's consumer reads it: parallelism
    keywords at the start of line 1, header keys after it, comm types in a layer's three comm
    fields and the per-layer parallelism in the 13th under HYBRID_CUSTOMIZED; nothing elsewhere
    (names, numbers, the count). The dialect is `dialect` when the client chose one, else the
    file's (detected as `validate` does), else ASTRA-sim. The client filters by what is typed."""
    lines = _lines(text) or [""]
    if text.endswith("\n"):
        lines.append("")  # the empty line after the final break, where typing goes on
    if not 0 <= line < len(lines):
        return []
    content = lines[line]
    begin = len(content) - len(content.lstrip("\ufeff")) if line == 0 else 0
    character = max(begin, min(character, len(content)))
    start = end = character
    while start > begin and not content[start - 1].isspace():
        start -= 1
    while end < len(content) and not content[end].isspace():
        end += 1
    before = content[begin:start].split()
    where = (line, start, line, end)
    if line == 0 and not before:
        return [
            Completion(p.value, "keyword", KEYWORDS.get(p.value, ""), where)
            for p in policies(dialect or Dialect.ASTRA_SIM)
        ]
    if line == 1:
        return []
    result = result or parse(text)
    workload = result.workload
    chosen = dialect or (workload and (workload.dialect or dialects.detect(workload))) or Dialect.ASTRA_SIM
    if line == 0:
        policy = Policy.__members__.get(before[0])
        if policy is None or before[-1].endswith(":"):
            return []  # an unknown keyword, or a key whose value comes next
        present = {token.rstrip(":") for token in content.split()}  # SimAI also wrote `pp_comm 5`
        return [
            Completion(k, "key", vocabulary.KEY[k].detail, where)
            for k in header_keys(policy, chosen)
            if k[:-1] not in present
        ]
    index = len(before)
    if index in _COMM_FIELDS:
        return [Completion(c.value, "comm", _comm_detail(c), where) for c in comm_types(chosen)]
    customized = workload is not None and workload.header.policy is Policy.HYBRID_CUSTOMIZED
    if index == _POLICY_FIELD and customized:
        return [Completion(p.value, "policy", KEYWORDS[p.value], where) for p in LAYER_POLICIES]
    return []
