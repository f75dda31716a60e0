"""Writer: Workload -> text, either as it was read (lossless) or canonical for one dialect.

Lossless: a parsed workload is written back byte for byte; an edited one keeps the spacing of
the lines it did not change. Canonical (workload-format.md section 14, "Writing"): ASCII, LF,
final newline, fields joined by one tab, no trailing blanks, no blank lines, the exact count,
header parameters in the dialect's own form. A workload the dialect cannot express raises
DiagnosticError (code D310) instead of being written wrong.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from modtrans.diagnostics import Diagnostic, DiagnosticError, diagnostic
from modtrans.workload import numbers, vocabulary
from modtrans.workload.dialects import CHAKRA_POLICIES, detect
from modtrans.workload.model import Dialect, Header, LineLayout, Workload, layer_tokens


def write(workload: Workload, dialect: Dialect | str | None = None) -> str:
    """The text of `workload`: lossless when no dialect is given, else canonical for `dialect`."""
    return "".join(iter_text(workload, dialect))


def iter_text(workload: Workload, dialect: Dialect | str | None = None) -> Iterator[str]:
    """Generate the text line by line (each piece ends with its line ending)."""
    if dialect is None and workload.layout is not None:
        yield from _lossless(workload)
        return
    target = Dialect(dialect) if dialect is not None else (workload.dialect or detect(workload))
    problems = list(unwritable(workload, target))
    if problems:
        raise DiagnosticError(problems)
    yield " ".join(header_tokens(workload.header, target)) + "\n"
    yield f"{len(workload.layers)}\n"
    # A projection's micro-batch copies hold the same Phase objects under new names: each line's
    # fields after its name are spelled once per distinct phases (by identity: the workload holds
    # them while the text is made) and update, reserved and policy fields.
    tails: dict[tuple[object, ...], str] = {}
    for layer in workload.layers:
        key = (id(layer.fwd), id(layer.input_grad), id(layer.weight_grad), layer.update_time, layer.reserved)
        tail = tails.get(key) if layer.policy is None else None
        if tail is None:
            tail = "\t".join(layer_tokens(layer)[1:])
            if layer.policy is None:
                tails[key] = tail
        yield f"{layer.name}\t{tail}\n"


def header_tokens(header: Header, dialect: Dialect) -> list[str]:
    """Line 1 as canonical tokens for `dialect` (1.0 positional forms, or SimAI keys)."""
    tokens = [header.policy.value]
    for key in vocabulary.WRITTEN:
        value = getattr(header, key.field)
        if value is None:
            continue
        if key is vocabulary.DLRM and dialect is not Dialect.SIMAI:
            tokens.append(str(value))  # ASTRA-sim 1.0 and Chakra: `HYBRID_DLRM <n>`
        elif key.kind == "list":
            tokens += [key.key, str(len(value)), *map(str, value)]
        else:
            tokens += [key.key, str(value)]
    if not header.extra:
        return tokens
    return _with_extra(tokens, header)


def _with_extra(tokens: list[str], header: Header) -> list[str]:
    """Place the unknown tokens where the reader gives them back as unknown tokens: before the
    first checkpoint list (after one, the list takes them), else right after the keyword (where
    a keyword or number is read as such), else at the end; the first placement that reads back
    as this header."""
    from modtrans.workload.parse import parse  # the reader imports this module

    lists = [i for i, t in enumerate(tokens) if t in _LIST_KEYS]
    places = [lists[0] if lists else len(tokens), 1, len(tokens)]
    candidates = [[*tokens[:at], *header.extra, *tokens[at:]] for at in places]
    for candidate in candidates:
        back = parse(" ".join(candidate) + "\n0\n").workload
        if back is not None and back.header == header:
            return candidate
    return candidates[0]  # the JSON reader and `fmt` refuse what no placement can say


_LIST_KEYS = frozenset(k.key for k in vocabulary.LISTS)


def unwritable(workload: Workload, dialect: Dialect) -> Iterator[Diagnostic]:
    """What `dialect` has no way to write (D310), without positions: the model is the subject."""
    header = workload.header
    if dialect is Dialect.SIMAI:
        return
    name = "ASTRA-sim 1.0" if dialect is Dialect.ASTRA_SIM else "Chakra"
    if dialect is Dialect.CHAKRA and header.policy not in CHAKRA_POLICIES:
        yield diagnostic(
            "D310",
            f"--dialect chakra: Chakra's text converter rejects {header.policy}",
            hint="write Chakra traces (--format chakra-et), which hold any keyword's plan, or "
            "--dialect astra-sim",
        )
    if header.simai_parameters:
        keys = ", ".join(f"{k}:" for k in header.simai_parameters)
        yield diagnostic(
            "D310",
            f"{name} cannot read the SimAI header parameters {keys}",
            hint="write with --dialect simai",
        )
    if header.extra:
        yield diagnostic(
            "D310",
            f"{name} reads header tokens by position; the unknown tokens "
            f"{' '.join(header.extra)!r} would shift them",
        )
    simai_types = sorted(
        {p.comm_type.value for layer in workload.layers for _, p in layer.phases if p.comm_type.is_simai_only}
    )
    if simai_types:
        yield diagnostic(
            "D310",
            f"{name} has no comm type {', '.join(simai_types)}",
            hint="write with --dialect simai, or use NONE/ALLREDUCE/ALLGATHER/REDUCESCATTER/ALLTOALL",
        )


# -- lossless ---------------------------------------------------------------------------------------


def _lossless(workload: Workload) -> Iterator[str]:
    file = workload.layout
    assert file is not None
    header = workload.header
    newline = header.layout.line.eol if header.layout and header.layout.line.eol else "\n"
    lines: list[tuple[Sequence[str], LineLayout | None]] = []
    if header.layout is not None and header.layout.meant == header:
        lines.append((header.layout.line.tokens, header.layout.line))
    else:
        target = workload.dialect or detect(workload)
        lines.append((header_tokens(header, target), header.layout.line if header.layout else None))
    same_length = file.layer_lines == len(workload.layers)
    lines.append(([str(file.declared_count if same_length else len(workload.layers))], file.count))
    lines += [(layer_tokens(layer), layer.layout) for layer in workload.layers]

    if file.bom:
        yield "\ufeff"
    last = len(lines) - 1
    for index, (tokens, layout) in enumerate(lines):
        if index == last and not file.trailing:
            eol = file.final_eol  # keep "no newline at end of file" when the last layer changes
        else:
            eol = (layout.eol if layout is not None else "") or newline
        if layout is None:
            yield "\t".join(tokens) + eol
            continue
        yield from layout.before
        yield _spelled(tokens, layout) + eol
    yield from file.trailing


def _spelled(canonical: Sequence[str], layout: LineLayout) -> str:
    seps = layout.separators
    if len(seps) != len(canonical) + 1:
        return "\t".join(canonical)
    raw = layout.tokens
    if len(raw) == len(canonical):
        canonical = [r if _same(r, c) else c for r, c in zip(raw, canonical, strict=True)]
    parts = [seps[0]]
    for token, sep in zip(canonical, seps[1:], strict=True):
        parts += (token, sep)
    return "".join(parts)


def _same(raw: str, canonical: str) -> bool:
    """Whether the token as read (`007`, `+7`, 5,000 zeros and a 7) spells the canonical number:
    read through numbers.integer, as the parser read it (int() refuses over 4,300 digits)."""
    if raw == canonical:
        return True
    if numbers.INTEGER.fullmatch(raw) and numbers.INTEGER.fullmatch(canonical):
        value = numbers.integer(raw)
        return value is not None and value == numbers.integer(canonical)
    try:  # `1_000`, ` 7`: what Chakra's int() reads
        return int(raw) == int(canonical)
    except ValueError:
        return False
