"""Activation memory of any model: the bytes of the tensors its backward pass needs, as PyTorch's
autograd saves them from the forward, read off the IR's op graph.

Each op saves what its derivative formula reads (pytorch/pytorch tools/autograd/derivatives.yaml,
the entry RULES names per op; the same file ships as torchgen/packaged/autograd/derivatives.yaml):
its inputs, its output, statistics it computes, indices, a mask. An op saves nothing when its
output needs no gradient (autograd makes no node for it); one whose formula has a term per
operand (mul, mm, bmm, div) saves an operand only for the other's gradient (the autograd code
generator's guard: `x * c` with c constant saves c alone). A tensor needs a gradient when a
trainable parameter or such a tensor is upstream of it; model inputs, integers and masks never
do. A tensor saved by several ops is counted once (by name); parameters and buffers are not
activations and are not counted. Views (Reshape, Transpose, Split) save nothing; neither do
Add and Sub, nor the shape arithmetic of an exported graph (its integer tensors need no
gradient), nor the graph's constants.

Not seen in an ONNX graph, so not counted: the loss (the graph ends at its logits), the
workspace of a cuDNN RNN (its gates: an RNN counts its inputs and output only), and the
allocator's rounding. A Dropout node is the training-mode dropout the exporter kept (an
eval-mode export has none): its mask is CUDA's native_dropout mask, one byte an element (on the
CPU, PyTorch multiplies by a float noise tensor instead: `_dropout_impl`, four).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modtrans import dtypes
from modtrans.ir.document import Activation, Layer, ModelIR

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
    attention: bool = False  # a fused attention: as the kernel keeps it (_attention)


_IN = Rule("", inputs=True)
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
    "Attention": Rule(
        "_scaled_dot_product_flash_attention: q, k, v, output, logsumexp", True, attention=True
    ),
    "MultiHeadAttention": Rule(
        "_scaled_dot_product_flash_attention: q, k, v, output, logsumexp", True, attention=True
    ),
    "LSTM": Rule(
        "_cudnn_rnn: input, weight, hx, cx, output (result0), the reserve (not counted)", True, output=True
    ),
    "GRU": Rule(
        "_cudnn_rnn: input, weight, hx, output (result0), the reserve (not counted)", True, output=True
    ),
    "RNN": Rule(
        "_cudnn_rnn: input, weight, hx, output (result0), the reserve (not counted)", True, output=True
    ),
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


def by_layer(ir: ModelIR, *, eager: bool = False) -> dict[str, float] | None:
    """Each layer's name -> the bytes autograd saves for it in one forward of `ir` at its batch
    (a tensor saved by several layers: the first's); None while a saved tensor's size is unknown
    (a symbolic dimension). `eager`: a fused attention op as eager attention keeps it."""
    needs = _needs_grad(ir)
    merged = fused(ir)
    roots = views(ir)
    counted: set[str] = set()
    out: dict[str, float] = {}
    for layer in ir.layers:
        items = _saved(layer, needs, eager, merged)
        if items is None:
            return None
        fresh = [(roots.get(name, name), size) for name, size in items]
        fresh = [(name, size) for name, size in dict(fresh).items() if name not in counted]
        counted.update(name for name, _ in fresh)
        out[layer.name] = sum(size for _, size in fresh)
    return out


@dataclass(frozen=True, slots=True)
class Part:
    """One workload unit as a rank of a tensor-parallel preset holds it: the layer that owns it,
    the layers folded into it, the ranks it is split over and whether its input is split (a
    row-parallel layer: its input 1/ways, the layers after it in the unit on the all-reduced, whole
    output; a column-parallel or MODEL-split layer keeps its whole input, and the layers after it
    work on its 1/ways of the output: Korthikanti et al. 2022, section 4.2.1, the sbh (10 + 24 / t)
    of a block under tensor parallelism)."""

    owner: Layer
    folded: Sequence[Layer] = ()
    ways: int = 1
    split_input: bool = False

    def bytes(self, saved: Mapping[str, float]) -> float:
        ways = max(1, self.ways)
        own = saved.get(self.owner.name, 0.0)
        folded = sum(saved.get(x.name, 0.0) for x in self.folded)
        return own / ways + folded if self.split_input else own + folded / ways


def peak(units: Sequence[Part], saved: Mapping[str, float], segments: Mapping[int, Sequence[int]]) -> float:
    """What one rank holds at the backward's peak: each unit's share (Part) of its layers' saved
    bytes (`saved`: by_layer). A recomputed segment (`segments`: its last unit -> the units whose
    forward reruns first) keeps only its input, the checkpoint, until its backward reruns its
    forward: then its own saved tensors are held beside the checkpoints of the segments before
    it; the units outside every segment keep theirs throughout."""
    own = [u.bytes(saved) for u in units]
    spans = sorted((min(rerun, default=end), end) for end, rerun in segments.items())
    inside = {i for first, last in spans for i in range(first, last + 1)}
    always = sum(b for i, b in enumerate(own) if i not in inside)
    checkpoints = [_entering(units[first].owner) for first, _ in spans]
    worst = max(
        (sum(checkpoints[:j]) + sum(own[first : last + 1]) for j, (first, last) in enumerate(spans)),
        default=0.0,
    )
    return always + worst


def _entering(layer: Layer) -> float:
    """A checkpoint's bytes: the floating inputs of a segment's first unit's owner."""
    return float(sum(a.bytes or 0 for a in layer.inputs if dtypes.carries_gradient(a.dtype)))


FUSED_BY = {"Erf": "gelu", "Tanh": "gelu (tanh)", "Sigmoid": "silu"}
"""The pointwise op at the heart of an exporter's decomposition of a fused PyTorch activation."""
ARITHMETIC = frozenset({"Add", "Sub", "Mul", "Div", "Pow"})


def fused(ir: ModelIR) -> dict[str, Activation | None]:
    """Layers that are an exporter's decomposition of one fused PyTorch activation -> what that
    op saves: its input on the product that ends it, nothing on the others. F.gelu is
    x * (1 + erf(x / sqrt 2)) / 2 in an ONNX graph before opset 20 (torch.onnx's gelu symbolic,
    onnxscript's aten_gelu; the tanh form alike) and F.silu x * sigmoid(x); autograd runs one op
    that saves x alone (derivatives.yaml gelu: gelu_backward(grad, self, approximate); silu:
    silu_backward(grad, self)). Recognised: a product of a tensor x and a chain computed from x
    alone by scalar arithmetic and one Erf, Tanh or Sigmoid. A model that writes the formula
    out in Python (GPT-2's NewGELUActivation: 0.5 * x * (...), the product's operand 0.5 x, not x)
    keeps its ops' own tensors, as autograd does."""
    made = {o.name: x for x in ir.layers for o in x.outputs}
    out: dict[str, Activation | None] = {}
    for m in ir.layers:
        operands = [a for a in m.inputs if dtypes.carries_gradient(a.dtype)]
        if m.op_type != "Mul" or m.params or len(operands) != 2:
            continue
        for x, y in (operands, operands[::-1]):
            chain = _chain(y.name, x.name, made)
            if chain is not None:
                out.update({c.name: None for c in chain})
                out[m.name] = x
                break
    return out


def _chain(start: str, root: str, made: Mapping[str, Layer], limit: int = 10) -> list[Layer] | None:
    """The layers computing tensor `start` from tensor `root` alone, by scalar arithmetic and one
    of FUSED_BY's ops; None where it is not such a chain."""
    chain: list[Layer] = []
    todo, seen, rooted = [start], set(), False
    while todo:
        name = todo.pop()
        rooted |= name == root
        if name == root or name in seen:
            continue
        seen.add(name)
        layer = made.get(name)
        if layer is None or layer.params or layer.op_type not in ARITHMETIC | set(FUSED_BY):
            return None
        if len(chain) == limit:
            return None
        chain.append(layer)
        todo += [a.name for a in layer.inputs if dtypes.carries_gradient(a.dtype)]
    cores = [c for c in chain if c.op_type in FUSED_BY]
    return chain if rooted and len(cores) == 1 else None


def views(ir: ModelIR) -> dict[str, str]:
    """Each tensor a layer reads that no layer writes, and that is a re-view of a layer's output
    (a Reshape, Flatten, Squeeze, a same-dtype Cast, a Dropout at p 0: no layer in the IR) ->
    that output, which it shares storage with: the one output of the layers feeding its reader
    (producers) with its dtype and element count (of those, its shape where several have them).
    Where two inputs of one layer would claim the same output, neither is taken for a view: a
    saved tensor counts once under either name, and twice rather than wrongly once."""
    outputs = {x.name: x.outputs for x in ir.layers}
    written = {o.name for x in ir.layers for o in x.outputs}
    inputs = frozenset(ir.provenance.input_shapes)
    roots: dict[str, str] = {}
    for layer in ir.layers:
        own = {a.name for a in layer.inputs}
        claims: dict[str, str] = {}
        for a in layer.inputs:
            if a.name in written or a.name in inputs or a.bytes is None:
                continue
            same = [
                o
                for p in layer.producers
                for o in outputs.get(p, ())
                if o.dtype == a.dtype and o.bytes == a.bytes and o.name not in own
            ]
            found = [o for o in same if o.shape == a.shape] or same
            if len(found) == 1:
                claims[a.name] = found[0].name
        wanted = Counter(claims.values())
        roots.update({a: root for a, root in claims.items() if wanted[root] == 1 and a not in roots})
    return roots


def _needs_grad(ir: ModelIR) -> dict[str, bool]:
    """Each tensor the layers read or write -> whether it needs a gradient (module docstring).
    A tensor no layer writes is a model input, a constant's re-view (RoPE's cos and sin tables)
    or a re-view (Reshape, Cast) of a layer's output: it needs one when it is floating and one of
    the layers feeding its reader (producers) other than those writing its other inputs does."""
    made: dict[str, bool] = {}
    writer = {o.name: x.name for x in ir.layers for o in x.outputs}
    inputs = frozenset(ir.provenance.input_shapes)
    outputs = {x.name: x.outputs for x in ir.layers}
    grads: dict[str, bool] = {}
    for layer in ir.layers:
        direct = {writer[a.name] for a in layer.inputs if a.name in made}
        viewed = [p for p in layer.producers if p not in direct and p in outputs]
        fed = any(made.get(o.name, False) for p in viewed for o in outputs[p])
        for a in layer.inputs:
            if a.name in made:
                grads[a.name] = made[a.name]
            else:
                grads[a.name] = a.name not in inputs and dtypes.carries_gradient(a.dtype) and fed
        live = any(p.trainable for p in layer.params) or any(grads[a.name] for a in layer.inputs)
        for o in layer.outputs:
            made[o.name] = live and dtypes.carries_gradient(o.dtype)
    return {**grads, **made}


def _saved(
    layer: Layer, needs: Mapping[str, bool], eager: bool, merged: Mapping[str, Activation | None]
) -> list[tuple[str, float]] | None:
    """The tensors `layer` saves, each as (a name to count it once by, bytes); None when a size
    is unknown. `merged`: fused()."""
    if layer.name in merged:
        x = merged[layer.name]
        if x is None or not needs.get(x.name, False):
            return []
        return None if x.bytes is None else [(x.name, float(x.bytes))]
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
        needed = rule.rows or rule.channels or rule.indices or rule.mask or rule.attention
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
    width = dtypes.BY_NAME[layer.outputs[0].dtype].bytes if layer.outputs[0].dtype in dtypes.BY_NAME else 4
    elements = _product(out)
    b, s = (out[0], out[1]) if len(out) >= 3 else (1, out[0] if out else 1)
    kept: list[tuple[str, float]] = []
    if layer.params:  # packed: the op projects q, k and v itself, and keeps them (3 x the output)
        kept.append((f"{layer.name}#qkv", 3.0 * elements * width))
    if eager:  # the s x s probabilities, softmax's output and the second matmul's operand
        return [*kept, (f"{layer.name}#probabilities", float(b * heads * s * s * width))]
    return [
        *kept,
        (f"{layer.name}#output", float(elements * width)),
        (f"{layer.name}#logsumexp", float(STAT * b * heads * s)),
    ]


def _product(dims: list[int]) -> int:
    total = 1
    for d in dims:
        total *= d
    return total
