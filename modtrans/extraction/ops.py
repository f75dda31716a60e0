"""Extraction, step 2: op_type -> layer facts (kind, parameter roles, FLOPs, forward GEMM).

Each handler sees one node with its attributes, the inferred shapes of its inputs and outputs and,
for each input, whether it is a parameter. It returns what the layer is. Handlers are registered by
op type in REGISTRY; an op without a handler still becomes a layer (kind OTHER, a warning names it).

FLOPs count a multiply-add as 2 and cover the whole batch. E is the number of output elements.

  conv / linear / rnn    forward 2·MACs (+E for a bias); input-grad 2·MACs; weight-grad 2·MACs (+E)
  matmul (2 activations) forward 2·MACs; input-grad 4·MACs (both operands get a gradient); none
  norm                   forward 5·E (statistics 2E, normalise and affine 3E); input-grad 8·E; 2·E
  embedding              forward 0 (a copy); input-grad 0 (ids have none); weight-grad E (scatter-add)
  elementwise            forward E; input-grad E; weight-grad E if it has a parameter operand
  pool                   forward E·window; input-grad E·window
  reduce / softmax       forward 5·E; input-grad 3·E
  data movement          0 (their cost is memory traffic, which the cost models take from the bytes)

These are the conventional counts (as in fvcore / ptflops for the forward pass; the backward pass
follows the chain rule: one GEMM per gradient). The MACs of the GEMM-like layers are exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from modtrans.ir import flops
from modtrans.ir.document import Flops, Gemm, Kind, Role

Shape = tuple[int, ...]


@dataclass(frozen=True)
class NodeView:
    """What a handler may look at. Shapes are None unless every dim is known."""

    op_type: str
    attrs: dict[str, Any]
    inputs: tuple[str, ...]
    in_shapes: tuple[Shape | None, ...]
    out_shapes: tuple[Shape | None, ...]
    is_param: tuple[bool, ...]  # per input: a parameter (initializer or constant, non-scalar)

    def shape(self, index: int) -> Shape | None:
        return self.in_shapes[index] if index < len(self.in_shapes) else None

    def param(self, index: int) -> bool:
        return index < len(self.is_param) and self.is_param[index]

    @property
    def out_elements(self) -> int | None:
        first = self.out_shapes[0] if self.out_shapes else None
        return None if first is None else math.prod(first)


@dataclass(frozen=True)
class Facts:
    kind: Kind
    roles: dict[int, Role] = field(default_factory=dict)  # input index -> parameter role
    flops: Flops = field(default_factory=Flops)
    gemm: Gemm | None = None


Handler = Callable[[NodeView], Facts]
REGISTRY: dict[str, Handler] = {}


def handles(*op_types: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for op in op_types:
            REGISTRY[op] = fn
        return fn

    return register


def _param_roles(node: NodeView, roles: Sequence[tuple[int, Role]]) -> dict[int, Role]:
    return {i: role for i, role in roles if node.param(i)}


# --------------------------------------------------------------------------------- GEMM-like


def _conv_shapes(node: NodeView) -> tuple[Shape, Shape, Shape, int] | None:
    """Input, weight and output shapes and the group count of a (transposed) convolution."""
    x, w, y = node.shape(0), node.shape(1), node.out_shapes[0] if node.out_shapes else None
    if x is None or w is None or y is None or len(x) < 3:
        return None
    return x, w, y, int(node.attrs.get("group", 1)) or 1


@handles("Conv")
def conv(node: NodeView) -> Facts:
    roles = _param_roles(node, [(1, Role.WEIGHT), (2, Role.BIAS)])
    shapes = _conv_shapes(node)
    if shapes is None:
        return Facts(Kind.CONV, roles)
    x, w, y, groups = shapes
    batch, cin, out_spatial, kernel = x[0], x[1], math.prod(y[2:]), math.prod(w[2:])
    cout = w[0]
    k = (cin // groups) * kernel
    macs = batch * out_spatial * k * cout
    bias = batch * out_spatial * cout if 2 in roles else 0
    gemm = Gemm(m=batch * out_spatial, k=k, n=cout // groups, groups=groups)
    return Facts(Kind.CONV, roles, flops.gemm(macs, bias, bias), gemm)


@handles("ConvTranspose")
def conv_transpose(node: NodeView) -> Facts:
    roles = _param_roles(node, [(1, Role.WEIGHT), (2, Role.BIAS)])
    shapes = _conv_shapes(node)
    if shapes is None:
        return Facts(Kind.CONV_TRANSPOSE, roles)
    x, w, y, groups = shapes
    batch, cin, in_spatial, kernel = x[0], x[1], math.prod(x[2:]), math.prod(w[2:])
    cout_per_group = w[1]
    macs = batch * in_spatial * cin * cout_per_group * kernel
    bias = math.prod(y) if 2 in roles else 0
    gemm = Gemm(m=batch * in_spatial, k=cin // groups, n=cout_per_group * kernel, groups=groups)
    return Facts(Kind.CONV_TRANSPOSE, roles, flops.gemm(macs, bias, bias), gemm)


@handles("Gemm")
def gemm(node: NodeView) -> Facts:
    a, b = node.shape(0), node.shape(1)
    if node.param(1) or node.param(0):
        weight = 1 if node.param(1) else 0
        kind = Kind.LINEAR
        roles = _param_roles(node, [(weight, Role.WEIGHT), (2, Role.BIAS)])
    else:
        kind, roles = Kind.MATMUL, _param_roles(node, [(2, Role.BIAS)])
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return Facts(kind, roles)
    m, k = (a[1], a[0]) if node.attrs.get("transA") else (a[0], a[1])
    n = b[0] if node.attrs.get("transB") else b[1]
    macs = m * k * n
    if kind is Kind.MATMUL:
        return Facts(kind, roles, flops.matmul(macs), Gemm(m, k, n))
    bias = m * n if 2 in roles else 0
    return Facts(kind, roles, flops.gemm(macs, bias, bias), Gemm(m, k, n))


@handles("MatMul", "MatMulInteger", "QLinearMatMul")
def matmul(node: NodeView) -> Facts:
    b_index = 3 if node.op_type == "QLinearMatMul" else 1
    a, b = node.shape(0), node.shape(b_index)
    weight = b_index if node.param(b_index) else 0 if node.param(0) else None
    kind = Kind.MATMUL if weight is None else Kind.LINEAR
    roles = {} if weight is None else {weight: Role.WEIGHT}
    if a is None or b is None or not a or not b:
        return Facts(kind, roles)
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = math.prod(_broadcast(a2[:-2], b2[:-2]))
    macs = batch * m * k * n
    if kind is Kind.MATMUL:
        return Facts(kind, roles, flops.matmul(macs), Gemm(m, k, n, groups=batch))
    if weight == b_index and len(b2) == 2:  # activations [..., M, K] times a [K, N] weight
        return Facts(kind, roles, flops.gemm(macs), Gemm(batch * m, k, n))
    return Facts(kind, roles, flops.gemm(macs), Gemm(m, k, n, groups=batch))


def _broadcast(a: Shape, b: Shape) -> Shape:
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


@handles("LSTM", "GRU", "RNN")
def rnn(node: NodeView) -> Facts:
    roles = _param_roles(node, [(1, Role.WEIGHT), (2, Role.WEIGHT), (3, Role.BIAS)])
    x, w = node.shape(0), node.shape(1)
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return Facts(Kind.RNN, roles)
    seq, batch = (x[1], x[0]) if node.attrs.get("layout") else (x[0], x[1])
    directions, gates_hidden, inputs = w
    hidden = int(node.attrs.get("hidden_size") or gates_hidden // {"LSTM": 4, "GRU": 3}.get(node.op_type, 1))
    macs = seq * batch * directions * gates_hidden * (inputs + hidden)
    elementwise = seq * batch * directions * gates_hidden
    gemm = Gemm(m=seq * batch, k=inputs + hidden, n=gates_hidden, groups=directions)
    return Facts(Kind.RNN, roles, flops.gemm(macs, elementwise, elementwise), gemm)


# --------------------------------------------------------------------------------- the others


@handles(
    "BatchNormalization",
    "InstanceNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "SkipLayerNormalization",
    "RMSNormalization",
    "SimplifiedLayerNormalization",
    "LpNormalization",
)
def norm(node: NodeView) -> Facts:
    if node.op_type == "BatchNormalization":
        roles = [(1, Role.SCALE), (2, Role.SHIFT), (3, Role.STATISTIC), (4, Role.STATISTIC)]
    elif node.op_type == "SkipLayerNormalization":
        roles = [(2, Role.SCALE), (3, Role.SHIFT), (4, Role.BIAS)]
    else:
        roles = [(1, Role.SCALE), (2, Role.SHIFT)]
    e = node.out_elements or 0
    return Facts(Kind.NORM, _param_roles(node, roles), flops.norm(e))


@handles("Gather", "GatherElements", "GatherND", "EmbedLayerNormalization")
def gather(node: NodeView) -> Facts:
    if node.op_type == "EmbedLayerNormalization":
        roles = _param_roles(
            node, [(2, Role.WEIGHT), (3, Role.WEIGHT), (4, Role.WEIGHT), (5, Role.SCALE), (6, Role.SHIFT)]
        )
        e = node.out_elements or 0
        return Facts(Kind.EMBEDDING, roles, Flops(5 * e, 0, 3 * e))
    if node.param(0):
        return Facts(Kind.EMBEDDING, {0: Role.WEIGHT}, flops.embedding(node.out_elements or 0))
    return Facts(Kind.DATA)


_ELEMENTWISE = (
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Elu",
    "Selu",
    "Celu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Softplus",
    "Softsign",
    "Gelu",
    "FastGelu",
    "BiasGelu",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Reciprocal",
    "Neg",
    "Abs",
    "Pow",
    "Clip",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "Where",
    "Dropout",
    "Mish",
    "Sin",
    "Cos",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Not",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "ThresholdedRelu",
    "Shrink",
    "QuantizeLinear",
    "DequantizeLinear",
    "BiasAdd",
)


@handles(*_ELEMENTWISE)
def elementwise(node: NodeView) -> Facts:
    role = {
        "Add": Role.BIAS,
        "Sub": Role.BIAS,
        "BiasAdd": Role.BIAS,
        "BiasGelu": Role.BIAS,
        "Mul": Role.SCALE,
        "PRelu": Role.WEIGHT,
    }.get(node.op_type)
    roles = {i: role for i in range(len(node.inputs)) if role is not None and node.param(i)}
    e = node.out_elements or 0
    return Facts(Kind.ELEMENTWISE, roles, flops.elementwise(e, with_params=bool(roles)))


@handles("MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def pool(node: NodeView) -> Facts:
    x = node.shape(0)
    if node.op_type.startswith("Global"):
        e = math.prod(x) if x else 0
        return Facts(Kind.POOL, {}, Flops(e, e, 0))
    window = math.prod(node.attrs.get("kernel_shape", [1]))
    e = (node.out_elements or 0) * window
    return Facts(Kind.POOL, {}, Flops(e, e, 0))


@handles(
    "Softmax",
    "LogSoftmax",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL2",
    "ReduceL1",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
    "CumSum",
    "TopK",
)
def reduce(node: NodeView) -> Facts:
    if node.op_type in {"Softmax", "LogSoftmax"}:
        e = node.out_elements or 0
        return Facts(Kind.REDUCE, {}, flops.softmax(e))
    x = node.shape(0)
    e = math.prod(x) if x else 0
    return Facts(Kind.REDUCE, {}, Flops(e, e, 0))


@handles(
    "Concat",
    "Split",
    "Slice",
    "Transpose",
    "Pad",
    "Expand",
    "Tile",
    "ScatterND",
    "ScatterElements",
    "DepthToSpace",
    "SpaceToDepth",
    "Resize",
    "Upsample",
    "Trilu",
    "OneHot",
    "Compress",
    "ReverseSequence",
)
def data(node: NodeView) -> Facts:
    return Facts(Kind.DATA)


PARAMETER_OPS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "MatMulInteger",
        "QLinearMatMul",
        "LSTM",
        "GRU",
        "RNN",
        "Gather",
        "EmbedLayerNormalization",
    }
)
"""Ops that are a layer when they read a parameter even if every other input is constant."""

NOT_LAYERS = frozenset(
    {
        "Constant",
        "ConstantOfShape",
        "Shape",
        "Size",
        "Identity",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Cast",
        "CastLike",
        "Range",
        "NonZero",
        "EyeLike",
    }
)
"""Ops that only rename, re-view or describe a tensor: never a layer of their own."""


def facts(node: NodeView) -> Facts | None:
    """The layer facts of a node, or None when modtrans has no model of its op."""
    handler = REGISTRY.get(node.op_type)
    return None if handler is None else handler(node)
