"""IR -> the per-layer table `modtrans inspect` prints (rich), or CSV / JSON rows for machines.

The columns follow the ModTrans paper's tables (layer name, variables, data type, model size) and
add what translation uses: op, output shape and forward GFLOPs.
"""

from __future__ import annotations

import csv
import io
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


def table(ir: ModelIR, selected: list[Row], title: str, width: int | None = None) -> Table:
    """One line per layer at any `width` (None: as wide as the cells): no cell wraps or folds
    mid-token; the layer name, then the op type and the shape, are shortened in the middle
    (`layer1.0.…conv2`) to fit. --format csv / json keep them whole."""
    cells = [
        [
            str(r.index),
            r.name,
            r.op_type,
            f"{r.variables:,}",
            r.dtype,
            f"{r.bytes:,}",
            r.output_shape,
            f"{r.forward_flops / 1e9:,.3f}",
        ]
        for r in selected
    ]
    footer = [
        "",
        "total",
        "",
        f"{sum(r.variables for r in selected):,}",
        "",
        f"{sum(r.bytes for r in selected):,}",
        "",
        f"{ir.totals.flops.forward / 1e9:,.3f}",
    ]
    headers = ["#", "layer", "op", "variables", "dtype", "bytes", "output", "GFLOPs\nfwd"]
    widths = [
        max([*map(len, headers[i].split("\n")), len(footer[i]), *(len(c[i]) for c in cells)])
        for i in range(len(headers))
    ]
    if width is not None:
        widths = _fitted(widths, width - (len(headers) - 1))  # one space between columns
    numeric = {0, 3, 5, 7}
    t = Table(
        title=title, title_justify="left", show_footer=True, box=None, padding=(0, 0, 0, 1), pad_edge=False
    )
    for i, header in enumerate(headers):
        t.add_column(
            header,
            footer=footer[i],
            justify="right" if i in numeric else "left",
            no_wrap=True,
            width=widths[i],
        )
    for c in cells:
        t.add_row(*(shortened(text, widths[i]) for i, text in enumerate(c)))
    return t


_SHRINKS = ((1, 16), (2, 8), (6, 9), (1, 8))
"""Which column gives way, in turn, and its least width: the layer name, the op type, the shape,
then the name again."""


def _fitted(widths: list[int], room: int) -> list[int]:
    """`widths` narrowed, in _SHRINKS' order, until they sum to `room` (as near as the least
    widths allow: below them the console crops rather than fold a token)."""
    out = list(widths)
    for column, least in _SHRINKS:
        over = sum(out) - room
        if over <= 0:
            break
        out[column] = max(least, out[column] - over)
    return out


def shortened(text: str, width: int) -> str:
    """`text` in `width` characters: whole, or its start and end around an ellipsis."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return f"{text[: width - 1 - tail]}…{text[len(text) - tail :] if tail else ''}"


def print_table(
    ir: ModelIR, selected: list[Row], title: str, *, color: bool | None, width: int | None
) -> None:
    console = Console(no_color=color is False, highlight=False, width=width, soft_wrap=False)
    console.print(table(ir, selected, title, console.width))
    f, t = ir.totals.flops, ir.totals
    console.print(
        f"{t.layers} IR layers; {t.params:,} parameters ({t.param_bytes:,} bytes), "
        f"{t.trainable_params:,} trainable; GFLOPs forward {f.forward / 1e9:,.3f}, "
        f"input-grad {f.input_grad / 1e9:,.3f}, weight-grad {f.weight_grad / 1e9:,.3f}"
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
