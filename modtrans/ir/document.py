"""The intermediate document (IR): what extraction yields and translation consumes.

A model is a list of layers in graph (topological) order. Each layer carries the facts every later
stage needs and nothing else: its parameters (shape, dtype, bytes, trainable), its activations,
its FLOPs per training phase and, for GEMM-like layers, the forward GEMM shape (M, K, N, groups) the
cost models map onto an accelerator. The dataclasses serialise to a JSON dict with a "version"
field, validated by schemas/model-ir.schema.json.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from modtrans import dtypes, schema
from modtrans.diagnostics import DiagnosticError

VERSION = 1
SCHEMA = "model-ir"

Dim = int | str
"""A tensor dimension: a size, or the symbolic name shape inference could not resolve."""


class Kind(enum.StrEnum):
    """What a layer does, as the cost models and strategies need to know it."""

    CONV = "conv"
    CONV_TRANSPOSE = "conv_transpose"
    LINEAR = "linear"  # Gemm, or MatMul with a parameter operand
    MATMUL = "matmul"  # MatMul of two activations (attention scores, context)
    NORM = "norm"  # BatchNormalization, LayerNormalization, GroupNorm, InstanceNorm ...
    EMBEDDING = "embedding"  # Gather on a parameter table
    RNN = "rnn"  # LSTM, GRU, RNN
    ELEMENTWISE = "elementwise"
    POOL = "pool"
    REDUCE = "reduce"  # Softmax, ReduceMean ...
    DATA = "data"  # Concat, Transpose, Slice ... (moves memory, no arithmetic)
    OTHER = "other"  # an op modtrans has no model of (a warning says which)

    @property
    def has_weights(self) -> bool:
        """Layers whose weight tensor the `--params weights` convention counts (conv and linear)."""
        return self in {Kind.CONV, Kind.CONV_TRANSPOSE, Kind.LINEAR, Kind.EMBEDDING, Kind.RNN}


class Role(enum.StrEnum):
    """What a parameter is to its layer."""

    WEIGHT = "weight"
    BIAS = "bias"
    SCALE = "scale"  # normalization gamma
    SHIFT = "shift"  # normalization beta
    STATISTIC = "statistic"  # BatchNorm running mean / variance: buffers, not trained
    QUANT = "quantization"  # DequantizeLinear scale / zero point
    OTHER = "other"


TRAINABLE_ROLES = frozenset({Role.WEIGHT, Role.BIAS, Role.SCALE, Role.SHIFT})


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter tensor of a layer, sized by its real dtype."""

    name: str  # the initializer (or Constant output) it comes from
    role: Role
    shape: tuple[int, ...]
    dtype: str  # ONNX dtype name, lower case: "float", "float16", "bfloat16", "int8" ...
    elements: int
    bytes: int
    trainable: bool
    shared_with: str | None = None  # a tied weight: the layer that owns (and counts) it

    @property
    def counted(self) -> bool:
        return self.shared_with is None


@dataclass(frozen=True, slots=True)
class Activation:
    """An input or output tensor of a layer; dims that stayed symbolic are strings."""

    name: str
    shape: tuple[Dim, ...] | None  # None: rank unknown
    dtype: str
    bytes: int | None  # None while any dim is unknown


@dataclass(frozen=True, slots=True)
class Flops:
    """Floating-point operations (a multiply-add is 2) per training phase, for the whole batch."""

    forward: int = 0
    input_grad: int = 0
    weight_grad: int = 0

    @property
    def total(self) -> int:
        return self.forward + self.input_grad + self.weight_grad


@dataclass(frozen=True, slots=True)
class Gemm:
    """The forward GEMM out[M x N] = A[M x K] . W[K x N], repeated `groups` times (grouped conv)."""

    m: int
    k: int
    n: int
    groups: int = 1


