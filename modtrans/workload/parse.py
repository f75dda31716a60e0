"""Reader: workload text -> ParseResult(workload, diagnostics). The only module that imports lark
(only for a line the fast paths do not read: most files never need it).

Each physical line is parsed on its own with the grammar's line rules, so one bad line gives one
diagnostic and every other line is still read. Separators, line endings, blank lines and raw
token spellings are kept as layout, which the writer uses for a byte-exact round trip.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import gc
import itertools
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from modtrans import resources
from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Diagnostic, Severity, Span, diagnostic
from modtrans.fileio import MAX_LINE as MAX_LINE  # longer lines are reported, never lexed
from modtrans.fileio import split_lines as split_lines  # the one definition of a line
from modtrans.workload import numbers, vocabulary
from modtrans.workload.dialects import detect, stray_policy
from modtrans.workload.model import (
    FileLayout,
    Header,
    HeaderLayout,
    Layer,
    LineLayout,
    Phase,
    Workload,
    layer_tokens,
)
from modtrans.workload.numbers import Kind

if TYPE_CHECKING:
    import lark

_T = TypeVar("_T")
_BLANKS = " \t\f\v"
_BLANK = "[ \\t\\f\\v]"  # one of _BLANKS, in the fast regexes (lark's %ignore has the same)
_FIELD_NAMES = tuple(c.name for c in vocabulary.COLUMNS)
_KEYS = tuple(k.key for k in vocabulary.HEADER_KEYS)


@dataclass(frozen=True, slots=True)
class ParseResult:
    """What the reader found: the workload (None if line 1 or 2 is unusable) and every diagnostic."""

    workload: Workload | None
    diagnostics: tuple[Diagnostic, ...]
    # The text's shape, so every span can be kept inside it: the length of each line, and
    # whether the last one ends with a line break (then an empty line follows it).
    widths: tuple[int, ...] | None = None
    final_break: bool = True

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)


@functools.cache
def _parser() -> lark.Lark:
    """The grammar's parser: for the lines the fast paths below do not read (22 ms with lark's
    import, which only happens here)."""
    import lark

    return lark.Lark(
        resources.grammar_path().read_text(encoding="utf-8"),
        parser="lalr",
        lexer="contextual",
        start=["workload", "header_line", "count_line", "layer_line"],
        maybe_placeholders=False,
    )


# The field terminals of a valid layer_line, in order (grammar/workload.lark, rule layer_line).
_TERMINAL_OF = {"name": "NAME", "int32": "INT", "uint64": "INT", "comm": "COMM_TYPE"}
_LAYER_TERMINALS = tuple(_TERMINAL_OF[c.kind] for c in vocabulary.COLUMNS[: vocabulary.REQUIRED])
_UNSIGNED = re.compile(r"0|[1-9][0-9]*")
_COMMS = {c.value: c for c in CommType}
_POLICIES = {p.value: p for p in Policy}


_TERMINAL = re.compile(r"([A-Z_]+)(?:\.\d+)?:\s*/(.*)/\s*$")


@functools.cache
def _terminals() -> dict[str, str]:
    """The regexes of the grammar's `NAME: /regex/` terminals, read from its text (building lark's
    parser, 16 ms, is left to the lines that need it), their groups made non-capturing: a match
    then builds only the fields' strings (each capturing group costs a substring per line). A test
    checks them against lark's own reading of the grammar."""
    found = {}
    for line in resources.grammar_path().read_text(encoding="utf-8").splitlines():
        terminal = _TERMINAL.match(line)
        if terminal is not None:
            found[terminal.group(1)] = re.sub(r"(?<!\\)\((?!\?)", "(?:", terminal.group(2))
    return found


# The fields in the fast regexes: the numbers in them are plain decimals that fit their field: a
# signed 32-bit reserved field, unsigned 64-bit (at most 19 digits) elsewhere. Anything else, a
# sign, a leading zero, a 20-digit value, takes the full path, whose diagnostics explain it.
_STRICT = {1: "(?:0|-?[1-9][0-9]{0,9})"}  # not "-0": it would write back as "0"
_UNSIGNED_FIELD = "(?:0|[1-9][0-9]{0,18})"


def _field_regexes() -> list[str]:
    terminals = _terminals()
    return [
        _STRICT.get(i, _UNSIGNED_FIELD if name == "INT" else terminals[name])
        for i, name in enumerate(_LAYER_TERMINALS)
    ]


@functools.cache
def _fast_layer() -> re.Pattern[str]:
    """One regex for a layer line whose every field is its typed terminal, built from the grammar.

    Lark's lexer and LALR loop cost about 70 us per line in Python; this match costs a few. Lines
    it does not accept take the full lark path, which gives the diagnostics (tests check that both
    paths agree on real and mutated lines).
    """
    blank = f"{_BLANK}*"
    # Between fields at least one blank, as lark's lexer has it: with `*` a long token could be
    # split between NAME (\S+) and the next field in every way, and a 1 MB line would backtrack
    # for hours (found by tests/fuzzing.py). The last field is followed by `*`: trailing blanks.
    parts = [f"(?P<s0>{blank})"]
    fields = _field_regexes()
    for i, terminal in enumerate(fields):
        between = blank if i == len(fields) - 1 else f"{_BLANK}+"
        parts.append(f"(?P<f{i}>{terminal})(?P<s{i + 1}>{between})")
    # A policy needs a blank before it: "80DATA" is one malformed token, as lark reads it.
    parts.append(f"(?:(?<={_BLANK})(?P<f12>{_terminals()['POLICY']})(?P<s13>{blank}))?")
    return re.compile("".join(parts))


