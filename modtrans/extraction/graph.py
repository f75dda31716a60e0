"""Extraction, step 1: walk an ONNX graph (after shape inference) into IR layers.

What counts as a layer: every node that computes on activations and is not a mere re-view of a
tensor (ops.NOT_LAYERS), including the nodes inside If / Loop / Scan bodies. Nodes that only
compute constants (weight chains, shape arithmetic on integers) are not layers.

Which parameters belong to a layer: an input that does not depend on any model input is computed
from constants only (an initializer of this graph or an enclosing one, or a `Constant` node's
tensor), through any chain of constant nodes: Identity, Transpose, Cast, DequantizeLinear, or the
Slice / Concat gate packing PyTorch writes for LSTM weights. Those constant leaves that are
non-scalar float or quantized integer tensors are the layer's parameters (each counted once). A
weight the file describes but does not store (onnx's "light" models fill theirs with
ConstantOfShape at run time) is a leaf too: the first node of its constant chain that makes a
weight-typed tensor out of none (shapes and scalars only), sized by its inferred shape; it is a
parameter of the weighted layers alone (_WEIGHTED_KINDS), since a made tensor an Add or Mul reads
is a mask or a fill, not a weight. A
tensor used by two layers (tied embeddings) belongs to the first; the second lists it with
`shared_with`, and totals and all-reduces count it once. The bias `Add` that exporters emit after a
MatMul is folded into that MatMul's layer.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import onnx

from modtrans import dtypes
from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.extraction import loops, ops, shapes
from modtrans.ir.document import TRAINABLE_ROLES, Activation, Dim, Flops, Kind, Layer, Param, Role

_CONTROL = frozenset({"If", "Loop", "Scan"})
_WEIGHT_TYPES = dtypes.FLOATING | dtypes.QUANTIZED
"""Weights of these types are trained parameters (a quantized model's stored weights count as its
parameters, sized as stored; see extraction/ops/quantized.py)."""

MAX_BYTES = 2**63 - 1


@dataclass(frozen=True)
class Source:
    """A constant tensor (initializer or Constant value) a parameter input is computed from."""

    name: str
    dims: tuple[int, ...]
    data_type: int
    quant: bool = False  # reached as a DequantizeLinear scale or zero point
    made: bool = False  # computed from shapes and scalars (ConstantOfShape), not stored

    @property
    def elements(self) -> int:
        return math.prod(self.dims)


Leaves = tuple[Source, ...]


@dataclass
class _Scope:
    graph: onnx.GraphProto
    parent: _Scope | None
    prefix: str
    initializers: dict[str, onnx.TensorProto] = field(default_factory=dict)
    producers: dict[str, onnx.NodeProto] = field(default_factory=dict)
    consumers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    types: dict[str, tuple[tuple[Dim, ...] | None, int]] = field(default_factory=dict)
    dynamic: set[str] = field(default_factory=set)
    memo: dict[str, Leaves | None] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # loop-invariant body input -> outer value

    def __post_init__(self) -> None:
        g = self.graph
        self.initializers = {t.name: t for t in g.initializer}
        for node in g.node:
            for out in node.output:
                self.producers[out] = node
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)
        for info in (*g.output, *g.value_info, *g.input):  # a body passing an input on: the input's
            self.types[info.name] = _type_of(info.type)
        for t in g.initializer:
            self.types[t.name] = (tuple(t.dims), t.data_type)
        self.dynamic = {
            i.name for i in g.input if i.name not in self.initializers and i.name not in self.aliases
        }

    def lookup_type(self, name: str) -> tuple[tuple[Dim, ...] | None, int]:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.types:
                return scope.types[name]
            scope = scope.parent
        return None, 0

    def leaves(self, name: str) -> Leaves | None:
        """None when `name` depends on a model input; else the constant tensors it is computed from
        (through any chain of constant-only nodes: Identity, Transpose, Cast, DequantizeLinear, and
        the Slice / Concat gate packing exporters write for LSTM weights)."""
        if not name:
            return ()
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.aliases and scope.parent is not None:  # a weight a loop carries unchanged
                name, scope = scope.aliases[name], scope.parent
                continue
            if name in scope.memo:
                return scope.memo[name]
            if name in scope.initializers:
                t = scope.initializers[name]
                return (Source(t.name, tuple(t.dims), t.data_type),)
            if name in scope.dynamic:
                return None
            node = scope.producers.get(name)
            if node is not None:
                found = scope._constant(node)
                scope.memo[name] = found
                return found
            scope = scope.parent
        return None  # a graph input or an outer-scope value

    def _constant(self, node: onnx.NodeProto) -> Leaves | None:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    return (Source(node.output[0], tuple(attr.t.dims), attr.t.data_type),)
            return ()
        if node.op_type in _CONTROL or (not node.input and node.op_type.startswith("Random")):
            return None
        found: list[Source] = []
        for index, name in enumerate(node.input):
            inner = self.leaves(name)
            if inner is None:
                return None
            if node.op_type == "DequantizeLinear" and index > 0:
                inner = tuple(Source(s.name, s.dims, s.data_type, quant=True) for s in inner)
            found.extend(inner)
        leaves = tuple({s.name: s for s in found}.values())  # a weight sliced four ways is one leaf
        return self._made(node, leaves) or leaves

    def _made(self, node: onnx.NodeProto, leaves: Leaves) -> Leaves | None:
        """The node's output as a leaf of its own when it is a weight made from no weight (a
        ConstantOfShape of a weight's shape, an Expand of a scalar): its inferred shape and type
        are all the file says of it. A re-view of stored scalars (paddle2onnx's Reshape of a
        one-element bias) holds no more values than they do, and stays theirs."""
        if len(node.output) != 1 or any(_is_param(s) for s in leaves):
            return None
        dims, data_type = self.lookup_type(node.output[0])
        concrete = _concrete(dims)
        stored = sum(s.elements for s in leaves if s.data_type in _WEIGHT_TYPES)
        if concrete is None or data_type not in _WEIGHT_TYPES or math.prod(concrete) <= stored:
            return None
        return (Source(node.output[0], concrete, data_type, made=True),)

    def inputs_read(self, name: str) -> list[str]:
        """The model inputs whose values `name` is computed from (what decides an If's
        condition: X513 names them, for --input-value)."""
        found: dict[str, None] = {}
        seen: set[str] = set()
        pending = [name]
        while pending:
            current = pending.pop()
            if not current or current in seen:
                continue
            seen.add(current)
            scope: _Scope | None = self
            while scope is not None and current not in scope.producers and current not in scope.types:
                scope = scope.parent
            if scope is None:
                continue
            node = scope.producers.get(current)
            if node is not None:
                if node.op_type not in ("Shape", "Size"):  # a shape is no input's value
                    pending.extend(node.input)
            elif scope.parent is None and current not in scope.initializers:
                found[current] = None  # a graph input of the top graph
        return list(found)

    def is_param(self, name: str, single: bool = False) -> bool:
        found = self.leaves(name)
        return found is not None and any(_is_param(s, single) for s in found)


def _type_of(proto: onnx.TypeProto) -> tuple[tuple[Dim, ...] | None, int]:
    if not proto.HasField("tensor_type"):
        return None, 0
    tensor = proto.tensor_type
    if not tensor.HasField("shape"):
        return None, tensor.elem_type
    dims: list[Dim] = []
    for d in tensor.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        else:
            dims.append(d.dim_param or "?")
    return tuple(dims), tensor.elem_type


def _is_param(source: Source, single: bool = False) -> bool:
    """A tensor that can be a weight: floating point, or the 8- and 4-bit integers quantized
    models store weights in (not int32/int64/bool: shapes, indices, masks). One element is a
    constant (an epsilon, a scale) unless `single`: the bias of a layer with one output
    (Linear(24, 1): its 1-element bias is trained like any other)."""
    sized = source.elements > 1 or (single and source.elements == 1)
    return sized and source.data_type not in dtypes.INDEX


_WEIGHTED_KINDS = frozenset(
    {Kind.CONV, Kind.CONV_TRANSPOSE, Kind.LINEAR, Kind.NORM, Kind.EMBEDDING, Kind.RNN}
)
"""The layers whose constant inputs are weights by the operator's definition (a Conv's W and B,
a BatchNormalization's scale, bias, mean and variance): a made tensor is a parameter there only."""