@dataclass(frozen=True, slots=True)
class Moe:
    """A layer of a mixture of experts: the router (expert None) or one expert's layer. Each token
    goes to `top_k` of `experts`; an expert layer's FLOPs and GEMM are those of the tokens it gets
    under balanced routing (tokens x top_k / experts). A grouped layer (`count` > 1) is the same
    layer of `count` experts from `expert` on, as one grouped GEMM (Megatron-Core's GroupedMLP:
    its weights one tensor of every expert's; Gemm.groups the experts)."""

    experts: int
    top_k: int
    expert: int | None = None
    count: int = 1

    @property
    def grouped(self) -> bool:
        return self.count > 1


class Part(enum.StrEnum):
    """What a layer is to the transformer block it belongs to (or to the model, outside blocks)."""

    EMBEDDING = "embedding"
    ATTENTION = "attention"
    MLP = "mlp"  # the dense MLP, or a MoE block's shared experts and combine
    ROUTER = "moe_router"
    EXPERT = "moe_expert"  # the expert index is the layer's Moe.expert
    NORM = "norm"
    HEAD = "head"


@dataclass(frozen=True, slots=True)
class Heads:
    """An attention's heads: query heads and key/value heads (fewer under grouped-query attention;
    Megatron-LM's num_query_groups)."""

    query: int
    key_value: int
    causal: bool | None = None  # each token attends to those before it (a decoder); None: nothing says
    dropout: float = 0.0  # the attention probabilities' dropout p in training (0: none)
    # the block's dropout p of its attention's and MLP's outputs, before each residual add (0: none)
    hidden_dropout: float = 0.0
    # a sliding window: each query attends to the last `window` keys, itself included (transformers'
    # sliding_window where the configuration's layer_types says sliding_attention); None: all of them
    window: int | None = None
    # the model's own implementation runs it op by op unless asked otherwise (a transformers class
    # without SDPA, its default: hf/blocks.eager_only), as a framework running that module does
    eager: bool = False
    # the scores get a per-head additive bias the model computes (T5's relative position bias,
    # [1, heads, queries, keys]): PyTorch's SDPA takes it as a float attn_mask (ir/core.py, mark)
    bias: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    """Where a layer sits in the model's structure: its transformer block (index None outside the
    blocks: embeddings, final norm, head) and its part there (None where nothing says). The LLM
    configuration reader knows both; ONNX extraction reads them from the module paths."""

    index: int | None
    part: Part | None = None
    heads: Heads | None = None  # an attention layer's heads (None: not attention, or nothing says)
    # between its attention's score and context products: inside a fused kernel (ir/core.py)
    core: bool = False


