"""Activation memory of any model: the bytes of the tensors its backward pass needs, as PyTorch's
autograd saves them from the forward, read off the IR's op graph (each op's rule:
derivatives.py).

A tensor needs a gradient when a trainable parameter or such a tensor is upstream of it; model
inputs, integers and masks never do. A tensor saved by several ops is counted once, under its
name or a re-view's (views); parameters and buffers are not activations and are not counted. An
exporter's decomposition of one fused PyTorch activation (F.gelu, F.silu) counts as that op
(fused). Not seen in an ONNX graph, so not counted: the loss (the graph ends at its logits), the
workspace of a cuDNN RNN (its gates: an RNN counts its inputs and output only), and the
allocator's rounding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modtrans import dtypes
from modtrans.ir.document import Activation, Layer, ModelIR
from modtrans.strategy.derivatives import saved_by


def by_layer(ir: ModelIR, *, eager: bool = False) -> dict[str, float] | None:
    """Each layer's name -> the bytes autograd saves for it in one forward of `ir` at its batch
    (a tensor saved by several layers: the first's); None while a saved tensor's size is unknown
    (a symbolic dimension). `eager`: a fused attention op as eager attention keeps it."""
    roots = views(ir)
    needs = _needs_grad(ir, roots)
    merged = fused(ir)
    counted: set[str] = set()
    out: dict[str, float] = {}
    for layer in ir.layers:
        items = _merged(merged[layer.name], needs) if layer.name in merged else saved_by(layer, needs, eager)
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


def _merged(x: Activation | None, needs: Mapping[str, bool]) -> list[tuple[str, float]] | None:
    """What a layer of a fused activation's decomposition saves (fused): the op's input on the
    product that ends it, nothing on the rest."""
    if x is None or not needs.get(x.name, False):
        return []
    return None if x.bytes is None else [(x.name, float(x.bytes))]


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


def _needs_grad(ir: ModelIR, roots: Mapping[str, str]) -> dict[str, bool]:
    """Each tensor the layers read or write -> whether it needs a gradient (module docstring).
    A tensor no layer writes is a model input, a re-view of a layer's output (`roots`: views(),
    the output's), or a constant's re-view (RoPE's cos and sin tables) or one views() could not
    place: that needs one when it is floating and one of the layers feeding its reader
    (producers) other than those writing its other inputs does."""
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
            if a.name in made or roots.get(a.name) in made:
                grads[a.name] = made[a.name if a.name in made else roots[a.name]]
            else:
                grads[a.name] = a.name not in inputs and dtypes.carries_gradient(a.dtype) and fed
        live = any(p.trainable for p in layer.params) or any(grads[a.name] for a in layer.inputs)
        for o in layer.outputs:
            made[o.name] = live and dtypes.carries_gradient(o.dtype)
    return {**grads, **made}
