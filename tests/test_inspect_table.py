"""`modtrans inspect MODEL`'s table at 80 and 120 columns, read back against --format csv: one line
per layer within the width, no cell folded onto a second line, a block's layers under its heading,
a shortened cell the start and end of the whole value, a number with an SI prefix the exact count
to its three digits, and every layer's name whole on the four models (a CNN, a dense LLM, a mixture
of experts, Gemma 3's extra norms)."""

from __future__ import annotations

import csv
import functools
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = [  # an ONNX built-in, an LLM built-in, Hugging Face config.json files as the Hub has them
    "resnet50",
    "llama-3-8b",
    str(ROOT / "modtrans" / "zoo" / "configs" / "mixtral-8x7b.json"),
    str(ROOT / "fixtures" / "configs" / "gemma-3-1b-pt.json"),
]
PREFIXES = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}


@functools.cache
def _inspect(model: str, *options: str, columns: int = 80) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "inspect", model, *options],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _csv(model: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_inspect(model, "--format", "csv"))))


@dataclass
class Shown:
    """One layer's line of the table, its name joined to the block heading above it."""

    index: str
    block: str  # the heading above an indented name, "" for a name of its own
    name: str
    cells: dict[str, str]  # by header: op, params, dtype, bytes, output, fwd


def _read(text: str) -> tuple[list[str], list[Shown], str]:
    """The table's lines, its layers and its title, located by the header's columns."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:3] == ["#", "layer", "op"])
    header = lines[at]
    name_at, op_at = header.index("layer"), header.index(" op ") + 1
    headers = header[op_at:].split()
    shown: list[Shown] = []
    block = ""
    for line in lines[at + 1 :]:
        index, name = line[:name_at].strip(), line[name_at:op_at].rstrip()
        if name.strip() == "total":
            break
        if not index:  # a block's heading: a name and nothing else
            assert line[op_at:].strip() == "", line
            assert not name.startswith(" "), line
            block = name
            continue
        values = line[op_at:].split()
        assert len(values) == len(headers), line
        within = name.startswith("  ")
        shown.append(
            Shown(index, block if within else "", name.strip(), dict(zip(headers, values, strict=True)))
        )
    else:
        raise AssertionError("no total line")
    return lines, shown, lines[at - 2]


def _matches(cell: str, whole: str) -> bool:
    if cell == whole:
        return True
    head, _, tail = cell.partition("…")
    return "…" in cell and whole.startswith(head) and whole.endswith(tail) and len(cell) < len(whole)


def _value(cell: str) -> float:
    return float(cell.rstrip("kMGTP")) * PREFIXES[cell.lstrip("0123456789.")]


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: Path(m).name)
def test_the_table_reads_back_as_the_csv(model: str, columns: int) -> None:
    wanted = _csv(model)
    lines, shown, _ = _read(_inspect(model, columns=columns))
    assert all(len(line.rstrip()) <= columns for line in lines), max(lines, key=len)
    assert len(shown) == len(wanted)  # one line per layer: no line of a folded cell between
    for row, whole in zip(shown, wanted, strict=True):
        assert row.index == whole["index"]
        name = f"{row.block}.{row.name}" if row.block else row.name
        assert _matches(name, whole["layer"]), (row, whole["layer"])
        assert _matches(row.cells["op"], whole["op"]), (row, whole["op"])
        assert _matches(row.cells["output"], whole["output_shape"]), (row, whole["output_shape"])
        for header, key in (("params", "variables"), ("bytes", "bytes"), ("fwd", "forward_flops")):
            if header in row.cells:  # three significant digits: within half a unit of the third
                exact = int(whole[key])
                assert abs(_value(row.cells[header]) - exact) <= 0.005 * exact, (row, header, exact)


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: Path(m).name)
def test_every_name_is_whole_and_under_its_block(model: str, columns: int) -> None:
    """What tells the layers apart (q_proj from k_proj, experts.w1 from experts.w3, a ResNet block's
    downsample.0) is shown whole: a block's common prefix is said once, in its heading."""
    wanted = _csv(model)
    _, shown, _ = _read(_inspect(model, columns=columns))
    names = [f"{row.block}.{row.name}" if row.block else row.name for row in shown]
    assert names == [row["layer"] for row in wanted]
    blocks = {row.block for row in shown if row.block}
    assert blocks, "no block heading"
    tails = {row.name for row in shown if row.block}
    if model != "resnet50":
        assert {"self_attn.q_proj", "self_attn.k_proj", "input_layernorm"} <= tails, sorted(tails)


def test_a_single_dtype_is_said_once_in_the_title() -> None:
    """Every parameter of llama-3-8b is bfloat16 (its config's torch_dtype): the title says so and
    the width goes to the names."""
    assert {row["dtype"] for row in _csv("llama-3-8b")} == {"bfloat16"}
    _, shown, title = _read(_inspect("llama-3-8b", columns=120))
    assert title.rstrip().endswith(", bfloat16"), title
    assert "dtype" not in shown[0].cells


@pytest.mark.parametrize("model", MODELS[1:], ids=lambda m: Path(m).name)
def test_narrower_still_a_cell_is_shortened_in_the_middle_never_folded(model: str) -> None:
    wanted = _csv(model)
    lines, shown, _ = _read(_inspect(model, columns=60))
    assert all(len(line.rstrip()) <= 60 for line in lines), max(lines, key=len)
    assert len(shown) == len(wanted)
    assert any("…" in row.name or "…" in row.cells["output"] for row in shown)
    for row, whole in zip(shown, wanted, strict=True):
        name = f"{row.block}.{row.name}" if row.block else row.name
        assert _matches(name, whole["layer"]), (row, whole["layer"])
        assert _matches(row.cells["output"], whole["output_shape"]), (row, whole["output_shape"])
