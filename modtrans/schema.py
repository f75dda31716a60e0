"""JSON Schema validation -> Diagnostics in domain words. The only module that imports jsonschema.

Schemas are shipped in the package (see resources.py) and resolved through an explicit
`referencing` registry, so nothing is ever fetched over the network.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from modtrans import resources
from modtrans.diagnostics import Diagnostic, Span, diagnostic

if TYPE_CHECKING:
    import jsonschema

Describe = Callable[[Sequence[str | int], Any], str]
Locate = Callable[[Sequence[str | int]], Span | None]


_FORMAT_PACKAGES = (
    "rfc3987_syntax",
    "rfc3987",
    "rfc3986_validator",
    "rfc3339_validator",
    "webcolors",
    "uri_template",
    "isoduration",
    "fqdn",
    "idna",
    "jsonpointer",
)


def _import_jsonschema() -> Any:
    import sys

    hidden = [name for name in _FORMAT_PACKAGES if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an ImportError for jsonschema._format
    try:
        import jsonschema
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return jsonschema


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    # Imported on first use, and without the optional packages of jsonschema's format checkers:
    # with them installed (mlc-chakra brings rfc3987-syntax, which compiles 39 lark grammars at
    # import) `import jsonschema` alone took 0.7 s. Our schemas use no "format" (a test keeps it
    # so); the packages are hidden only while jsonschema is imported.
    jsonschema = _import_jsonschema()
    import referencing

    schema = resources.schema(name)
    registry: referencing.Registry[Any] = referencing.Registry().with_resource(
        schema["$id"], referencing.Resource.from_contents(schema)
    )
    # JSON's 1.0 is a float to every reader of ours: an integer field takes integers only (the
    # draft's own checker accepts 1.0, which the text format cannot write).
    strict = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool)
    )
    extend = jsonschema.validators.extend
    cls = extend(jsonschema.Draft202012Validator, type_checker=strict)
    return cls(schema, registry=registry)  # type: ignore[no-any-return]


def check(
    instance: Any,
    name: str,
    *,
    path: str | None = None,
    describe: Describe | None = None,
    locate: Locate | None = None,
    code: str = "S402",
) -> list[Diagnostic]:
    """Every schema violation of `instance` against schemas/<name>.schema.json, as `code`, at
    the span `locate` gives for its JSON path."""
    found = []
    for error in sorted(validator(name).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path))):
        where = list(error.absolute_path)
        place = describe(where, instance) if describe else "/".join(map(str, where)) or "document"
        span = locate(where) if locate else None
        found.append(diagnostic(code, f"{place}: {_reworded(error)}", path=path, span=span))
    return found


def _reworded(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        return error.message.replace("is a required property", "is missing")
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown field(s)")
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))  # type: ignore[arg-type]
        return f"{_short(error.instance)} is not one of {allowed}"
    if error.validator == "not":
        return f"{_short(error.instance)} is not allowed here (the text would read it as something else)"
    if error.validator == "pattern" and str(error.validator_value).startswith("^\\S+("):
        return f"{_short(error.instance)} is not one blank-free token"
    full = repr(error.instance)  # jsonschema quotes the whole value: a 5,000-digit number, a 1 MB name
    if error.message.startswith(full):
        return _short(error.instance) + error.message[len(full) :]
    return error.message


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, dict | list) else type(value).__name__
    return text if len(text) <= 40 else f"{text[:18]}...{text[-18:]}"
