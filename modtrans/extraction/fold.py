"""Extraction, step 0c: fold shape arithmetic so shape inference can see through it.

Exporters with dynamic axes (PyTorch's, for every Hugging Face model) compute sizes at run time:
Shape -> Gather -> Unsqueeze -> Concat -> Reshape / Expand / Slice. ONNX shape inference cannot
follow a Slice or Expand whose operands come out of such a chain, so every tensor behind it loses
its shape. Once the inputs' dims are fixed (--batch, --input-shape), those chains are constants:
this pass evaluates them with onnx's reference evaluator (small integer tensors only, never a
weight) and replaces them by Constant nodes, then shape inference runs again, until nothing new
resolves.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

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
    }
)
_MAX_ELEMENTS = 1 << 16
_ROUNDS = 4


def fold(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` (already shape-inferred) with constant shape arithmetic folded and shapes re-inferred."""
    for _ in range(_ROUNDS):
        try:
            folded = _fold_once(model)
            if folded is None:
                return model
            model = onnx.shape_inference.infer_shapes(folded, strict_mode=False, data_prop=True)
        except Exception:  # best effort: a graph onnx cannot evaluate keeps the shapes it has
            return model
    return model


def _static_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        t = info.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[info.name] = tuple(d.dim_value for d in t.shape.dim)
    return shapes


def _small(t: onnx.TensorProto) -> bool:
    return t.data_location != onnx.TensorProto.EXTERNAL and math.prod(t.dims) <= _MAX_ELEMENTS


def _fold_once(model: onnx.ModelProto) -> onnx.ModelProto | None:
    graph = model.graph
    shapes = _static_shapes(graph)
    known = {t.name for t in graph.initializer if _small(t)}
    initializers = {t.name: t for t in graph.initializer if t.name in known}
    picked: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type not in _FOLDABLE or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant":
            if all(a.type != onnx.AttributeProto.TENSOR or _small(a.t) for a in node.attribute):
                known.update(node.output)
                picked.append(node)
            continue
        if node.op_type in {"Shape", "Size"}:
            if node.input[0] in shapes:
                known.update(node.output)
                picked.append(node)
            continue
        if all(not i or i in known for i in node.input):
            known.update(node.output)
            picked.append(node)
    targets = [o for n in picked if n.op_type != "Constant" for o in n.output if o]
    if not targets:
        return None
    values = _evaluate(model, picked, initializers, shapes, targets)
    if not values:
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    replaced = set(values)
    kept = [n for n in out.graph.node if not (n.output and all(o in replaced for o in n.output if o))]
    constants = [
        onnx.helper.make_node(
            "Constant",
            [],
            [name],
            name=f"modtrans_folded/{name}",
            value=numpy_helper.from_array(np.asarray(value), name),
        )
        for name, value in values.items()
    ]
    del out.graph.node[:]
    out.graph.node.extend([*constants, *kept])
    del out.graph.value_info[:]
    return out


def _evaluate(
    model: onnx.ModelProto,
    picked: list[onnx.NodeProto],
    initializers: dict[str, onnx.TensorProto],
    shapes: dict[str, tuple[int, ...]],
    targets: list[str],
) -> dict[str, object]:
    """Run the picked nodes (Shape of a known tensor becomes its constant) and keep small results."""
    nodes = []
    for node in picked:
        if node.op_type in {"Shape", "Size"}:
            dims = shapes[node.input[0]]
            if node.op_type == "Size":
                value = np.array(math.prod(dims), dtype=np.int64)
            else:
                attrs = {a.name: a.i for a in node.attribute}
                start, end = attrs.get("start", 0), attrs.get("end", len(dims))
                value = np.array(dims[start:end], dtype=np.int64)
            nodes.append(
                onnx.helper.make_node("Constant", [], list(node.output), value=numpy_helper.from_array(value))
            )
        else:
            nodes.append(node)
    graph = onnx.helper.make_graph(
        nodes,
        "modtrans_fold",
        [],
        [onnx.helper.make_empty_tensor_value_info(t) for t in targets],
        list(initializers.values()),
    )
    probe = onnx.helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    try:
        results = ReferenceEvaluator(probe).run(None, {})
    except Exception:  # the reference evaluator raises many types; folding is best effort
        return {}
    return {
        name: value
        for name, value in zip(targets, results, strict=True)
        if isinstance(value, np.ndarray) and value.size <= _MAX_ELEMENTS and value.dtype.kind in "iub"
    }
