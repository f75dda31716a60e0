"""IR -> the per-layer table `modtrans inspect` prints (rich), or CSV / JSON rows for machines.

The columns follow the ModTrans paper's tables (layer name, variables, data type, model size) and
add what translation uses: op, output shape and forward FLOPs.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from modtrans.ir.document import Layer, ModelIR, Role


@dataclass(frozen=True)
class Row:
    index: int
    name: str
    op_type: str
    variables: int  # parameter elements counted under the convention
    dtype: str
    bytes: int
    output_shape: str
    forward_flops: int


def rows(ir: ModelIR, *, weights_only: bool = False, all_layers: bool = False) -> list[Row]:
    out: list[Row] = []
    for layer in ir.layers:
        chosen = [p for p in layer.params if p.counted and (p.role is Role.WEIGHT or not weights_only)]
        if weights_only:
            chosen = [p for p in chosen if p.trainable]
        if not chosen and not all_layers:
            continue
        out.append(
            Row(
                index=len(out),
                name=layer.name,
                op_type=layer.op_type,
                variables=sum(p.elements for p in chosen),
                dtype="/".join(sorted({p.dtype for p in chosen})) or "-",
                bytes=sum(p.bytes for p in chosen),
                output_shape=_shape(layer),
                forward_flops=layer.flops.forward,
            )
        )
    return out


def _shape(layer: Layer) -> str:
    if not layer.outputs or layer.outputs[0].shape is None:
        return "?"
    return "x".join(str(d) for d in layer.outputs[0].shape)


@dataclass(frozen=True)
class _Column:
    """One column of the table: its header, a row's cell, the footer's total, which side it is
    justified to, and its least width before it is shortened (0: never shortened)."""

    header: str
    cell: Callable[[Row], str]
    total: Callable[[ModelIR, list[Row]], str]
    right: bool = True
    least: int = 0


_COLUMNS = (
    _Column("#", lambda r: str(r.index), lambda ir, s: ""),
    _Column("layer", lambda r: r.name, lambda ir, s: "total", right=False, least=16),
    _Column("op", lambda r: r.op_type, lambda ir, s: "", right=False, least=8),
    _Column("params", lambda r: si(r.variables), lambda ir, s: si(sum(r.variables for r in s))),
    _Column("dtype", lambda r: r.dtype, lambda ir, s: "", right=False),
    _Column("bytes", lambda r: si(r.bytes), lambda ir, s: si(sum(r.bytes for r in s))),
    _Column("output", lambda r: r.output_shape, lambda ir, s: "", right=False, least=9),
    _Column("FLOPs\nfwd", lambda r: si(r.forward_flops), lambda ir, s: si(ir.totals.flops.forward)),
)

_GIVE_WAY = ("dtype", "bytes")
"""The columns dropped, in turn, while the cells are wider than the console: what the others and
the totals below the table imply (one dtype, or bytes = params x its size)."""

_SHRINKS = ("op", "output", "layer")
"""The columns shortened, in turn, down to their least width, once none is left to drop."""

_INDENT = "  "
"""Before a layer's name within its block."""


def table(ir: ModelIR, selected: list[Row], width: int | None = None) -> Table:
    """One line per layer at any `width` (None: as wide as the cells), no cell wrapped or folded.

    A run of layers in one numbered block (`model.layers.3`, `layer1.0`) gets the block's name on
    a line of its own and each layer its name within it (`self_attn.q_proj`): the width goes to
    the part that tells layers apart. Numbers carry SI prefixes (16.8M, 1.05G). Where the cells
    are still too wide the dtype, then the bytes, give way, and then the op, the shape and the
    name are shortened in the middle (`RMSNo…ation`); --format csv / json keep every value whole.
    """
    columns = [c for c in _COLUMNS if c.header != "dtype" or len(_dtypes(selected)) > 1]
    lines = _lines(selected)
    widths = _natural(ir, selected, columns, lines)
    if width is not None:
        room = width - (len(columns) - 1)  # one space between columns
        for name in _GIVE_WAY:
            if sum(widths) <= room:
                break
            kept = [i for i, c in enumerate(columns) if c.header != name]
            columns, widths = [columns[i] for i in kept], [widths[i] for i in kept]
            room = width - (len(columns) - 1)
        widths = _fitted(columns, widths, room)
    t = Table(show_footer=True, box=None, padding=(0, 0, 0, 1), pad_edge=False)
    for c, w in zip(columns, widths, strict=True):
        t.add_column(
            c.header,
            footer=c.total(ir, selected),
            justify="right" if c.right else "left",
            no_wrap=True,
            width=w,
        )
    for _, row, name in lines:
        t.add_row(*(_cell(c, row, name, w) for c, w in zip(columns, widths, strict=True)))
    return t


