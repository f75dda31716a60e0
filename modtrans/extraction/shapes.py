"""Extraction, step 0d: the shapes onnx's inference leaves out.

- `contrib_rules()`: onnx has no shape rules for onnxruntime's com.microsoft operators, so every
  tensor after the first fused op of an optimum / onnxruntime-optimized model is unknown. Inside
  this context, onnx's own inference runs a rule of ours for each of them (a schema registered
  with a Python inference function, taken away again on leaving, so that onnx's checker never
  judges those nodes by it). Each rule gives an op's outputs from its inputs' shapes and
  attributes, as onnxruntime's contrib op schemas define them (onnxruntime/core/graph/
  contrib_ops/bert_defs.cc, contrib_defs.cc, quantization_defs.cc); a symbolic dim passes through.
- `bodies`: a Loop's or Scan's body declares the types of its carried state; PyTorch writes dims
  of its own there (`h.13_dim_0`), jax2onnx the model input's names (`B`), and onnx keeps those
  over the shapes the loop starts with. A declared dim that is symbolic takes the start value's.
  And onnx never shapes a loop's final carried values (the spec lets them change shape from step
  to step): one whose body output has the shape it started with gets that shape, and a Loop's
  scan outputs, of known trip count, [trips, *the body's]. A body whose output changes shape
  keeps onnx's answer, which then says so by staying unknown. fold.py runs this pass in its
  rounds, with shape inference after each.
- `branch_outputs` and `larger`: what each branch of an If gives its outputs, and the shape an
  If whose branches disagree is carried on with (fold.py writes it, graph.py warns X517).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Sequence

import onnx
from onnx import defs, numpy_helper

from modtrans.extraction import loops

Shape = tuple[int, ...]
Dim = int | str | None
Dims = tuple[Dim, ...]
_SIMPLIFIED = "SimplifiedLayerNormalization"  # onnxruntime registers it in the default domain
_Rule = Callable[[Sequence[Dims | None], dict[str, object]], Sequence[Dims | None]]


def _int(value: object) -> int:
    """An integer attribute's value (0 when absent or not an integer)."""
    return value if isinstance(value, int) else 0


def _product(*dims: Dim) -> Dim:
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else None  # type: ignore[arg-type]


def _part(dim: Dim, parts: int) -> Dim:
    return dim // parts if isinstance(dim, int) and parts else None


