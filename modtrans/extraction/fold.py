"""Extraction, step 0c: fold shape arithmetic so shape inference can see through it, and take
the branch of each If whose condition that makes constant.

Exporters with dynamic axes (PyTorch's, for every Hugging Face model) compute sizes at run time:
Shape -> Gather -> Unsqueeze -> Concat -> Reshape / Expand / Slice. ONNX shape inference cannot
follow a Slice or Expand whose operands come out of such a chain, so every tensor behind it loses
its shape. Once the inputs' dims are fixed (--batch, --input-shape), those chains are constants:
this pass evaluates them (arith.py: numpy, or onnx's reference evaluator for a rare op; small
tensors only, never a weight) and replaces them by Constant nodes, then shape inference runs
again, until nothing new resolves.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from modtrans.extraction import arith, load, shapes

_FOLDABLE = frozenset(
    {
        "Shape",
        "Size",
        "Gather",
        "Unsqueeze",
        "Squeeze",
        "Concat",
        "Slice",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Cast",
        "Range",
        "Equal",
        "Less",
        "Greater",
        "Where",
        "Reshape",
        "Expand",
        "ConstantOfShape",
        "ReduceProd",
        "Identity",
        "Not",
        "Min",
        "Max",
        "Neg",
        "Abs",
        "Floor",
        "Ceil",
        "Sqrt",
        "Mod",
        "Tile",
        "Constant",
        "And",
        "Or",
        "LessOrEqual",
        "GreaterOrEqual",
        "Trilu",
        "Split",  # paddle2onnx splits a stacked pads vector into its entries
        "Pow",
        "Reciprocal",
        "Sign",
        "Round",
        "Clip",
        "Transpose",
        "Flatten",
        "ReduceSum",
        "ReduceMin",
        "ReduceMax",
        "CumSum",
        "Xor",
        "GatherElements",
        "GatherND",
        "ScatterND",
        "ScatterElements",
    }
)
_MAX_ELEMENTS = 1 << 16
_ROUNDS = 4


def fold(model: onnx.ModelProto, inference: load.Inference | None = None) -> onnx.ModelProto:
    """`model` (already shape-inferred) with constant shape arithmetic folded, every If whose
    condition became a constant replaced by the branch it takes, loop bodies given the shapes
    their state starts with (shapes.bodies), and shapes re-inferred (by `inference`: the
    extraction's, which knows whether data propagation fits its memory budget)."""
    inference = inference or load.Inference()
    cache: dict[str, np.ndarray] = {}  # the values of constants, decoded once
    for _ in range(_ROUNDS):
        try:
            changed = False
            for step in (functools.partial(_fold_once, cache=cache), _take_branches, shapes.bodies):
                result = step(model)
                if result is not None:
                    model, changed = result, True
            if not changed:
                return model
            model = inference(model, strict=False)
        except Exception:  # best effort: a graph onnx cannot evaluate keeps the shapes it has
            return model
    return model


def _take_branches(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """Inline the branch of each top-level If whose condition is a constant: its nodes and
    initializers join the graph, its outputs renamed to the If's (through Identity)."""
    graph = model.graph
    picks = {}
    for index, node in enumerate(graph.node):
        if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
            continue
        value = shapes.scalar(graph, node.input[0])  # the condition, when fixed shapes made it constant
        if value is None:
            continue
        branch = "then_branch" if value else "else_branch"
        body = next((a.g for a in node.attribute if a.name == branch), None)
        if body is not None and len(body.output) == len(node.output):
            picks[index] = body
    if not picks:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(model.graph.node):
        body = picks.get(index)
        if body is None:
            nodes.append(node)
            continue
        nodes.extend(body.node)
        out.graph.initializer.extend(body.initializer)
        for inner, outer in zip(body.output, node.output, strict=True):
            nodes.append(
                onnx.helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}/taken/{outer}")
            )
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _static_shapes(graph: onnx.GraphProto, wanted: set[str]) -> dict[str, tuple[int, ...]]:
    """The fully known dims of the `wanted` tensors (those a Shape or Size reads: looking at every
    value's dims would cost GPT-2 10 ms a round)."""
    shapes = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.name not in wanted:
            continue
        t = info.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[info.name] = tuple(d.dim_value for d in t.shape.dim)
    return shapes


def _small(t: onnx.TensorProto) -> bool:
    return t.data_location != onnx.TensorProto.EXTERNAL and math.prod(t.dims) <= _MAX_ELEMENTS


def _fold_once(model: onnx.ModelProto, cache: dict[str, np.ndarray]) -> onnx.ModelProto | None:
    makers, picked = _foldable(model.graph, cache)
    targets = {o for n in picked for o in n.output if o}
    if not targets:
        return None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    computed = arith.evaluate(
        [n for n in picked if n.op_type not in {"Shape", "Size"}],
        makers,
        opset,
        model.opset_import,
        _MAX_ELEMENTS,
    )
    # integer results only (shapes, indices, masks), and every Shape's, whether a node read it or not
    values = {n: v for n, v in computed.items() if n in targets and v.dtype.kind in "iub"}
    for node in picked:
        if node.op_type in {"Shape", "Size"} and node.output[0] not in values:
            values[node.output[0]] = makers[node.output[0]]()
    if not values:
        return None
    return _with_constants(model, values, cache)


def _foldable(
    graph: onnx.GraphProto, cache: dict[str, np.ndarray]
) -> tuple[dict[str, Callable[[], np.ndarray]], list[onnx.NodeProto]]:
    """The nodes computable from small constants and static shapes, and a maker of each value they read."""
    shapes = _static_shapes(
        graph, {n.input[0] for n in graph.node if n.op_type in {"Shape", "Size"} and n.input}
    )
    makers: dict[str, Callable[[], np.ndarray]] = {}
    for t in graph.initializer:
        if _small(t):
            makers[t.name] = functools.partial(numpy_helper.to_array, t)
    picked: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type not in _FOLDABLE or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant":
            if (
                all(a.type != onnx.AttributeProto.TENSOR or _small(a.t) for a in node.attribute)
                and node.output
            ):
                name = node.output[0]
                makers[name] = functools.partial(_cached, cache, name, node)
            continue
        if node.op_type in {"Shape", "Size"}:
            dims = shapes.get(node.input[0])
            if dims is not None and node.output:
                makers[node.output[0]] = functools.partial(_shape_of, node, dims)
                picked.append(node)
            continue
        if all(not i or i in makers for i in node.input):
            for output in node.output:
                makers[output] = functools.partial(_unknown, output)  # made by a picked node
            picked.append(node)
    return makers, picked


def _with_constants(
    model: onnx.ModelProto, values: dict[str, np.ndarray], cache: dict[str, np.ndarray]
) -> onnx.ModelProto:
    """A copy of `model` whose folded values are Constant nodes (also cached) in place of their makers."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    replaced = set(values)
    kept = [n for n in out.graph.node if not (n.output and all(o in replaced for o in n.output if o))]
    constants = []
    for name, value in values.items():
        cache[name] = np.asarray(value)
        constants.append(
            onnx.helper.make_node(
                "Constant",
                [],
                [name],
                name=f"modtrans_folded/{name}",
                value=numpy_helper.from_array(np.asarray(value), name),
            )
        )
    del out.graph.node[:]
    out.graph.node.extend([*constants, *kept])
    del out.graph.value_info[:]
    return out


def _cached(cache: dict[str, np.ndarray], name: str, node: onnx.NodeProto) -> np.ndarray:
    """A Constant's value: decoded once across fold's rounds (GPT-2 folds 5,000 of them)."""
    if name not in cache:
        cache[name] = arith.evaluate([node], {}, 1, [], _MAX_ELEMENTS)[name]
    return cache[name]


def _shape_of(node: onnx.NodeProto, dims: tuple[int, ...]) -> np.ndarray:
    if node.op_type == "Size":
        return np.array(math.prod(dims), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return np.array(dims[start:end], dtype=np.int64)


def _unknown(name: str) -> np.ndarray:
    raise KeyError(name)  # a picked node's output it did not make (it failed): nothing after it runs