@functools.cache
def _uniform_layer() -> re.Pattern[str]:
    """_fast_layer for the usual line, whose fields are all parted by the same run of blanks: a
    backreference stands for the eleven runs after the first, so a match builds 16 strings, not 27.
    Its groups: leading blanks, name, the run, fields 1-11, the policy (or None), trailing blanks."""
    blank = f"{_BLANK}*"
    name, *rest = _field_regexes()
    parts = [f"({blank})({name})({_BLANK}+)", "\\3".join(f"({terminal})" for terminal in rest)]
    parts.append(f"(?:\\3({_terminals()['POLICY']}))?({blank})")
    return re.compile("".join(parts))


@functools.cache
def _plain_header() -> re.Pattern[str]:
    """The usual header: a keyword alone, or with `model_parallel_NPU_group: G` (G a plain decimal
    that fits its field). Its groups: leading blanks, keyword, blanks, key, blanks, G, trailing."""
    group = f"(?:({_BLANK}+)({re.escape(vocabulary.GROUP.key)})({_BLANK}+)({_STRICT_COUNT}))?"
    return re.compile(f"({_BLANK}*)({_terminals()['POLICY']}){group}({_BLANK}*)")


def clean_layer_line(content: str) -> bool:
    """Whether the reader reads `content` as a layer line on its fast path, with no finding: every
    field its terminal, parted by one run of blanks (as the writer parts them), the reserved field
    within int32. The quick check of written text (workload/quick.py) asks this of each line."""
    match = _uniform_layer().fullmatch(content)
    if match is None:
        return False
    reserved = match.group(4)
    return len(reserved) < 10 or -(2**31) <= int(reserved) < 2**31


@functools.cache
def _name_field() -> re.Pattern[str]:
    """The layer line's first field, its name, as the fast paths read it."""
    return re.compile(_field_regexes()[0])


def clean_layer_name(name: str) -> bool:
    """Whether `name` is read back as one layer name: what decides whether a line that differs
    from a clean one (clean_layer_line) only in its name is clean too (the name field takes no
    blank, so the fields after it are read the same whatever the name)."""
    return _name_field().fullmatch(name) is not None


_TOKEN = re.compile(f"[^{_BLANKS}]+")
_STRICT_VALUE = re.compile(
    "0|[1-9][0-9]{0,9}"
)  # a header value that is one without a finding (< 2^31 checked)
_KEYED = {k.key: k for k in vocabulary.HEADER_KEYS}  # the spellings with a colon, as the writer's
_DLRM = frozenset({Policy.HYBRID_DLRM.value, Policy.HYBRID_DLRM_ENHANCED.value})


def clean_header(content: str) -> Header | None:
    """The header `content` is to the reader when it reads it with no finding on a fast path (a
    keyword alone, with its group, or the writer's keyed form), else None (lark's path reads it).
    The quick check of written text (workload/quick.py) compares it with the written header."""
    return _fast_header(1, content, "\n", (), 0)


def _fast_header(lineno: int, content: str, eol: str, before: tuple[str, ...], offset: int) -> Header | None:
    """Line 1 as the usual header (_plain) or the keyed one (_keyed_header); None: lark's path."""
    plain = _plain_header().fullmatch(content)
    if plain is not None and (plain.group(6) is None or int(plain.group(6)) < 2**31):
        return _plain(lineno, content, eol, before, offset, plain.groups())
    return _keyed_header(lineno, content, eol, before, offset)


def _plain(
    lineno: int,
    content: str,
    eol: str,
    before: tuple[str, ...],
    offset: int,
    groups: tuple[str | None, ...],
) -> Header:
    """What the lark path makes of the usual header (a test compares the two)."""
    lead, keyword, after, key, between, group, trail = groups
    assert lead is not None
    assert keyword is not None
    assert trail is not None
    if group is None:
        tokens: tuple[str, ...] = (keyword,)
        separators: tuple[str, ...] = (lead, trail)
        meant = Header(_POLICIES[keyword])
    else:
        assert after is not None
        assert key is not None
        assert between is not None
        tokens, separators = (keyword, key, group), (lead, after, between, trail)
        meant = Header(_POLICIES[keyword], model_parallel_group=int(group))
    layout = LineLayout(tokens, separators, eol, before)
    span = Span(lineno, 1 + offset, lineno, len(content) - len(trail) + 1 + offset)
    return replace(meant, span=span, layout=HeaderLayout(layout, meant))


