"""The registry of parallel degrees: each degree's module declares its mesh axis and how the
layout counts it (`register(Degree(...))`), as cost models and techniques register. The layout
(options.py) derives from them the mesh, the axes a group spans, D and the sequence's split, and
runs each degree's own rules; build.py runs each degree's model check and collectives. Every
module of this package is imported on the first question, so a new degree is its module, its
option's rows in table.py (translate's, and the sweep's list of values), its Layout field and
ORDER token (options.py), its typed column of the sweep's table (sweep/rows.py) and its line in
the package's module map; tests/test_degrees.py holds each of them to the registry. The
.meta.json's parallel.llm (sidecar.py), the timeline's title (picture.py), the sweep's search,
labels and finalists' options (sweep/space.py, rows.py, finalists.py) read the registry.

    register(Degree("cp", Purpose("context"), listed=4, optional=True, replica=True, ...))
    registered()["cp"].purpose      Purpose("context")
    sizes(lambda d: d.ranks(layout))    {"tp": 2, "pp": 2, "dp": 4, "ep": 2, "cp": 1}

A degree's place in the rank order is options.ORDER's (Megatron-Core's order string)."""

from __future__ import annotations

import functools
import importlib
import math
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from modtrans.plan.model import Purpose

Layout = Any  # options.Layout: options.py reads this registry, so it is not imported here
Rule = Callable[[Layout], None]


@dataclass(frozen=True)
class Degree:
    """One parallel degree: its Layout field and ORDER token (`token`), its mesh axis, and what
    the layout's rules read of it.

    listed     its place where outputs list the degrees (.meta.json's parallel.llm, the title):
               fixed, so that those bytes stay as they are when a degree comes; a new one next
    optional   the mesh has its axis only where it holds more than one rank (no context axis
               without C: a mesh, and its groups' ids, as before the degree existed)
    replica    its ranks hold the same dense weights: the dense gradients are reduced over its
               axis too (Megatron's data-parallel group with context parallelism)
    sequence   its ranks split every micro-batch's sequence: each runs, stores and sends 1 / size
    shards     it divides each layer's work or weights among its ranks: the units a rank runs
               depend on its size (tensor, context, expert; not the pipeline's or data's)
    data       the data degree itself (its axis holds the D / E expert-data ranks)
    carved     its ranks come out of the D data ranks (experts), not a factor of N beside them
    size       its axis's ranks for a layout (default: the Layout field)
    tried      (left, model): the sizes a sweep tries where not told (default: the divisors of
               `left`, the ranks of N the degrees before it leave; the data degree is not tried,
               D follows from N); `model` has the model's blocks and experts (sweep/space.Model)
    rules      its own layout rules, raising LayoutError (run last, after the shared ones)
    runs       (framework): whether the framework runs it (default: every one); a sweep tries
               only size 1 for one that does not, where not told
    refuses    (ir, layout): raises LayoutError where the model cannot be split so
    attach     (units, layout): its collectives, attached after tensor parallelism's
    label      its name in a layout's label (TP8 PP4 ...; default: the token in capitals)"""

    token: str
    purpose: Purpose
    listed: int
    optional: bool = False
    replica: bool = False
    sequence: bool = False
    shards: bool = False
    data: bool = False
    carved: bool = False
    size: Callable[[Layout], int] | None = None
    tried: Callable[[int, Any], Iterable[int]] | None = None
    rules: Rule | None = None
    refuses: Callable[[Any, Layout], None] | None = None
    attach: Callable[[Any, Layout], None] | None = None
    label: str | None = None
    runs: Callable[[Any], bool] | None = None

    @property
    def title(self) -> str:
        """Its name in a layout's label: TP, PP, DP, CP, EP, HSDP."""
        return self.label or self.token.upper()

    def ranks(self, layout: Layout) -> int:
        """Its axis's ranks in `layout`."""
        return int(self.size(layout) if self.size is not None else getattr(layout, self.token))

    def choices(self, left: int, model: Any, framework: Any = None) -> tuple[int, ...]:
        """The sizes a sweep tries where the user gives none (`tried`; else `left`'s divisors):
        only 1 where `framework` does not run it (`runs`)."""
        if framework is not None and self.runs is not None and not self.runs(framework):
            return (1,)
        return tuple(self.tried(left, model)) if self.tried is not None else divisors(left)

    @property
    def beside_data(self) -> bool:
        """A factor of N beside D (N = T x C x P x D): neither D nor carved from it."""
        return not (self.data or self.carved)


_DEGREES: dict[str, Degree] = {}
_loading: list[bool] = []


def register(degree: Degree) -> Degree:
    """Declare a degree (its module does, when imported); a token twice is a programming error."""
    known = _DEGREES.get(degree.token)
    if known is not None and known != degree:
        raise ValueError(f"the degree {degree.token!r} is registered twice")
    _DEGREES[degree.token] = degree
    return degree


def registered() -> Mapping[str, Degree]:
    """Every degree, by token (this package's modules imported once, to register theirs)."""
    if not _loading:
        _loading.append(True)
        package = __name__.rpartition(".")[0]
        path = importlib.import_module(package).__path__
        for found in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
            importlib.import_module(f"{package}.{found.name}")
    return _DEGREES


def listed() -> tuple[Degree, ...]:
    """Every degree, in the order outputs list them (Degree.listed)."""
    return tuple(sorted(registered().values(), key=lambda d: d.listed))


def sizes(ranks: Callable[[Degree], int]) -> dict[str, int]:
    """Each degree's size as its option names it, in listed order, from its axis's `ranks` (of a
    layout: Degree.ranks; of a plan's mesh: its extent): the data degree's is D, its axis's
    D / E ranks times every carved degree's (experts come out of the data ranks)."""
    carved = math.prod(ranks(d) for d in registered().values() if d.carved)
    return {d.token: ranks(d) * (carved if d.data else 1) for d in listed()}


def named(values: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The degrees as titles and labels name them (TP2), in listed order: those every layout
    has (T, P, D: neither optional nor carved), and the others (E, C) where more than 1; a degree
    `values` (by token) leaves out is 1."""
    always = [f"{d.title}{values.get(d.token, 1)}" for d in listed() if not (d.optional or d.carved)]
    rest = [
        f"{d.title}{values[d.token]}"
        for d in listed()
        if (d.optional or d.carved) and values.get(d.token, 1) != 1
    ]
    return always, rest


def divisors(n: int) -> tuple[int, ...]:
    """n's divisors, ascending (pairs up to its square root)."""
    low = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return tuple(sorted({*low, *(n // d for d in low)}))


def degrees(tokens: Iterable[str]) -> list[Degree]:
    """The degrees of `tokens`, in their order (KeyError: a token no module registers)."""
    known = registered()
    return [known[t] for t in tokens]


@functools.cache
def dense_data() -> frozenset[Purpose]:
    """The axes the dense gradients are reduced over: every replica degree's (Megatron-LM's
    data-parallel group with context parallelism, parallel_state.get_data_parallel_group(
    with_context_parallel=True)); a mesh without one of them names no ranks of it."""
    return frozenset(d.purpose for d in registered().values() if d.replica)


def product(layout: Layout, chosen: Iterable[Degree]) -> int:
    """The ranks of the chosen degrees' axes together."""
    return math.prod(d.ranks(layout) for d in chosen)
