"""A layout's programs, each built when it is asked for and kept only while it is in use.

A pipeline stage's program holds some 10^4 operations per 100 micro-batches: GPT 1T at TP 8 x
PP 64 with 512 micro-batches has 64 programs of 34,000 operations, 1.3 GB held together. The
writers read them one at a time (the trace encoder a stage's ranks in a row, the self-check one
stage and its neighbours), so Programs builds a program on demand and keeps those read last, up
to KEPT operations: a small plan's every program, built once.
Outlines are kept: a few percent of their programs (shared operations, the transfers their own).

    programs = Programs(stages, build)     build(p, outline) -> program p's operations
    programs[p]                            the program, as StageProgram builds it
    programs.outline(p)                    its communication only (below), a fraction of the work

An outline holds the program's operations at the same indices: the transfers as built, the
collectives without their tensors, and each compute with its layer, step, time and FLOPs but no
tensors; no operation's dependencies are kept. It says which groups the program's collectives
span and in which order, which transfers it posts, and what each unit computes: what the group
ids, the check across ranks (plan/check.py) and the text projections (plan/lines.py) read,
without the program's tensors and names.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence, Sized
from typing import Any, TypeVar, overload

Program = TypeVar("Program", bound=Sized)  # plan/model.py's tuple of operations (not imported: a cycle)

KEPT = 1 << 17
"""Operations kept built, of the programs read last (the last one whatever its size): a small
plan's every program (a program read again is not built again), a large one's few stages (GPT 1T
at 512 micro-batches: 34,000 operations a stage, some 600 bytes each: 3 kept, 60 MB). The encoder
reads one program's ranks in a row, and the program again for each collective whose group differs
by rank."""


class Programs(Sequence[Program]):
    """`count` programs, program p `build(p, False)`, its outline `build(p, True)`. Equal to,
    hashed and pickled as the tuple of its programs (each built for it)."""

    def __init__(self, count: int, build: Callable[[int, bool], Program]) -> None:
        self._size, self.build = count, build
        self._kept: OrderedDict[int, Program] = OrderedDict()
        self._held = 0  # the operations of the programs kept
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

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return f"Programs({self._size} stages, {len(self._kept)} built)"

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
            self._held += len(program)
            while self._held > KEPT and len(kept) > 1:
                self._held -= len(kept.popitem(last=False)[1])
        else:
            kept.move_to_end(p)
        return program


def outline(programs: Sequence[Program], p: int) -> Program:
    """Program p's outline where `programs` builds them, else the program itself (a plan made by
    hand, or a keyword preset's one program)."""
    return programs.outline(p) if isinstance(programs, Programs) else programs[p]
