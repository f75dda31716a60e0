"""A plan's timeline (plan/timeline.py) as a picture: one lane per pipeline stage, a block per
forward, backward or recomputed forward of a micro-batch and model chunk (odd chunks lighter), its
letter and micro-batch where it is wide enough (a narrower block its letter, or nothing, and the
legend counts them), sends ticked below their lane, each lane's idle share at its start, and a
time axis in ns, µs or ms as the iteration's span asks. SVG is plain text (no library, any
browser shows it); PNG is the same picture drawn by Pillow (the `png` extra; imported here only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modtrans.plan.model import Step
from modtrans.plan.timeline import Block, Timeline
from modtrans.strategy.llm.degrees import named


class PictureError(ValueError):
    """A picture that cannot be made: an unknown file type, or PNG without Pillow."""


def draw(t: Timeline, title: str, target: Path, *, tick_ns: float) -> str | bytes:
    """The picture for `target`'s type: SVG text for .svg, PNG bytes for .png; a tick of the
    timeline is `tick_ns` nanoseconds (a plan's clock, or a trace's microsecond)."""
    suffix = target.suffix.lower()
    if suffix == ".svg":
        return svg(t, title, tick_ns=tick_ns)
    if suffix == ".png":
        return png(t, title, tick_ns=tick_ns)
    raise PictureError(f"a picture is FILE.svg or FILE.png, not {target.suffix or 'no suffix'}")


def title_of(name: str, llm: Mapping[str, Any], npus: int | None = None) -> str:
    """`name: TP2 x PP4 x DP2 (EP2), interleaved V=2, 8 micro-batches, --recompute none` from a
    layout's `parallel.llm` (sidecar.llm_of: DP is the layout's D, experts carved from it), or
    `name: 8 NPUs, one stage` without a layout (the name alone where the NPUs are not known)."""
    if not llm:
        return name if npus is None else f"{name}: {npus} NPU{'s' if npus != 1 else ''}, one stage"
    always, rest = named(llm)
    shape = " x ".join(always) + (f" ({', '.join(rest)})" if rest else "")
    chunks = f" V={llm['vpp']}" if llm.get("vpp", 1) != 1 else ""
    schedule = f"{llm.get('schedule')}{chunks}, {llm.get('ga')} micro-batches"
    return f"{name}: {shape}, {schedule}, --recompute {llm.get('recompute')}"


UNITS = (("ms", 1e6), ("µs", 1e3), ("ns", 1.0))


def axis(span_ns: float) -> tuple[str, float, list[float]]:
    """The time axis of a span: its unit (the largest of ms, µs, ns the span holds once), the
    unit's ns, and the ticks in ns: 0 and each multiple of a 1, 2 or 5 step, 4 to 10 of them."""
    unit, size = next(((u, n) for u, n in UNITS if span_ns >= n), UNITS[-1])
    if span_ns <= 0:
        return unit, size, [0.0]
    rough = span_ns / 8
    power = 10 ** math.floor(math.log10(rough))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= rough)
    return unit, size, [k * step for k in range(int(span_ns // step) + 1)]


def duration(ns: float, unit: str, size: float) -> str:
    """`ns` in `unit` (of `size` ns), with the decimals its value needs (at most 3)."""
    value = ns / size
    text = f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"


COLOURS = {
    Step.FWD: "#4e79a7",
    Step.INPUT_GRAD: "#59a14f",
    Step.RECOMPUTE: "#bab0ac",
    Step.WEIGHT_GRAD: "#f28e2b",
    Step.UPDATE: "#b07aa1",
    Step.GRAD_SYNC: "#76b7b2",
}
LETTERS = {
    Step.FWD: "F", Step.INPUT_GRAD: "B", Step.RECOMPUTE: "R", Step.WEIGHT_GRAD: "W", Step.UPDATE: "U",
    Step.GRAD_SYNC: "S",
}  # fmt: skip
NAMES = {
    Step.FWD: "forward",
    Step.INPUT_GRAD: "backward",
    Step.RECOMPUTE: "recomputed forward",
    Step.WEIGHT_GRAD: "weight gradient",
    Step.UPDATE: "optimizer step",
    Step.GRAD_SYNC: "gradient sync kernels",
}


def _shown(t: Timeline) -> list[Step]:
    """The legend's kinds: forward, backward, recomputed forward, weight gradients where a
    schedule runs them apart (ZB-H1), the optimizer step and the bucket kernels where the plan has
    them."""
    present = {b.step for b in t.blocks}
    return [s for s in COLOURS if s not in (Step.WEIGHT_GRAD, Step.UPDATE, Step.GRAD_SYNC) or s in present]


LEFT, TOP, LANE, AXIS = 120, 40, 28, 30
CHAR = 9  # pixels a label's character is given (11-px sans-serif is 6 to 7 wide: room to read)


def _label(b: Block, w: float) -> str | None:
    """The block's label for its width in pixels: letter and micro-batch, the letter alone, or
    none (the legend counts the blocks without their full label)."""
    return next((text for text in (_full(b), LETTERS[b.step]) if w > CHAR * len(text) + 2), None)


def _height(t: Timeline) -> int:
    return TOP + t.stages * (LANE + 8) + AXIS + 76  # the legend and two lines of notes


def svg(t: Timeline, title: str, *, tick_ns: float, width: int = 1400) -> str:
    scale = (width - LEFT - 20) / max(t.end, 1)
    height = _height(t)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{_escape(title)}</title>",
        f'<text x="{LEFT}" y="20" font-size="14">{_escape(title)}</text>',
    ]
    for s in range(t.stages):
        out += _lane(t, s, scale, tick_ns)
    out += _axis(t, scale, tick_ns)
    out += _legend(t, TOP + t.stages * (LANE + 8) + AXIS + 14, scale, tick_ns)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _axis(t: Timeline, scale: float, tick_ns: float) -> list[str]:
    y = TOP + t.stages * (LANE + 8)
    unit, size, ticks = axis(t.end * tick_ns)
    end = LEFT + t.end * scale
    out = [
        f'<g class="axis" data-unit="{unit}">',
        f'<line x1="{LEFT}" y1="{y}" x2="{end:.1f}" y2="{y}" stroke="#333"/>',
    ]
    for ns in ticks:
        x = LEFT + ns / tick_ns * scale
        out.append(f'<line x1="{x:.2f}" y1="{y}" x2="{x:.2f}" y2="{y + 4}" stroke="#333"/>')
        label = duration(ns, unit, size)
        out.append(
            f'<text class="tick" data-ns="{ns:.3f}" x="{x:.2f}" y="{y + 16}" '
            f'text-anchor="middle">{label}</text>'
        )
    out.append("</g>")
    return out


def _lane(t: Timeline, s: int, scale: float, tick_ns: float) -> list[str]:
    y = TOP + s * (LANE + 8)
    idle = 1 - t.busy(s) / t.end if t.end else 0.0
    out = [
        f'<g class="lane" data-stage="{s}">',
        f'<text x="4" y="{y + LANE * 0.65:.1f}">stage {s} ({idle:.0%} idle)</text>',
        f'<rect x="{LEFT}" y="{y}" width="{t.end * scale:.1f}" height="{LANE}" fill="#f4f4f4"/>',
    ]
    for b in (b for b in t.blocks if b.stage == s):
        out += _block(b, y, scale, tick_ns)
    for stage, tick in t.sends:
        if stage == s:
            x, low = f"{LEFT + tick * scale:.2f}", y + LANE
            out.append(f'<line class="send" x1="{x}" y1="{low}" x2="{x}" y2="{low + 5}" stroke="#333"/>')
    out.append("</g>")
    return out


def _rows(b: Block, y: int) -> tuple[float, float]:
    """The block's top and height: the whole lane, or its upper or lower half (an overlapped pair)."""
    return (y, LANE) if b.half == 0 else (y + (b.half - 1) * LANE / 2, LANE / 2)


def _block(b: Block, y: int, scale: float, tick_ns: float) -> list[str]:
    x, w = LEFT + b.start * scale, _width(b, scale)
    top, tall = _rows(b, y)
    shade = COLOURS[b.step] if b.chunk % 2 == 0 else _lighter(COLOURS[b.step])
    span = f"{b.start * tick_ns:,.0f}-{b.end * tick_ns:,.0f} ns"
    tip = f"stage {b.stage} {NAMES[b.step]} micro-batch {b.micro} chunk {b.chunk}: {span}"
    data = f'data-step="{b.step.value}" data-micro="{b.micro}" data-chunk="{b.chunk}"'
    out = [
        f'<rect class="block" {data} x="{x:.2f}" y="{top:g}" width="{w:.2f}" height="{tall:g}" '
        f'fill="{shade}" stroke="#fff" stroke-width="0.5"><title>{tip}</title></rect>'
    ]
    if (label := _label(b, w)) is not None:
        at = f'x="{x + w / 2:.1f}" y="{top + tall * 0.65:.1f}"'
        out.append(f'<text class="label" {at} text-anchor="middle" fill="#fff">{label}</text>')
    return out


def _legend(t: Timeline, y: int, scale: float, tick_ns: float) -> list[str]:
    out = []
    for i, step in enumerate(_shown(t)):
        colour = COLOURS[step]
        out.append(f'<rect x="{LEFT + i * 170}" y="{y}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{LEFT + i * 170 + 16}" y="{y + 10}">{LETTERS[step]}: {NAMES[step]}</text>')
    for i, line in enumerate(_notes(t, scale, tick_ns)):
        out.append(f'<text class="note" x="{LEFT}" y="{y + 32 + 14 * i}" fill="#777">{line}</text>')
    return out


def _notes(t: Timeline, scale: float, tick_ns: float) -> list[str]:
    """The legend's notes: the iteration's time (ns, one unit whatever the source), what the
    shades and marks mean, and how many blocks are too narrow for their full label."""
    unit, size, _ = axis(t.end * tick_ns)
    end = t.end * tick_ns
    paired = (
        "; half-lane blocks: a forward and a backward overlapped" if any(b.half for b in t.blocks) else ""
    )
    first = (
        f"{duration(end, unit, size)} ({end:,.0f} ns) per iteration with a free network; "
        f"lighter: odd model chunks; ticks below a lane: sends{paired}"
    )
    short = sum(_label(b, _width(b, scale)) != _full(b) for b in t.blocks)
    if not short:
        return [first]
    narrow = f"{short:,} of {len(t.blocks):,} blocks too narrow for their label (step and micro-batch)"
    return [first, f"{narrow}: a letter or the colour gives the step, an SVG's tooltip the rest"]


def _full(b: Block) -> str:
    return f"{LETTERS[b.step]}{b.micro}" if b.micro >= 0 else LETTERS[b.step]


def _width(b: Block, scale: float) -> float:
    return max((b.end - b.start) * scale, 0.5)


def _lighter(colour: str) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(c + (255 - c) // 2 for c in (r, g, b)))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def png(t: Timeline, title: str, *, tick_ns: float, width: int = 1400) -> bytes:
    """The SVG's picture as PNG, through Pillow."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise PictureError("PNG needs Pillow: pip install 'modtrans[png]' (or draw FILE.svg)") from None
    import io

    scale = (width - LEFT - 20) / max(t.end, 1)
    image = Image.new("RGB", (width, _height(t)), "white")
    pen = ImageDraw.Draw(image)
    font, big = ImageFont.load_default(size=11), ImageFont.load_default(size=14)
    pen.text((LEFT, 6), title, fill="black", font=big)
    for s in range(t.stages):
        y = TOP + s * (LANE + 8)
        idle = 1 - t.busy(s) / t.end if t.end else 0.0
        pen.text((4, y + LANE * 0.3), f"stage {s} ({idle:.0%} idle)", fill="black", font=font)
        pen.rectangle((LEFT, y, LEFT + t.end * scale, y + LANE), fill="#f4f4f4")
        for b in (b for b in t.blocks if b.stage == s):
            x, w = LEFT + b.start * scale, _width(b, scale)
            shade = COLOURS[b.step] if b.chunk % 2 == 0 else _lighter(COLOURS[b.step])
            top, tall = _rows(b, y)
            pen.rectangle((x, top, x + w, top + tall), fill=shade, outline="white")
            if (label := _label(b, w)) is not None:
                pen.text((x + w / 2, top + tall / 2), label, fill="white", font=font, anchor="mm")
        for stage, tick in t.sends:
            if stage == s:
                pen.line((LEFT + tick * scale, y + LANE, LEFT + tick * scale, y + LANE + 5), fill="#333")
    y = TOP + t.stages * (LANE + 8)
    unit, size, ticks = axis(t.end * tick_ns)
    pen.line((LEFT, y, LEFT + t.end * scale, y), fill="#333")
    for ns in ticks:
        x = LEFT + ns / tick_ns * scale
        pen.line((x, y, x, y + 4), fill="#333")
        pen.text((x, y + 6), duration(ns, unit, size), fill="black", font=font, anchor="ma")
    y += AXIS + 14
    for i, step in enumerate(_shown(t)):
        pen.rectangle((LEFT + i * 170, y, LEFT + i * 170 + 12, y + 12), fill=COLOURS[step])
        pen.text((LEFT + i * 170 + 16, y), f"{LETTERS[step]}: {NAMES[step]}", fill="black", font=font)
    for i, line in enumerate(_notes(t, scale, tick_ns)):
        pen.text((LEFT, y + 22 + 14 * i), line, fill="#777777", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
