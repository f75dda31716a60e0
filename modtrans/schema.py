"""JSON Schema validation -> Diagnostics in domain words. The only module that imports jsonschema.

Schemas are shipped in the package (see resources.py) and resolved through an explicit
`referencing` registry, so nothing is ever fetched over the network. Their references are
inlined first (inline_refs). check() asks predicates compiled from the schema (valid) whether a
document is valid, and only when it is not asks jsonschema what is wrong, and where: a valid
100,000-layer workload never waits for jsonschema, nor even imports it.
"""

from __future__ import annotations

import functools
import operator
import re
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
    """The validator of schemas/<name>.schema.json, its references inlined (inline_refs)."""
    return compile_schema(inline_refs(resources.schema(name)))


def compile_schema(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    # Imported on first use, and without the optional packages of jsonschema's format checkers:
    # with them installed (mlc-chakra brings rfc3987-syntax, which compiles 39 lark grammars at
    # import) `import jsonschema` alone took 0.7 s. Our schemas use no "format" (a test keeps it
    # so); the packages are hidden only while jsonschema is imported.
    jsonschema = _import_jsonschema()
    import referencing

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


Predicate = Callable[[Any], bool]


@functools.cache
def valid(name: str) -> Predicate | None:
    """Whether a document is valid against schemas/<name>.schema.json, answered by plain Python
    functions compiled from the schema (its references inlined): 20x faster than jsonschema,
    which check() still asks for the findings when the answer is no. None when the schema uses
    a keyword the compiler does not know (then jsonschema alone answers). A test holds it to
    jsonschema's verdict on hundreds of mutated real documents."""
    try:
        return _compiled(inline_refs(resources.schema(name)))
    except _Unsupported:
        return None


class _Unsupported(Exception):
    pass


_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
)


def _number(v: Any) -> bool:  # what JSON holds: a bool is no number
    return type(v) in (int, float)


_TYPES: dict[str, Predicate] = {
    "integer": lambda v: type(v) is int,  # as validator(): a bool or 1.0 is not an integer
    "number": _number,
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "null": lambda v: v is None,
}


def _compiled(schema: Any) -> Predicate:
    """The predicate of one (sub)schema: every keyword's test must pass. Raises _Unsupported."""
    if schema is True:
        return lambda _: True
    if schema is False:
        return lambda _: False
    if not isinstance(schema, dict):
        raise _Unsupported(schema)
    found = [_keyword(schema, key, value) for key, value in schema.items() if key not in _ANNOTATIONS]
    tests = [t for t in found if t is not None]
    if len(tests) == 1:
        return tests[0]
    return lambda v: all(t(v) for t in tests)


_BOUNDS: dict[str, Callable[[Any, Any], bool]] = {
    "minimum": operator.ge,
    "maximum": operator.le,
    "exclusiveMinimum": operator.gt,
    "exclusiveMaximum": operator.lt,
}


def _keyword(schema: dict[str, Any], key: str, value: Any) -> Predicate | None:
    if key == "type":
        kinds = [value] if isinstance(value, str) else list(value)
        checks = [_TYPES[k] for k in kinds]
        return lambda v: any(c(v) for c in checks)
    if key == "properties":
        inner = {name: _compiled(sub) for name, sub in value.items()}
        return lambda v: type(v) is not dict or all(c(v[k]) for k, c in inner.items() if k in v)
    if key == "required":
        needed = tuple(value)
        return lambda v: type(v) is not dict or all(k in v for k in needed)
    if key == "additionalProperties":
        known = frozenset(schema.get("properties", {}))
        if "patternProperties" in schema:
            raise _Unsupported(key)
        if value is False:
            return lambda v: type(v) is not dict or known.issuperset(v)
        extra = _compiled(value)
        return lambda v: type(v) is not dict or all(extra(x) for k, x in v.items() if k not in known)
    if key == "items":
        each = _compiled(value)
        return lambda v: type(v) is not list or all(each(x) for x in v)
    if key in _BOUNDS:
        compare, bound = _BOUNDS[key], value
        return lambda v: not _number(v) or compare(v, bound)
    if key in ("enum", "const"):
        allowed = value if key == "enum" else [value]
        if not all(type(a) is str for a in allowed):  # jsonschema's equality of 1, 1.0 and True
            if key == "const" and type(value) is int:
                return lambda v: _number(v) and v == value
            raise _Unsupported(key)
        strings = frozenset(allowed)
        return lambda v: type(v) is str and v in strings
    if key == "pattern":
        search = re.compile(value).search
        return lambda v: type(v) is not str or search(v) is not None
    if key == "minLength":
        return lambda v: type(v) is not str or len(v) >= value
    if key == "minItems":
        return lambda v: type(v) is not list or len(v) >= value
    if key == "maxItems":
        return lambda v: type(v) is not list or len(v) <= value
    if key == "minProperties":
        return lambda v: type(v) is not dict or len(v) >= value
    if key == "propertyNames":
        names = _compiled(value)
        return lambda v: type(v) is not dict or all(names(k) for k in v)
    if key == "not":
        negated = _compiled(value)
        return lambda v: not negated(v)
    if key == "allOf":
        parts = [_compiled(sub) for sub in value]
        return lambda v: all(p(v) for p in parts)
    if key == "if":
        condition = _compiled(value)
        then = _compiled(schema.get("then", True))
        otherwise = _compiled(schema.get("else", True))
        return lambda v: then(v) if condition(v) else otherwise(v)
    if key in ("then", "else"):
        return None  # read with "if"
    raise _Unsupported(key)


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each `{"$ref": "#/$defs/X", ...}` replaced by X itself (by `{..., "allOf":
    [X]}` when the reference has keywords beside it, which means the same in draft 2020-12). The
    validator then follows no reference, each of which cost a registry lookup: validating
    VGG16's IR takes 7 ms instead of 13. A schema whose definitions refer to themselves is kept
    as it is. Error messages and paths are the same (a test compares them)."""
    defs = schema.get("$defs", {})

    def inline(node: Any, within: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, within) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        name = ref[len("#/$defs/") :] if isinstance(ref, str) and ref.startswith("#/$defs/") else None
        if name is None or name not in defs:
            return {k: v if k == "$defs" else inline(v, within) for k, v in node.items()}
        if name in within:
            raise RecursionError(name)
        body = inline(defs[name], (*within, name))
        rest = {k: inline(v, within) for k, v in node.items() if k != "$ref"}
        return {**rest, "allOf": [*rest.get("allOf", []), body]} if rest else body

    try:
        inlined: dict[str, Any] = inline(schema, ())
    except RecursionError:
        return schema
    return inlined


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
    fast = valid(name)
    if fast is not None and fast(instance):
        return []  # no violation: jsonschema would find none, and would take 200 us a layer to say so
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
