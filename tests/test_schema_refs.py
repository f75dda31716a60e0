"""schema.inline_refs: the validators follow no `$ref` (each was a registry lookup), and they find
exactly what the schemas as written find, with the same messages at the same paths. schema.valid:
the predicates compiled from the schemas give jsonschema's verdict."""

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
            parent[last] = rng.choice(["x", -1, 0, 1, 1.0, 1.5, None, [], {}, True, False, "", "a b", 2**70])
        out.append(copied)
    return out


def _errors(validator: Any, instance: Any) -> list[tuple[str, str, str]]:
    return sorted(
        (json.dumps(list(e.absolute_path)), e.validator, e.message) for e in validator.iter_errors(instance)
    )


@pytest.mark.fuzz  # 360 mutated real documents through both validators
@pytest.mark.parametrize("name", ["model-ir", "workload", "device"])
def test_inlined_schemas_find_what_the_schemas_as_written_find(name: str) -> None:
    written = resources.schema(name)
    inlined = schema.inline_refs(written)
    body = {k: v for k, v in inlined.items() if k != "$defs"}
    assert "$ref" not in json.dumps(body)  # nothing left to look up
    as_written, ours = schema.compile_schema(written), schema.validator(name)
    fast = schema.valid(name)
    assert fast is not None  # every shipped schema compiles
    rng = random.Random(16)
    cases = failing = 0
    for instance in _instances(name):
        assert _errors(ours, instance) == []
        assert fast(instance)
        for case in _mutated(instance, rng, 120):
            found = _errors(as_written, case)
            assert _errors(ours, case) == found
            assert fast(case) == (not found), found
            cases, failing = cases + 1, failing + bool(found)
    assert cases >= 240
    assert failing > cases // 2  # most mutations break the document


def test_a_schema_that_refers_to_itself_is_kept_as_written() -> None:
    recursive = {
        "$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
        "$ref": "#/$defs/tree",
    }
    assert schema.inline_refs(recursive) is recursive


def test_the_compiled_predicates_follow_jsonschemas_equality_and_types() -> None:
    """The corners where JSON Schema's meaning is not Python's: a bool is not an integer (nor a
    number a bound applies to), 1.0 equals the const 1, a keyword about strings or objects says
    nothing about other types."""
    cases: list[tuple[dict[str, Any], list[Any]]] = [
        ({"type": "integer"}, [1, True, 1.0, "1", None]),
        ({"type": ["integer", "null"], "minimum": 1}, [1, 0, None, True, 2.5]),
        ({"const": 1}, [1, 1.0, True, "1"]),
        ({"enum": ["a", "b"]}, ["a", "c", 1, None]),
        ({"pattern": "^\\S+$", "minLength": 2}, ["ab", "a", "a b", 5]),
        (
            {"required": ["a"], "additionalProperties": False, "properties": {"a": {"type": "string"}}},
            [{"a": "x"}, {"a": 1}, {}, {"a": "x", "b": 1}, [1]],
        ),
        (
            {"if": {"properties": {"k": {"const": 1}}}, "then": {"required": ["x"]}},
            [{"k": 1}, {"k": 2}, {"k": 1, "x": 0}],
        ),
        ({"propertyNames": {"pattern": "^a"}, "minProperties": 1}, [{"ab": 1}, {"b": 1}, {}]),
        ({"not": {"enum": ["x"]}, "items": {"exclusiveMinimum": 0}}, ["x", "y", [1, 2], [0]]),
    ]
    checked = 0
    for sub, values in cases:
        compiled = schema._compiled(sub)
        draft = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://t.invalid/s"}
        reference = schema.compile_schema({**draft, **sub})
        for value in values:
            assert compiled(value) == reference.is_valid(value), (sub, value)
            checked += 1
    assert checked == 37