@dataclass(frozen=True, slots=True)
class Layer:
    """One ONNX node that does work (a conv, a MatMul, a norm, an activation...): its parameters,
    the activations in and out, the FLOPs of each training phase and, for GEMM-shaped work, the
    forward GEMM the cost models time. `producers` are the layers feeding it (strategies use
    them to find row-parallel layers)."""

    name: str  # sanitised: no whitespace, unique in the model
    node: str  # the ONNX node name it comes from ("" if the node had none)
    op_type: str
    kind: Kind
    params: tuple[Param, ...] = ()
    inputs: tuple[Activation, ...] = ()
    outputs: tuple[Activation, ...] = ()
    flops: Flops = Flops()
    gemm: Gemm | None = None
    fused: tuple[str, ...] = ()  # ONNX nodes folded into this layer (e.g. a MatMul's bias Add)
    producers: tuple[str, ...] = ()  # the layers whose outputs feed this one (through re-views)
    moe: Moe | None = None  # a router or expert layer of a mixture of experts
    repeats: int = 1  # runs per step: the trip count of the Loops / Scans around it (flops, gemm: all runs)
    flops_known: bool = True  # False: FLOPs need a shape or trip count nobody knows (X510, X514)
    block: Block | None = None  # its transformer block and part (None: nothing says)
    tp_style: str | None = None  # the style the model's own tensor-parallel plan names (hf/plans.py)

    def param_bytes(self, *, weights_only: bool = False, trainable_only: bool = True) -> int:
        """Bytes a data-parallel all-reduce of this layer moves, under a parameter convention."""
        total = 0
        for p in self.params:
            if not p.counted or (trainable_only and not p.trainable):
                continue
            if weights_only and p.role is not Role.WEIGHT:
                continue
            total += p.bytes
        return total

    @property
    def activation_bytes(self) -> int:
        return sum(a.bytes or 0 for a in (*self.inputs, *self.outputs))


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where the IR comes from: the file (or built-in name) and its SHA-256 (or, above 64 MiB and
    without --full-hash, its sampled digest: modtrans/digest.py), the exporter, the opsets, and
    the input shapes after --batch / --input-shape."""

    file: str
    sha256: str | None  # None when hashing was skipped (--no-hash) or sampled
    size: int
    producer: str
    producer_version: str
    ir_version: int
    opset: dict[str, int]
    graph: str
    batch: int | None
    input_shapes: dict[str, tuple[Dim, ...]]
    tool: str  # "modtrans <version>"
    architecture_only: bool  # the file had no weight bytes (a built-in, or stripped)
    sampled_sha256: str | None = None  # a large file's sampled digest, when its SHA-256 was not made


@dataclass(frozen=True, slots=True)
class Totals:
    """Sums over the model: layers, parameter elements and bytes (all counted ones, and the
    trainable ones), and FLOPs per phase as a training step runs them (an input gradient only
    where autograd computes one: needs_input_grad)."""

    layers: int
    params: int  # elements of every counted parameter
    param_bytes: int
    trainable_params: int
    trainable_bytes: int
    flops: Flops
    active_params: int = 0  # what one token computes with: a routed expert's share top_k / experts
    embedding_params: int = 0  # the embedding tables' (looked up, not multiplied)


def consumers(layers: Sequence[Layer]) -> dict[str, list[str]]:
    """Each layer's consumers by name, in order: the layers that name it among their producers."""
    out: dict[str, list[str]] = {}
    for x in layers:
        for p in x.producers:
            out.setdefault(p, []).append(x.name)
    return out


def needs_input_grad(layer: Layer, model_inputs: frozenset[str]) -> bool:
    """Whether back-propagation must compute this layer's input gradient: not when every input is
    a model input (the first conv's image) or an integer or quantized tensor (an embedding's token
    ids, an int8 activation: dtypes.carries_gradient). torch.autograd computes none there:
    FlopCounterMode counts the first convolution's backward as its weight gradient alone
    (convolution_backward's output_mask[0] False). The one definition `inspect`'s input-gradient
    total, a translation's units and a trace's nodes share."""
    return any(a.name not in model_inputs and dtypes.carries_gradient(a.dtype) for a in layer.inputs)


def _active(layers: Sequence[Layer]) -> int:
    """The parameters one token is computed with: every counted one, a routed expert's times
    top_k / experts (balanced routing sends each token to top_k of them), exact."""
    whole, shares = 0, Fraction(0)
    for x in layers:
        elements = sum(p.elements for p in x.params if p.counted)
        if x.moe is not None and x.moe.expert is not None and x.moe.experts:
            shares += Fraction(elements * x.moe.top_k, x.moe.experts)
        else:
            whole += elements
    return whole + round(shares)


