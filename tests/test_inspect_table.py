"""`modtrans inspect MODEL`'s table at 80 and 120 columns: one line per layer within the width, no
token folded onto a second line, a shortened name, op or shape the start and end of the whole
one (which --format csv keeps)."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODELS = [  # an ONNX built-in, a Hugging Face config.json as the Hub has it (a mixture of experts)
    "resnet50",
    str(ROOT / "modtrans" / "zoo" / "configs" / "mixtral-8x7b.json"),
    str(ROOT / "fixtures" / "configs" / "gemma-3-1b-pt.json"),
]


def _inspect(model: str, *options: str, columns: int = 80) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "inspect", model, *options],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _matches(cell: str, whole: str) -> bool:
    if cell == whole:
        return True
    head, _, tail = cell.partition("…")
    return "…" in cell and whole.startswith(head) and whole.endswith(tail) and len(cell) < len(whole)


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("model", MODELS, ids=lambda m: Path(m).name)
def test_the_table_is_one_line_per_layer_within_the_width(model: str, columns: int) -> None:
    wanted = list(csv.DictReader(io.StringIO(_inspect(model, "--format", "csv"))))
    lines = _inspect(model, columns=columns).splitlines()
    assert all(len(line.rstrip()) <= columns for line in lines), max(lines, key=len)
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "layer"]) + 1
    body = lines[start : start + len(wanted)]
    assert lines[start + len(wanted)].split()[0] == "total"  # no line of a folded cell between
    for line, row in zip(body, wanted, strict=True):
        cells = line.split()
        assert len(cells) == 8, line
        index, name, op, *_, shape, _ = cells
        assert index == row["index"]
        assert _matches(name, row["layer"]), (name, row["layer"])
        assert _matches(op, row["op"]), (op, row["op"])
        assert _matches(shape, row["output_shape"]), (shape, row["output_shape"])


def test_at_120_columns_resnet50_names_and_ops_are_whole() -> None:
    """ResNet-50's longest name (layer1.0.downsample.0, 21) and op (BatchNormalization) fit."""
    text = _inspect("resnet50", columns=120)
    assert " layer1.0.downsample.0 " in text
    assert " BatchNormalization " in text
    assert "…" not in text
