"""(Workload, Workload) -> WorkloadDiff: header, layer pairs, per-field deltas, moves, phase totals.

Pure: no printing, no rich. The second workload is the reference, as in numpy.isclose: a numeric
field differs when |first - reference| > atol + rtol * |reference|.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from modtrans.diff.align import align
from modtrans.workload.model import Header, Layer, Workload
from modtrans.workload.traffic import collectives
from modtrans.workload.vocabulary import COLUMNS, HEADER_KEYS, POLICY, REQUIRED

Value = int | str | None

_COLUMNS = (*COLUMNS[2:REQUIRED], COLUMNS[1], COLUMNS[POLICY])  # the phases, update; reserved, policy
FIELDS: tuple[str, ...] = tuple(c.diff for c in _COLUMNS if c.diff is not None)
"""Every compared field of a layer line: the phases and the update in file order, then the
reserved field and the policy (the name is compared separately)."""

GROUPS: dict[str, tuple[str, ...]] = {
    "comm": tuple(c.diff for c in _COLUMNS if c.diff and c.phase and c.unit != "ticks"),
    "compute": tuple(c.diff for c in _COLUMNS if c.diff and c.phase and c.unit == "ticks"),
    "update": tuple(c.diff for c in _COLUMNS if c.diff and not c.phase and c.unit == "ticks"),
    "all": FIELDS,
}

_HEADER: dict[str, Callable[[Header], object]] = {
    "policy": lambda h: h.policy.value,
    **{key.diff: operator.attrgetter(key.field) for key in HEADER_KEYS},
}


def parse_fields(spec: str) -> tuple[str, ...]:
    """`comm`, `compute,update`, `wg_size,fwd_compute` ... -> field names; ValueError names the culprit."""
    chosen: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if part in GROUPS:
            chosen += GROUPS[part]
        elif part in FIELDS:
            chosen.append(part)
        else:
            known = ", ".join([*GROUPS, *FIELDS])
            raise ValueError(f"unknown field {part!r}; use one of {known}")
    return tuple(f for f in FIELDS if f in chosen)


@dataclass(frozen=True)
class Options:
    fields: tuple[str, ...] = GROUPS["all"]
    rtol: float = 0.0
    atol: float = 0.0
    ignore_order: bool = False
    ignore_names: bool = False
    ignore_header: bool = False  # header lines (keyword, group, SimAI keys) are not a difference


@dataclass(frozen=True, slots=True)
class FieldDiff:
    field: str
    a: object
    b: object

    @property
    def delta(self) -> int | None:
        return self.a - self.b if isinstance(self.a, int) and isinstance(self.b, int) else None

    @property
    def relative(self) -> float | None:
        delta = self.delta
        if delta is None or not isinstance(self.b, int) or self.b == 0:
            return None
        return delta / abs(self.b)


@dataclass(frozen=True, slots=True)
class LayerDiff:
    """One row of the comparison. `a` / `b` are 0-based layer indices (None: absent on that side)."""

    a: int | None
    b: int | None
    name_a: str | None
    name_b: str | None
    fields: tuple[FieldDiff, ...] = ()
    moved: bool = False
    line_a: int | None = None
    line_b: int | None = None

    @property
    def renamed(self) -> bool:
        return self.a is not None and self.b is not None and self.name_a != self.name_b

    @property
    def status(self) -> str:
        if self.b is None:
            return "added"
        if self.a is None:
            return "removed"
        if self.fields:
            return "changed"
        if self.moved:
            return "moved"
        return "renamed" if self.renamed else "identical"


@dataclass(frozen=True, slots=True)
class Block:
    """Consecutive layers that moved together: first-side a..a+length-1 are second-side b.."""

    a: int
    b: int
    length: int


@dataclass(frozen=True, slots=True)
class PhaseTotal:
    phase: str
    compute_a: int
    compute_b: int
    bytes_a: int
    bytes_b: int


@dataclass(frozen=True)
class Counts:
    layers_a: int
    layers_b: int
    identical: int
    moved: int
    changed: int
    renamed: int
    added: int
    removed: int


@dataclass(frozen=True)
class Traffic:
    """One collective type over one group, per iteration: how many and how many bytes, each side."""

    comm: str
    group: str
    count_a: int
    count_b: int
    bytes_a: int
    bytes_b: int


@dataclass(frozen=True)
class WorkloadDiff:
    header: tuple[FieldDiff, ...]
    layers: tuple[LayerDiff, ...]  # every pair and every unpaired layer, in first-side order
    blocks: tuple[Block, ...]
    totals: tuple[PhaseTotal, ...]
    options: Options
    traffic: tuple[Traffic, ...] = ()  # by collective type and group: granularity does not matter
    counts: Counts = field(init=False)

    def __post_init__(self) -> None:
        rows = self.layers
        paired = [r for r in rows if r.a is not None and r.b is not None]
        counts = Counts(
            layers_a=sum(r.a is not None for r in rows),
            layers_b=sum(r.b is not None for r in rows),
            identical=sum(
                not r.fields and not r.moved and (self.options.ignore_names or not r.renamed) for r in paired
            ),
            moved=sum(r.moved for r in paired),
            changed=sum(bool(r.fields) for r in paired),
            renamed=0 if self.options.ignore_names else sum(r.renamed for r in paired),
            added=sum(r.b is None for r in rows),
            removed=sum(r.a is None for r in rows),
        )
        object.__setattr__(self, "counts", counts)

    @property
    def differing(self) -> tuple[LayerDiff, ...]:
        """Rows that are a difference under the options (moves and renames may be ignored)."""
        o = self.options
        return tuple(
            r
            for r in self.layers
            if r.a is None
            or r.b is None
            or r.fields
            or (r.moved and not o.ignore_order)
            or (r.renamed and not o.ignore_names)
        )

    @property
    def equivalent(self) -> bool:
        return not self.header and not self.differing


def compare(first: Workload, reference: Workload, options: Options = Options()) -> WorkloadDiff:
    a, b = first.layers, reference.layers
    content_a, content_b = _contents(a, options.fields), _contents(b, options.fields)
    comm = [k for k, f in enumerate(options.fields) if f in GROUPS["comm"]]
    weaker = []
    if comm and len(comm) < len(options.fields):
        weaker.append(
            ([tuple(c[k] for k in comm) for c in content_a], [tuple(c[k] for k in comm) for c in content_b])
        )
    alignment = align(
        [x.name for x in a],
        [x.name for x in b],
        content_a,
        content_b,
        use_names=not options.ignore_names,
        weaker=weaker,
    )
    rows: dict[tuple[int, int, int], LayerDiff] = {}
    for i, j in alignment.pairs.items():
        row_a, row_b = content_a[i], content_b[j]
        diffs = (
            ()
            if row_a == row_b  # most pairs: no field to look at one by one
            else tuple(
                FieldDiff(name, va, vb)
                for name, va, vb in zip(options.fields, row_a, row_b, strict=True)
                if not _close(va, vb, options)
            )
        )
        rows[(i, 0, j)] = LayerDiff(
            i, j, a[i].name, b[j].name, diffs, i in alignment.moved, _line(a[i]), _line(b[j])
        )
    for i in alignment.added:
        rows[(i, 0, -1)] = LayerDiff(i, None, a[i].name, None, line_a=_line(a[i]))
    after = _first_side_position(alignment.pairs, len(b))
    for j in alignment.removed:
        rows[(after[j], 1, j)] = LayerDiff(None, j, None, b[j].name, line_b=_line(b[j]))
    return WorkloadDiff(
        header=() if options.ignore_header else _header(first.header, reference.header),
        layers=tuple(rows[k] for k in sorted(rows)),
        blocks=_blocks(alignment.pairs, alignment.moved),
        totals=_totals(a, b),
        options=options,
        traffic=_traffic(first, reference),
    )


def _row(x: Layer) -> tuple[Value, ...]:
    """The values of FIELDS, in that order, in one call per layer (100,000-layer files stay fast)."""
    f, i, w = x.fwd, x.input_grad, x.weight_grad
    policy = None if x.policy is None else x.policy.value
    return (
        f.compute_time,
        f.comm_type.value,
        f.comm_size,
        i.compute_time,
        i.comm_type.value,
        i.comm_size,
        w.compute_time,
        w.comm_type.value,
        w.comm_size,
        x.update_time,
        x.reserved,
        policy,
    )


def _contents(layers: Sequence[Layer], fields: tuple[str, ...]) -> list[tuple[Value, ...]]:
    rows = [_row(x) for x in layers]
    if fields == FIELDS:
        return rows
    picks = [FIELDS.index(f) for f in fields]
    return [tuple(r[k] for k in picks) for r in rows]


def _close(va: Value, vb: Value, options: Options) -> bool:
    if va == vb:
        return True
    if isinstance(va, int) and isinstance(vb, int):
        return abs(va - vb) <= options.atol + options.rtol * abs(vb)
    return False


def _line(layer: Layer) -> int | None:
    return layer.span.line if layer.span is not None else None


def _first_side_position(pairs: dict[int, int], count_b: int) -> list[int]:
    """For each second-side index, the first-side index of the nearest paired layer before it."""
    by_b = {j: i for i, j in pairs.items()}
    out, last = [], -1
    for j in range(count_b):
        last = by_b.get(j, last)
        out.append(last)
    return out


def _header(a: Header, b: Header) -> tuple[FieldDiff, ...]:
    return tuple(FieldDiff(name, get(a), get(b)) for name, get in _HEADER.items() if get(a) != get(b))


def _blocks(pairs: dict[int, int], moved: frozenset[int]) -> tuple[Block, ...]:
    blocks: list[Block] = []
    for i in sorted(moved):
        j = pairs[i]
        last = blocks[-1] if blocks else None
        if last and last.a + last.length == i and last.b + last.length == j:
            blocks[-1] = Block(last.a, last.b, last.length + 1)
        else:
            blocks.append(Block(i, j, 1))
    return tuple(blocks)


def _totals(a: Sequence[Layer], b: Sequence[Layer]) -> tuple[PhaseTotal, ...]:
    def sums(layers: Iterable[Layer]) -> list[int]:
        """Compute and bytes per phase, then the update, in one pass over the layers."""
        out = [0] * 7
        for x in layers:
            f, i, w = x.fwd, x.input_grad, x.weight_grad
            out[0] += f.compute_time
            out[1] += f.comm_size
            out[2] += i.compute_time
            out[3] += i.comm_size
            out[4] += w.compute_time
            out[5] += w.comm_size
            out[6] += x.update_time
        return out

    sa, sb = sums(a), sums(b)
    names = ("forward", "input-gradient", "weight-gradient")
    phases = [
        PhaseTotal(name, sa[2 * k], sb[2 * k], sa[2 * k + 1], sb[2 * k + 1]) for k, name in enumerate(names)
    ]
    return (*phases, PhaseTotal("update", sa[6], sb[6], 0, 0))


def _traffic(first: Workload, reference: Workload) -> tuple[Traffic, ...]:
    """Each side's collectives per (type, group), the rows where the two differ first. A file holds
    one iteration, so these are its bytes per iteration whatever its layers' granularity (AICB's
    one line per role and block against one per module)."""
    a, b = collectives(first), collectives(reference)
    rows = []
    for key in sorted(a.keys() | b.keys()):
        (count_a, bytes_a), (count_b, bytes_b) = a.get(key, (0, 0)), b.get(key, (0, 0))
        rows.append(Traffic(*key, count_a, count_b, bytes_a, bytes_b))
    return tuple(sorted(rows, key=lambda t: (t.bytes_a == t.bytes_b and t.count_a == t.count_b, t.comm)))
