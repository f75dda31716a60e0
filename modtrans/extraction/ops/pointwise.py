"""Element-wise ops, pooling, reductions, resampling and data movement.

elementwise    forward E; input-grad E; weight-grad E if it has a parameter operand
pool           forward E·window; input-grad E·window
reduce         forward E (of the input); input-grad E;  softmax 5·E and 3·E
resize         E·taps per pass: nearest 1, linear 2^r, cubic 4^r taps for r resized axes
data movement  0 FLOPs (Concat, Pad, Slice, Transpose ...): their cost is memory traffic, which
               the cost models take from the activation bytes
"""

from __future__ import annotations

import math

from modtrans.extraction.ops.registry import DEFAULT, MICROSOFT, Facts, NodeView, handles, unknown
from modtrans.ir import flops
from modtrans.ir.document import Flops, Kind, Role

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
)


@handles(*_ELEMENTWISE)
@handles(
    "FastGelu", "BiasGelu", "BiasAdd", "QuickGelu", "Gelu", "BiasSplitGelu", domains=(DEFAULT, MICROSOFT)
)
def elementwise(node: NodeView) -> Facts:
    role = {
        "Add": Role.BIAS,
        "Sub": Role.BIAS,
        "BiasAdd": Role.BIAS,
        "BiasGelu": Role.BIAS,
        "FastGelu": Role.BIAS,
        "Mul": Role.SCALE,
        "PRelu": Role.WEIGHT,
    }.get(node.op_type)
    roles = {i: role for i in range(len(node.inputs)) if role is not None and node.param(i)}
    e = node.out_elements
    if e is None:
        return unknown(Kind.ELEMENTWISE, roles)
    return Facts(Kind.ELEMENTWISE, roles, flops.elementwise(e, with_params=bool(roles)))


@handles("MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def pool(node: NodeView) -> Facts:
    x = node.shape(0)
    if node.op_type.startswith("Global"):
        if x is None:
            return unknown(Kind.POOL, {})
        return Facts(Kind.POOL, {}, flops.pool(math.prod(x)))
    if node.out_elements is None:
        return unknown(Kind.POOL, {})
    window = math.prod(node.attrs.get("kernel_shape", [1]))
    return Facts(Kind.POOL, {}, flops.pool(node.out_elements * window))


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
        if node.out_elements is None:
            return unknown(Kind.REDUCE, {})
        return Facts(Kind.REDUCE, {}, flops.softmax(node.out_elements))
    x = node.shape(0)
    if x is None:
        return unknown(Kind.REDUCE, {})
    e = math.prod(x)
    return Facts(Kind.REDUCE, {}, Flops(e, e, 0))


@handles("Resize", "Upsample")
def resize(node: NodeView) -> Facts:
    x, y = node.shape(0), node.out_shapes[0] if node.out_shapes else None
    if x is None or y is None or len(x) != len(y):
        return unknown(Kind.ELEMENTWISE, {})
    axes = sum(1 for a, b in zip(x, y, strict=True) if a != b)
    mode = node.text("mode", "nearest")
    taps = {"linear": 2**axes, "bilinear": 2**axes, "cubic": 4**axes}.get(mode, 1)
    e = math.prod(y) * taps
    return Facts(Kind.ELEMENTWISE, {}, Flops(e, e, 0))


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
    "Trilu",
    "OneHot",
    "Compress",
    "ReverseSequence",
)
def data(node: NodeView) -> Facts:
    return Facts(Kind.DATA, costed=node.out_elements is not None or not node.out_shapes)
