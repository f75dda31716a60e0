"""What each op saves for its backward, as PyTorch's autograd saves it: one rule per ONNX op, each
with the derivative formula it comes from (pytorch/pytorch tools/autograd/derivatives.yaml; the
same file ships as torchgen/packaged/autograd/derivatives.yaml): its inputs, its output, the
statistics it computes, indices, a mask.

An op saves nothing when its output needs no gradient (autograd makes no node for it); one whose
formula has a term per operand (mul, mm, bmm, div) saves an operand only for the other's gradient
(the autograd code generator's guard: `x * c` with c constant saves c alone). Views (Reshape,
Transpose, Split) save nothing; neither do Add and Sub, nor the shape arithmetic of an exported
graph (its integer tensors need no gradient). A Dropout node is the training-mode dropout the
exporter kept (an eval-mode export has none; one at ratio 0 is no layer): its mask is CUDA's
native_dropout mask, one byte an element (on the CPU, PyTorch multiplies by a float noise tensor
instead: aten/src/ATen/native/Dropout.cpp, _dropout_impl, four). saved.py reads the graph: which
tensors need a gradient, which are one storage, which ops an exporter wrote for one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from modtrans import dtypes
from modtrans.ir.document import Activation, Layer

STAT = 4  # norms' statistics are fp32 (their accumulation type) for 16- and 32-bit inputs
INDEX = 8  # int64 indices (max pooling's)
MASK = 1  # a bool mask (native_dropout's result1)


@dataclass(frozen=True, slots=True)
class Rule:
    """What one op saves for its backward, with the derivatives.yaml entry that says so."""

    entry: str
    inputs: bool = False  # its floating activation inputs
    operands: bool = False  # for each operand that needs a gradient, the other activation operands
    output: bool = False  # its first output
    keys: bool = False  # its integer and bool inputs: an embedding's indices, where's condition
    rows: int = 0  # fp32 statistics per row (a row: the output's last dimension)
    channels: int = 0  # fp32 statistics per channel (dimension 1), over the whole batch
    indices: bool = False  # an int64 index per output element
    mask: bool = False  # a 1-byte mask per output element
    formed: bool = False  # a tensor shaped like its output it forms inside (a fused op's x + skip)
    attention: bool = False  # a fused attention: as the kernel keeps it (_attention)


_IN = Rule("", inputs=True)
_FLASH = Rule("_scaled_dot_product_flash_attention: q, k, v, output, logsumexp", True, attention=True)
_RNN = Rule("_cudnn_rnn: input, weight, hx, output (result0), the reserve (not counted)", True, output=True)
RULES: dict[str, Rule] = {
    "Conv": Rule("convolution: input, weight, bias: convolution_backward(grad, input, weight, ...)", True),
    "ConvTranspose": Rule("convolution (transposed): convolution_backward(grad, input, weight, ...)", True),
    "Gemm": Rule("addmm: mat1: mm_mat1_backward(grad, mat2, ...); mat2: ...(grad, mat1, ...)", operands=True),
    "MatMul": Rule(
        "mm / bmm: self: grad.bmm(mat2...); mat2: self.transpose(1, 2)...bmm(grad)", operands=True
    ),
    "Einsum": Rule("einsum (bmm underneath): each operand's gradient reads the others", operands=True),
    "Mul": Rule(
        "mul.Tensor: self: mul_tensor_backward(grad, other, ...); other: ...(grad, self)", operands=True
    ),
    "Div": Rule(
        "div.Tensor: self: ...(grad, other); other: div_tensor_other_backward(grad, self, other)",
        operands=True,
    ),
    "Pow": Rule("pow.Tensor_Scalar: self: pow_backward(grad, self, exponent)", True),
    "Relu": Rule("relu: self: threshold_backward(grad, result, 0)", output=True),
    "Sigmoid": Rule("sigmoid: self: sigmoid_backward(grad, result)", output=True),
    "Tanh": Rule("tanh: self: tanh_backward(grad, result)", output=True),
    "Softmax": Rule("_softmax: self: _softmax_backward_data(grad, result, dim, ...)", output=True),
    "LogSoftmax": Rule("_log_softmax: self: _log_softmax_backward_data(grad, result, ...)", output=True),
    "Exp": Rule("exp: self: grad * result.conj()", output=True),
    "Sqrt": Rule("sqrt: self: grad / (2 * result.conj())", output=True),
    "Reciprocal": Rule("reciprocal: self: -grad * (result * result).conj()", output=True),
    "Gelu": Rule("gelu: self: gelu_backward(grad, self, approximate)", True),
    "Erf": Rule("erf: self: 2.0 / sqrt(M_PI) * exp(-(self.pow(2))) * grad", True),
    "HardSwish": Rule("hardswish: self: hardswish_backward(grad, self)", True),
    "HardSigmoid": Rule("hardsigmoid: self: hardsigmoid_backward(grad, self)", True),
    "LeakyRelu": Rule("leaky_relu: self: leaky_relu_backward(grad, self, negative_slope, false)", True),
    "Elu": Rule("elu: self: elu_backward(grad, alpha, scale, input_scale, false, self)", True),
    "Softplus": Rule("softplus: self: softplus_backward(grad, self, beta, threshold)", True),
    "Mish": Rule("mish: self: mish_backward(grad, self)", True),
    "Clip": Rule("clamp: self: clamp_backward(grad, self, min, max)", True),
    "Log": Rule("log: self: grad.div(self.conj())", True),
    "Sin": Rule("sin: self: grad * self.cos().conj()", True),
    "Cos": Rule("cos: self: grad * -self.sin().conj()", True),
    "Abs": Rule("abs: self: grad * self.sgn()", True),
    "AveragePool": Rule("avg_pool2d: self: avg_pool2d_backward(grad, self, ...)", True),
    "MaxPool": Rule(
        "max_pool2d_with_indices: self: ...backward(grad, self, ..., result1)", True, indices=True
    ),
    "GlobalMaxPool": Rule("adaptive_max_pool2d: self: ...backward(grad, self, result1)", True, indices=True),
    "LayerNormalization": Rule(
        "native_layer_norm: ...backward(grad, input, normalized_shape, result1, result2, weight, bias)",
        True,
        rows=2,
    ),
    "RMSNormalization": Rule(
        "_fused_rms_norm: ...backward(grads[0], input, ..., result1, weight)", True, rows=1
    ),
    "SimplifiedLayerNormalization": Rule("_fused_rms_norm: (input, result1 the rstd, weight)", True, rows=1),
    "BatchNormalization": Rule(
        "native_batch_norm: ...backward(grad, input, weight, running_mean, running_var, result1, result2)",
        True,
        channels=2,
    ),
    "InstanceNormalization": Rule(
        "native_batch_norm on (1, N C, ...): input (its N C statistics: not counted)", True
    ),
    "GroupNormalization": Rule(
        "native_group_norm: input, result1, result2 (N G statistics: not counted)", True
    ),
    "Dropout": Rule("native_dropout: input: native_dropout_backward(grad, result1, scale)", mask=True),
    "Gather": Rule("embedding: weight: embedding_backward(grad, indices, ...); gather: (index)", keys=True),
    "Where": Rule("where.self: self: where(condition, grad, 0); other: where(condition, 0, grad)", keys=True),
    "Attention": _FLASH,
    "MultiHeadAttention": _FLASH,
    "SkipLayerNormalization": Rule(
        "add, native_layer_norm: (grad, input, ..., result1, result2): the sum, 2 fp32 a row",
        formed=True,
        rows=2,
    ),
    "SkipSimplifiedLayerNormalization": Rule(
        "add, _fused_rms_norm: (grads[0], input, ..., result1, weight): the sum, 1 fp32 a row",
        formed=True,
        rows=1,
    ),
    "EmbedLayerNormalization": Rule(
        "embedding (its ids), add, native_layer_norm (the sum, 2 fp32 a row)", keys=True, formed=True, rows=2
    ),
    "BiasGelu": Rule("add, gelu: gelu_backward(grad, self, approximate): x + bias", formed=True),
    "FastGelu": Rule("add, gelu (tanh): gelu_backward(grad, self, 'tanh'): x + bias", formed=True),
    "LSTM": Rule(
        "_cudnn_rnn: input, weight, hx, cx, output (result0), the reserve (not counted)", True, output=True
    ),
    "GRU": _RNN,
    "RNN": _RNN,
}
"""Per ONNX op, what it saves. Ops not here and not in NOTHING save their floating inputs (most
pointwise derivatives read their input)."""

NOTHING = frozenset(
    {
        "Add", "Sub", "Neg", "Sum", "Transpose", "Concat", "Split", "Slice", "Expand", "Tile", "Pad",
        "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast", "CastLike", "GlobalAveragePool",
        "ReduceMean", "ReduceSum", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth", "Constant",
        "ConstantOfShape", "Shape", "Size", "Range", "Equal", "Less", "Greater", "Not", "And", "Or",
        "IsNaN", "Trilu", "CumSum",
    }
)  # fmt: skip
"""Ops whose derivative reads no tensor (add.Tensor, sub.Tensor: the gradient as it comes; views:
their sizes; mean.dim, sum.dim_IntList, the 1 x 1 adaptive average pool: sizes; cat, split:
sizes; upsample_nearest2d, upsample_bilinear2d: sizes) or that carry no gradient (comparisons)."""


def saved_by(layer: Layer, needs: Mapping[str, bool], eager: bool) -> list[tuple[str, float]] | None:
    """The tensors `layer` saves by its op's rule, each as (a name to count it once by, bytes);
    None when a size is unknown. `needs`: whether each tensor needs a gradient; `eager`: a fused
    attention op as eager attention keeps it."""
    op = layer.op_type
    if op in NOTHING or not any(needs.get(o.name, False) for o in layer.outputs):
        return []
    rule = RULES.get(op, _IN)
    floating = [a for a in layer.inputs if dtypes.carries_gradient(a.dtype)]
    chosen: list[Activation] = []
    if rule.inputs:
        chosen += floating
    if rule.operands:
        trained = any(p.trainable for p in layer.params)
        chosen += [a for a in floating if trained or any(needs[b.name] for b in floating if b is not a)]
    if rule.keys:
        chosen += [a for a in layer.inputs if not dtypes.carries_gradient(a.dtype)]
    out = layer.outputs[0] if layer.outputs else None
    if rule.output and out is not None:
        chosen.append(out)
    items = [(a.name, a.bytes) for a in chosen]
    extra = _extra(layer, rule, eager)
    if extra is None or any(size is None for _, size in items):
        return None
    return [(name, float(size)) for name, size in items if size is not None] + extra


def _extra(layer: Layer, rule: Rule, eager: bool) -> list[tuple[str, float]] | None:
    """What an op computes and keeps beside its inputs and output: statistics, indices, masks,
    a fused attention's state."""
    out = layer.outputs[0] if layer.outputs else None
    shape = out.shape if out is not None else None
    if shape is None or not all(isinstance(d, int) for d in shape):
        needed = rule.rows or rule.channels or rule.indices or rule.mask or rule.attention or rule.formed
        return None if needed else []
    dims = [int(d) for d in shape]
    elements = _product(dims)
    name = layer.name
    extra: list[tuple[str, float]] = []
    if rule.rows and dims:
        extra.append((f"{name}#statistics", rule.rows * STAT * elements / dims[-1]))
    if rule.channels and len(dims) > 1:
        extra.append((f"{name}#statistics", rule.channels * STAT * dims[1]))
    if rule.indices:
        extra.append((f"{name}#indices", INDEX * elements))
    if rule.mask:
        extra.append((f"{name}#mask", MASK * elements))
    if rule.formed and out is not None:
        extra.append((f"{name}#formed", float(elements * _width(out))))
    if rule.attention:
        extra += _attention(layer, dims, eager)
    return extra


