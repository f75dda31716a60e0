"""schema.inline_refs: the validators follow no `$ref` (each was a registry lookup), and they find
exactly what the schemas as written find, with the same messages at the same paths."""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest

import modtrans
from modtrans import resources, schema
from modtrans.ir import document
from modtrans.workload import jsonform

ROOT = Path(__file__).resolve().parent.parent


def _instances(name: str) -> list[Any]:
    """Real documents of the schema, cut to a few layers (each is validated ~120 times)."""
    if name == "model-ir":
        found = [document.to_dict(modtrans.extract(model)) for model in ("resnet50", "llama-3-8b")]
        for ir in found:
            ir["layers"] = ir["layers"][:4]
        return found
    if name == "workload":
        texts = sorted((ROOT / "fixtures" / "workloads" / "corpus").rglob("*.txt"))[:8]
        parsed = [modtrans.parse(p.read_bytes().decode(errors="replace")).workload for p in texts]
        documents = [json.loads(jsonform.dumps(w)) for w in parsed if w is not None]
        for one in documents:
            one["layers"] = one["layers"][:4]
        return documents
    return list(json.loads((ROOT / "modtrans" / "cost" / "devices.json").read_text()).values())


def _places(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            found += _places(item, (*at, index))
    return found


def _mutated(instance: Any, rng: random.Random, count: int) -> list[Any]:
    """`count` copies of `instance`, each with one value replaced or one key removed or added."""
    places = _places(instance)[1:]
    out = []
    for _ in range(count):
        copied = copy.deepcopy(instance)
        *parent_path, last = rng.choice(places)
        parent = copied
        for step in parent_path:
            parent = parent[step]
        choice = rng.randrange(4)
        if choice == 0 and isinstance(parent, dict):
            del parent[last]
        elif choice == 1 and isinstance(parent, dict):
            parent["unexpected"] = 1
        else:
            parent[last] = rng.choice(["x", -1, 1.5, None, [], {}, True, "", 2**70])
        out.append(copied)
    return out


def _errors(validator: Any, instance: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (json.dumps(list(e.absolute_path)), e.validator, e.message) for e in validator.iter_errors(instance)
    )


@pytest.mark.parametrize("name", ["model-ir", "workload", "device"])
def test_inlined_schemas_find_what_the_schemas_as_written_find(name: str) -> None:
    written = resources.schema(name)
    inlined = schema.inline_refs(written)
    body = {k: v for k, v in inlined.items() if k != "$defs"}
    assert "$ref" not in json.dumps(body)  # nothing left to look up
    as_written, ours = schema.compile_schema(written), schema.validator(name)
    rng = random.Random(16)
    cases = failing = 0
    for instance in _instances(name):
        assert _errors(ours, instance) == []
        for case in _mutated(instance, rng, 60):
            found = _errors(as_written, case)
            assert _errors(ours, case) == found
            cases, failing = cases + 1, failing + bool(found)
    assert cases >= 120
    assert failing > cases // 2  # most mutations break the document


def test_a_schema_that_refers_to_itself_is_kept_as_written() -> None:
    recursive = {
        "$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
        "$ref": "#/$defs/tree",
    }
    assert schema.inline_refs(recursive) is recursive