@dataclass(frozen=True, slots=True)
class ModelIR:
    """What `modtrans.extract()` returns: the model's layers in graph order, with provenance
    and totals; `dumps` / `loads` give its JSON form (schemas/model-ir.schema.json)."""

    provenance: Provenance
    layers: tuple[Layer, ...]
    totals: Totals = field(init=False)

    def __post_init__(self) -> None:
        counted = [p for layer in self.layers for p in layer.params if p.counted]
        trainable = [p for p in counted if p.trainable]
        inputs = frozenset(self.provenance.input_shapes)
        flops = Flops(  # what a training step runs: no input gradient autograd does not compute
            sum(x.flops.forward for x in self.layers),
            sum(x.flops.input_grad for x in self.layers if needs_input_grad(x, inputs)),
            sum(x.flops.weight_grad for x in self.layers),
        )
        totals = Totals(
            layers=len(self.layers),
            params=sum(p.elements for p in counted),
            param_bytes=sum(p.bytes for p in counted),
            trainable_params=sum(p.elements for p in trainable),
            trainable_bytes=sum(p.bytes for p in trainable),
            flops=flops,
            active_params=_active(self.layers),
            embedding_params=sum(
                p.elements for x in self.layers if x.kind is Kind.EMBEDDING for p in x.params if p.counted
            ),
        )
        object.__setattr__(self, "totals", totals)

    def layer(self, name: str) -> Layer:
        for candidate in self.layers:
            if candidate.name == name:
                return candidate
        raise KeyError(name)


# ----------------------------------------------------------------------------------------- JSON


def dumps(model: ModelIR, *, path: str | None = None) -> str:
    """The IR as JSON text, validated against schemas/model-ir.schema.json first.

    A schema failure here is a ModTrans bug (the dataclasses should not allow it): it raises
    DiagnosticError with S403 diagnostics naming the JSON path, and nothing is written.
    """
    data = to_dict(model)
    problems = schema.check(data, SCHEMA, path=path, code="S403")
    if problems:
        raise DiagnosticError(problems)
    return json.dumps(data, indent=1) + "\n"


def to_dict(model: ModelIR) -> dict[str, Any]:
    p = model.provenance
    t = model.totals
    return {
        "version": VERSION,
        "provenance": provenance_dict(p),
        "totals": {
            "layers": t.layers,
            "params": t.params,
            "param_bytes": t.param_bytes,
            "trainable_params": t.trainable_params,
            "trainable_bytes": t.trainable_bytes,
            "active_params": t.active_params,
            "embedding_params": t.embedding_params,
            "flops": _flops(t.flops),
        },
        "layers": [_layer(x) for x in model.layers],
    }


def provenance_dict(p: Provenance) -> dict[str, Any]:
    return {
        "file": p.file,
        "sha256": p.sha256,
        **({"sampled_sha256": p.sampled_sha256} if p.sampled_sha256 else {}),
        "size": p.size,
        "producer": p.producer,
        "producer_version": p.producer_version,
        "ir_version": p.ir_version,
        "opset": dict(p.opset),
        "graph": p.graph,
        "batch": p.batch,
        "input_shapes": {k: list(v) for k, v in p.input_shapes.items()},
        "tool": p.tool,
        "architecture_only": p.architecture_only,
    }


def _flops(f: Flops) -> dict[str, int]:
    return {"forward": f.forward, "input_grad": f.input_grad, "weight_grad": f.weight_grad}


def _activation(a: Activation) -> dict[str, Any]:
    return {
        "name": a.name,
        "shape": None if a.shape is None else list(a.shape),
        "dtype": a.dtype,
        "bytes": a.bytes,
    }