def _attention(layer: Layer, out: list[int], eager: bool) -> list[tuple[str, float]]:
    """A fused attention's state beyond its inputs (q, k, v: the rule's `inputs`): the flash
    kernels keep the output and an fp32 logsumexp per query row and head; eager attention the
    softmax's s x s probabilities (its second matmul's operand; Korthikanti et al. 2022). Its
    heads come from the IR's Heads (one when nothing says); the sequence is the output's second
    dimension (batch, sequence, hidden)."""
    heads = layer.block.heads.query if layer.block and layer.block.heads else 1
    width = _width(layer.outputs[0])
    elements = _product(out)
    b, s = (out[0], out[1]) if len(out) >= 3 else (1, out[0] if out else 1)
    kept: list[tuple[str, float]] = []
    if layer.params:  # packed: the op projects q, k and v itself, and keeps them (3 x the output)
        kept.append((f"{layer.name}#qkv", 3.0 * elements * width))
    if eager:  # the s x s probabilities, softmax's output and the second matmul's operand
        return [*kept, (f"{layer.name}#probabilities", float(b * heads * s * s * width))]
    return [
        *kept,
        (layer.outputs[0].name, float(elements * width)),  # the output projection's input too
        (f"{layer.name}#logsumexp", float(STAT * b * heads * s)),
    ]


def _width(a: Activation) -> int:
    """Bytes an element of `a` (4 where its dtype is not known)."""
    known = dtypes.BY_NAME.get(a.dtype)
    return known.bytes if known is not None else 4


def _product(dims: list[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total
