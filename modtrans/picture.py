"""A plan's timeline (plan/timeline.py) as a picture: one lane per pipeline stage, a block per
forward, backward or recomputed forward of a micro-batch and model chunk (odd chunks lighter), its
letter and micro-batch where it is wide enough, sends ticked below their lane, each lane's idle
share at its start. SVG is plain text (no library, any browser shows it); PNG is the same picture
drawn by Pillow (the `png` extra; imported here only).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modtrans.plan.model import Step
from modtrans.plan.timeline import Block, Timeline


class PictureError(ValueError):
    """A picture that cannot be made: an unknown file type, or PNG without Pillow."""


def draw(t: Timeline, title: str, target: Path) -> str | bytes:
    """The picture for `target`'s type: SVG text for .svg, PNG bytes for .png."""
    suffix = target.suffix.lower()
    if suffix == ".svg":
        return svg(t, title)
    if suffix == ".png":
        return png(t, title)
    raise PictureError(f"a picture is FILE.svg or FILE.png, not {target.suffix or 'no suffix'}")


def title_of(name: str, llm: Mapping[str, Any]) -> str:
    """`name: TP2 x PP4 x DP1, interleaved V=2, 8 micro-batches, --recompute none` from a trace set's
    metadata (its `parallel.llm`), or the name alone."""
    if not llm:
        return name
    shape = " x ".join(f"{k.upper()}{llm.get(k, 1)}" for k in ("tp", "pp", "dp"))
    chunks = f" V={llm['vpp']}" if str(llm.get("vpp", "1")) != "1" else ""
    schedule = f"{llm.get('schedule')}{chunks}, {llm.get('ga')} micro-batches"
    return f"{name}: {shape}, {schedule}, --recompute {llm.get('recompute')}"


COLOURS = {
    Step.FWD: "#4e79a7",
    Step.INPUT_GRAD: "#59a14f",
    Step.RECOMPUTE: "#bab0ac",
    Step.WEIGHT_GRAD: "#f28e2b",
}
LETTERS = {Step.FWD: "F", Step.INPUT_GRAD: "B", Step.RECOMPUTE: "R", Step.WEIGHT_GRAD: "W"}
NAMES = {
    Step.FWD: "forward",
    Step.INPUT_GRAD: "backward",
    Step.RECOMPUTE: "recomputed forward",
    Step.WEIGHT_GRAD: "weight gradient",
}


def _shown(t: Timeline) -> list[Step]:
    """The legend's kinds: forward, backward, recomputed forward, and weight gradients where a
    schedule runs them apart (ZB-H1)."""
    split = any(b.step is Step.WEIGHT_GRAD for b in t.blocks)
    return [s for s in COLOURS if s is not Step.WEIGHT_GRAD or split]


LEFT, TOP, LANE = 120, 40, 28


def svg(t: Timeline, title: str, *, width: int = 1400) -> str:
    scale = (width - LEFT - 20) / max(t.end, 1)
    height = TOP + t.stages * (LANE + 8) + 60
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f"<title>{_escape(title)}</title>",
        f'<text x="{LEFT}" y="20" font-size="14">{_escape(title)}</text>',
    ]
    for s in range(t.stages):
        out += _lane(t, s, scale)
    out += _legend(t, TOP + t.stages * (LANE + 8) + 20)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _lane(t: Timeline, s: int, scale: float) -> list[str]:
    y = TOP + s * (LANE + 8)
    idle = 1 - t.busy(s) / t.end if t.end else 0.0
    out = [
        f'<g class="lane" data-stage="{s}">',
        f'<text x="4" y="{y + LANE * 0.65:.1f}">stage {s} ({idle:.0%} idle)</text>',
        f'<rect x="{LEFT}" y="{y}" width="{t.end * scale:.1f}" height="{LANE}" fill="#f4f4f4"/>',
    ]
    for b in (b for b in t.blocks if b.stage == s):
        out += _block(b, y, scale)
    for stage, tick in t.sends:
        if stage == s:
            x, low = f"{LEFT + tick * scale:.2f}", y + LANE
            out.append(f'<line class="send" x1="{x}" y1="{low}" x2="{x}" y2="{low + 5}" stroke="#333"/>')
    out.append("</g>")
    return out


def _rows(b: Block, y: int) -> tuple[float, float]:
    """The block's top and height: the whole lane, or its upper or lower half (an overlapped pair)."""
    return (y, LANE) if b.half == 0 else (y + (b.half - 1) * LANE / 2, LANE / 2)