def _keyed_header(lineno: int, content: str, eol: str, before: tuple[str, ...], offset: int) -> Header | None:
    """What the lark path makes of a header in the writer's keyed form (SimAI's: `HYBRID_TRANSFORMER
    model_parallel_NPU_group: 8 ep: 1 pp: 8 ...`): a keyword (a DLRM one with its positional
    layer), then keys each given once, an int key with one plain decimal under 2^31, a list key
    with its count and that many. None for any other line, which the lark path reads (and reports
    on); a test compares the two."""
    tokens: list[str] = []
    separators: list[str] = []
    position = 0
    for token in _TOKEN.finditer(content):
        separators.append(content[position : token.start()])
        tokens.append(token.group())
        position = token.end()
    separators.append(content[position:])
    if not tokens or tokens[0] not in _POLICIES:
        return None
    values: dict[str, Any] = {}
    at = 1
    first = _strict_value(tokens, 1) if tokens[0] in _DLRM else None
    if first is not None:  # ASTRA-sim 1.0's and Chakra's `HYBRID_DLRM 4`: the last bottom-MLP layer
        values["dlrm_last_bottom_layer"] = first
        at = 2
    while at < len(tokens):
        key = _KEYED.get(tokens[at])
        if key is None or key.field in values:
            return None
        count = 1
        if key.kind == "list":
            listed = _strict_value(tokens, at + 1)
            if listed is None or at + 1 + listed >= len(tokens):  # a count past the line's tokens
                return None
            count = listed + 1
        found = [_strict_value(tokens, at + i) for i in range(1, count + 1)]
        if None in found:
            return None
        values[key.field] = tuple(found[1:]) if key.kind == "list" else found[0]
        at += count + 1
    meant = Header(_POLICIES[tokens[0]], **values)
    layout = LineLayout(tuple(tokens), tuple(separators), eol, before)
    span = Span(lineno, 1 + offset, lineno, len(content.rstrip()) + 1 + offset)
    return replace(meant, span=span, layout=HeaderLayout(layout, meant))


def _strict_value(tokens: list[str], at: int) -> int | None:
    """tokens[at] as a header value the lark path reads without a finding, else None."""
    if at >= len(tokens) or _STRICT_VALUE.fullmatch(tokens[at]) is None:
        return None
    value = int(tokens[at])
    return value if value < 2**31 else None


_STRICT_COUNT = "(?:0|[1-9][0-9]{0,9})"  # a layer count or group: then at most 2^31 - 1 (checked)
_PLAIN_COUNT = re.compile(f"({_BLANK}*)({_STRICT_COUNT})({_BLANK}*)")


Getter = Callable[[tuple[str | None, ...]], tuple[Any, ...]]  # str, only the policy may be None


# Of the 13 fields: the times and sizes (int() of a match), and the words: name, reserved (int()
# after a range check), the three comm types, policy.
_NUMBERS = tuple(c.index for c in vocabulary.COLUMNS if c.kind == "uint64")
_WORDS = tuple(c.index for c in vocabulary.COLUMNS if c.kind != "uint64")


@functools.cache
def _field_groups() -> tuple[Getter, Getter, Getter]:
    """Getters of _fast_layer's groups() tuple: the words (_WORDS), the numbers (_NUMBERS) and the
    fourteen separators."""
    index = _fast_layer().groupindex
    fields = tuple(index[f"f{i}"] - 1 for i in range(13))
    separators = operator.itemgetter(*(index[f"s{i}"] - 1 for i in range(14)))
    words = operator.itemgetter(*(fields[i] for i in _WORDS))
    return words, operator.itemgetter(*(fields[i] for i in _NUMBERS)), separators


# The same of _uniform_layer's groups: leading blanks, f0, the run, f1..f11, f12, trailing blanks.
_UNIFORM_WORDS: Getter = operator.itemgetter(*(i + 1 if i == 0 else i + 2 for i in _WORDS))
_UNIFORM_NUMBERS: Getter = operator.itemgetter(*(i + 2 for i in _NUMBERS))


def _constructor(cls: type[_T]) -> Callable[..., _T]:
    """cls(*fields) for a frozen slotted dataclass, in half the time of its generated __init__
    (which calls object.__setattr__ per field): the same slots set through their descriptors.
    Every field must be given, in order; the parser builds several such objects per line."""
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if hasattr(cls, "__post_init__") or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: not a plain slotted dataclass")
    scope: dict[str, object] = {"_new": object.__new__, "_cls": cls}
    scope |= {f"_set_{n}": getattr(cls, n).__set__ for n in names}
    body = "".join(f"    _set_{n}(o, {n})\n" for n in names)
    exec(f"def make({', '.join(names)}):\n    o = _new(_cls)\n{body}    return o\n", scope)
    return scope["make"]  # type: ignore[return-value]


_new_layer = _constructor(Layer)
_new_phase = _constructor(Phase)
_new_span = _constructor(Span)


@dataclass(eq=False)
class LineCache:
    """The layer lines of the text parsed last, by position. What an editor re-parsing a buffer
    after a change passes back in (and diff, for the second of two versions of a file): a line
    that is where it was, as it was, after the same blank lines and under the same header, costs
    one comparison, and its layer and findings are the ones built last time (a line depends on
    nothing else). A line that moved (lines inserted or deleted above it, found by the common
    tail of the two texts) keeps its layer, given its new line number. Each parse leaves in it
    exactly the text it read."""

    header: object = None
    lines: Sequence[tuple[str, str]] = ()
    layers: list[Layer | None] = field(default_factory=list)  # by line index; None: not a layer
    findings: dict[int, tuple[Diagnostic, ...]] = field(default_factory=dict)  # lines with any
    before: dict[int, tuple[str, ...]] = field(default_factory=dict)  # lines after blank lines


