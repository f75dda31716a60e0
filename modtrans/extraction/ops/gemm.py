"""GEMM-shaped ops: convolutions, Gemm, MatMul, recurrent layers, Einsum.

    conv / linear / rnn    forward 2·MACs (+E for a bias); input-grad 2·MACs; weight-grad 2·MACs (+E)
    matmul (2 activations) forward 2·MACs; input-grad 4·MACs (both operands get a gradient); none
    einsum                 2 x the product of every index's size (one multiply-add per point of the
                           index space), like a matmul of activations when no operand is a weight

A weight whose dims contradict its input (a conv's input channels, a GEMM's reduction) is a
conflict: the input shape given (--input-shape) does not fit the model.
"""

from __future__ import annotations

import math

from modtrans.extraction.ops.registry import Facts, NodeView, Shape, handles, param_roles, unknown
from modtrans.ir import flops
from modtrans.ir.document import Gemm, Kind, Role


def _conv_shapes(node: NodeView) -> tuple[Shape, Shape, Shape, int] | None:
    """Input, weight and output shapes and the group count of a (transposed) convolution."""
    x, w, y = node.shape(0), node.shape(1), node.out_shapes[0] if node.out_shapes else None
    if x is None or w is None or y is None or len(x) < 3:
        return None
    return x, w, y, int(node.attrs.get("group", 1)) or 1