def _layer(x: Layer) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": x.name,
        "node": x.node,
        "op_type": x.op_type,
        "kind": x.kind.value,
        "params": [
            {
                "name": p.name,
                "role": p.role.value,
                "shape": list(p.shape),
                "dtype": p.dtype,
                "elements": p.elements,
                "bytes": p.bytes,
                "trainable": p.trainable,
                **({"shared_with": p.shared_with} if p.shared_with else {}),
            }
            for p in x.params
        ],
        "inputs": [_activation(a) for a in x.inputs],
        "outputs": [_activation(a) for a in x.outputs],
        "flops": _flops(x.flops),
    }
    if x.gemm is not None:
        out["gemm"] = {"m": x.gemm.m, "k": x.gemm.k, "n": x.gemm.n, "groups": x.gemm.groups}
    if x.fused:
        out["fused"] = list(x.fused)
    if x.producers:
        out["producers"] = list(x.producers)
    if x.moe is not None:
        count = {"count": x.moe.count} if x.moe.count > 1 else {}
        out["moe"] = {"experts": x.moe.experts, "top_k": x.moe.top_k, "expert": x.moe.expert, **count}
    if x.repeats != 1:
        out["repeats"] = x.repeats
    if not x.flops_known:
        out["flops_known"] = False
    if x.block is not None:
        part = {} if x.block.part is None else {"part": x.block.part.value}
        h = x.block.heads
        causal = {} if h is None or h.causal is None else {"causal": h.causal}
        dropout = {} if h is None or not h.dropout else {"dropout": h.dropout}
        hidden = {} if h is None or not h.hidden_dropout else {"hidden_dropout": h.hidden_dropout}
        options = {**causal, **dropout, **hidden}
        if h is not None and h.window is not None:
            options["window"] = h.window
        if h is not None and h.eager:
            options["eager"] = True
        if h is not None and h.bias:
            options["bias"] = True
        heads = {} if h is None else {"heads": {"query": h.query, "key_value": h.key_value, **options}}
        core = {"core": True} if x.block.core else {}
        out["block"] = {"index": x.block.index, **part, **heads, **core}
    if x.tp_style is not None:
        out["tp_style"] = x.tp_style
    return out


def from_dict(data: dict[str, Any]) -> ModelIR:
    """The inverse of to_dict, for a dict that already passed the schema."""
    p = data["provenance"]
    provenance = Provenance(
        file=p["file"],
        sha256=p["sha256"],
        sampled_sha256=p.get("sampled_sha256"),
        size=p["size"],
        producer=p["producer"],
        producer_version=p["producer_version"],
        ir_version=p["ir_version"],
        opset=dict(p["opset"]),
        graph=p["graph"],
        batch=p["batch"],
        input_shapes={k: tuple(v) for k, v in p["input_shapes"].items()},
        tool=p["tool"],
        architecture_only=p["architecture_only"],
    )
    return ModelIR(provenance, tuple(_layer_from(x) for x in data["layers"]))


def _activation_from(a: dict[str, Any]) -> Activation:
    shape = None if a["shape"] is None else tuple(a["shape"])
    return Activation(a["name"], shape, a["dtype"], a["bytes"])


def _layer_from(x: dict[str, Any]) -> Layer:
    gemm = x.get("gemm")
    return Layer(
        name=x["name"],
        node=x["node"],
        op_type=x["op_type"],
        kind=Kind(x["kind"]),
        params=tuple(
            Param(
                name=p["name"],
                role=Role(p["role"]),
                shape=tuple(p["shape"]),
                dtype=p["dtype"],
                elements=p["elements"],
                bytes=p["bytes"],
                trainable=p["trainable"],
                shared_with=p.get("shared_with"),
            )
            for p in x["params"]
        ),
        inputs=tuple(_activation_from(a) for a in x["inputs"]),
        outputs=tuple(_activation_from(a) for a in x["outputs"]),
        flops=Flops(**x["flops"]),
        gemm=None if gemm is None else Gemm(**gemm),
        fused=tuple(x.get("fused", ())),
        producers=tuple(x.get("producers", ())),
        moe=None if x.get("moe") is None else Moe(**x["moe"]),
        repeats=x.get("repeats", 1),
        flops_known=x.get("flops_known", True),
        block=_block_from(x.get("block")),
        tp_style=x.get("tp_style"),
    )


def _block_from(b: dict[str, Any] | None) -> Block | None:
    if b is None:
        return None
    part, heads = b.get("part"), b.get("heads")
    return Block(
        b["index"],
        None if part is None else Part(part),
        None if heads is None else Heads(**heads),
        bool(b.get("core", False)),
    )