def _common_tail(old: Sequence[tuple[str, str]], new: Sequence[tuple[str, str]]) -> int:
    """How many lines `old` and `new` end with in common."""
    common, limit = 0, min(len(old), len(new))
    while common < limit and old[-1 - common] == new[-1 - common]:
        common += 1
    return common


_LAYER_HEAD = operator.attrgetter(
    "name", "fwd", "input_grad", "weight_grad", "update_time", "reserved", "policy"
)


def _moved(layer: Layer, lines: int) -> Layer:
    """`layer`, read `lines` lines further down (up, when negative)."""
    return _new_layer(*_LAYER_HEAD(layer), _shifted(layer.span, lines), layer.layout, layer.field_span)


def _shifted(span: Span | None, lines: int) -> Span | None:
    if span is None:
        return None
    return _new_span(span.line + lines, span.column, span.end_line + lines, span.end_column)


def parse(text: str, *, path: str | None = None, cache: LineCache | None = None) -> ParseResult:
    """Parse workload text. Never raises on bad input: problems come back as diagnostics."""
    return parse_lines(split_lines(text), path=path, cache=cache)


def shape(lines: Sequence[tuple[str, str]]) -> tuple[tuple[int, ...], bool]:
    """What ParseResult keeps of a text to hold spans inside it: each line's length, and whether
    the last line ends with a break (an empty line follows it then)."""
    return tuple(len(content) for content, _ in lines), not lines or bool(lines[-1][1])


def parse_lines(
    lines: Sequence[tuple[str, str]], *, path: str | None = None, cache: LineCache | None = None
) -> ParseResult:
    """Parse already split (content, line ending) pairs; line numbers are their 1-based positions."""
    reader = _Reader(path, cache)
    # The reader allocates several objects per line, none of them in a reference cycle: the cyclic
    # collector's passes over them would cost a quarter of a 100,000-line parse, and find nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        result = reader.read(lines)
    finally:
        if collecting:
            gc.enable()
    if cache is not None:
        cache.header, cache.lines = reader.header, lines
        cache.layers, cache.findings, cache.before = reader.by_line, reader.findings, reader.befores
    return result


