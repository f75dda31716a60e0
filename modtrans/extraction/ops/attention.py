"""Fused attention ops: ONNX's Attention (opset 23) and RotaryEmbedding, and the com.microsoft
ops optimum / onnxruntime exports use (Attention, MultiHeadAttention, GroupQueryAttention,
RotaryEmbedding).

The core of H heads, queries S_q, keys S_kv, head dims D (scores) and D_v (values), as the
unfused graph counts it (two activation matmuls and a softmax, modtrans/ir/flops.py):

    forward      2 (B H S_q S_kv D) + 2 (B H S_q S_kv D_v) + 5 (B H S_q S_kv)
    input grad   4 (B H S_q S_kv D) + 4 (B H S_q S_kv D_v) + 3 (B H S_q S_kv)

com.microsoft Attention also projects its input to Q, K, V through its [hidden, 3 hidden] weight
(a linear layer); the others take Q, K, V as inputs. RotaryEmbedding: 3 FLOPs per element.
"""

from __future__ import annotations

from modtrans.extraction.ops.registry import (
    DEFAULT,
    MICROSOFT,
    Facts,
    NodeView,
    Shape,
    handles,
    param_roles,
    unknown,
)
from modtrans.ir import flops
from modtrans.ir.document import Flops, Gemm, Kind, Role


def core_flops(batch: int, heads: int, queries: int, keys: int, d: int, dv: int) -> Flops:
    scores, context = (
        flops.matmul(batch * heads * queries * keys * d),
        flops.matmul(batch * heads * queries * keys * dv),
    )
    soft = flops.softmax(batch * heads * queries * keys)
    return Flops(
        scores.forward + context.forward + soft.forward,
        scores.input_grad + context.input_grad + soft.input_grad,
        0,
    )


def _split(shape: Shape, heads: int) -> tuple[int, int, int] | None:
    """(batch, sequence, head dim) of [B, S, H·D] or [B, H, S, D]."""
    if len(shape) == 3 and heads and shape[2] % heads == 0:
        return shape[0], shape[1], shape[2] // heads
    if len(shape) == 4:
        return shape[0], shape[2], shape[3]
    return None


@handles("Attention")
def attention(node: NodeView) -> Facts:
    q, k, v = node.shape(0), node.shape(1), node.shape(2)
    heads = int(node.attrs.get("q_num_heads", 0) or 0) or (q[1] if q is not None and len(q) == 4 else 0)
    kv_heads = int(node.attrs.get("kv_num_heads", 0) or 0) or (
        k[1] if k is not None and len(k) == 4 else heads
    )
    if q is None or k is None or v is None or not heads:
        return unknown(Kind.MATMUL, {})
    qs, ks, vs = _split(q, heads), _split(k, kv_heads), _split(v, kv_heads)
    if qs is None or ks is None or vs is None:
        return unknown(Kind.MATMUL, {})
    return Facts(Kind.MATMUL, {}, core_flops(qs[0], heads, qs[1], ks[1], qs[2], vs[2]))


def projected(node: NodeView, *, bias_flops: bool) -> Facts:
    """An attention op that projects its input [B, S, hidden] to Q, K, V through one [hidden,
    3 hidden] weight (input 1, bias input 2), then runs the core: com.microsoft's Attention and,
    on quantized operands, QAttention. `bias_flops`: count the bias add."""
    roles = param_roles(node, [(1, Role.WEIGHT), (2, Role.BIAS)])
    x, w = node.shape(0), node.shape(1)
    heads = int(node.attrs.get("num_heads", 0) or 0)
    if x is None or w is None or len(x) != 3 or len(w) != 2 or not heads:
        return unknown(Kind.LINEAR, roles)
    batch, seq, hidden = x
    if hidden != w[0]:
        return Facts(
            Kind.LINEAR, roles, conflict=f"its input's {hidden} features meet a weight {list(w)} of {w[0]}"
        )
    width = w[1]
    bias = batch * seq * width if bias_flops else 0
    projection = flops.gemm(batch * seq * hidden * width, bias, bias)
    d = width // 3 // heads
    core = core_flops(batch, heads, seq, seq, d, d)
    total = Flops(
        projection.forward + core.forward, projection.input_grad + core.input_grad, projection.weight_grad
    )
    return Facts(Kind.LINEAR, roles, total, Gemm(batch * seq, hidden, width))


@handles("Attention", domains=(MICROSOFT,))
def ms_attention(node: NodeView) -> Facts:
    return projected(node, bias_flops=node.param(2))


@handles("MultiHeadAttention", "GroupQueryAttention", domains=(MICROSOFT,))
def ms_core(node: NodeView) -> Facts:
    q, k, v = node.shape(0), node.shape(1), node.shape(2)
    heads = int(node.attrs.get("num_heads", 0) or 0)
    kv_heads = int(node.attrs.get("kv_num_heads", 0) or 0) or heads
    if q is None or not heads:
        return unknown(Kind.MATMUL, {})
    qs = _split(q, heads)
    ks = _split(k, kv_heads) if k is not None else qs  # packed QKV: keys are the queries' length
    vs = _split(v, kv_heads) if v is not None else ks
    if qs is None or ks is None or vs is None:
        return unknown(Kind.MATMUL, {})
    return Facts(Kind.MATMUL, {}, core_flops(qs[0], heads, qs[1], ks[1], qs[2], vs[2]))


@handles("RotaryEmbedding", domains=(DEFAULT, MICROSOFT))
def rotary(node: NodeView) -> Facts:
    e = node.out_elements
    if e is None:
        return unknown(Kind.ELEMENTWISE, {})
    return Facts(Kind.ELEMENTWISE, {}, flops.elementwise(3 * e))