def _block(b: Block, y: int, scale: float) -> list[str]:
    x, w = LEFT + b.start * scale, max((b.end - b.start) * scale, 0.5)
    top, tall = _rows(b, y)
    label = f"{LETTERS[b.step]}{b.micro}" if b.micro >= 0 else LETTERS[b.step]
    shade = COLOURS[b.step] if b.chunk % 2 == 0 else _lighter(COLOURS[b.step])
    tip = f"stage {b.stage} {NAMES[b.step]} micro-batch {b.micro} chunk {b.chunk}: {b.start:,}-{b.end:,}"
    data = f'data-step="{b.step.value}" data-micro="{b.micro}" data-chunk="{b.chunk}"'
    out = [
        f'<rect class="block" {data} x="{x:.2f}" y="{top:g}" width="{w:.2f}" height="{tall:g}" '
        f'fill="{shade}" stroke="#fff" stroke-width="0.5"><title>{tip}</title></rect>'
    ]
    if w > 9 * len(label):
        at = f'x="{x + w / 2:.1f}" y="{top + tall * 0.65:.1f}"'
        out.append(f'<text {at} text-anchor="middle" fill="#fff">{label}</text>')
    return out


def _legend(t: Timeline, y: int) -> list[str]:
    out = []
    for i, step in enumerate(_shown(t)):
        colour = COLOURS[step]
        out.append(f'<rect x="{LEFT + i * 170}" y="{y}" width="12" height="12" fill="{colour}"/>')
        out.append(f'<text x="{LEFT + i * 170 + 16}" y="{y + 10}">{LETTERS[step]}: {NAMES[step]}</text>')
    note = _note(t)
    out.append(f'<text x="{LEFT}" y="{y + 32}" fill="#777">{note}</text>')
    return out


def _note(t: Timeline) -> str:
    paired = (
        "; half-lane blocks: a forward and a backward overlapped" if any(b.half for b in t.blocks) else ""
    )
    return (
        f"{t.end:,} ticks with a free network; lighter: odd model chunks; ticks below a lane: sends{paired}"
    )


def _lighter(colour: str) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(c + (255 - c) // 2 for c in (r, g, b)))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def png(t: Timeline, title: str, *, width: int = 1400) -> bytes:
    """The SVG's picture as PNG, through Pillow."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:
        raise PictureError("PNG needs Pillow: pip install 'modtrans[png]' (or draw FILE.svg)") from None
    import io

    scale = (width - LEFT - 20) / max(t.end, 1)
    height = TOP + t.stages * (LANE + 8) + 60
    image = Image.new("RGB", (width, height), "white")
    pen = ImageDraw.Draw(image)
    font, big = ImageFont.load_default(size=11), ImageFont.load_default(size=14)
    pen.text((LEFT, 6), title, fill="black", font=big)
    for s in range(t.stages):
        y = TOP + s * (LANE + 8)
        idle = 1 - t.busy(s) / t.end if t.end else 0.0
        pen.text((4, y + LANE * 0.3), f"stage {s} ({idle:.0%} idle)", fill="black", font=font)
        pen.rectangle((LEFT, y, LEFT + t.end * scale, y + LANE), fill="#f4f4f4")
        for b in (b for b in t.blocks if b.stage == s):
            x, w = LEFT + b.start * scale, max((b.end - b.start) * scale, 0.5)
            shade = COLOURS[b.step] if b.chunk % 2 == 0 else _lighter(COLOURS[b.step])
            top, tall = _rows(b, y)
            pen.rectangle((x, top, x + w, top + tall), fill=shade, outline="white")
            label = f"{LETTERS[b.step]}{b.micro}" if b.micro >= 0 else LETTERS[b.step]
            if w > 9 * len(label):
                pen.text((x + w / 2, top + tall / 2), label, fill="white", font=font, anchor="mm")
        for stage, tick in t.sends:
            if stage == s:
                pen.line((LEFT + tick * scale, y + LANE, LEFT + tick * scale, y + LANE + 5), fill="#333")
    y = TOP + t.stages * (LANE + 8) + 20
    for i, step in enumerate(_shown(t)):
        pen.rectangle((LEFT + i * 170, y, LEFT + i * 170 + 12, y + 12), fill=COLOURS[step])
        pen.text((LEFT + i * 170 + 16, y), f"{LETTERS[step]}: {NAMES[step]}", fill="black", font=font)
    note = _note(t)
    pen.text((LEFT, y + 22), note, fill="#777777", font=font)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()