class _Reader:
    def __init__(self, path: str | None, cache: LineCache | None = None) -> None:
        self.path = path
        self.diagnostics: list[Diagnostic] = []
        self._separators: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._layouts: dict[tuple[object, ...], LineLayout] = {}  # by spelling: see _layer_fast
        self.cache = cache
        # what the next parse's cache will hold (LineCache's fields)
        self.header: Header | None = None
        self.by_line: list[Layer | None] = []
        self.findings: dict[int, tuple[Diagnostic, ...]] = {}
        self.befores: dict[int, tuple[str, ...]] = {}
        self._uniform = _uniform_layer().fullmatch
        self._match = _fast_layer().fullmatch
        self._words, self._numbers, self._separators_of = _field_groups()

    # -- helpers -------------------------------------------------------------------------------
    def report(
        self,
        code: str,
        message: str,
        span: Span | None,
        *,
        hint: str | None = None,
        severity: Severity | None = None,
    ) -> None:
        self.diagnostics.append(
            diagnostic(code, message, path=self.path, span=span, hint=hint, severity=severity)
        )

    def _span(self, lineno: int, token: lark.Token, offset: int) -> Span:
        column = (token.column or 1) + offset
        return Span(lineno, column, lineno, column + len(token))

    def _layout(
        self,
        content: str,
        tokens: Sequence[lark.Token],
        eol: str,
        before: tuple[str, ...],
        canonical: Sequence[str] | None,
    ) -> LineLayout:
        seps = []
        position = 0
        for token in tokens:
            start = token.start_pos or 0
            seps.append(content[position:start])
            position = start + len(token)
        seps.append(content[position:])
        key = tuple(seps)
        shared = self._separators.setdefault(key, key)
        raw = tuple(str(t) for t in tokens)
        # Keep raw tokens only where they differ from what the writer would produce anyway.
        kept = () if canonical is not None and raw == tuple(canonical) else raw
        return LineLayout(kept, shared, eol, before)

    # -- the file ------------------------------------------------------------------------------
    def read(self, lines: Sequence[tuple[str, str]]) -> ParseResult:
        lines, bom = self._without_bom(lines)
        self.by_line = [None] * len(lines)
        header, count, first = self._start(lines, bom)
        reuse, moved, moved_from = self._reuse(header, lines)
        layers: list[Layer] = []
        layer_lines = 0
        blanks: list[str] = []
        for index, line in enumerate(itertools.islice(lines, first, None), first):
            content, eol = line
            lineno = index + 1
            if len(content) > MAX_LINE:
                self._too_long(lineno, content)
                layer_lines += 1
                continue
            if not content or (content[0] in _BLANKS and not content.strip(_BLANKS)):
                self._blank_line(lineno, content, early=False)
                blanks.append(content + eol)
                continue
            if blanks:
                before, blanks = tuple(blanks), []
            else:
                before = ()
            layer_lines += 1
            was = index - moved if index >= moved_from else index  # its index in the cache
            if (
                reuse is not None
                and was < len(reuse.lines)
                and reuse.lines[was] == line
                and self._reusable(reuse, was, index, before)
            ):
                layer = reuse.layers[was]
                if layer is not None and was != index:
                    layer = _moved(layer, index - was)
            else:
                layer = self._layer_fast(lineno, content, eol, before)  # which reports nothing
                if layer is None:
                    start = len(self.diagnostics)
                    layer = self._layer_full(lineno, content, eol, before, header)
                    if len(self.diagnostics) > start:
                        self.findings[index] = tuple(self.diagnostics[start:])
            if before:
                self.befores[index] = before
            if layer is not None:
                self.by_line[index] = layer
                layers.append(layer)

        widths, final_break = shape(lines)
        if header is None or count is None:
            return ParseResult(None, tuple(self.diagnostics), widths, final_break)
        layout = _file_layout(count, layer_lines, bom, tuple(blanks), lines[-1][1])
        workload = Workload(header, tuple(layers), dialect=None, layout=layout)
        workload = replace(workload, dialect=detect(workload))
        return ParseResult(workload, tuple(self.diagnostics), widths, final_break)

    def _start(
        self, lines: Sequence[tuple[str, str]], bom: bool
    ) -> tuple[Header | None, tuple[int | None, LineLayout] | None, int]:
        """Lines 1 and 2: the header, the layer count (None when missing) and the index after it."""
        seen_header = False
        blanks: list[str] = []
        for index, (content, eol) in enumerate(lines):
            lineno = index + 1
            if len(content) > MAX_LINE:
                self._too_long(lineno, content)
                continue
            if not content or (content[0] in _BLANKS and not content.strip(_BLANKS)):
                self._blank_line(lineno, content, early=True)
                blanks.append(content + eol)
                continue
            before, blanks = tuple(blanks), []
            if seen_header:
                return self.header, self._count(lineno, content, eol, before), index + 1
            seen_header = True
            offset = 1 if bom and lineno == 1 else 0
            self.header = self._header(lineno, content, eol, before, offset)
        self._missing_start(lines, seen_header)
        return self.header, None, len(lines)

    def _without_bom(self, lines: Sequence[tuple[str, str]]) -> tuple[Sequence[tuple[str, str]], bool]:
        """The lines without a leading byte order mark (reported), and whether there was one."""
        if not lines or not lines[0][0].startswith("\ufeff"):
            return lines, False
        self.report("V251", "the file starts with a UTF-8 byte order mark", Span.at(1, 1))
        return [(lines[0][0][1:], lines[0][1]), *lines[1:]], True

    def _too_long(self, lineno: int, content: str) -> None:
        """Report a line too long to lex: it is skipped (after line 2 it still counts as a layer line)."""
        self.report(
            "P102",
            f"line {lineno} is {len(content):,} characters long (limit {MAX_LINE:,})",
            Span.at(lineno, 1),
        )

    def _reuse(
        self, header: Header | None, lines: Sequence[tuple[str, str]]
    ) -> tuple[LineCache | None, int, int]:
        """The cache if read under this header, and the lines from `moved_from` on `moved` lines down."""
        cache = self.cache
        if cache is None or cache.header != header:
            return None, 0, len(lines)
        if len(cache.lines) == len(lines):
            return cache, 0, len(lines)
        return cache, len(lines) - len(cache.lines), len(lines) - _common_tail(cache.lines, lines)

    def _missing_start(self, lines: Sequence[tuple[str, str]], seen_header: bool) -> None:
        """Report which of line 1 (the header) and line 2 (the layer count) the text lacks."""
        if not seen_header:
            self.report("P110", "the file is empty: line 1 must hold a parallelism keyword", Span.at(1, 1))
            return
        last = len(lines)
        if lines[-1][1]:  # the empty line after the final line break
            span = Span(last + 1, 1, last + 1, 1)
        else:  # the end of the last line: there is no line after it
            end = len(lines[-1][0]) + 1
            span = Span(last, end, last, end)
        self.report("P120", "the layer count (line 2) is missing", span)

    def _reusable(self, cache: LineCache, was: int, index: int, before: tuple[str, ...]) -> bool:
        """Whether the cache's layer (or None) for line `was`, the same text as line `index`, is
        this line's; its findings are reported again then, at its line. Not when the line was not a
        layer line, came after other blank lines, or has findings that name another file (diff's
        two sides share one cache). No message names its line: spans say where."""
        if cache.before.get(was, ()) != before:
            return False
        found = cache.findings.get(was)
        if found is None:
            return cache.layers[was] is not None
        if found[0].path != self.path:
            return False
        if was != index:
            found = tuple(replace(d, span=_shifted(d.span, index - was)) for d in found)
        self.findings[index] = found
        self.diagnostics.extend(found)
        return True

    def _blank_line(self, lineno: int, content: str, early: bool) -> None:
        what = "whitespace-only line" if content else "blank line"
        if early:
            self.report(
                "V250",
                f"{what} before the layer count: SimAI reads line 1 as the header and line 2 as the count",
                Span.at(lineno, 1),
                severity=Severity.ERROR,
            )
        else:
            self.report("V250", what, Span.at(lineno, 1, len(content)), hint="delete the line")

    def _syntax(self, lineno: int, content: str, start: str, offset: int) -> lark.Tree[lark.Token] | None:
        import lark

        try:
            return _parser().parse(content, start=start)
        except lark.UnexpectedCharacters as error:
            position = error.pos_in_stream or 0
            char = content[position] if position < len(content) else " "
            name = "carriage return without line feed" if char == "\r" else f"U+{ord(char):04X}"
            self.report(
                "P103",
                f"unexpected character ({name})",  # where: the span (a moved line keeps its finding)
                Span.at(lineno, error.column + offset),
                hint="separate fields with spaces or tabs",
            )
        except lark.UnexpectedInput as error:
            self._wrong_shape(lineno, content, start, error, offset)
        return None

    def _wrong_shape(
        self, lineno: int, content: str, start: str, error: lark.UnexpectedInput, offset: int
    ) -> None:
        fields = content.split()
        if start == "layer_line":
            if len(fields) < 12:
                end = len(content.rstrip())
                self.report(
                    "P130",
                    f"layer line has {len(fields)} fields; expected 12 "
                    f"(missing: {', '.join(_FIELD_NAMES[len(fields) : vocabulary.REQUIRED])})",
                    Span.at(lineno, end + 1),
                )
            else:
                self.report(
                    "P130",
                    f"layer line has {len(fields)} fields; expected 12, or 13 under HYBRID_CUSTOMIZED",
                    Span.at(lineno, error.column, 1),
                )
        elif start == "count_line":
            self.report(
                "P120",
                f"line {lineno} must hold only the layer count; found {len(fields)} fields",
                Span.at(lineno, 1, len(content.rstrip())),
                hint="put the header on line 1 and the number of layer lines alone on line 2",
            )
        else:
            self.report(
                "P111",
                f"cannot read header token at column {error.column}",
                Span.at(lineno, error.column + offset),
            )

    # -- line 1 ----------------------------------------------------------------------------------
    def _header(
        self, lineno: int, content: str, eol: str, before: tuple[str, ...], offset: int
    ) -> Header | None:
        fast = _fast_header(lineno, content, eol, before, offset)
        return fast if fast is not None else self._header_full(lineno, content, eol, before, offset)

    def _header_full(
        self, lineno: int, content: str, eol: str, before: tuple[str, ...], offset: int
    ) -> Header | None:
        import lark

        tree = self._syntax(lineno, content, "header_line", offset)
        if tree is None:
            return None
        first = tree.children[0]
        assert isinstance(first, lark.Token)
        if first.type != "POLICY":
            self.report(
                "P110",
                f"`{first}` is not a parallelism keyword",
                self._span(lineno, first, offset),
                hint=_suggest(str(first), Policy),
            )
            return None
        values: dict[str, object] = {"policy": Policy(str(first))}
        extra: list[str] = []
        tokens: list[lark.Token] = [first]
        for item in tree.children[1:]:
            assert isinstance(item, lark.Tree)
            parts = [t for t in item.children if isinstance(t, lark.Token)]
            tokens.extend(parts)
            self._header_param(lineno, offset, item.data, parts, values, extra)
        header = Header(extra=tuple(extra), **values)  # type: ignore[arg-type]
        layout = self._layout(content, tokens, eol, before, None)
        end = len(content.rstrip())
        return replace(
            header,
            span=Span(lineno, 1 + offset, lineno, end + 1 + offset),
            layout=HeaderLayout(layout, header),
        )

    def _header_param(
        self,
        lineno: int,
        offset: int,
        kind: str,
        parts: list[lark.Token],
        values: dict[str, object],
        extra: list[str],
    ) -> None:
        if kind == "positional_int":
            self._positional_param(lineno, offset, parts[0], values, extra)
            return
        key, args = parts[0], parts[1:]
        if kind == "unknown_param":
            self.report(
                "V243",
                f"unknown header parameter `{key}`",
                self._span(lineno, key, offset),
                hint=_suggest(str(key), _KEYS),
            )
            extra.extend(str(t) for t in parts)
            return
        known = vocabulary.KEY[str(key).rstrip(":") + ":"]  # SimAI also wrote `pp_comm` bare
        name = known.field
        if name in values:
            self.report("V242", f"header parameter `{key}` is given twice", self._span(lineno, key, offset))
            return
        if known.kind == "list":
            indices = self._index_list(lineno, offset, key, args)
            if indices is not None:
                values[name] = indices
            return
        value = self._header_int(lineno, offset, args[0], f"`{key}`", allow_float=kind == "pp_comm")
        if value is not None:
            values[name] = value

    def _positional_param(
        self, lineno: int, offset: int, token: lark.Token, values: dict[str, object], extra: list[str]
    ) -> None:
        """A bare number: DLRM's last bottom-MLP layer (the first one), else an extra token (reported)."""
        glued = next((k for k in _KEYS if token.startswith(k) and len(token) > len(k)), None)
        if glued is not None:
            self.report(
                "P111",
                f"`{token}` glues the key `{glued}` to its value",
                self._span(lineno, token, offset),
                hint=f"write `{glued} {token[len(glued) :]}` with a blank in between",
            )
            extra.append(str(token))
            return
        if (
            values["policy"] in (Policy.HYBRID_DLRM, Policy.HYBRID_DLRM_ENHANCED)
            and "dlrm_last_bottom_layer" not in values
        ):
            number = self._header_int(lineno, offset, token, "last bottom-MLP layer index")
            if number is not None:
                values["dlrm_last_bottom_layer"] = number
            return
        self.report(
            "V243",
            f"header token `{token}` is not a parameter of {values['policy']}",
            self._span(lineno, token, offset),
            hint="remove it: ASTRA-sim 1.0 would read it as the layer count",
        )
        extra.append(str(token))

    def _index_list(
        self, lineno: int, offset: int, key: lark.Token, args: list[lark.Token]
    ) -> tuple[int, ...] | None:
        """A list parameter's indices (`key count i1 i2 ...`); None if the count or an entry is bad."""
        numbers_ = [self._header_int(lineno, offset, t, f"`{key}` entry") for t in args]
        if not args:
            self.report(
                "V241",
                f"`{key}` has no count",
                self._span(lineno, key, offset),
                hint=f"write `{key} 0` for an empty list",
            )
            return None
        if any(n is None for n in numbers_):
            return None
        declared, indices = numbers_[0], tuple(n for n in numbers_[1:] if n is not None)
        if declared != len(indices):
            self.report(
                "V242",
                f"`{key}` declares {declared} indices but lists {len(indices)}",
                self._span(lineno, args[0], offset),
                hint=f"the first number is the count: `{key} {len(indices)} ...`",
            )
        return indices

    def _header_int(
        self, lineno: int, offset: int, token: lark.Token, what: str, allow_float: bool = False
    ) -> int | None:
        text = str(token)
        if allow_float and text.endswith(".0") and text[:-2].isdigit() and len(text) < 12:
            return int(text[:-2])  # AICB writes pp_comm as a Python float; SimAI's stoi truncates
        if text.endswith(":"):
            self.report(
                "V241", f"{what} has no value (found the key `{text}`)", self._span(lineno, token, offset)
            )
            return None
        reading = numbers.read(text, Kind.INT32, what)
        if reading.code is not None:
            code = "V241" if reading.code == "V202" else reading.code
            self.report(code, reading.message or "", self._span(lineno, token, offset))
        return reading.value

    # -- line 2 ----------------------------------------------------------------------------------
    def _count(
        self, lineno: int, content: str, eol: str, before: tuple[str, ...]
    ) -> tuple[int | None, LineLayout]:
        plain = _PLAIN_COUNT.fullmatch(content)
        if plain is not None and int(plain.group(2)) < 2**31:  # what the lark path makes of it
            return int(plain.group(2)), LineLayout((), (plain.group(1), plain.group(3)), eol, before)
        return self._count_full(lineno, content, eol, before)

    def _count_full(
        self, lineno: int, content: str, eol: str, before: tuple[str, ...]
    ) -> tuple[int | None, LineLayout]:
        import lark

        tree = self._syntax(lineno, content, "count_line", 0)
        if tree is None:
            return None, LineLayout((content,), ("", ""), eol, before)
        token = tree.children[0]
        assert isinstance(token, lark.Token)
        reading = numbers.read(str(token), Kind.INT32, "layer count")
        if reading.code is not None:
            code = "P120" if reading.code == "V202" else reading.code
            self.report(code, reading.message or "", self._span(lineno, token, 0))
        value = reading.value
        if value is not None and value < 0:
            self.report("P120", f"layer count is negative ({value})", self._span(lineno, token, 0))
            value = None
        layout = self._layout(content, [token], eol, before, None if value is None else [str(value)])
        return value, layout

    # -- lines 3... ------------------------------------------------------------------------------
    def _layer_fast(self, lineno: int, content: str, eol: str, before: tuple[str, ...]) -> Layer | None:
        match = self._uniform(content)
        if match is not None:
            groups = match.groups()
            name, reserved, c_f, c_i, c_w, keyword = _UNIFORM_WORDS(groups)
            numbers = _UNIFORM_NUMBERS(groups)
            lead, run, trail = groups[0], groups[2], groups[15]
            key: tuple[object, ...] = (lead, run, trail, keyword is None, eol, before)
            layout = self._layouts.get(key)
            if layout is None:
                runs = (run,) * (11 if keyword is None else 12)
                layout = self._layouts[key] = LineLayout((), (lead, *runs, trail), eol, before)
        else:
            match = self._match(content)
            if match is None:
                return None
            groups = match.groups()
            name, reserved, c_f, c_i, c_w, keyword = self._words(groups)
            numbers = self._numbers(groups)
            separators = self._separators_of(groups)
            if keyword is None:
                separators = separators[:13]
            key = (separators, eol, before)
            layout = self._layouts.get(key)
            if layout is None:
                layout = self._layouts[key] = LineLayout((), separators, eol, before)
        # one LineLayout per spelling (separators, ending, blank lines before): most lines share one
        if len(reserved) >= 10 and not -(2**31) <= int(reserved) < 2**31:
            return None
        t_f, s_f, t_i, s_i, t_w, s_w, update = map(int, numbers)
        return _new_layer(
            name,
            _new_phase(t_f, _COMMS[c_f], s_f),
            _new_phase(t_i, _COMMS[c_i], s_i),
            _new_phase(t_w, _COMMS[c_w], s_w),
            update,
            int(reserved),
            _POLICIES[keyword] if keyword is not None else None,
            _new_span(lineno, 1, lineno, len(content) - len(layout.separators[-1]) + 1),  # w/o trailing
            layout,
            None,
        )

    def _layer_full(
        self, lineno: int, content: str, eol: str, before: tuple[str, ...], header: Header | None
    ) -> Layer | None:
        import lark

        tree = self._syntax(lineno, content, "layer_line", 0)
        if tree is None:
            return None
        tokens = [t for t in tree.children if isinstance(t, lark.Token)]
        ints = self._layer_numbers(lineno, tokens)
        comms = self._layer_comms(lineno, tokens)
        bad_policy = False
        policy: Policy | None = None
        if len(tokens) > vocabulary.POLICY:
            token = tokens[vocabulary.POLICY]
            if token.type == "POLICY":
                policy = Policy(str(token))
            elif header is not None and header.policy is not Policy.HYBRID_CUSTOMIZED:
                bad_policy = True
                message, hint = stray_policy(str(tokens[0]), str(token), header.policy)
                self.report("V220", message, self._span(lineno, token, 0), hint=hint)
            else:
                bad_policy = True
                self.report(
                    "V222",
                    f"`{token}` is not a parallelism keyword",
                    self._span(lineno, token, 0),
                    hint=_suggest(str(token), Policy),
                )
        if bad_policy or ints is None or comms is None:
            return None
        reserved, t_f, s_f, t_i, s_i, t_w, s_w, update = ints
        layer = Layer(
            str(tokens[0]),
            Phase(t_f, comms[0], s_f),
            Phase(t_i, comms[1], s_i),
            Phase(t_w, comms[2], s_w),
            update,
            reserved,
            policy,
        )
        layout = self._layout(content, tokens, eol, before, layer_tokens(layer))
        end = len(content.rstrip(_BLANKS))
        return replace(layer, span=Span(lineno, 1, lineno, end + 1), layout=layout)

    def _layer_numbers(self, lineno: int, tokens: Sequence[lark.Token]) -> list[int] | None:
        """The reserved field, times and sizes as ints; None if any is unreadable (each reported)."""
        ints: list[int] = []
        failed = False
        for position in vocabulary.NUMBERS:
            token = tokens[position]
            kind = Kind.INT32 if vocabulary.COLUMNS[position].kind == "int32" else Kind.UINT64
            reading = numbers.read(str(token), kind, _FIELD_NAMES[position])
            if reading.code is not None:
                self.report(reading.code, reading.message or "", self._span(lineno, token, 0))
            if reading.value is None:
                failed = True
            else:
                ints.append(reading.value)
        return None if failed else ints

    def _layer_comms(self, lineno: int, tokens: Sequence[lark.Token]) -> list[CommType] | None:
        """The three comm types; None if any field is not a comm type (each reported)."""
        comms: list[CommType] = []
        failed = False
        for position in vocabulary.COMMS:
            token = tokens[position]
            if token.type == "COMM_TYPE":
                comms.append(CommType(str(token)))
            else:
                failed = True
                self.report(
                    "V210",
                    f"unknown comm type `{token}` ({_FIELD_NAMES[position]})",
                    self._span(lineno, token, 0),
                    hint=_suggest(str(token), CommType),
                )
        return None if failed else comms


