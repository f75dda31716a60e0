"""Extraction, step 0c (with fold.py's rounds): the integer constants a subgraph reads from the
graphs around it, made its own.

onnx's shape inference runs an If branch's or a Loop body's nodes knowing the types of the
enclosing graphs' tensors but not their values: a Pad whose pads, an Unsqueeze whose axes or a
Reshape whose shape is an initializer of the enclosing graph gets an unknown shape, and so does
everything after it (measured with onnx 1.23.2 on Silero VAD 6's op-18 export, whose sample-rate
If reads its pads and axes from the top graph: Pad [1, 512] -> unknown; the same pads copied into
the branch: [1, 576]). `localise` copies each such constant into the subgraph that reads it, as a
Constant node of a name of its own. Integer tensors only (shapes, axes, pads, indices): a weight
stays where it is, and is counted there.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import onnx
from onnx import numpy_helper

_MAX_ELEMENTS = 1 << 16  # a shape or an index vector, never a table
_INTEGER = frozenset(
    {
        onnx.TensorProto.INT64,
        onnx.TensorProto.INT32,
        onnx.TensorProto.INT16,
        onnx.TensorProto.INT8,
        onnx.TensorProto.UINT64,
        onnx.TensorProto.UINT32,
        onnx.TensorProto.UINT16,
        onnx.TensorProto.UINT8,
        onnx.TensorProto.BOOL,
    }
)
SUFFIX = "/modtrans_local"
"""Names a copied constant: `val_0_2/modtrans_local3` in the fourth subgraph that reads val_0_2
(a name is defined once in a model, subgraphs included)."""


def localise(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """A copy of `model` in which every subgraph holds the small integer constants of its
    enclosing graphs that its nodes read; None when no subgraph reads one."""
    if not any(True for _ in _reads(model.graph, {})):
        return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for count, (graph, wanted) in enumerate(list(_reads(out.graph, {}))):
        _copy_in(graph, wanted, f"{SUFFIX}{count}")
    return out


def constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The small integer constants `graph` defines: its initializers and Constant nodes."""
    found = {t.name: t for t in graph.initializer if _fits(t)}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and _fits(value):
                found[node.output[0]] = value
    return found


def _fits(t: onnx.TensorProto) -> bool:
    elements = 1
    for d in t.dims:
        elements *= d
    return (
        t.data_type in _INTEGER and t.data_location != onnx.TensorProto.EXTERNAL and elements <= _MAX_ELEMENTS
    )


def _defined(graph: onnx.GraphProto) -> set[str]:
    names = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    names |= {t.values.name for t in graph.sparse_initializer}
    return names | {o for n in graph.node for o in n.output}


def _subgraphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield attr.g
            yield from attr.graphs


def _reads(
    graph: onnx.GraphProto, outer: Mapping[str, onnx.TensorProto]
) -> Iterator[tuple[onnx.GraphProto, dict[str, onnx.TensorProto]]]:
    """Each subgraph below `graph` with the enclosing constants its own nodes read (`outer`: those
    of the graphs around `graph`, the innermost definition of a name winning)."""
    local = _defined(graph)
    visible = {k: v for k, v in outer.items() if k not in local} | constants(graph)
    for sub in _subgraphs(graph):
        mine = _defined(sub)
        wanted = {
            name: visible[name]
            for node in sub.node
            for name in node.input
            if name and name not in mine and name in visible
        }
        if wanted:
            yield sub, wanted
        yield from _reads(sub, visible)


def _copy_in(graph: onnx.GraphProto, wanted: Mapping[str, onnx.TensorProto], suffix: str) -> None:
    """`graph` with a Constant of each `wanted` value first, its nodes reading that instead."""
    renamed = {name: name + suffix for name in wanted}
    made = [
        onnx.helper.make_node(
            "Constant",
            [],
            [renamed[name]],
            name=renamed[name],
            value=numpy_helper.from_array(numpy_helper.to_array(t), renamed[name]),
        )
        for name, t in wanted.items()
    ]
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name in renamed:
                node.input[index] = renamed[name]
    nodes = [*made, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
