"""Quantized ops: their weights are parameters sized as stored (int8, uint8, 4-bit packed), their
FLOPs those of the float op they stand for.

    ConvInteger, QLinearConv             as Conv (weight input 1, or 3 with bias 8 for QLinearConv)
    MatMulInteger, QLinearMatMul         as MatMul (weight input 1, or 3)
    QGemm (com.microsoft)                as Gemm (A 0, B 3, C 6)
    DynamicQuantizeMatMul (com.microsoft)  as MatMul (bias 4)
    DynamicQuantizeLSTM (com.microsoft)  as LSTM; its weights are stored [D, input, 4H]
    QAttention (com.microsoft)           the QKV projection (weight [hidden, 3 hidden]) + attention
    MatMulNBits (com.microsoft)          as MatMul of [.., K] x [K, N]; B packs N x K values of
                                         `bits` bits: the parameter has N·K elements, N·K·bits/8 bytes
    DynamicQuantizeLinear                elementwise (scale, zero point and rounding per element)

A quantized model's stored weights are its parameters: counted, sized as stored and treated as
trained (a workload for the model as it is; --dtype-bytes N sizes all-reduces as N-byte master
weights instead).
"""

from __future__ import annotations

import math

from modtrans.extraction.ops.attention import projected
from modtrans.extraction.ops.gemm import conv, gemm, matmul_facts, rnn_facts
from modtrans.extraction.ops.registry import MICROSOFT, Facts, NodeView, handles, param_roles, unknown
from modtrans.ir import flops
from modtrans.ir.document import Gemm, Kind, Role


def _reindexed(node: NodeView, order: tuple[int, ...]) -> NodeView:
    """The node as the float op would see it: inputs picked in `order` (e.g. x, w, bias)."""
    import dataclasses

    pick = list(order)
    return dataclasses.replace(
        node,
        inputs=tuple(node.inputs[i] if i < len(node.inputs) else "" for i in pick),
        in_shapes=tuple(node.shape(i) for i in pick),
        is_param=tuple(node.param(i) for i in pick),
    )


def _back(facts: Facts, order: tuple[int, ...]) -> Facts:
    import dataclasses

    return dataclasses.replace(
        facts, roles={order[i]: role for i, role in facts.roles.items() if i < len(order)}
    )


@handles("ConvInteger")
def conv_integer(node: NodeView) -> Facts:
    return _back(conv(_reindexed(node, (0, 1))), (0, 1))


@handles("QLinearConv")
def qlinear_conv(node: NodeView) -> Facts:
    order = (0, 3, 8)
    return _back(conv(_reindexed(node, order)), order)


@handles("MatMulInteger")
def matmul_integer(node: NodeView) -> Facts:
    return matmul_facts(node, 0, 1)


@handles("QLinearMatMul")
def qlinear_matmul(node: NodeView) -> Facts:
    return matmul_facts(node, 0, 3)


@handles("QGemm", domains=(MICROSOFT,))
def qgemm(node: NodeView) -> Facts:
    order = (0, 3, 6)
    return _back(gemm(_reindexed(node, order)), order)


@handles("DynamicQuantizeMatMul", domains=(MICROSOFT,))
def dynamic_quantize_matmul(node: NodeView) -> Facts:
    return matmul_facts(node, 0, 1, param_roles(node, [(4, Role.BIAS)]))


@handles("DynamicQuantizeLSTM", domains=(MICROSOFT,))
def dynamic_quantize_lstm(node: NodeView) -> Facts:
    import dataclasses

    roles = param_roles(node, [(1, Role.WEIGHT), (2, Role.WEIGHT), (3, Role.BIAS)])
    w = node.shape(1)
    if w is not None and len(w) == 3:  # ORT stores W as [D, input, 4H]: ONNX's LSTM wants [D, 4H, input]
        shapes = list(node.in_shapes)
        shapes[1] = (w[0], w[2], w[1])
        node = dataclasses.replace(node, op_type="LSTM", in_shapes=tuple(shapes))
    return rnn_facts(dataclasses.replace(node, op_type="LSTM"), roles)


@handles("QAttention", domains=(MICROSOFT,))
def qattention(node: NodeView) -> Facts:
    return projected(node, bias_flops=True)  # QAttention's bias is a required input


@handles("MatMulNBits", domains=(MICROSOFT,))
def matmul_nbits(node: NodeView) -> Facts:
    roles = param_roles(node, [(1, Role.WEIGHT), (2, Role.QUANT), (3, Role.QUANT), (5, Role.BIAS)])
    a = node.shape(0)
    k, n, bits = (int(node.attrs.get(key, 0) or 0) for key in ("K", "N", "bits"))
    bits = bits or 4
    elements = {1: n * k} if n and k else {}
    if a is None or not k or not n:
        return Facts(Kind.LINEAR, roles, costed=False, param_elements=elements)
    if a[-1] != k:
        return Facts(Kind.LINEAR, roles, conflict=f"its input's {a[-1]} features meet a weight of K={k}")
    m = math.prod(a[:-1])
    return Facts(Kind.LINEAR, roles, flops.gemm(m * k * n), Gemm(m, k, n), param_elements=elements)


@handles("DynamicQuantizeLinear")
def dynamic_quantize_linear(node: NodeView) -> Facts:
    e = node.out_elements
    if e is None:
        return unknown(Kind.ELEMENTWISE, {})
    return Facts(Kind.ELEMENTWISE, {}, flops.elementwise(3 * e))