def _file_layout(
    count: tuple[int | None, LineLayout],
    layer_lines: int,
    bom: bool,
    trailing: tuple[str, ...],
    final_eol: str,
) -> FileLayout:
    """The file's layout; an unreadable count declares as many layers as there are layer lines."""
    declared, count_layout = count
    count_value = declared if declared is not None else layer_lines
    return FileLayout(count_layout, count_value, layer_lines, bom, trailing, final_eol)


def _suggest(word: str, vocabulary: Iterable[str]) -> str | None:
    options = [str(v) for v in vocabulary]
    for option in options:
        if option.lower() == word.lower().replace("-", "_"):
            return f"did you mean `{option}`?"
    close = difflib.get_close_matches(word.upper(), options, n=1, cutoff=0.6)
    if not close:  # DATAPARALLEL, ModelParallelism: the longest word it starts with
        close = sorted((o for o in options if word.upper().startswith(o.upper())), key=len, reverse=True)
    return f"did you mean `{close[0]}`?" if close else None


def parse_workload(text: str, *, path: str | None = None) -> Workload:
    """Parse or raise DiagnosticError (errors only; warnings are dropped)."""
    from modtrans.diagnostics import DiagnosticError

    result = parse(text, path=path)
    if result.workload is None or not result.ok:
        raise DiagnosticError(d for d in result.diagnostics if d.severity is Severity.ERROR)
    return result.workload