@handles("Conv")
def conv(node: NodeView) -> Facts:
    roles = param_roles(node, [(1, Role.WEIGHT), (2, Role.BIAS)])
    shapes = _conv_shapes(node)
    if shapes is None:
        return unknown(Kind.CONV, roles)
    x, w, y, groups = shapes
    batch, cin, out_spatial, kernel = x[0], x[1], math.prod(y[2:]), math.prod(w[2:])
    cout = w[0]
    if len(w) >= 2 and cin != w[1] * groups:
        return Facts(
            Kind.CONV,
            roles,
            conflict=f"its input has {cin} channels, its weight {list(w)} takes {w[1] * groups}",
        )
    k = (cin // groups) * kernel
    macs = batch * out_spatial * k * cout
    bias = batch * out_spatial * cout if 2 in roles else 0
    gemm = Gemm(m=batch * out_spatial, k=k, n=cout // groups, groups=groups)
    return Facts(Kind.CONV, roles, flops.gemm(macs, bias, bias), gemm)


def transposed_output(node: NodeView, x: Shape, w: Shape) -> Shape:
    """ConvTranspose's output shape by the operator's formula, for when shape inference leaves it
    symbolic: out = stride (in - 1) + output_padding + (kernel - 1) dilation + 1 - pads."""
    explicit = node.attrs.get("output_shape")
    spatial = len(x) - 2
    if explicit:
        return (x[0], w[1] * int(node.attrs.get("group", 1) or 1), *(int(v) for v in explicit[-spatial:]))
    strides = list(node.attrs.get("strides") or [1] * spatial)
    dilations = list(node.attrs.get("dilations") or [1] * spatial)
    pads = list(node.attrs.get("pads") or [0] * (2 * spatial))
    extra = list(node.attrs.get("output_padding") or [0] * spatial)
    dims = [
        strides[i] * (x[2 + i] - 1)
        + extra[i]
        + (w[2 + i] - 1) * dilations[i]
        + 1
        - pads[i]
        - pads[spatial + i]
        for i in range(spatial)
    ]
    return (x[0], w[1] * int(node.attrs.get("group", 1) or 1), *dims)


@handles("ConvTranspose")
def conv_transpose(node: NodeView) -> Facts:
    roles = param_roles(node, [(1, Role.WEIGHT), (2, Role.BIAS)])
    shapes = _conv_shapes(node)
    x, w = node.shape(0), node.shape(1)
    if shapes is None and x is not None and w is not None and len(x) >= 3 and len(w) == len(x):
        shapes = x, w, transposed_output(node, x, w), int(node.attrs.get("group", 1)) or 1
    if shapes is None:
        return unknown(Kind.CONV_TRANSPOSE, roles)
    x, w, y, groups = shapes
    batch, cin, in_spatial, kernel = x[0], x[1], math.prod(x[2:]), math.prod(w[2:])
    if cin != w[0]:
        return Facts(
            Kind.CONV_TRANSPOSE,
            roles,
            conflict=f"its input has {cin} channels, its weight {list(w)} takes {w[0]}",
        )
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
        roles = param_roles(node, [(weight, Role.WEIGHT), (2, Role.BIAS)])
    else:
        kind, roles = Kind.MATMUL, param_roles(node, [(2, Role.BIAS)])
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return unknown(kind, roles)
    m, k = (a[1], a[0]) if node.attrs.get("transA") else (a[0], a[1])
    k_b, n = (b[1], b[0]) if node.attrs.get("transB") else (b[0], b[1])
    if k != k_b:
        return Facts(kind, roles, conflict=f"its input's {k} features meet a weight {list(b)} of {k_b}")
    macs = m * k * n
    if kind is Kind.MATMUL:
        return Facts(kind, roles, flops.matmul(macs), Gemm(m, k, n))
    bias = m * n if 2 in roles else 0
    return Facts(kind, roles, flops.gemm(macs, bias, bias), Gemm(m, k, n))


def matmul_facts(
    node: NodeView, a_index: int, b_index: int, roles_extra: dict[int, Role] | None = None
) -> Facts:
    """A MatMul of inputs a_index x b_index (the quantized MatMuls put scales between them)."""
    a, b = node.shape(a_index), node.shape(b_index)
    weight = b_index if node.param(b_index) else a_index if node.param(a_index) else None
    kind = Kind.MATMUL if weight is None else Kind.LINEAR
    roles = {} if weight is None else {weight: Role.WEIGHT}
    roles.update(roles_extra or {})
    if a is None or b is None or not a or not b:
        return unknown(kind, roles)
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k, n = a2[-2], a2[-1], b2[-1]
    if k != b2[-2]:
        return Facts(kind, roles, conflict=f"its input's {k} features meet a weight {list(b)} of {b2[-2]}")
    batch = math.prod(_broadcast(a2[:-2], b2[:-2]))
    macs = batch * m * k * n
    if kind is Kind.MATMUL:
        return Facts(kind, roles, flops.matmul(macs), Gemm(m, k, n, groups=batch))
    if weight == b_index and len(b2) == 2:  # activations [..., M, K] times a [K, N] weight
        return Facts(kind, roles, flops.gemm(macs), Gemm(batch * m, k, n))
    return Facts(kind, roles, flops.gemm(macs), Gemm(m, k, n, groups=batch))


@handles("MatMul")
def matmul(node: NodeView) -> Facts:
    return matmul_facts(node, 0, 1)


def _broadcast(a: Shape, b: Shape) -> Shape:
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def rnn_facts(node: NodeView, roles: dict[int, Role]) -> Facts:
    x, w = node.shape(0), node.shape(1)
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return unknown(Kind.RNN, roles)
    seq, batch = (x[1], x[0]) if node.attrs.get("layout") else (x[0], x[1])
    directions, gates_hidden, inputs = w
    if x[2] != inputs:
        return Facts(
            Kind.RNN, roles, conflict=f"its input has {x[2]} features, its weight {list(w)} takes {inputs}"
        )
    hidden = int(node.attrs.get("hidden_size") or gates_hidden // {"LSTM": 4, "GRU": 3}.get(node.op_type, 1))
    macs = seq * batch * directions * gates_hidden * (inputs + hidden)
    elementwise = seq * batch * directions * gates_hidden
    gemm = Gemm(m=seq * batch, k=inputs + hidden, n=gates_hidden, groups=directions)
    return Facts(Kind.RNN, roles, flops.gemm(macs, elementwise, elementwise), gemm)


@handles("LSTM", "GRU", "RNN")
def rnn(node: NodeView) -> Facts:
    return rnn_facts(node, param_roles(node, [(1, Role.WEIGHT), (2, Role.WEIGHT), (3, Role.BIAS)]))


@handles("Einsum")
def einsum(node: NodeView) -> Facts:
    equation = node.text("equation").replace(" ", "")
    weight = next((i for i in range(len(node.inputs)) if node.param(i)), None)
    roles = {} if weight is None else {weight: Role.WEIGHT}
    kind = Kind.MATMUL if weight is None else Kind.LINEAR
    operands = equation.split("->")[0].split(",") if "->" in equation or equation else []
    sizes: dict[str, int] = {}
    for index, letters in enumerate(operands):
        shape = node.shape(index)
        if shape is None or "..." in letters or len(letters) != len(shape):
            return unknown(kind, roles)
        for letter, size in zip(letters, shape, strict=True):
            sizes[letter] = max(sizes.get(letter, 1), size)
    if not sizes:
        return unknown(kind, roles)
    macs = math.prod(sizes.values())
    return Facts(kind, roles, flops.matmul(macs) if weight is None else flops.gemm(macs))
