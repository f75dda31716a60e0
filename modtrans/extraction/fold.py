"""Extraction, step 0c: fold shape arithmetic so shape inference can see through it, and take
the branch of each If whose condition that makes constant.

Exporters with dynamic axes (PyTorch's, for every Hugging Face model) compute sizes at run time:
Shape -> Gather -> Unsqueeze -> Concat -> Reshape / Expand / Slice. ONNX shape inference cannot
follow a Slice or Expand whose operands come out of such a chain, so every tensor behind it loses
its shape. Once the inputs' dims are fixed (--batch, --input-shape), those chains are constants:
this pass evaluates them (arith.py: numpy, or onnx's reference evaluator for a rare op; small
tensors only, never a weight) and replaces them by Constant nodes, then shape inference runs
again, until nothing new resolves.

The same inside If branches: a branch reads the values and shapes of the graphs around it
(TorchScript exports a Silero-style VAD as an If on the sample rate whose branches each compute
their STFT pads from the input's Shape and hold an If on the input's length), so each branch is
folded with what its enclosing graphs know, and an If there whose condition becomes constant is
replaced by its branch too. An If that stays (its condition a matter of values) is costed with
both branches; where they give an output different shapes, onnx leaves it unknown, and
`_shape_ifs` carries the larger on (shapes.larger, README; the walker warns X517).

Where nothing else changes, a while loop whose condition follows from counters is made the
counted loop it is, and its body given the shapes its iterations have (whiles.py); then the rounds
go on, until none changes anything. Each step only moves forward: a fold turns nodes into
Constants, a taken If is gone, a counted loop stays counted, a shape _shape_ifs or shapes.bodies
gives is one inference left unknown (and inference keeps a declared shape it cannot better), so
the rounds end. _ROUNDS only guards against a step that breaks that promise (X518).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from modtrans.diagnostics import Diagnostic, Severity, diagnostic
from modtrans.extraction import arith, load, scopes, shapes, whiles

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
_ROUNDS = 64
"""A safety bound on fold's rounds, far above what a model needs: each round's inference shapes
the next Shape of a chain, and the real-model suite's longest chains take 6 rounds that change
something (rapidocr 1.2.3's PP-OCRv3 recogniser, its SVTR neck's LayerNorm weight reshaped to
Slice(Shape(...))) and 5 (magika 0.5.1's tf2onnx LayerNormalization); measured 2026-12-06."""
_STANDARD = ("", "ai.onnx")
_SIZE_OPERANDS = {"Resize": frozenset({1, 2}), "Upsample": frozenset({1})}
"""Inputs that hold sizes as floats (Resize's roi and scales, Upsample's scales). A float folded
for one of them is a size, not a weight: paddle2onnx writes a Paddle `scale_factor` tensor as
Concat(Constant [1, 1], Identity(scale)), and until it is a constant onnx cannot shape the Resize
(its inference reads constant scales only: onnx/defs/tensor/utils.cc resizeShapeInference), nor
anything after it."""
_Path = tuple[tuple[int, str], ...]
"""Where a graph is: the (node index, attribute name) of each If branch on the way from the top."""


def fold(
    model: onnx.ModelProto, inference: load.Inference | None = None, path: str = ""
) -> tuple[onnx.ModelProto, list[Diagnostic]]:
    """`model` (already shape-inferred) with constant shape arithmetic folded, every If whose
    condition became a constant replaced by the branch it takes (inside If branches too, where
    the shapes of the enclosing graph are known), each remaining If's outputs shaped when its
    branches disagree (shapes.larger), loop bodies given the shapes their state starts with
    (shapes.bodies), while loops on counters made counted loops (whiles.py), and shapes
    re-inferred (by `inference`: the extraction's, which knows whether data propagation fits its
    memory budget), until nothing changes; X518 (at `path`) when that takes more than _ROUNDS
    rounds."""
    inference = inference or load.Inference()
    cache: dict[str, np.ndarray] = {}  # the values of constants, decoded once
    steps: dict[str, Callable[[onnx.ModelProto], onnx.ModelProto | None]] = {
        "localise": scopes.localise,  # what a subgraph reads of the constants around it, its own
        "shape_ifs": _shape_ifs,
        "fold_once": functools.partial(_fold_once, cache=cache),
        "take_branches": _take_branches,
        "bodies": shapes.bodies,
    }
    changed: list[str] = []
    for _ in range(_ROUNDS):
        try:
            changed = []
            for name, step in steps.items():
                result = step(model)
                if result is not None:
                    model = result
                    changed.append(name)
            if not changed:  # the body of a while loop has the shapes its state starts with
                counted = whiles.count(model, lambda alone: fold(alone, inference)[0])
                if counted is None:
                    return model, []
                model, changed = counted, ["whiles"]
            model = inference(model, strict=False)
        except Exception:  # best effort: a graph onnx cannot evaluate keeps the shapes it has
            return model, []
    message = f"shape folding still changed the graph after {_ROUNDS} rounds ({', '.join(changed)})"
    hint = "shapes may be left unknown; please report the model"
    return model, [diagnostic("X518", message, path=path, hint=hint, severity=Severity.WARNING)]


def _branches(graph: onnx.GraphProto, path: _Path = ()) -> Iterator[tuple[_Path, onnx.GraphProto]]:
    """Every If branch of `graph`, depth first, with its path. An If's branch runs at most once,
    so a Shape in it is a constant; a Loop's body may see other shapes each time: not entered."""
    for index, node in enumerate(graph.node):
        if node.op_type != "If" or node.domain not in _STANDARD:
            continue
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH and attr.name in ("then_branch", "else_branch"):
                inner = (*path, (index, attr.name))
                yield inner, attr.g
                yield from _branches(attr.g, inner)


def _at(graph: onnx.GraphProto, path: _Path) -> onnx.GraphProto:
    for index, name in path:
        graph = next(a.g for a in graph.node[index].attribute if a.name == name)
    return graph


def _chain(graph: onnx.GraphProto, path: _Path) -> list[onnx.GraphProto]:
    """The graph at `path` and those enclosing it, innermost first (where its names resolve)."""
    found = [graph]
    for depth in range(len(path)):
        found.insert(0, _at(graph, path[: depth + 1]))
    return found


def _edited(model: onnx.ModelProto, plans: dict[_Path, Callable[[onnx.GraphProto], None]]) -> onnx.ModelProto:
    """A copy of `model` with each plan applied to the graph at its path; the deepest first, so
    that no edit moves the nodes a deeper path counts through."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for path in sorted(plans, key=len, reverse=True):
        plans[path](_at(out.graph, path))
    return out


def _scalar(chain: Sequence[onnx.GraphProto], name: str) -> int | None:
    """shapes.scalar in the innermost graph of `chain` that holds `name`."""
    return next((v for g in chain if (v := shapes.scalar(g, name)) is not None), None)


def _take_branches(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """Inline the branch of each If whose condition is a constant (in the top graph or in a
    branch of an If that stays): its nodes and initializers join the graph, its outputs renamed
    to the If's (through Identity)."""
    plans: dict[_Path, Callable[[onnx.GraphProto], None]] = {}
    for path, graph in ((), model.graph), *_branches(model.graph):
        chain = _chain(model.graph, path)
        picks: dict[int, onnx.GraphProto] = {}
        for index, node in enumerate(graph.node):
            if node.op_type != "If" or node.domain not in _STANDARD:
                continue
            value = _scalar(chain, node.input[0])  # the condition, when fixed shapes made it constant
            if value is None:
                continue
            branch = "then_branch" if value else "else_branch"
            body = next((a.g for a in node.attribute if a.name == branch), None)
            if body is not None and len(body.output) == len(node.output):
                picks[index] = body
        if picks:
            plans[path] = functools.partial(_inline, picks=picks)
    return _edited(model, plans) if plans else None


def _inline(graph: onnx.GraphProto, picks: dict[int, onnx.GraphProto]) -> None:
    """`graph` with each picked If replaced by its branch; its shapes inferred again (_reshape)."""
    taken = {o for index in picks for o in graph.node[index].output if o}
    nodes: list[onnx.NodeProto] = []
    for index, node in enumerate(graph.node):
        body = picks.get(index)
        if body is None:
            nodes.append(node)
            continue
        nodes.extend(body.node)
        graph.initializer.extend(body.initializer)
        for inner, outer in zip(body.output, node.output, strict=True):
            nodes.append(
                onnx.helper.make_node("Identity", [inner.name], [outer], name=f"{node.name}/taken/{outer}")
            )
    del graph.node[:]
    graph.node.extend(nodes)
    _reshape(graph, taken)


def _shape_ifs(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """Give each If that stays (its condition a matter of values) the output shapes its branches
    give, where onnx left them unknown because the branches disagree: shapes.larger of the two
    (graph.Walker says so, X517). onnx's If inference keeps only the dims both branches share."""
    plans: dict[_Path, Callable[[onnx.GraphProto], None]] = {}
    for path, graph in ((), model.graph), *_branches(model.graph):
        chosen: dict[str, tuple[tuple[int, ...], int]] = {}
        declared = {i.name: i for i in (*graph.value_info, *graph.output)}
        for node in graph.node:
            if node.op_type != "If" or node.domain not in _STANDARD:
                continue
            for name, (then, other, element) in shapes.branch_outputs(node).items():
                info = declared.get(name)
                if (
                    then is None
                    or other is None
                    or then == other
                    or (info is not None and shapes.fixed(info))
                ):
                    continue
                chosen[name] = (shapes.larger(then, other), element)
        if chosen:
            plans[path] = functools.partial(_declare, chosen=chosen)
    return _edited(model, plans) if plans else None


def _declare(graph: onnx.GraphProto, chosen: dict[str, tuple[tuple[int, ...], int]]) -> None:
    """Write `chosen` shapes as the graph's value_info (or its output's type, for a graph output)."""
    outputs = {o.name: o for o in graph.output}
    for name, (dims, element) in chosen.items():
        made = onnx.helper.make_tensor_value_info(name, element, list(dims))
        if name in outputs:
            outputs[name].type.CopyFrom(made.type)
            continue
        kept = [i for i in graph.value_info if i.name != name]
        del graph.value_info[:]
        graph.value_info.extend([*kept, made])


def _static_shapes(chain: Sequence[onnx.GraphProto], wanted: set[str]) -> dict[str, tuple[int, ...]]:
    """The fully known dims of the `wanted` tensors (those a Shape or Size reads: looking at every
    value's dims would cost GPT-2 10 ms a round), each from the innermost graph of `chain` that
    declares it."""
    found: dict[str, tuple[int, ...]] = {}
    for graph in chain:
        for info in (*graph.input, *graph.value_info, *graph.output):
            if info.name not in wanted or info.name in found:
                continue
            if info.type.HasField("tensor_type") and shapes.fixed(info):
                found[info.name] = tuple(d.dim_value for d in info.type.tensor_type.shape.dim)
        wanted = wanted - set(found)
        if not wanted:
            break
    return found


def _small(t: onnx.TensorProto) -> bool:
    return t.data_location != onnx.TensorProto.EXTERNAL and math.prod(t.dims) <= _MAX_ELEMENTS


def _fold_once(model: onnx.ModelProto, cache: dict[str, np.ndarray]) -> onnx.ModelProto | None:
    """Fold what is constant in the top graph and in every If branch, where the constants and
    static shapes of the enclosing graphs are known too."""
    opset = next((o.version for o in model.opset_import if o.domain in _STANDARD), 1)
    plans: dict[_Path, Callable[[onnx.GraphProto], None]] = {}
    visible: dict[_Path, dict[str, Callable[[], np.ndarray]]] = {(): {}}
    for path, _ in ((), model.graph), *_branches(model.graph):
        outer = visible.get(path[:-1], {}) if path else {}
        chain = _chain(model.graph, path)
        values, known = _fold_graph(chain, outer, cache, opset, model.opset_import)
        visible[path] = known
        if values:
            plans[path] = functools.partial(_with_constants, values=values, cache=cache)
    return _edited(model, plans) if plans else None


def _fold_graph(
    chain: Sequence[onnx.GraphProto],
    outer: dict[str, Callable[[], np.ndarray]],
    cache: dict[str, np.ndarray],
    opset: int,
    opsets: Iterable[onnx.OperatorSetIdProto],
) -> tuple[dict[str, np.ndarray], dict[str, Callable[[], np.ndarray]]]:
    """(the values to fold in chain[0], a maker of every value its branches can read)."""
    graph = chain[0]
    makers, picked = _foldable(chain, outer, cache)
    targets = {o for n in picked for o in n.output if o}
    computed = (
        arith.evaluate(
            [n for n in picked if n.op_type not in {"Shape", "Size"}], makers, opset, opsets, _MAX_ELEMENTS
        )
        if targets
        else {}
    )
    sizes = _size_operands(graph)
    # integer results (shapes, indices, masks) and floats that are sizes, and every Shape's,
    # whether a node read it or not
    values = {n: v for n, v in computed.items() if n in targets and (v.dtype.kind in "iub" or n in sizes)}
    for node in picked:
        if node.op_type in {"Shape", "Size"} and node.output[0] not in values:
            values[node.output[0]] = makers[node.output[0]]()
    known = {n: m for n, m in makers.items() if n not in targets}
    known.update({n: functools.partial(_given, v) for n, v in (computed | values).items()})
    return values, known


def _size_operands(graph: onnx.GraphProto) -> set[str]:
    """The tensors `graph` reads at a _SIZE_OPERANDS position."""
    found = set()
    for node in graph.node:
        for index in _SIZE_OPERANDS.get(node.op_type, ()) if node.domain in _STANDARD else ():
            if index < len(node.input) and node.input[index]:
                found.add(node.input[index])
    return found


def _given(value: np.ndarray) -> np.ndarray:
    return value


def _foldable(
    chain: Sequence[onnx.GraphProto], outer: dict[str, Callable[[], np.ndarray]], cache: dict[str, np.ndarray]
) -> tuple[dict[str, Callable[[], np.ndarray]], list[onnx.NodeProto]]:
    """The nodes of chain[0] computable from small constants and static shapes (of it and of
    the graphs enclosing it), and a maker of each value they read."""
    graph = chain[0]
    shapes = _static_shapes(
        chain, {n.input[0] for n in graph.node if n.op_type in {"Shape", "Size"} and n.input}
    )
    makers: dict[str, Callable[[], np.ndarray]] = dict(outer)
    for t in graph.initializer:
        if _small(t):
            makers[t.name] = functools.partial(numpy_helper.to_array, t)
    picked: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type not in _FOLDABLE or node.domain not in _STANDARD:
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
    graph: onnx.GraphProto, values: dict[str, np.ndarray], cache: dict[str, np.ndarray]
) -> None:
    """`graph` with its folded values as Constant nodes (also cached) in place of their makers.
    Its shapes are inferred again from scratch (a shape onnx's data propagation got wrong is
    not kept), except an If's outputs, which _shape_ifs may have shaped: known no other way."""
    replaced = set(values)
    kept = [n for n in graph.node if not (n.output and all(o in replaced for o in n.output if o))]
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
    del graph.node[:]
    graph.node.extend([*constants, *kept])
    _reshape(graph, replaced)


def _reshape(graph: onnx.GraphProto, replaced: set[str]) -> None:
    """Leave `graph`'s shapes to be inferred again from scratch, now that the values in
    `replaced` are made otherwise (a shape onnx's data propagation got wrong is not kept), except
    the outputs of the Ifs that stay, which _shape_ifs may have shaped: known no other way. The
    shape _shape_ifs gave an If that is now taken goes too (it was the larger branch's, and the
    branch taken may be the other), and so does every shape inferred from it; a branch's output
    that was such an If's forgets its shape (the enclosing graph's inference gives it again)."""
    branched = {o for n in graph.node if n.op_type == "If" for o in n.output}
    chosen = [i for i in graph.value_info if i.name in branched and shapes.fixed(i)]
    del graph.value_info[:]
    graph.value_info.extend(chosen)
    for output in graph.output:
        if output.name in replaced and output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")


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