_BIAS_INPUT = {"Gemm": 2, "Conv": 2, "ConvTranspose": 2}
"""The input position of a layer's bias, which may hold a single element."""


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/:\[\]]+")


def sanitise(name: str) -> str:
    """A workload-safe layer name: no whitespace, no leading slash, nothing a consumer splits on."""
    return _UNSAFE.sub("_", name).strip("/") or "_"


def readable(node_name: str, op_type: str) -> str:
    """PyTorch's scoped node names as module paths: /layer1/layer1.0/conv1/Conv -> layer1.0.conv1.

    Each scope is a module's name, Sequential children repeating their parent's prefix; the last
    part is the op (kept when it is not the module's first op of that type: ...self.MatMul_1).
    Other names are only sanitised.
    """
    if not node_name.startswith("/") or node_name.count("/") < 2:
        return sanitise(node_name)
    *scopes, last = node_name.strip("/").split("/")
    path: list[str] = []
    for scope in scopes:
        if path and scope.startswith(path[-1] + "."):
            path[-1] = scope
        else:
            path.append(scope)
    if last != op_type:
        path.append(last)
    return sanitise(".".join(path))


class Walker:
    """Turns a shape-inferred graph into layers; collects diagnostics on the way."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.layers: list[Layer] = []
        self.diagnostics: list[Diagnostic] = []
        self._names: set[str] = set()
        self._owners: dict[str, str] = {}
        self._unknown_dims: set[str] = set()
        self._unsupported: set[str] = set()
        self._made_by: dict[str, tuple[str, ...]] = {}  # tensor -> the layers it comes from
        self.top_k: dict[str, int] = {}  # TopK layer -> its constant K (mixtures of experts)
        self._conflicted = False
        self.opsets: dict[str, int] = {}
        self.untrained: frozenset[str] = frozenset()  # buffers and constants by the file's word (buffers.py)

    def walk(
        self,
        graph: onnx.GraphProto,
        parent: _Scope | None = None,
        prefix: str = "",
        aliases: dict[str, str] | None = None,
    ) -> None:
        scope = _Scope(graph, parent, prefix, aliases=aliases or {})
        fused = self._bias_adds(scope)
        for index, node in enumerate(graph.node):
            node_name = prefix + (node.name or f"{node.op_type}_{index}")
            if node.op_type in _CONTROL:
                if node.op_type == "If":
                    read = scope.inputs_read(node.input[0])
                    self.diagnostics.append(
                        diagnostic(
                            "X513",
                            f"If {node_name!r}: its condition {node.input[0]!r} depends on input values"
                            + (f" ({', '.join(read)})" if read else "")
                            + ", so both branches are costed",
                            path=self.path,
                            hint=" ".join(f"--input-value {n}=V" for n in read)
                            + " takes one branch (modtrans.translate(..., input_value={"
                            + ", ".join(f"{n!r}: V" for n in read)
                            + "}))"
                            if read
                            else None,
                        )
                    )
                scope.dynamic.update(node.output)
                start = len(self.layers)
                for attr in node.attribute:
                    for sub in (attr.g, *attr.graphs) if attr.type in (5, 10) else ():
                        self.walk(sub, scope, f"{node_name}/{attr.name}/", loops.invariants(node, sub))
                if node.op_type != "If":
                    self._repeat(scope, node, node_name, start)
                else:
                    self._disagree(node, node_name)
                continue
            if all(scope.leaves(i) is not None for i in node.input) and not self._reads_params(scope, node):
                continue  # computes a constant: a weight chain or shape arithmetic
            scope.dynamic.update(node.output)
            feeding = tuple(dict.fromkeys(x for i in node.input for x in self._made_by.get(i, ())))
            if (
                node.op_type in ops.NOT_LAYERS
                or node.name in fused
                or not self._floating(scope, node)
                or _passes_through(scope, node)
            ):
                self._misfit(scope, node, node_name)
                for out in node.output:  # a re-view passes on who made its input
                    self._made_by[out] = feeding
                continue
            bias = next((add for add, mm in fused.items() if mm == id(node)), None)
            self._layer(scope, node, node_name, bias, feeding)
            if node.op_type == "TopK":
                k = _constant_int(scope, node.input[1]) if len(node.input) > 1 else None
                if k is not None:
                    self.top_k[self.layers[-1].name] = k
            for out in node.output:
                self._made_by[out] = (self.layers[-1].name,)

    def _misfit(self, scope: _Scope, node: onnx.NodeProto, node_name: str) -> None:
        """X511 for a re-view whose fixed size the input does not fit: a Reshape whose target
        holds another number of elements than its input, a Squeeze of an axis that is not 1.
        onnx's inference writes a Reshape's target as its output without comparing counts, and
        leaves a bad Squeeze unshaped, so the failure showed as X510 further on (paddle2onnx's
        PP-OCRv4 recogniser reshapes its neck to [0, 1, W, 120], a line of height 1: a 320-pixel
        high input gave X510 at a Concat 30 nodes on). onnxruntime refuses both
        (reshape_helper.h: input_shape_size == requested_shape_size; Squeeze: "an axis is selected
        with shape entry not equal to one", Operators.md)."""
        if node.domain not in ("", "ai.onnx") or self._conflicted:
            return
        given = _concrete(scope.lookup_type(node.input[0])[0]) if node.input else None
        if given is None:
            return
        why = None
        if node.op_type == "Reshape":
            made = _concrete(scope.lookup_type(node.output[0])[0])
            if made is not None and math.prod(given) != math.prod(made):
                why = f"its input {list(given)} holds {math.prod(given):,} elements, its target {list(made)} "
                why += f"{math.prod(made):,}"
        elif node.op_type == "Squeeze":
            listed = next((tuple(a.ints) for a in node.attribute if a.name == "axes"), None)  # opset < 13
            axes = _constant_ints(scope, node.input[1]) if len(node.input) > 1 else listed
            bad = [a for a in axes or () if -len(given) <= a < len(given) and given[a] != 1]
            if bad:
                why = f"axis {bad[0]} of its input {list(given)} is {given[bad[0]]}, not 1"
        if why is not None:
            self._conflict(
                f"node {node_name!r} ({node.op_type}): {why}",
                "the input shape does not fit a size the model fixes: check --input-shape against the "
                "shape the model was exported for",
            )

    def _conflict(self, message: str, hint: str) -> None:
        """X511, once per model: what follows the first contradiction only repeats it."""
        if not self._conflicted:
            self._conflicted = True
            self.diagnostics.append(diagnostic("X511", message, path=self.path, hint=hint))

    def _repeat(self, scope: _Scope, node: onnx.NodeProto, node_name: str, start: int) -> None:
        """The body layers of a Loop / Scan (layers[start:]) run once per iteration: their FLOPs
        and GEMMs are multiplied by the trip count, or, when nobody knows it, X514 says the body
        is costed once and the layers' FLOPs are marked unknown."""
        trips, why = loops.trips(
            node, lambda name: _constant_int(scope, name), lambda name: scope.lookup_type(name)[0]
        )
        body = self.layers[start:]
        if trips is None:
            if body:
                self.diagnostics.append(
                    diagnostic(
                        "X514",
                        f"{node.op_type} {node_name!r}: {why}, "
                        f"so its {len(body)} layers are costed for one iteration",
                        path=self.path,
                        hint="--input-shape, when the count follows from the shapes; else --allow-unknown",
                    )
                )
            self.layers[start:] = [dataclasses.replace(x, flops_known=False) for x in body]
            return
        self.layers[start:] = [loops.repeated(x, trips) for x in body]

    def _disagree(self, node: onnx.NodeProto, node_name: str) -> None:
        """X517 for each output of a value-dependent If whose branches give it different shapes:
        fold.py carried the larger on (shapes.larger), and this says which, and where (the If's
        name, after the branches that hold it)."""
        for name, (then, other, _) in shapes.branch_outputs(node).items():
            if then is None or other is None or then == other:
                continue
            self.diagnostics.append(
                diagnostic(
                    "X517",
                    f"If {node_name!r}: output {name!r} is {list(then)} "
                    f"in then_branch and {list(other)} in else_branch; what follows is costed with "
                    f"{list(shapes.larger(then, other))}, the larger",
                    path=self.path,
                )
            )

    @staticmethod
    def _reads_params(scope: _Scope, node: onnx.NodeProto) -> bool:
        """A constant-input node that still trains a parameter: position embeddings looked up with
        folded position ids. Weight chains (Transpose of a weight ...) are not layers."""
        return node.op_type in ops.PARAMETER_OPS and any(scope.is_param(i) for i in node.input)

    def _floating(self, scope: _Scope, node: onnx.NodeProto) -> bool:
        """False for nodes on integer/boolean tensors only (shape arithmetic, mask building);
        quantized compute (MatMulInteger's int32 output ...) is work all the same."""
        if node.op_type in ops.QUANTIZED:
            return True
        kinds = [scope.lookup_type(o)[1] for o in node.output if o]
        return not kinds or any(k == 0 or k not in dtypes.INDEX for k in kinds)

    def _bias_adds(self, scope: _Scope) -> dict[str, int]:
        """Add nodes (by name) that add a parameter bias to a MatMul's output -> id of that MatMul."""
        found: dict[str, int] = {}
        for node in scope.graph.node:
            if node.op_type != "MatMul" or not node.output:
                continue
            if not any(scope.is_param(i) for i in node.input):
                continue
            users = scope.consumers.get(node.output[0], [])
            if len(users) != 1 or users[0].op_type != "Add" or not users[0].name:
                continue
            add = users[0]
            other = [i for i in add.input if i != node.output[0]]
            weight = next((scope.leaves(i) for i in node.input if scope.is_param(i)), None) or ()
            one_output = any(s.dims[-1:] == (1,) for s in weight)  # Linear(K, 1): a 1-element bias
            if len(other) == 1 and scope.is_param(other[0], single=one_output):
                found[add.name] = id(node)
        return found

    def _layer(
        self,
        scope: _Scope,
        node: onnx.NodeProto,
        node_name: str,
        bias: str | None,
        producers: tuple[str, ...],
    ) -> None:
        sources = [scope.leaves(i) for i in node.input]
        bias_at = _BIAS_INPUT.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if node.op_type == "Add" and node.domain in ("", "ai.onnx"):
            bias_at = _single_channel_bias(scope, node)
        in_shapes = tuple(_concrete(scope.lookup_type(i)[0]) for i in node.input)
        view, found = self._view(scope, node, node_name, sources, bias_at, in_shapes)
        if found.kind not in _WEIGHTED_KINDS and any(x.made for s in sources for x in s or ()):
            sources = [None if s is None else tuple(x for x in s if not x.made) for s in sources]
            view, found = self._view(scope, node, node_name, sources, bias_at, in_shapes)
        name = self._unique(readable(node_name, node.op_type))
        self._judge(name, node, found, in_shapes, scope)
        params = self._params(name, sources, found.roles, found.param_elements, single=bias_at)
        flops, fused_nodes = found.flops, tuple[str, ...]()
        if bias is not None:
            add = next(n for n in scope.graph.node if n.name == bias)
            other = next(i for i in add.input if i not in node.output)
            params += self._params(name, [scope.leaves(other)], {0: Role.BIAS}, single=0)
            e = view.out_elements or 0
            flops = Flops(flops.forward + e, flops.input_grad, flops.weight_grad + e)
            fused_nodes = (bias,)
        inputs = tuple(
            self._activation(scope, i) for i, s in zip(node.input, sources, strict=True) if i and s is None
        )
        outputs = tuple(self._activation(scope, o) for o in node.output if o)
        self.layers.append(
            Layer(
                name,
                node.name,
                node.op_type,
                found.kind,
                params,
                inputs,
                outputs,
                flops,
                found.gemm,
                fused_nodes,
                producers,
                flops_known=found.costed,
            )
        )

    def _view(
        self,
        scope: _Scope,
        node: onnx.NodeProto,
        node_name: str,
        sources: list[Leaves | None],
        bias_at: int | None,
        in_shapes: tuple[tuple[int, ...] | None, ...],
    ) -> tuple[ops.NodeView, ops.Facts]:
        """What the op's handler sees of `node` with these parameter sources, and its facts."""
        is_param = tuple(
            s is not None and any(_is_param(x, single=k == bias_at) for x in s) for k, s in enumerate(sources)
        )
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        view = ops.NodeView(
            node.op_type,
            _attributes(node),
            tuple(node.input),
            in_shapes,
            tuple(_concrete(scope.lookup_type(o)[0]) for o in node.output),
            is_param,
            domain,
            self.opsets.get(domain, 0),
        )
        return view, self._facts(view, node, node_name)

    def _facts(self, view: ops.NodeView, node: onnx.NodeProto, node_name: str) -> ops.Facts:
        """The op model's facts; for an op without a model, uncosted OTHER facts (X505, once per op)."""
        found = ops.facts(view)
        if found is not None:
            return found
        # no model of the op: its FLOPs are unknown (X505 names the op, X510 the layer)
        if node.op_type not in self._unsupported:
            self._unsupported.add(node.op_type)
            domain = f"{node.domain}::" if node.domain else ""
            self.diagnostics.append(
                diagnostic(
                    "X505",
                    f"no FLOP model for op {domain}{node.op_type} (first seen at node {node_name!r})",
                    path=self.path,
                    hint="the layer keeps its parameters and activations; FLOPs are 0",
                )
            )
        return ops.Facts(Kind.OTHER, {i: Role.OTHER for i, p in enumerate(view.is_param) if p}, costed=False)

    def _judge(
        self,
        name: str,
        node: onnx.NodeProto,
        found: ops.Facts,
        in_shapes: tuple[tuple[int, ...] | None, ...],
        scope: _Scope,
    ) -> None:
        """X511 for the first layer whose input contradicts its weights; X510 for a layer whose
        FLOPs need a shape that is unknown, naming the tensor."""
        if found.conflict is not None:
            self._conflict(
                f"layer {name} ({node.op_type}): {found.conflict}",
                "the input shape does not fit the model's weights: check --input-shape's layout",
            )
        if not found.costed:
            shapeless = next(
                (
                    i
                    for i, shape in zip(node.input, in_shapes, strict=False)
                    if i and shape is None and not scope.is_param(i)
                ),
                node.output[0] if node.output else "",
            )
            dims = scope.lookup_type(shapeless)[0]
            self.diagnostics.append(
                diagnostic(
                    "X510",
                    f"layer {name} ({node.op_type}): FLOPs unknown, tensor {shapeless!r} has shape "
                    f"{list(dims) if dims is not None else 'unknown'}",
                    path=self.path,
                    hint="give the inputs' shapes (--input-shape NAME=AxB), or --allow-unknown for 0 FLOPs",
                )
            )

    def _params(
        self,
        layer: str,
        sources: list[Leaves | None],
        roles: dict[int, Role],
        packed: dict[int, int] | None = None,
        single: int | None = None,
    ) -> tuple[Param, ...]:
        """The parameters among `sources` by their roles; the input at `single` (a bias) may
        hold one element."""
        out: dict[str, Param] = {}
        for index, role in roles.items():
            leaves = sources[index] if index < len(sources) else None
            for leaf in leaves or ():
                weight = _is_param(leaf, single=index == single and role is Role.BIAS)
                if leaf.name not in out and (weight or (leaf.quant and leaf.elements > 1)):
                    values = (packed or {}).get(index) if len(leaves or ()) == 1 else None
                    out[leaf.name] = self._param(layer, leaf, Role.QUANT if leaf.quant else role, values)
        return tuple(out.values())

    def _param(self, layer: str, source: Source, role: Role, values: int | None = None) -> Param:
        """A parameter sized as stored; `values`: the values a packed (4-bit) tensor holds."""
        owner = self._owners.setdefault(source.name, layer)
        elements = source.elements
        return Param(
            name=source.name,
            role=role,
            shape=source.dims,
            dtype=dtypes.name(source.data_type),
            elements=values or elements,
            bytes=dtypes.size_bytes(elements, source.data_type),
            trainable=role in TRAINABLE_ROLES
            and source.data_type in _WEIGHT_TYPES
            and source.name not in self.untrained,
            shared_with=None if owner == layer else owner,
        )

    def _activation(self, scope: _Scope, name: str) -> Activation:
        dims, data_type = scope.lookup_type(name)
        if dims is not None:
            for axis, d in enumerate(dims):
                if isinstance(d, str) and d not in self._unknown_dims:
                    self._unknown_dims.add(d)
                    self.diagnostics.append(
                        diagnostic(
                            "X504",
                            f"tensor {name!r} dimension {axis} is {d!r} after shape inference",
                            path=self.path,
                            hint="pass --batch N or --input-shape NAME=AxBxC",
                        )
                    )
        concrete = _concrete(dims)
        size = (
            None if concrete is None or data_type == 0 else dtypes.size_bytes(math.prod(concrete), data_type)
        )
        return Activation(name, dims, dtypes.name(data_type) if data_type else "unknown", size)

    def _unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self._names:
            n += 1
            candidate = f"{name}_{n}"
        self._names.add(candidate)
        return candidate


def _single_channel_bias(scope: _Scope, node: onnx.NodeProto) -> int | None:
    """The input of an Add that is the bias of a Conv / ConvTranspose with one output channel
    before it (through Identity), or None. paddle2onnx writes a Paddle conv's bias as Reshape(bias)
    + Add after Identity(conv) (as its files show); PP-OCR's DB head ends in
    Conv2DTranspose(C, 1, 2, stride=2), whose bias holds one element and is trained like any other."""
    if len(node.input) != 2:
        return None
    for index, name in enumerate(node.input):
        conv = scope.producers.get(node.input[1 - index])
        for _ in range(8):  # paddle2onnx's Identity, or a few (a cyclic graph ends here too)
            if conv is None or conv.op_type != "Identity" or not conv.input:
                break
            conv = scope.producers.get(conv.input[0])
        if conv is None or conv.op_type not in ("Conv", "ConvTranspose") or len(conv.input) < 2:
            continue
        weight = scope.leaves(conv.input[1]) or ()
        group = next((a.i for a in conv.attribute if a.name == "group"), 1) or 1
        channels = {
            s.dims[0] if conv.op_type == "Conv" else s.dims[1] * group for s in weight if len(s.dims) > 2
        }
        bias = [s for s in scope.leaves(name) or () if s.data_type not in dtypes.INDEX]  # not its shape
        if channels == {1} and len(bias) == 1 and bias[0].elements == 1:
            return index
    return None


def _passes_through(scope: _Scope, node: onnx.NodeProto) -> bool:
    """A Dropout whose ratio is a constant 0 returns its input (ONNX's Dropout; PyTorch's dropout
    at p = 0 in training too: aten/src/ATen/native/Dropout.cpp, _dropout_impl, `if (p == 0 ||
    !train ...) return input`): a re-view, not a layer (it keeps no mask for the backward)."""
    if node.op_type != "Dropout" or len(node.input) < 2 or not node.input[1]:
        return False
    ratio = _constant_values(scope, node.input[1])
    return ratio is not None and len(ratio) == 1 and ratio[0] == 0


def _constant_int(scope: _Scope, name: str) -> int | None:
    """The value of a one-element integer constant (a TopK's K), when the graph holds it."""
    values = _constant_ints(scope, name)
    return values[0] if values is not None and len(values) == 1 else None


def _constant_ints(scope: _Scope, name: str) -> tuple[int, ...] | None:
    """The values of an integer constant (a Squeeze's axes), when the graph holds it."""
    values = _constant_values(scope, name)
    try:
        return None if values is None else tuple(int(v) for v in values)
    except (ValueError, TypeError, OverflowError):  # a string, complex or non-finite constant
        return None


def _constant_values(scope: _Scope, name: str) -> tuple[int | float, ...] | None:
    """The values of a constant (an integer or floating tensor), when the graph holds it."""
    from onnx import numpy_helper

    current: _Scope | None = scope
    while current is not None:
        tensor = current.initializers.get(name)
        node = current.producers.get(name)
        if tensor is None and node is not None and node.op_type == "Constant":
            tensor = next((a.t for a in node.attribute if a.name == "value"), None)
        if tensor is not None:
            try:
                return tuple(v.item() for v in numpy_helper.to_array(tensor).reshape(-1))
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):  # a malformed tensor
                return None
        current = current.parent
    return None


def _concrete(dims: tuple[Dim, ...] | None) -> tuple[int, ...] | None:
    """The dims when every one is a size; a negative one is unknown too, so that FLOPs counted on
    it are unknown (X510), never negative."""
    if dims is None or any(not isinstance(d, int) or d < 0 for d in dims):
        return None
    return tuple(int(d) for d in dims)


def _attributes(node: onnx.NodeProto) -> dict[str, object]:
    out: dict[str, object] = {}
    for attr in node.attribute:
        if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSOR):
            continue
        out[attr.name] = onnx.helper.get_attribute_value(attr)
    return out


def tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor stored in a graph: initializers, Constant values and those of subgraphs."""
    for g in graphs(graph):
        yield from g.initializer
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    yield attr.t
                yield from attr.tensors


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every graph inside it (If branches, Loop and Scan bodies, at any depth)."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            for sub in (attr.g, *attr.graphs) if attr.type in (5, 10) else ():
                yield from graphs(sub)
