"""Extraction, step 2: op -> layer facts (kind, parameter roles, FLOPs, forward GEMM).

Each handler sees one node with its attributes, the inferred shapes of its inputs and outputs,
for each input whether it is a parameter, and the node's domain and opset version. It returns
what the layer is. Handlers are registered by (domain, op_type) in registry.py's REGISTRY, one
module per op family:

  gemm.py       Conv, ConvTranspose, Gemm, MatMul, LSTM / GRU / RNN, Einsum
  quantized.py  ConvInteger, QLinearConv, MatMulInteger, QLinearMatMul, QGemm, MatMulNBits,
                DynamicQuantize{Linear, MatMul, LSTM}, QAttention
  attention.py  Attention (ONNX 23, com.microsoft), MultiHeadAttention, GroupQueryAttention, RotaryEmbedding
  norm.py       the normalisations, Gather embeddings, EmbedLayerNormalization
  pointwise.py  element-wise, pooling, reductions, Resize, data movement

An op without a handler still becomes a layer (kind OTHER; X505 names it). A handler whose FLOPs
need a shape shape inference left unknown says so (Facts.costed False: X510), and one whose
input shapes contradict its weights says how (Facts.conflict: X511). A multiply-add is 2 FLOPs;
FLOPs cover the whole batch; the formulas are in modtrans/ir/flops.py.
"""

from __future__ import annotations

from modtrans.extraction.ops import attention, gemm, norm, pointwise, quantized  # noqa: F401 - registers
from modtrans.extraction.ops.registry import DEFAULT, REGISTRY, Facts, NodeView, Shape, handles

__all__ = [
    "NOT_LAYERS",
    "PARAMETER_OPS",
    "QUANTIZED",
    "REGISTRY",
    "Facts",
    "NodeView",
    "Shape",
    "facts",
    "handles",
]

PARAMETER_OPS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "Gemm",
        "MatMul",
        "MatMulInteger",
        "QLinearMatMul",
        "ConvInteger",
        "QLinearConv",
        "QGemm",
        "DynamicQuantizeMatMul",
        "DynamicQuantizeLSTM",
        "MatMulNBits",
        "QAttention",
        "Attention",
        "Einsum",
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


QUANTIZED = frozenset(
    {
        "ConvInteger",
        "MatMulInteger",
        "QLinearConv",
        "QLinearMatMul",
        "QGemm",
        "DynamicQuantizeLinear",
        "DynamicQuantizeMatMul",
        "DynamicQuantizeLSTM",
        "QAttention",
        "MatMulNBits",
    }
)
"""Ops whose outputs may be integers but which compute: always layers."""


def facts(node: NodeView) -> Facts | None:
    """The layer facts of a node, or None when modtrans has no model of its op."""
    domain = DEFAULT if node.domain in ("", "ai.onnx") else node.domain
    handler = REGISTRY.get((domain, node.op_type))
    return None if handler is None else handler(node)
