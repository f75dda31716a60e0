"""The fast layer-line path (one regex built from the grammar's terminals) agrees with lark's."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from modtrans.workload.parse import _Reader, parse, split_lines
from tests.conftest import corpus_files


def test_fast_and_full_paths_agree_on_real_and_mutated_lines() -> None:
    rng = random.Random(7)
    lines = [c for p in corpus_files() for c, _ in split_lines(p.read_bytes().decode())[2:]]
    mutated = []
    for line in lines[:400]:
        i = rng.randrange(len(line) + 1)
        mutated.append(
            line[:i] + rng.choice([" ", "\t", "0", "-", "+", "x", "_EP", ".5", " DATA"]) + line[i:]
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


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_line_cache_changes_nothing(data: st.DataObject) -> None:
    """Re-parsing after an edit with the editor's line cache gives what a fresh parse gives."""
    from modtrans.workload.parse import LineCache

    rows = data.draw(
        st.lists(
            st.sampled_from(
                [
                    "conv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1",
                    "fc -1 5 ALLGATHER 8 5 NONE 0 5 ALLREDUCE 4 2 DATA",
                    "bad -1 x NONE 0 1 NONE 0 1 ALLREDUCE 64 1",
                    "",
                    "conv1 -1 1 NONE 0 1 NONE 0 1 AllReduce 64 1",
                ]
            ),
            min_size=1,
            max_size=8,
        )
    )
    header = data.draw(st.sampled_from(["DATA", "HYBRID_CUSTOMIZED", "MODEL"]))
    before = "\n".join([header, str(len(rows)), *rows]) + "\n"
    cache: LineCache = {}
    parse(before, cache=cache)
    lines = before.split("\n")
    at = data.draw(st.integers(0, len(lines) - 1))
    lines[at] = data.draw(st.sampled_from(["conv2 -1 2 NONE 0 2 NONE 0 2 ALLREDUCE 8 1", "", "DATA", "3"]))
    after = "\n".join(lines)
    cached, fresh = parse(after, cache=cache), parse(after)
    assert cached.workload == fresh.workload
    assert cached.diagnostics == fresh.diagnostics
    assert len(cache) <= len(lines)


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
