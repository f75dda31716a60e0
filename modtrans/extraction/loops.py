"""Extraction: what a Loop or Scan means for the layers of its body.

A body runs once per iteration, so its layers' FLOPs and GEMMs are the trip count times one
iteration's (`repeated`; the layer records the count as `repeats`). The trip count (`trips`):

- Loop: its M input when that is a constant (PyTorch's `for t in range(x.size(0))` gives
  Gather(Shape(x), 0), a constant once the input shapes are fixed; jax2onnx's `lax.scan` gives an
  initializer), provided the loop's condition stays true: no condition input or a constant true
  one, and a body whose condition output is its condition input passed on. A condition the body
  computes (tf2onnx's `tf.while_loop`) makes the count a matter of values: unknown.
- Scan: the length of its first scanned input along its scan axis.

`invariants` finds the body inputs that are loop-carried and passed on unchanged (jax2onnx hands a
scanned cell its weights this way), so the walker sees the weights they are and not activations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import onnx

from modtrans.ir.document import Dim, Flops, Layer


def carried(node: onnx.NodeProto, body: onnx.GraphProto) -> list[tuple[onnx.ValueInfoProto, str]]:
    """(body input, the outer value it starts as) for each carried state of a Loop or Scan, in
    the order of their body outputs (after a Loop body's condition output). A Scan's scanned
    inputs are slices, not carried."""
    if node.op_type == "Loop":  # body inputs: iteration, condition, then the carried values
        return list(zip(body.input[2:], node.input[2:], strict=False))
    if node.op_type != "Scan":
        return []
    scanned = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
    states = len(body.input) - scanned
    offset = len(node.input) - len(body.input)  # 1 in opset 8, whose first input is sequence_lens
    return list(zip(body.input[:states], node.input[offset : offset + states], strict=False))


def first_carried_output(node: onnx.NodeProto) -> int:
    """Where a body's carried outputs start: 1 in a Loop (its condition comes first), else 0."""
    return 1 if node.op_type == "Loop" else 0


def _passed(body: onnx.GraphProto) -> dict[str, str]:
    """Identity output -> its input, in `body`."""
    return {n.output[0]: n.input[0] for n in body.node if n.op_type == "Identity" and n.input and n.output}


def invariants(node: onnx.NodeProto, body: onnx.GraphProto) -> dict[str, str]:
    """Body input -> the outer value it carries, for each carried value the body passes on
    unchanged (a body output that is that input, directly or through Identity)."""
    passed = _passed(body)
    results = body.output[first_carried_output(node) :]
    found = {}
    for (inner, outer), result in zip(carried(node, body), results, strict=False):
        if outer and (result.name == inner.name or passed.get(result.name) == inner.name):
            found[inner.name] = outer
    return found


def trips(
    node: onnx.NodeProto,
    constant: Callable[[str], int | None],
    dims: Callable[[str], tuple[Dim, ...] | None],
) -> tuple[int | None, str]:
    """(trip count, "") or (None, why nobody knows it). `constant` gives the value of a
    one-element constant of the enclosing scope, `dims` a tensor's inferred dims."""
    if node.op_type == "Scan":
        scanned = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
        axes = next((list(a.ints) for a in node.attribute if a.name == "scan_input_axes"), [])
        first = node.input[len(node.input) - scanned] if scanned else ""
        shape = dims(first) if first else None
        axis = axes[0] if axes else 0
        if shape is not None and -len(shape) <= axis < len(shape) and isinstance(shape[axis], int):
            return int(shape[axis]), ""
        return None, f"the length of its scanned input {first!r} is unknown"
    count = node.input[0] if node.input else ""
    condition = node.input[1] if len(node.input) > 1 else ""
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    if not count:
        return None, "it has no trip count (a while loop: its condition decides)"
    value = constant(count)
    if value is None:
        return None, f"its trip count {count!r} is not a constant"
    if condition and constant(condition) != 1:
        return None, f"its condition {condition!r} is not a constant true"
    if body is not None and len(body.input) > 1 and body.output:
        passed = _passed(body)
        result = body.output[0].name
        while result in passed:  # through Identity, to the condition input or a constant
            result = passed.pop(result)
        if result != body.input[1].name and not _true(body, result) and constant(result) != 1:
            return None, "its body computes the condition (a while loop: it may stop early)"
    return max(value, 0), ""


def _true(body: onnx.GraphProto, name: str) -> bool:
    """Whether `name` is a Constant true made in the body."""
    from onnx import numpy_helper

    for node in body.node:
        if node.op_type == "Constant" and name in node.output:
            tensor = next((a.t for a in node.attribute if a.name == "value"), None)
            try:
                values = numpy_helper.to_array(tensor).reshape(-1) if tensor is not None else None
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # a malformed tensor
                return False
            return values is not None and values.size == 1 and bool(values[0])
    return False


def repeated(layer: Layer, count: int) -> Layer:
    """`layer` run `count` times: its FLOPs and GEMM repetitions multiplied, `repeats` recorded."""
    f, gemm = layer.flops, layer.gemm
    return dataclasses.replace(
        layer,
        flops=Flops(f.forward * count, f.input_grad * count, f.weight_grad * count),
        gemm=None if gemm is None or count == 0 else dataclasses.replace(gemm, groups=gemm.groups * count),
        repeats=layer.repeats * count,
    )
