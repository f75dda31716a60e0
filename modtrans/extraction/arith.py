"""Extraction: evaluate the small tensor arithmetic exporters compute sizes with, in numpy.

fold.py hands over the nodes whose inputs are all known (Shape of a fixed tensor, constants,
their results) in graph order; `evaluate` runs each one, by the semantics of its ONNX opset, and
returns what it computed. A node whose op is not in the table below goes to onnx's reference
evaluator, alone; a node that fails either way is skipped, with everything that needs its result,
and the rest are still evaluated. The table exists for speed: the reference evaluator builds an
operator object per node, and GPT-2's graph folds 5,000 constants in three rounds (0.29 s, plus
0.1 s to import it), where numpy takes a few ms. Its results are checked against the reference
evaluator's on every fixture (tests/test_real_onnx.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

Value = np.ndarray
_Op = Callable[[list[Value | None], dict[str, Any], int], list[Value]]


LIMIT = 1 << 16
"""No op makes a tensor of more elements than this: fold keeps no larger result, and a fuzzed or
hostile shape ([10**12]) must not be allocated to find that out."""


class TooLarge(ValueError):
    """A result over LIMIT elements: not made, and not asked of the reference evaluator either."""


def _sized(shape: Sequence[int]) -> tuple[int, ...]:
    """`shape`, if a tensor of it is small enough to make (TooLarge otherwise)."""
    dims = tuple(int(d) for d in shape)
    total = 1
    for d in dims:
        if d < 0:
            raise ValueError(f"negative dimension {d}")
        total *= d
        if total > LIMIT:
            raise TooLarge(f"a result of more than {LIMIT} elements")
    return dims


def _gather(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1])
    axis = int(attrs.get("axis", 0)) % max(data.ndim, 1)
    _sized([*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :]])
    return [np.take(data, indices, axis=axis)]


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _ints(value: Value | None) -> list[int]:
    return [] if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def _axes(
    inputs: list[Value | None], attrs: dict[str, Any], opset: int, since: int, at: int
) -> list[int] | None:
    """Axes from attribute (before opset `since`) or from input `at` (from it on); None: absent."""
    if opset < since:
        axes = attrs.get("axes")
        return None if axes is None else [int(a) for a in axes]
    return _ints(inputs[at]) if len(inputs) > at and inputs[at] is not None else None


def _unsqueeze(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data = np.asarray(inputs[0])
    axes = _axes(inputs, attrs, opset, 13, 1) or []
    rank = data.ndim + len(axes)
    out = data
    for axis in sorted(a % rank for a in axes):
        out = np.expand_dims(out, axis)
    return [out]


def _squeeze(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data = np.asarray(inputs[0])
    axes = _axes(inputs, attrs, opset, 13, 1)
    return [np.squeeze(data) if axes is None else np.squeeze(data, axis=tuple(a % data.ndim for a in axes))]


def _slice(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data = np.asarray(inputs[0])
    if opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
        steps = _ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        if step == 0:
            raise ValueError("Slice step 0")
        index[int(axis) % data.ndim] = slice(int(start), int(end), int(step))
    return [data[tuple(index)]]


def _reshape(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data = np.asarray(inputs[0])
    shape = _ints(inputs[1])
    if not attrs.get("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [data.reshape(shape)]


def _expand(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data = np.asarray(inputs[0])
    shape = _sized(np.broadcast_shapes(data.shape, tuple(_ints(inputs[1]))))
    return [np.broadcast_to(data, shape).copy()]


def _constant_of_shape(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    tensor = attrs.get("value")
    fill = numpy_helper.to_array(tensor).reshape(-1) if tensor is not None else np.zeros(1, np.float32)
    return [np.full(_sized(_ints(inputs[0])), fill[0], dtype=fill.dtype)]


def _constant(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    if "value" in attrs:
        return [numpy_helper.to_array(attrs["value"])]
    for key, dtype in (
        ("value_int", np.int64),
        ("value_ints", np.int64),
        ("value_float", np.float32),
        ("value_floats", np.float32),
    ):
        if key in attrs:
            return [np.array(attrs[key], dtype=dtype)]
    raise ValueError("Constant without a supported value")


def _div(a: Value, b: Value) -> Value:
    if np.issubdtype(a.dtype, np.integer):  # truncated toward zero, as ONNX runtimes divide integers
        return np.asarray(np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
    return np.asarray(np.divide(a, b)).astype(a.dtype)


def _reduce(function: Callable[..., Value], since: int) -> _Op:
    def run(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
        data = np.asarray(inputs[0])
        axes = _axes(inputs, attrs, opset, since, 1)
        keep = bool(attrs.get("keepdims", 1))
        if not axes:  # none given, or empty: all axes, unless noop_with_empty_axes (opset 18)
            if attrs.get("noop_with_empty_axes", 0):
                return [data]
            return [np.asarray(function(data, axis=None, keepdims=keep))]
        return [np.asarray(function(data, axis=tuple(a % data.ndim for a in axes), keepdims=keep))]

    return run


def _split(inputs: list[Value | None], attrs: dict[str, Any], opset: int, outputs: int) -> list[Value]:
    data = np.asarray(inputs[0])
    axis = int(attrs.get("axis", 0)) % data.ndim
    sizes = (
        _ints(inputs[1])
        if opset >= 13 and len(inputs) > 1 and inputs[1] is not None
        else list(attrs.get("split", []))
    )
    if not sizes:
        whole = data.shape[axis]
        part = -(-whole // outputs)
        sizes = [min(part, whole - i * part) for i in range(outputs)]
    bounds = np.cumsum(sizes)[:-1]
    return list(np.split(data, bounds, axis=axis))


def _clip(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
    data = np.asarray(inputs[0])
    if opset < 11:
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low = inputs[1] if len(inputs) > 1 else None
        high = inputs[2] if len(inputs) > 2 else None
    return [np.clip(data, low, high).astype(data.dtype)]


def _broadcastable(inputs: list[Value | None]) -> list[Value]:
    """The inputs as arrays, once their broadcast result is known to be small enough."""
    values = [np.asarray(x) for x in inputs]
    _sized(np.broadcast_shapes(*(v.shape for v in values)))
    return values


def _elementwise(function: Callable[..., Value]) -> _Op:
    def run(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
        values = _broadcastable(inputs)
        return [np.asarray(function(*values))]

    return run


def _same_type(function: Callable[..., Value]) -> _Op:
    """An arithmetic op whose result keeps its first input's element type (numpy would widen)."""

    def run(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
        values = _broadcastable(inputs)
        return [np.asarray(function(*values)).astype(values[0].dtype)]

    return run


def _variadic(function: Callable[..., Value]) -> _Op:
    def run(inputs: list[Value | None], attrs: dict[str, Any], opset: int) -> list[Value]:
        values = _broadcastable(inputs)
        out = values[0]
        for v in values[1:]:
            out = function(out, v)
        return [np.asarray(out)]

    return run


_OPS: dict[str, _Op] = {
    "Constant": _constant,
    "Identity": lambda i, a, o: [np.asarray(i[0])],
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda i, a, o: [np.concatenate([np.asarray(x) for x in i], axis=int(a["axis"]))],
    "Slice": _slice,
    "Reshape": _reshape,
    "Expand": _expand,
    "ConstantOfShape": _constant_of_shape,
    "Cast": lambda i, a, o: [np.asarray(i[0]).astype(onnx.helper.tensor_dtype_to_np_dtype(int(a["to"])))],
    "Range": lambda i, a, o: [_range(i[0], i[1], i[2])],
    "Add": _same_type(np.add),
    "Sub": _same_type(np.subtract),
    "Mul": _same_type(np.multiply),
    "Div": lambda i, a, o: [_div(np.asarray(i[0]), np.asarray(i[1]))],
    "Mod": lambda i, a, o: [(np.fmod if a.get("fmod", 0) else np.mod)(np.asarray(i[0]), np.asarray(i[1]))],
    "Neg": _same_type(np.negative),
    "Abs": _same_type(np.abs),
    "Sign": _same_type(np.sign),
    "Floor": _same_type(np.floor),
    "Ceil": _same_type(np.ceil),
    "Round": _same_type(np.round),
    "Sqrt": _same_type(np.sqrt),
    "Reciprocal": _same_type(np.reciprocal),
    "Pow": _same_type(np.power),
    "Min": _variadic(np.minimum),
    "Max": _variadic(np.maximum),
    "Equal": _elementwise(np.equal),
    "Less": _elementwise(np.less),
    "Greater": _elementwise(np.greater),
    "LessOrEqual": _elementwise(np.less_equal),
    "GreaterOrEqual": _elementwise(np.greater_equal),
    "Not": _elementwise(np.logical_not),
    "And": _elementwise(np.logical_and),
    "Or": _elementwise(np.logical_or),
    "Xor": _elementwise(np.logical_xor),
    "Where": _elementwise(np.where),
    "Tile": lambda i, a, o: [np.tile(np.asarray(i[0]), _tiles(np.asarray(i[0]), _ints(i[1])))],
    "Transpose": lambda i, a, o: [np.transpose(np.asarray(i[0]), a.get("perm"))],
    "Flatten": lambda i, a, o: [_flatten(np.asarray(i[0]), int(a.get("axis", 1)))],
    "Clip": _clip,
    "ReduceProd": _reduce(np.prod, 18),
    "ReduceSum": _reduce(np.sum, 13),
    "ReduceMin": _reduce(np.min, 18),
    "ReduceMax": _reduce(np.max, 18),
}


def _tiles(data: Value, repeats: list[int]) -> list[int]:
    _sized([*data.shape, *repeats])  # the result has data.size * prod(repeats) elements
    return repeats


def _range(start: Value | None, limit: Value | None, delta: Value | None) -> Value:
    first, last, step = _scalar(start), _scalar(limit), _scalar(delta)
    if step == 0:
        raise ValueError("Range delta 0")
    _sized([max(int(np.ceil((last - first) / step)), 0)])
    return np.arange(first, last, step).astype(np.asarray(start).dtype)


def _scalar(value: Value | None) -> Any:
    return np.asarray(value).reshape(-1)[0]


def _flatten(data: Value, axis: int) -> Value:
    if axis < 0:  # ONNX: -r..r, a negative one counted from the rank
        axis += data.ndim
    head = int(np.prod(data.shape[:axis]))
    return data.reshape(head, -1) if data.size else data.reshape(head, 0)


def evaluate(
    nodes: Sequence[onnx.NodeProto],
    known: Mapping[str, Callable[[], Value]],
    opset: int,
    opsets: Iterable[onnx.OperatorSetIdProto],
    limit: int,
) -> dict[str, Value]:
    """Run `nodes` in order; `known` makes the value of each tensor they read that no node of
    theirs makes. The values of the nodes' outputs, except those over `limit` elements and those
    of nodes that failed (and of everything after them that needed them)."""
    values: dict[str, Value] = {}

    def value(name: str) -> Value | None:
        if not name:
            return None
        if name not in values:
            values[name] = known[name]()
        return values[name]

    for node in nodes:
        try:
            inputs = [value(i) for i in node.input]
        except (KeyError, ValueError, TypeError):  # an input that failed or is not here
            continue
        try:
            outputs = _run(node, inputs, opset, opsets)
        except Exception:  # numpy or the reference evaluator raise many types: skip this node
            continue
        for name, result in zip(node.output, outputs, strict=False):
            if name and isinstance(result, np.ndarray) and result.size <= limit:
                values[name] = result
    return values


def _run(
    node: onnx.NodeProto, inputs: list[Value | None], opset: int, opsets: Iterable[onnx.OperatorSetIdProto]
) -> list[Value]:
    attrs = _attrs(node)
    if node.op_type == "Split":
        return _split(inputs, attrs, opset, len(node.output))
    op = _OPS.get(node.op_type)
    try:
        outputs = op(inputs, attrs, opset) if op is not None else _reference(node, inputs, opsets)
    except TooLarge:
        raise
    except Exception:  # a case the table does not cover (np.clip with neither bound ...): ask onnx
        if op is None:
            raise
        outputs = _reference(node, inputs, opsets)
    return [np.asarray(x) for x in outputs]  # numpy gives scalars where ONNX has 0-d tensors


def _reference(
    node: onnx.NodeProto, inputs: list[Value | None], opsets: Iterable[onnx.OperatorSetIdProto]
) -> list[Value]:
    """One node through onnx's reference evaluator (0.1 s to import: only for an op not above)."""
    from onnx.reference import ReferenceEvaluator

    feeds = {name: x for name, x in zip(node.input, inputs, strict=True) if name and x is not None}
    graph = onnx.helper.make_graph(
        [node],
        "modtrans_arith",
        [
            onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for n, v in feeds.items()
        ],
        [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o],
    )
    model = onnx.helper.make_model(graph, opset_imports=list(opsets))
    return list(ReferenceEvaluator(model).run(None, feeds))
