"""JSON Schema validation -> Diagnostics in domain words. The only module that imports jsonschema.

Schemas are shipped in the package (see resources.py) and resolved through an explicit
`referencing` registry, so nothing is ever fetched over the network.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from modtrans import resources
from modtrans.diagnostics import Diagnostic, diagnostic

if TYPE_CHECKING:
    import jsonschema

Describe = Callable[[Sequence[str | int], Any], str]


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    # Imported on first use: jsonschema loads its optional format checkers at import (with some
    # packages installed that alone takes a second), and most commands never validate JSON.
    import jsonschema
    import referencing

    schema = resources.schema(name)
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(
        schema["$id"], referencing.Resource.from_contents(schema)
    )
    return jsonschema.Draft202012Validator(schema, registry=registry)


def check(
    instance: Any,
    name: str,
    *,
    path: str | None = None,
    describe: Describe | None = None,
    code: str = "S402",
) -> list[Diagnostic]:
    """Every schema violation of `instance` against schemas/<name>.schema.json, as `code`."""
    found = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path)):
        where = list(error.absolute_path)
        place = describe(where, instance) if describe else "/".join(map(str, where)) or "document"
        found.append(diagnostic(code, f"{place}: {_reworded(error)}", path=path))
    return found


def _reworded(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        return error.message.replace("is a required property", "is missing")
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown field(s)")
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))  # type: ignore[arg-type]
        return f"{error.instance!r} is not one of {allowed}"
    return error.message
