"""The sweep's picture (SVG, drawn as modtrans/picture.py draws a timeline: plain text, no
library): each layout's throughput (tokens/s, by its best tier) against its memory per GPU (the
most loaded stage's rank) or the GPUs, the Pareto front (no layout faster with no more memory, or
no more GPUs) joined and marked, the simulated finalists labelled."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from modtrans.sweep.rows import Row, front

WIDTH, HEIGHT = 1000, 640
LEFT, RIGHT, TOP, BOTTOM = 90, 30, 50, 60
PLAIN, FRONT, FINALIST = "#9aa7b5", "#e15759", "#4e79a7"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def ticks(low: float, high: float) -> list[float]:
    """4 to 10 ticks on a 1, 2 or 5 step covering low..high."""
    span = max(high - low, 1e-9)
    power = 10 ** math.floor(math.log10(span / 8))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= span / 8)
    start = math.floor(low / step) * step
    return [
        start + k * step for k in range(int((high - start) / step) + 2) if start + k * step <= high + step
    ]


def svg(rows: Sequence[Row], title: str, *, against: str = "memory") -> str:
    shown = [r for r in rows if r.tokens_per_s]
    xs = [float(r.gpus if against == "gpus" else r.memory_gib) for r in shown]
    ys = [float(r.tokens_per_s or 0) for r in shown]
    x_name = "GPUs" if against == "gpus" else "memory per GPU (GiB, the most loaded stage)"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
        f"<title>{_escape(title)}</title>",
        f'<text x="{LEFT}" y="24" font-size="14">{_escape(title)}</text>',
    ]
    if not shown:
        out.append(f'<text x="{LEFT}" y="{HEIGHT // 2}">no layout was estimated</text></svg>')
        return "\n".join(out) + "\n"
    x_ticks = ticks(min(0.0, *xs), max(xs))
    y_ticks = ticks(0.0, max(ys))
    x0, x1, y1 = x_ticks[0], x_ticks[-1], y_ticks[-1]

    def px(x: float) -> float:
        return LEFT + (x - x0) / max(x1 - x0, 1e-9) * (WIDTH - LEFT - RIGHT)

    def py(y: float) -> float:
        return HEIGHT - BOTTOM - y / max(y1, 1e-9) * (HEIGHT - TOP - BOTTOM)

    out += _axes(x_ticks, y_ticks, px, py, x_name)
    on_front = front(list(zip(xs, ys, strict=True)))
    path = " ".join(f"{px(xs[i]):.1f},{py(ys[i]):.1f}" for i in on_front)
    out.append(f'<polyline points="{path}" fill="none" stroke="{FRONT}" stroke-width="1.5"/>')
    marked = set(on_front)
    for i, r in enumerate(shown):
        colour = FINALIST if r.finalist else FRONT if i in marked else PLAIN
        size = 4 if i in marked or r.finalist else 2.5
        tip = f"{r.label}: {ys[i]:,.0f} tokens/s, {r.memory_gib:g} GiB ({r.tier})"
        out.append(
            f'<circle cx="{px(xs[i]):.1f}" cy="{py(ys[i]):.1f}" r="{size}" fill="{colour}">'
            f"<title>{_escape(tip)}</title></circle>"
        )
        if r.finalist:
            out.append(f'<text x="{px(xs[i]) + 6:.1f}" y="{py(ys[i]) - 6:.1f}">{_escape(r.label)}</text>')
    legend = [(PLAIN, "a layout"), (FRONT, "the Pareto front"), (FINALIST, "simulated (ASTRA-sim 2.x)")]
    for k, (colour, name) in enumerate(legend):
        x = WIDTH - RIGHT - 200
        y = TOP + 14 * k
        out.append(
            f'<circle cx="{x}" cy="{y}" r="4" fill="{colour}"/><text x="{x + 8}" y="{y + 4}">{name}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _axes(
    x_ticks: list[float],
    y_ticks: list[float],
    px: Callable[[float], float],
    py: Callable[[float], float],
    x_name: str,
) -> list[str]:
    out = []
    for x in x_ticks:
        out.append(
            f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" y2="{HEIGHT - BOTTOM}" stroke="#eee"/>'
        )
        out.append(f'<text x="{px(x):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{x:g}</text>')
    for y in y_ticks:
        out.append(
            f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{WIDTH - RIGHT}" y2="{py(y):.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:,.0f}</text>')
    middle = (TOP + HEIGHT - BOTTOM) / 2
    out.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 18}" text-anchor="middle">{x_name}</text>'
    )
    turned = f'transform="rotate(-90 18 {middle})"'
    out.append(f'<text x="18" y="{middle}" text-anchor="middle" {turned}>tokens per second</text>')
    return out