def _same(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    return (inputs[0],)


def _skip_norm(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """SkipLayerNormalization: output, mean, inv_std_var, input_skip_bias_sum."""
    x = inputs[0]
    reduced = None if x is None else (*x[:-1], 1)
    return (x, reduced, reduced, x)


def _embed_norm(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """EmbedLayerNormalization(input_ids [B, S], segment_ids, word_embedding [V, H], ...):
    output [B, S, H], mask_index [B], embedding_sum [B, S, H]."""
    ids, word = inputs[0], inputs[2] if len(inputs) > 2 else None
    if ids is None or word is None or len(ids) != 2:
        return ()
    out = (*ids, word[-1])
    return (out, (ids[0],), out)


def _attention(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """Attention / QAttention(input [B, S, Hin], weights [Hin, Hq + Hk + Hv], ...): [B, S, Hv]."""
    x, w = inputs[0], inputs[1] if len(inputs) > 1 else None
    if x is None or w is None or len(x) != 3:
        return ()
    sizes = attrs.get("qkv_hidden_sizes")
    hidden = int(sizes[2]) if isinstance(sizes, list) and len(sizes) == 3 else _part(w[-1], 3)
    return ((x[0], x[1], hidden),)


def _multi_head(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """MultiHeadAttention(query [B, S, D] or packed [B, S, N, 3, H], key, value [B, L, Dv] or
    [B, N, L, H]): [B, S, Dv]."""
    q = inputs[0]
    v = inputs[2] if len(inputs) > 2 else None
    if q is None:
        return ()
    if len(q) == 5:  # packed QKV
        return ((q[0], q[1], _product(q[2], q[4])),)
    if v is not None and len(v) == 3:
        return ((q[0], q[1], v[2]),)
    if v is not None and len(v) == 4:
        return ((q[0], q[1], _product(v[1], v[3])),)
    return (q,) if len(q) == 3 else ()


def _group_query(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """GroupQueryAttention(query [B, S, D], key, value, ...): [B, S, num_heads * head_size];
    without key the query is packed QKV, D = (num_heads + 2 kv_num_heads) head_size."""
    q = inputs[0]
    key = inputs[1] if len(inputs) > 1 else None
    if q is None or len(q) != 3:
        return ()
    heads, kv_heads = _int(attrs.get("num_heads")), _int(attrs.get("kv_num_heads"))
    if key is not None or not heads:
        return (q,)
    return ((q[0], q[1], _product(heads, _part(q[2], heads + 2 * kv_heads))),)


def _dynamic_lstm(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """DynamicQuantizeLSTM(X [S, B, I], W [D, I, 4H], ...): Y [S, D, B, H], Y_h, Y_c [D, B, H]."""
    x, w = inputs[0], inputs[1] if len(inputs) > 1 else None
    hidden = _int(attrs.get("hidden_size"))
    if x is None or w is None or len(x) != 3 or not hidden:
        return ()
    return ((x[0], w[0], x[1], hidden), (w[0], x[1], hidden), (w[0], x[1], hidden))


def _matmul_n(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """MatMulNBits(A [..., K], packed B) with attribute N: [..., N]."""
    a, n = inputs[0], _int(attrs.get("N"))
    return ((*a[:-1], n),) if a is not None and n else ()


def _matmul_b(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """DynamicQuantizeMatMul / MatMulIntegerToFloat / GemmFastGelu(A [..., K], B [K, N]): [..., N]."""
    a, b = inputs[0], inputs[1] if len(inputs) > 1 else None
    return ((*a[:-1], b[-1]),) if a is not None and b is not None and len(b) == 2 else ()


def _bias_split(inputs: Sequence[Dims | None], attrs: dict[str, object]) -> Sequence[Dims | None]:
    """BiasSplitGelu(X [B, S, 2D], bias): [B, S, D]."""
    x = inputs[0]
    return ((*x[:-1], _part(x[-1], 2)),) if x is not None else ()


_RULES: dict[str, _Rule] = {
    "SkipLayerNormalization": _skip_norm,
    "SkipSimplifiedLayerNormalization": _skip_norm,
    "EmbedLayerNormalization": _embed_norm,
    "Attention": _attention,
    "QAttention": _attention,
    "MultiHeadAttention": _multi_head,
    "GroupQueryAttention": _group_query,
    "DynamicQuantizeLSTM": _dynamic_lstm,
    "MatMulNBits": _matmul_n,
    "DynamicQuantizeMatMul": _matmul_b,
    "MatMulIntegerToFloat": _matmul_b,
    "GemmFastGelu": _matmul_b,
    "BiasSplitGelu": _bias_split,
    **dict.fromkeys(
        ("FastGelu", "BiasGelu", "Gelu", "QuickGelu", "BiasAdd", "RotaryEmbedding", _SIMPLIFIED),
        _same,
    ),
}
_READS = ("qkv_hidden_sizes", "num_heads", "kv_num_heads", "hidden_size", "N")
_ELEMENT_FROM = {"EmbedLayerNormalization": 2, "QAttention": 2, "MatMulIntegerToFloat": 2}
"""The input whose element type the outputs have, where it is not the first (a quantized op's
float output has its bias's or scale's type)."""
_INT32_OUTPUTS = {("EmbedLayerNormalization", 1)}  # mask_index
_ANY = [
    f"tensor({t})"
    for t in (
        "float",
        "float16",
        "bfloat16",
        "double",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "int64",
        "bool",
    )
]
_lock = threading.Lock()
_users = 0
_registered: list[str] = []


def _dims(proto: onnx.TypeProto | None) -> Dims | None:
    if proto is None or not proto.HasField("tensor_type") or not proto.tensor_type.HasField("shape"):
        return None
    return tuple(
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in proto.tensor_type.shape.dim
    )


def _inference(op: str, rule: _Rule) -> Callable[[onnx.shape_inference.InferenceContext], None]:
    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        try:
            count = ctx.get_num_inputs()
            types = [ctx.get_input_type(i) if ctx.has_input(i) else None for i in range(count)]
            attrs = {}
            for name in _READS:
                attr = ctx.get_attribute(name)
                if attr is not None:
                    attrs[name] = onnx.helper.get_attribute_value(attr)
            source = types[_ELEMENT_FROM.get(op, 0)] if len(types) > _ELEMENT_FROM.get(op, 0) else None
            element = source.tensor_type.elem_type if source is not None else 0
            for index, dims in enumerate(rule([_dims(t) for t in types], attrs)):
                if dims is None or index >= ctx.get_num_outputs() or not ctx.has_output(index):
                    continue
                kind = onnx.TensorProto.INT32 if (op, index) in _INT32_OUTPUTS else element
                if kind:
                    ctx.set_output_type(index, onnx.helper.make_tensor_type_proto(kind, list(dims)))
        except Exception:  # a rule never fails inference: the output just stays unknown
            return

    return infer


def _schema(op: str, domain: str, rule: _Rule) -> defs.OpSchema:
    variadic = defs.OpSchema.FormalParameterOption.Variadic
    schema = defs.OpSchema(
        op,
        domain,
        1,
        inputs=[
            defs.OpSchema.FormalParameter(
                "inputs", "T", param_option=variadic, is_homogeneous=False, min_arity=0
            )
        ],
        outputs=[
            defs.OpSchema.FormalParameter(
                "outputs", "T", param_option=variadic, is_homogeneous=False, min_arity=0
            )
        ],
        type_constraints=[("T", _ANY, "any tensor")],
    )
    schema.set_type_and_shape_inference_function(_inference(op, rule))
    return schema


@contextlib.contextmanager
def contrib_rules(model: onnx.ModelProto) -> Iterator[None]:
    """Within: onnx's shape inference knows the com.microsoft ops of _RULES that `model` uses (and
    onnx does not know already). Nested and concurrent uses share one registration."""
    global _users
    wanted = _used(model.graph) & set(_RULES)
    with _lock:
        if wanted:
            # onnx.reference builds its table of every registered schema when first imported and
            # refuses two ops of one name (com.microsoft's Attention beside ONNX 23's): before ours
            import onnx.reference  # noqa: F401
        for op in sorted(wanted):
            domain = "" if op == _SIMPLIFIED else "com.microsoft"
            if f"{domain}\0{op}" in _registered:
                continue
            try:
                defs.get_schema(op, 1, domain)
                continue  # onnx (or someone) knows it
            except defs.SchemaError:
                pass
            defs.register_schema(_schema(op, domain, _RULES[op]))
            _registered.append(f"{domain}\0{op}")
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                for entry in _registered:
                    domain, op = entry.split("\0")
                    defs.deregister_schema(op, 1, domain)
                _registered.clear()


def _used(graph: onnx.GraphProto) -> set[str]:
    """The op types of the fused-op domains that `graph` and its subgraphs use."""
    found: set[str] = set()
    for node in graph.node:
        if node.domain == "com.microsoft" or (node.domain in ("", "ai.onnx") and node.op_type == _SIMPLIFIED):
            found.add(node.op_type)
        for attr in node.attribute:
            for sub in (attr.g, *attr.graphs) if attr.type in (5, 10) else ():
                found |= _used(sub)
    return found


_STANDARD = frozenset({"", "ai.onnx"})
_INTEGERS = frozenset({2, 3, 4, 5, 6, 7, 9, 12, 13})  # and bool (9): a condition


def _known(graph: onnx.GraphProto) -> dict[str, tuple[Shape, int]]:
    """Tensors of `graph` whose shape is fully known: name -> (dims, element type)."""
    found: dict[str, tuple[Shape, int]] = {}
    for t in graph.initializer:
        found[t.name] = (tuple(t.dims), t.data_type)
    for info in (*graph.input, *graph.value_info, *graph.output):
        tensor = info.type.tensor_type
        fixed = tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)
        if info.type.HasField("tensor_type") and fixed:
            found[info.name] = (tuple(d.dim_value for d in tensor.shape.dim), tensor.elem_type)
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    found[node.output[0]] = (tuple(a.t.dims), a.t.data_type)
    return found


def bodies(model: onnx.ModelProto) -> onnx.ModelProto | None:
    """`model` with each top-level Loop / Scan body's symbolic carried-state dims set from the
    values the loop starts with, or None when there is none to set."""
    if not any(n.op_type in ("Loop", "Scan") for n in model.graph.node):
        return None  # most models: no copy, no table of shapes
    out = onnx.ModelProto()
    out.CopyFrom(model)
    known = _known(out.graph)
    changed = False
    for node in out.graph.node:
        if node.domain not in _STANDARD or node.op_type not in ("Loop", "Scan"):
            continue
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if body is None:
            continue
        for inner, outer in loops.carried(node, body):
            if outer in known:
                changed |= _settle(inner, known[outer][0])
        for name, dims, element in _finals(node, body, known, out.graph):
            out.graph.value_info.append(onnx.helper.make_tensor_value_info(name, element, list(dims)))
            known[name] = (dims, element)
            changed = True
    return out if changed else None


def _finals(
    node: onnx.NodeProto, body: onnx.GraphProto, known: dict[str, tuple[Shape, int]], graph: onnx.GraphProto
) -> list[tuple[str, Shape, int]]:
    """(output, dims, element type) of the loop's outputs that can be shaped and are not yet:
    carried values whose body output keeps the start shape, and a Loop's scan outputs when its
    trip count is a constant."""
    inner = _known(body)
    carried = loops.carried(node, body)
    first = loops.first_carried_output(node)
    found: list[tuple[str, Shape, int]] = []
    for index, name in enumerate(node.output):
        result = body.output[first + index].name if first + index < len(body.output) else ""
        if not name or name in known or result not in inner:
            continue
        dims, element = inner[result]
        if index < len(carried):
            start = carried[index][0].name
            if inner.get(start, (None, 0))[0] == dims:
                found.append((name, dims, element))
        elif node.op_type == "Loop":
            # as many rows as iterations: known only when the count is (a while loop may stop early)
            trips, _ = loops.trips(node, lambda value: scalar(graph, value), lambda _: None)
            if trips is not None:
                found.append((name, (trips, *dims), element))
    return found


def scalar(graph: onnx.GraphProto, name: str) -> int | None:
    """The value of a one-element integer or bool initializer or Constant of `graph` named `name`
    (a trip count, a condition)."""
    if not name:
        return None
    tensor = next((t for t in graph.initializer if t.name == name), None)
    if tensor is None:
        node = next((n for n in graph.node if n.op_type == "Constant" and name in n.output), None)
        tensor = next((a.t for a in node.attribute if a.name == "value"), None) if node else None
    if tensor is None or math.prod(tensor.dims) != 1 or tensor.data_type not in _INTEGERS:
        return None
    try:
        return int(numpy_helper.to_array(tensor).reshape(-1)[0])
    except (ValueError, TypeError, IndexError):  # a malformed tensor
        return None


def _settle(info: onnx.ValueInfoProto, dims: Shape) -> bool:
    """Give `info`'s symbolic dims the values of `dims` (same rank); True when one changed."""
    if not info.type.HasField("tensor_type"):
        return False
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        tensor.shape.SetInParent()
        for value in dims:
            tensor.shape.dim.add().dim_value = value
        return True
    if len(tensor.shape.dim) != len(dims):
        return False
    changed = False
    for d, value in zip(tensor.shape.dim, dims, strict=True):
        if not d.HasField("dim_value"):
            d.dim_value = value
            changed = True
    return changed


def fixed(info: onnx.ValueInfoProto) -> bool:
    """Whether `info` is a tensor whose every dim is a size."""
    return _fixed_dims(info) is not None


def _fixed_dims(info: onnx.ValueInfoProto) -> Shape | None:
    dims = _dims(info.type)
    return dims if dims is not None and all(isinstance(d, int) for d in dims) else None  # type: ignore[return-value]


def branch_outputs(node: onnx.NodeProto) -> dict[str, tuple[Shape | None, Shape | None, int]]:
    """For each output of an If: (its then_branch's dims, its else_branch's dims, element type),
    the dims where fully known (onnx's inference writes them on each branch's outputs)."""
    branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    then, other = branches.get("then_branch"), branches.get("else_branch")
    if then is None or other is None:
        return {}
    found = {}
    for name, a, b in zip(node.output, then.output, other.output, strict=False):
        if name:
            found[name] = (_fixed_dims(a), _fixed_dims(b), a.type.tensor_type.elem_type)
    return found


def larger(then: Shape, other: Shape) -> Shape:
    """The shape an If whose branches give `then` and `other` is costed with downstream: the one
    of more elements, then_branch's on a tie. Both run in the IR (X513); what follows the If is
    costed for the costlier of the two, an upper bound on what one inference does (README)."""
    return other if math.prod(other) > math.prod(then) else then
