"""A layout's programs, each built when it is asked for and kept only while it is in use.

A pipeline stage's program holds some 10^4 operations per 100 micro-batches: GPT 1T at TP 8 x
PP 64 with 512 micro-batches has 64 programs of 34,000 operations, 1.3 GB held together. The
writers read them one at a time (the trace encoder a stage's ranks in a row, the self-check one
stage and its neighbours), so Programs builds a program on demand and keeps the last KEEP built.
Outlines are kept: a few percent of their programs (shared operations, the transfers their own).

    programs = Programs(stages, build)     build(p, outline) -> program p's operations
    programs[p]                            the program, as StageProgram builds it
    programs.outline(p)                    its communication only (below), a fraction of the work

An outline holds the program's operations at the same indices: the transfers as built, the
collectives without their tensors, and for each compute a placeholder of its layer and step; no
operation's dependencies are kept. It says which groups the program's collectives span and in
which order, and which transfers it posts: what the group ids and the check across ranks
(plan/check.py) read, without the program's tensors and names.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar, overload

Program = TypeVar("Program")  # a program: plan/model.py's tuple of operations (no import: no cycle)

KEEP = 2
"""Programs kept built, the most recently asked for: the encoder reads one program's ranks in a
row; a rank's trace reads its program again for each collective whose group differs by rank."""


class Programs(Sequence[Program]):
    """`count` programs, program p `build(p, False)`, its outline `build(p, True)`."""

    def __init__(self, count: int, build: Callable[[int, bool], Program]) -> None:
        self._size, self.build = count, build
        self._kept: OrderedDict[int, Program] = OrderedDict()
        self._outlines: dict[int, Program] = {}

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Program: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Program, ...]: ...

    def __getitem__(self, index: int | slice) -> Program | tuple[Program, ...]:
        if isinstance(index, slice):
            return tuple(self._get(p) for p in range(*index.indices(self._size)))
        return self._get(self._position(index))

    def __iter__(self) -> Iterator[Program]:
        return (self._get(p) for p in range(self._size))

    def outline(self, index: int) -> Program:
        p = self._position(index)
        if p not in self._outlines:
            self._outlines[p] = self.build(p, True)
        return self._outlines[p]

    def _position(self, index: int) -> int:
        p = operator.index(index)
        p = p + self._size if p < 0 else p
        if not 0 <= p < self._size:
            raise IndexError(f"program {index} of {self._size}")
        return p

    def _get(self, p: int) -> Program:
        kept = self._kept
        program = kept.get(p)
        if program is None:
            program = kept[p] = self.build(p, False)
            while len(kept) > KEEP:
                kept.popitem(last=False)
        else:
            kept.move_to_end(p)
        return program


def outline(programs: Sequence[Program], p: int) -> Program:
    """Program p's outline where `programs` builds them, else the program itself (a plan made by
    hand, or a keyword preset's one program)."""
    return programs.outline(p) if isinstance(programs, Programs) else programs[p]