def heading(title: str, selected: list[Row]) -> str:
    """The line above the table: `title`, and the parameters' dtype where they have one (the
    table then has no dtype column). Printed by the console, as wide as it, not the table."""
    dtypes = _dtypes(selected)
    return f"{title}, {dtypes[0]}" if len(dtypes) == 1 else title


def _dtypes(selected: list[Row]) -> list[str]:
    return sorted({d for r in selected for d in r.dtype.split("/")} - {"-"})


def _lines(selected: list[Row]) -> list[tuple[str, Row | None, str]]:
    """The table's lines as (block, row, name shown): a block's heading (row None) before a run
    of two or more layers in it, their names within it indented; any other layer's whole."""
    keys = [block(r.name) for r in selected]
    out: list[tuple[str, Row | None, str]] = []
    for i, (r, key) in enumerate(zip(selected, keys, strict=True)):
        run = key is not None and (
            (i > 0 and keys[i - 1] == key) or (i + 1 < len(keys) and keys[i + 1] == key)
        )
        if not run or key is None:
            out.append(("", r, r.name))
            continue
        if i == 0 or keys[i - 1] != key:
            out.append((key, None, key))
        out.append((key, r, _INDENT + r.name[len(key) + 1 :]))
    return out


def block(name: str) -> str | None:
    """The numbered block a layer's dotted name is in: its name up to the first numeric part that
    is not the last (`model.layers.3` of `model.layers.3.mlp.up_proj`, `layer1.0` of
    `layer1.0.downsample.0`); None for a name with no such part."""
    parts = name.split(".")
    for i in range(1, len(parts) - 1):
        if parts[i].isdigit():
            return ".".join(parts[: i + 1])
    return None


def _natural(
    ir: ModelIR, selected: list[Row], columns: list[_Column], lines: list[tuple[str, Row | None, str]]
) -> list[int]:
    """Each column's width with every cell whole: its header's, its total's, its widest cell's."""
    names = [name for _, _, name in lines]
    out = []
    for c in columns:
        cells = names if c.header == "layer" else [c.cell(r) for r in selected]
        out.append(max([*map(len, c.header.split("\n")), len(c.total(ir, selected)), *map(len, cells)]))
    return out


def _fitted(columns: list[_Column], widths: list[int], room: int) -> list[int]:
    """`widths` narrowed, in _SHRINKS' order, until they sum to `room` (as near as the least
    widths allow: below them the console crops rather than fold a token)."""
    out = list(widths)
    for name in _SHRINKS:
        over = sum(out) - room
        if over <= 0:
            break
        i = next(i for i, c in enumerate(columns) if c.header == name)
        out[i] = max(columns[i].least, out[i] - over)
    return out


def _cell(column: _Column, row: Row | None, name: str, width: int) -> str:
    """A line's cell in `width`: a block's heading has its name only; a name within a block keeps
    its indent and is shortened after it."""
    if column.header == "layer":
        indent = _INDENT if name.startswith(_INDENT) else ""
        return indent + shortened(name[len(indent) :], width - len(indent))
    return "" if row is None else shortened(column.cell(row), width)


def shortened(text: str, width: int) -> str:
    """`text` in `width` characters: whole, or its start and end around an ellipsis."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return f"{text[: width - 1 - tail]}…{text[len(text) - tail :] if tail else ''}"


def si(n: float) -> str:
    """`n` in three significant digits and an SI prefix (256, 4.1k, 16.8M, 1.05G, 2.15T): a
    column's magnitudes at a glance; --format csv / json keep the exact counts."""
    for prefix in ("", "k", "M", "G", "T", "P"):
        if abs(n) < 999.5 or prefix == "P":
            return f"{n:.3g}{prefix}"
        n /= 1000
    raise AssertionError  # the loop returns at "P"


def print_table(
    ir: ModelIR, selected: list[Row], title: str, *, color: bool | None, width: int | None
) -> None:
    console = Console(no_color=color is False, highlight=False, width=width, soft_wrap=False)
    console.print(heading(title, selected))
    console.print(table(ir, selected, console.width))
    f, t = ir.totals.flops, ir.totals
    console.print(
        f"{t.layers} IR layers; {t.params:,} parameters ({t.param_bytes:,} bytes), "
        f"{t.trainable_params:,} trainable; FLOPs forward {si(f.forward)}, "
        f"input-grad {si(f.input_grad)}, weight-grad {si(f.weight_grad)}"
    )
    console.print(
        f"parameters: {t.params:,} in all, {t.params - t.embedding_params:,} without the embedding tables; "
        f"active per token {t.active_params:,} ({t.active_params - t.embedding_params:,} without)"
    )


def to_csv(selected: list[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["index", "layer", "op", "variables", "dtype", "bytes", "output_shape", "forward_flops"])
    for r in selected:
        writer.writerow(
            [r.index, r.name, r.op_type, r.variables, r.dtype, r.bytes, r.output_shape, r.forward_flops]
        )
    return buffer.getvalue()
