"""The fast layer-line path (one regex built from the grammar's terminals) agrees with lark's."""

from __future__ import annotations

import random

from modtrans.workload.parse import _Reader, split_lines
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
