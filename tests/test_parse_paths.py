"""The fast paths (a layer line by one regex built from the grammar's terminals; the usual and
the keyed header, the layer count) agree with lark's."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from modtrans.workload import vocabulary
from modtrans.workload.model import Dialect, Layer, LineLayout, Phase
from modtrans.workload.parse import (
    _UNIFORM_NUMBERS,
    _UNIFORM_WORDS,
    _constructor,
    _fast_layer,
    _field_groups,
    _keyed_header,
    _Reader,
    _uniform_layer,
    parse,
    split_lines,
)
from modtrans.workload.write import write
from tests.conftest import corpus_files


def test_fast_and_full_paths_agree_on_real_and_mutated_lines() -> None:
    rng = random.Random(7)
    lines = [c for p in corpus_files() for c, _ in split_lines(p.read_bytes().decode())[2:]]
    mutated = []
    for line in lines[:400]:
        i = rng.randrange(len(line) + 1)
        mutated.append(
            line[:i] + rng.choice([" ", "\t", "0", "-", "+", "x", "_EP", ".5", " DATA", "DATA"]) + line[i:]
        )
    checked = 0
    for line in lines + mutated:
        reader = _Reader(None)
        fast = reader._layer_fast(3, line, "\n", ())
        full = reader._layer_full(3, line, "\n", (), None)
        if fast is not None:
            checked += 1
            assert full == fast
            assert (full.span, full.layout) == (fast.span, fast.layout)
    assert checked > len(lines)  # every real line, and the mutations that stay valid


_ROWS = [
    "conv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1",
    "fc -1 5 ALLGATHER 8 5 NONE 0 5 ALLREDUCE 4 2 DATA",
    "bad -1 x NONE 0 1 NONE 0 1 ALLREDUCE 64 1",
    "",
    " \t",
    "conv1 -1 1 NONE 0 1 NONE 0 1 AllReduce 64 1\r",
    "conv2 -1 2 NONE 0 2 NONE 0 2 ALLREDUCE 8 1",
    "DATA",
    "3",
]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_line_cache_changes_nothing(data: st.DataObject) -> None:
    """Re-parsing after edits (a line replaced, inserted or deleted, several in a row, as an editor
    sends them) with the editor's line cache gives what a fresh parse gives: the same layers,
    spans, layouts and findings."""
    from modtrans.workload.parse import LineCache

    rows = data.draw(st.lists(st.sampled_from(_ROWS), min_size=1, max_size=8))
    header = data.draw(st.sampled_from(["DATA", "HYBRID_CUSTOMIZED", "MODEL"]))
    lines = [header, str(len(rows)), *rows, ""]
    cache = LineCache()
    parse("\n".join(lines), path="a.txt", cache=cache)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(lines) - 1))
        edit = data.draw(st.sampled_from(["replace", "insert", "delete"]))
        if edit == "delete" and len(lines) > 1:
            del lines[at]
        else:
            lines[at : at + (edit == "replace")] = [data.draw(st.sampled_from(_ROWS))]
        after = "\n".join(lines)
        path = data.draw(st.sampled_from(["a.txt", "b.txt"]))  # diff's second side: another file
        cached, fresh = parse(after, path=path, cache=cache), parse(after, path=path)
        assert cached.workload == fresh.workload
        assert cached.diagnostics == fresh.diagnostics
        if fresh.workload is not None and cached.workload is not None:
            spelled = [(x.span, x.layout) for x in fresh.workload.layers]
            assert [(x.span, x.layout) for x in cached.workload.layers] == spelled
        assert cache.lines == split_lines(after)


def test_the_fast_path_never_splits_a_token_between_fields() -> None:
    """Fields are separated by blanks, as lark's lexer has it. A regex that let a separator be
    empty could split one long token between NAME and the next field in every way: a layer
    line with a 1 MB token backtracked for hours (found by tests/fuzzing.py, bench/fuzz.py)."""
    reader = _Reader(None)
    glued = "l1-1 1 NONE 0 1 NONE 0 1 NONE 0 1"  # name and reserved field run together
    assert reader._layer_fast(3, glued, "\n", ()) is None
    assert reader._layer_full(3, glued, "\n", (), None) is None
    for at in range(13):  # a 200,000-digit token in every field position: answered at once
        fields = ["l1", "-1", "1", "NONE", "0", "1", "NONE", "0", "1", "NONE", "0", "1", "DATA"]
        fields[at] = "9" * 200_000
        result = parse("HYBRID_CUSTOMIZED\n1\n" + " ".join(fields) + "\n")
        assert bool(result.diagnostics) == (at != 0)  # a name may be all digits


_NAMES = ["l1", "12", "DATA"]
_NUMBERS = ["0", "7", "12"]
_COMMS = ["NONE", "ALLREDUCE", "ALLTOALL_EP"]
_FIELDS = [_NAMES, ["-1", "0"], *([_NUMBERS, _COMMS, _NUMBERS] * 3), _NUMBERS]
_RUNS = [" ", "\t", "  ", " \t", "\f"]
_DAMAGE = ["", "-1", "12DATA", "x", "DATA", "00", "+1"]  # a run of no blanks, or a bad token


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_fast_path_accepts_only_what_lark_reads_the_same(data: st.DataObject) -> None:
    """A valid line with at most one flaw (two fields glued together, a bad token anywhere): what
    the fast path reads, lark reads the same, with no finding. The class of "3229DATA": the
    general regex once let a policy follow the update time with no blank between, and read one
    malformed token as two fields."""
    tokens = [data.draw(st.sampled_from(choices)) for choices in _FIELDS]
    tokens += data.draw(st.sampled_from([[], ["DATA"], ["MODEL"]]))
    runs = [data.draw(st.sampled_from(["", *_RUNS]))] + [data.draw(st.sampled_from(_RUNS)) for _ in tokens]
    runs[-1] = data.draw(st.sampled_from(["", *_RUNS]))  # leading and trailing blanks may be none
    at, damage = data.draw(st.integers(0, 2 * len(tokens))), data.draw(st.sampled_from(_DAMAGE))
    if at < len(tokens):
        tokens[at] = damage or tokens[at]
    else:
        runs[at - len(tokens)] = ""
    line = runs[0] + "".join(t + r for t, r in zip(tokens, runs[1:], strict=True))
    fast = _Reader(None)._layer_fast(3, line, "\n", ())
    full_reader = _Reader(None)
    full = full_reader._layer_full(3, line, "\n", (), None)
    if fast is None:
        return
    assert full == fast, line
    assert (full.span, full.layout) == (fast.span, fast.layout)
    assert not full_reader.diagnostics, line


def test_the_uniform_regex_reads_what_the_general_one_reads() -> None:
    """_uniform_layer (one run of blanks between every field) is a shortcut of _fast_layer: on every
    corpus line either rejects or both give the same thirteen fields and fourteen separators."""
    words_of, numbers_of, separators_of = _field_groups()
    lines = [c for p in corpus_files() for c, _ in split_lines(p.read_bytes().decode())[2:]]
    lines += ["a -1 1 NONE 0 1 NONE 0 1 NONE 0 1 DATA  ", "\ta\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tNONE\t0\t1\t"]
    uniform = 0
    for line in lines:
        short, general = _uniform_layer().fullmatch(line), _fast_layer().fullmatch(line)
        if short is None:
            continue
        uniform += 1
        assert general is not None, line
        groups, full_groups = short.groups(), general.groups()
        assert _UNIFORM_WORDS(groups) == words_of(full_groups)  # the 13 fields: 6 words, 7 numbers
        assert _UNIFORM_NUMBERS(groups) == numbers_of(full_groups)
        runs = (groups[2],) * (11 if groups[14] is None else 12)
        separators = separators_of(full_groups)[: 13 if groups[14] is None else 14]
        assert (groups[0], *runs, groups[15]) == separators
    assert uniform > len(lines) // 2  # the corpus's lines are mostly uniform


def test_the_fast_constructors_build_what_the_dataclasses_build() -> None:
    phase = _constructor(Phase)(5, Phase(1).comm_type, 7)
    assert phase == Phase(5, Phase(1).comm_type, 7)
    layout = _constructor(LineLayout)((), (" ",), "\n", ())
    assert layout == LineLayout((), (" ",), "\n", ())
    fields = ("n", phase, phase, phase, 3, -1, None, None, layout, None)
    built = _constructor(Layer)(*fields)
    assert built == Layer(*fields)
    assert built.layout is layout
    assert hash(built) == hash(Layer(*fields))


def test_the_fast_paths_read_the_grammars_own_terminals() -> None:
    """The fast regexes take their terminals from the grammar's text, not from lark (whose parser
    takes 16 ms to build): they are the ones lark reads."""
    import re

    from modtrans.workload.parse import _parser, _terminals

    lark_terminals = {t.name: t.pattern.to_regexp() for t in _parser().terminals}
    for name in ("NAME", "INT", "COMM_TYPE", "POLICY"):
        assert _terminals()[name] == re.sub(r"(?<!\\)\((?!\?)", "(?:", lark_terminals[name])


_HEADER_WORDS = ["DATA", "HYBRID_TRANSFORMER", "MODEL", "DATAX", "data"]
_HEADER_TAILS = [
    [],
    ["model_parallel_NPU_group:", "8"],
    ["model_parallel_NPU_group:", "0"],
    ["model_parallel_NPU_group:", "2147483648"],
    ["model_parallel_NPU_group:", "08"],
    ["model_parallel_NPU_group:8"],
    ["model_parallel_NPU_group:", "8", "ep:", "2"],
    ["model_parallel_NPU_group:"],
    ["4"],
]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_fast_header_and_count_lines_are_what_lark_reads(data: st.DataObject) -> None:
    """The usual header (a keyword, maybe its group) and a plain layer count skip lark. Whatever
    the tokens and blanks, a line the fast path reads gives lark's header or count, with its
    span and layout and no finding."""
    tokens = [data.draw(st.sampled_from(_HEADER_WORDS)), *data.draw(st.sampled_from(_HEADER_TAILS))]
    runs = [data.draw(st.sampled_from(["", " ", "\t", "  \t", "\f"])) for _ in range(len(tokens) + 1)]
    runs[1:-1] = [r or " " for r in runs[1:-1]]
    line = runs[0] + "".join(t + r for t, r in zip(tokens, runs[1:], strict=True))
    offset = data.draw(st.sampled_from([0, 1]))  # 1: after a byte order mark
    fast_reader, full_reader = _Reader(None), _Reader(None)
    fast = fast_reader._header(1, line, "\n", (), offset)
    full = full_reader._header_full(1, line, "\n", (), offset)
    if fast_reader.diagnostics == []:
        assert fast == full
        assert fast is not None
        assert full is not None
        assert (fast.span, fast.layout) == (full.span, full.layout)
        assert full_reader.diagnostics == []
    count = data.draw(st.sampled_from(["0", "12", "2147483647", "2147483648", "012", "+3", "-1", "1e3"]))
    count_line = runs[0] + count + runs[-1]
    fast_reader, full_reader = _Reader(None), _Reader(None)
    got = fast_reader._count(2, count_line, "\r\n", ("\n",))
    if not fast_reader.diagnostics:
        assert got == full_reader._count_full(2, count_line, "\r\n", ("\n",))
        assert full_reader.diagnostics == []


_KEYED_WORDS = [
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_TRANSFORMER",
    "DATA",
    "HYBRID_DLRM",
    "MICRO",
    "hybrid",
]
_KEYED_TOKENS = [
    *(k.key for k in vocabulary.HEADER_KEYS),
    "pp_comm",  # SimAI 2024-12's bare key
    "mode:",  # AICB's unknown key
    "0", "1", "2", "8", "16", "2147483647", "2147483648", "08", "-1", "+2", "1.0", "4.5", "x",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_keyed_header_is_what_lark_reads(data: st.DataObject) -> None:
    """SimAI's keyed header (the writer's form) skips lark too. Whatever the keys, their order and
    repeats, the values and the blanks, a line the keyed path reads gives lark's header, with its
    span and layout, and lark finds nothing in it."""
    tokens = [data.draw(st.sampled_from(_KEYED_WORDS))]
    tokens += data.draw(st.lists(st.sampled_from(_KEYED_TOKENS), max_size=14))
    runs = [data.draw(st.sampled_from(["", " ", "\t", "  \t", "\f"])) for _ in range(len(tokens) + 1)]
    runs[1:-1] = [r or " " for r in runs[1:-1]]
    line = runs[0] + "".join(t + r for t, r in zip(tokens, runs[1:], strict=True))
    offset = data.draw(st.sampled_from([0, 1]))
    fast = _keyed_header(1, line, "\n", (), offset)
    full_reader = _Reader(None)
    full = full_reader._header_full(1, line, "\n", (), offset)
    if fast is not None:
        assert fast == full
        assert full is not None
        assert (fast.span, fast.layout) == (full.span, full.layout)
        assert full_reader.diagnostics == []


def test_a_list_count_past_the_line_goes_to_lark_which_reports_it() -> None:
    """A list key's count is how many values follow (`checkpoints: 2 0 9`). A count larger than
    the tokens left, up to 2^31 - 1 (a fuzzed real file had `checkpoints: 150994944`), is not
    read by the keyed path, which once walked every one of them (a 4 KiB file took a minute):
    lark's path reads the line and reports it, on the header's line."""
    lists = [k.key for k in vocabulary.HEADER_KEYS if k.kind == "list"]
    assert lists
    for key in lists:
        for count in (1, 2, 2**31 - 1):
            line = f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 8 {key} {count}"
            assert _keyed_header(1, line, "\n", (), 0) is None, line
            result = parse(line + "\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")
            assert result.diagnostics, line
            assert all(d.span is not None and d.span.line == 1 for d in result.diagnostics), line


def test_the_keyed_header_reads_simai_text_as_written() -> None:
    """What the writer makes of every real SimAI or AICB header (the corpus, canonically) and of a
    translation's is read by the keyed path, not lark's."""
    import modtrans

    texts = [modtrans.translate("llama-3-8b", tp=2, pp=2, sp=True, dialect="simai").text]
    for path in corpus_files():
        workload = parse(path.read_text(encoding="utf-8")).workload
        if workload is not None and workload.dialect is Dialect.SIMAI and not workload.header.extra:
            texts.append(write(workload, Dialect.SIMAI))
    assert len(texts) > 3
    for text in texts:
        assert text is not None
        header = text.split("\n", 1)[0]
        assert _keyed_header(1, header, "\n", (), 0) is not None, header
