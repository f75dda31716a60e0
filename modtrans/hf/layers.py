"""A recorded forward (library.Recorded) -> the IR's layers, named by the modules that ran them.

Every op belongs to the innermost module running it. A leaf module with parameters (nn.Linear,
nn.Embedding, a norm, a convolution) is one layer of all its ops; in any other module each matrix
product is a layer of its own and each run of the other ops between them one more, named after
the module and the op (`model.layers.0.self_attn.matmul`, `....softmax`). A matrix product that
reads a parameter (through a view or a gather: F.linear's weight.t(), a MoE's
gate_up_proj[expert_ids]) is a linear layer; one of two activations (the attention's scores and
context) a matmul.

FLOPs: a matrix product's forward is torch.utils.flop_counter's count of it (FlopCounterMode's
own formula); its backward and every other op's are modtrans/ir/flops.py's formulas, as the
hand-written path counts them (llm/build.py): a linear layer's input and weight gradients each
its forward's matrix FLOPs (a bias adds its M·N to the forward and the weight gradient), a matmul
of two activations twice its forward for the input gradients, a norm 5e | 8e | 2e, a softmax
5e | 3e, an element-wise op e per phase it runs in, an embedding's gradient e.

Blocks, parts and heads: blocks.py; routers and experts: mixture.py; a multimodal model's towers:
towers.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any

from modtrans.hf.blocks import Shape, block, block_index, in_attention, with_router
from modtrans.hf.mixture import moe as routing
from modtrans.hf.mixture import routed, router_modules
from modtrans.hf.towers import ahead, where_outside
from modtrans.ir import flops
from modtrans.ir.document import (
    Activation,
    Flops,
    Gemm,
    Kind,
    Layer,
    Moe,
    Param,
    Part,
    Role,
)

INTEGER = {"int64": "int64", "int32": "int32", "bool": "bool", "int8": "int8", "uint8": "uint8"}
WIDTHS = {"int64": 8, "int32": 4, "bool": 1, "int8": 1, "uint8": 1}


@dataclass
class _Group:
    """The ops of one layer to be."""

    name: str
    module: str
    kind: Kind
    ops: list[Any] = field(default_factory=list)
    params: list[str] = field(default_factory=list)
    run: int = 0  # the matrix products of this name before it: the expert a loop over experts ran


def layers(recorded: Any, shape: Shape) -> list[Layer]:
    """The IR's layers of a recorded forward (library.Recorded), in the order they ran."""
    shape = with_router(shape, recorded.modules)
    modules = {m.path: m for m in recorded.modules}
    groups = _groups(recorded, modules)
    _unread(groups, recorded, modules)
    where = {op.index: g.name for g in groups for op in g.ops}
    shapes = {key: s for m in recorded.modules for key, s in m.params}  # parameter key -> its shape
    sliced = _sliced(groups, shapes, shape.experts or 0)
    sharing = _sharing(groups, recorded.owners, sliced)
    blocks = block_index(recorded)
    towers: Mapping[str, Shape] = getattr(recorded, "towers", {})
    groups = ahead(groups, blocks, towers)
    places = where_outside(groups, blocks, block_index(recorded, towered=True), towers)
    out = []
    for g, (tower, outside) in zip(groups, places, strict=True):
        own = shape if tower is None else towers[tower]
        out.append(
            _layer(g, own, shapes, modules, where, blocks, outside, sharing, tower is not None, sliced)
        )
    return routed(router_modules(out))


def _groups(recorded: Any, modules: Mapping[str, Any]) -> list[_Group]:
    groups: list[_Group] = []
    names: dict[str, int] = {}

    def unique(name: str) -> str:
        n = names.get(name, 0)
        names[name] = n + 1
        return name if n == 0 else f"{name}_{n}"

    for op in recorded.ops:
        module = modules.get(op.module)
        whole = (
            module is not None
            and module.leaf
            and (module.params or _is_norm(module.cls))
            and not _fused_experts(module)
        )
        last = groups[-1] if groups else None
        if whole:
            if last is not None and last.module == op.module and last.name.endswith(op.module):
                last.ops.append(op)
                continue
            groups.append(_Group(unique(op.module or "model"), op.module, _leaf_kind(module, op)))
        elif op.category == "gemm":
            kind = Kind.LINEAR if op.params else Kind.MATMUL
            if op.name == "convolution":
                kind = Kind.CONV
            # named after the matrix it multiplies by: addmm's operands are (bias, input, weight)
            label = op.params[-1].rsplit(".", 1)[-1] if op.params and op.module else op.name
            name = _join(op.module, label)
            groups.append(_Group(unique(name), op.module, kind, run=names[name] - 1))
        elif last is not None and _bias_add(last, op):
            last.ops.append(op)
            continue
        else:
            kind = _op_kind(op)
            if (
                last is not None
                and last.module == op.module
                and last.kind is kind
                and not last.name.endswith(op.module)
                and kind is not Kind.LINEAR
            ):
                last.ops.append(op)
                continue
            groups.append(_Group(unique(_join(op.module, op.name)), op.module, kind))
        groups[-1].ops.append(op)
    for g in groups:
        # a leaf with parameters that multiplies no matrices is not a linear layer: Moonshine
        # streaming's asinh compression (asinh(exp(log_k) * x)) is the pointwise ops it runs
        done = [_op_kind(o) for o in g.ops if o.category not in ("gemm", "data")]
        if g.kind is Kind.LINEAR and done and not any(o.category == "gemm" for o in g.ops):
            g.kind = done[0]
    return [g for g in groups if g.kind is not Kind.DATA or any(o.params for o in g.ops)]


def _bias_add(last: _Group, op: Any) -> bool:
    """Whether `op` adds a parameter to the output of the matrix product `last` just made in the
    same module (not a leaf's): the bias of an F.linear torch ran as matmul, then add, on an input
    it cannot flatten, one layer with its product as addmm's is (WavLM's functional in-projection
    on [time, batch, width]: addmm at one sample, matmul and add at two)."""
    return (
        last.kind is Kind.LINEAR
        and len(last.ops) == 1
        and last.module == op.module
        and op.name in ("add", "add_")
        and bool(op.params)
        and last.ops[0].index in op.reads
    )


def _unread(groups: list[_Group], recorded: Any, modules: Mapping[str, Any]) -> None:
    """Each parameter to one layer: a leaf module's own to its (first) layer; another's to the
    first layer that reads it; one the forward never reads to a layer of its module, after the
    others. A tied parameter (a head sharing the embedding's table) is listed by each module
    that holds it, and counted by its first owner's (_sharing). A leaf module's parameter read
    elsewhere first (RWKV rescales its output weights in place, in the model's own forward) stays
    its module's."""
    leaves = {g.module for g in groups if g.name == (g.module or "model")}
    held = {
        recorded.owners.get(key, key)
        for m in recorded.modules
        if m.leaf and m.path in leaves
        for key, _ in m.params
    }
    taken: set[str] = set()
    for g in groups:
        module = modules.get(g.module)
        if module is not None and module.leaf and g.name == (g.module or "model"):
            for key, _ in module.params:
                g.params.append(key)
                taken.add(key)
        for key in (key for op in g.ops for key in op.params):
            owner = recorded.owners.get(key, key)
            if owner not in taken and owner not in held:
                g.params.append(owner)
                taken.add(owner)
    for m in recorded.modules:
        keys = [key for key, _ in m.params if key not in taken and recorded.owners.get(key, key) not in taken]
        if keys:
            taken.update(keys)
            path = m.path
            groups.append(_Group(f"{path}.unused" if path else "unused", path, _class_kind(m.cls), [], keys))


def _sliced(
    groups: Sequence[_Group], shapes: Mapping[str, tuple[int, ...]], experts: int
) -> set[tuple[str, str]]:
    """The (layer, parameter) pairs where a layer holds 1 / E of a parameter: a projection under
    `experts` that runs one expert at a time over a 2-D weight of E x f rows (DbrxExperts: w1, v1
    and w2 each [E x ffn_hidden_size, d_model], modeling_dbrx.py, DbrxExpertGLU.forward's
    w1.view(E, f, h)[expert_idx]) holds its expert's rows, as the expert's own module would (the
    run mixture.moe marks expert run % E). Where the forward ran each of the E experts once (balanced
    routing: hf/values.py), each run lists the parameter, counted in every one: the E runs hold the
    whole, and expert parallelism keeps its rank's experts' (expert.py)."""
    runs: dict[str, list[_Group]] = {}
    if experts < 2:
        return set()
    for g in groups:
        last = g.ops[-1].out_shapes[0] if g.ops and g.ops[-1].out_shapes else None
        inside = re.search(r"\.experts(\.|$)", g.module) is not None
        if g.kind is not Kind.LINEAR or not inside or last is None or len(last) != 2:
            continue
        read = [key for op in g.ops for key in op.params]
        if any(len(shapes.get(key, ())) == 3 for key in read):
            continue  # fused [E, ...] weights: one grouped layer (mixture.moe)
        for key in dict.fromkeys(read):
            rows = shapes.get(key, ())
            if len(rows) == 2 and rows[0] % experts == 0 and rows[0] > experts:
                runs.setdefault(key, []).append(g)
    found: set[tuple[str, str]] = set()
    for key, each in runs.items():
        if len(each) != experts:  # an expert the forward did not run: the whole stays one layer's
            continue
        for g in each:
            if key not in g.params:
                g.params.append(key)
            found.add((g.name, key))
    return found


def _sharing(
    groups: Sequence[_Group], owners: Mapping[str, str], sliced: Set[tuple[str, str]] = frozenset()
) -> dict[tuple[str, str], str | None]:
    """Each listed (layer, parameter) -> None where it is counted, else the layer that counts it:
    the first listed of those that are the same tensor; each run's share of a `sliced` one its own."""
    counted: dict[str, str] = {}
    found: dict[tuple[str, str], str | None] = {}
    for g in groups:
        for key in g.params:
            owner = owners.get(key, key)
            if (g.name, key) in sliced:
                found[(g.name, key)] = None
            elif owner in counted:
                found[(g.name, key)] = counted[owner]
            else:
                counted[owner] = g.name
                found[(g.name, key)] = None
    return found


def _layer(
    g: _Group,
    shape: Shape,
    shapes: Mapping[str, tuple[int, ...]],
    modules: Mapping[str, Any],
    where: Mapping[int, str],
    blocks: Mapping[str, int],
    outside: Part,
    sharing: Mapping[tuple[str, str], str | None],
    towered: bool,
    sliced: Set[tuple[str, str]] = frozenset(),
) -> Layer:
    params = []
    for key in g.params:
        shared = sharing.get((g.name, key))
        s = shapes.get(key, ())
        if (g.name, key) in sliced and shape.experts:  # its expert's rows (_sliced)
            s = (s[0] // shape.experts, *s[1:])
        elements = math.prod(s)
        role = _role(key, len(s), g.kind)
        params.append(Param(key, role, tuple(s), shape.dtype, elements, elements * shape.width, True, shared))
    last = g.ops[-1].out_shapes[0] if g.ops and g.ops[-1].out_shapes else None
    moe = routing(g.module, g.kind, [shapes.get(key, ()) for key in g.params], last, shape, g.run)
    inputs = _inputs(g, shape, where)
    outputs = _outputs(g, shape)
    fl, gemm = _flops(g, params, moe)
    if moe is not None and in_attention(g.module, modules):
        moe = None  # an attention's experts: its heads' (blocks.in_attention), no routed MLP's
    producers = tuple(
        dict.fromkeys(where[r] for op in g.ops for r in op.reads if r in where and where[r] != g.name)
    )
    op_type = _op_type(g)
    return Layer(
        g.name,
        g.module,
        op_type,
        g.kind,
        tuple(params),
        inputs,
        outputs,
        fl,
        gemm,
        producers=producers,
        moe=moe,
        block=block(g.module, g.kind, shape, modules, blocks, moe, outside, towered),
    )


def _flops(g: _Group, params: Sequence[Param], moe: Moe | None) -> tuple[Flops, Gemm | None]:
    matrix = sum(op.flops for op in g.ops if op.category == "gemm")
    rest = sum(_elements(op) for op in g.ops if op.category != "gemm") + sum(map(_bias_added, g.ops))
    biased = any(p.role is Role.BIAS for p in params)
    gemm = _gemm(g, moe)
    if g.kind in (Kind.LINEAR, Kind.CONV):
        return Flops(matrix + rest, matrix + rest * (not biased), matrix + rest * biased), gemm
    if g.kind is Kind.MATMUL:
        return flops.matmul(matrix // 2) if matrix % 2 == 0 else Flops(matrix, 2 * matrix, 0), gemm
    out = max((math.prod(s) for op in g.ops for s in op.out_shapes[:1]), default=0)
    if g.kind is Kind.NORM:
        return flops.norm(out, affine=bool(params)), None
    if g.kind is Kind.EMBEDDING:
        return flops.embedding(out), None
    if g.kind is Kind.REDUCE and any(op.category == "softmax" for op in g.ops):
        return flops.softmax(
            sum(math.prod(op.out_shapes[0]) for op in g.ops if op.category == "softmax")
        ), None
    return flops.elementwise(rest, with_params=bool(params)), None


def _bias_added(op: Any) -> int:
    """The M x N bias add an addmm fuses into its product (beta x bias + mat1 . mat2), which
    flop_registry does not count (torch 2.13 torch/utils/flop_counter.py, addmm_flop: "return
    mm_flop(a_shape, b_shape)"): the add F.linear runs as its own op where it does not take addmm
    (a 3-D input it cannot flatten: aten.matmul, then add), counted there as every add is. Without
    it a linear's bias cost its M x N at one batch size and nothing at another (YOLOS's detection
    head: addmm on its [100, 192] rows of one image, matmul + add on two images' [2, 100, 192])."""
    return math.prod(op.out_shapes[0]) if op.name == "addmm" and op.out_shapes else 0


def _elements(op: Any) -> int:
    if op.category == "reduce":
        return int(op.in_elements)
    if op.category in ("pointwise", "softmax", "norm"):
        return math.prod(op.out_shapes[0]) if op.out_shapes else 0
    return 0


def _gemm(g: _Group, moe: Moe | None) -> Gemm | None:
    """The forward GEMM of a layer's first matrix product: mm and addmm [M x K].[K x N]; bmm
    [B x M x K].[B x K x N], B groups; a grouped expert layer's, per expert on its balanced share
    (batched_mm's [rows, n, 1] over the routed rows), or on the rows a bmm over the experts gives
    each ([E, rows, n]: Llama4TextExperts, every token for each, which mixture.routed takes to the
    routed share), or the first expert's of a module that runs one product an expert
    (JetMoeParallelExperts' F.linear per expert, modeling_jetmoe.py: its first product is expert
    0's rows)."""
    gemms = [o for o in g.ops if o.category == "gemm" and o.name != "convolution"]
    op = gemms[0] if gemms else None
    if op is None or not op.out_shapes:
        return None
    out = op.out_shapes[0]
    per_expert = moe is not None and moe.grouped and len(out) == 3 and out[0] == moe.experts and out[2] != 1
    if moe is not None and moe.grouped and op.flops and not per_expert:
        rows = out[0]
        n = math.prod(out[1:])
        k = op.flops // (2 * rows * n) if rows * n else 0
        return Gemm(rows if len(gemms) > 1 else -(-rows // moe.experts), k, n, moe.experts)
    if len(out) < 2 or op.flops <= 0:
        return None
    m, n = out[-2], out[-1]
    groups = math.prod(out[:-2])
    k = op.flops // (2 * m * n * max(groups, 1)) if m * n else 0
    return Gemm(m, k, n, groups)


def _inputs(g: _Group, shape: Shape, where: Mapping[int, str]) -> tuple[Activation, ...]:
    inside = {f"op{op.index}" for op in g.ops}
    found: dict[str, Activation] = {}
    for op in g.ops:
        for dims, dtype, source in op.inputs:
            if source in inside or source in found or not source:
                continue
            name = (
                f"{where[int(source[2:])]}.out"
                if source.startswith("op") and int(source[2:]) in where
                else source
            )
            found[source] = _activation(name, dims, dtype, shape)
    return tuple(found.values())


def _outputs(g: _Group, shape: Shape) -> tuple[Activation, ...]:
    last = g.ops[-1] if g.ops else None
    if last is None or not last.out_shapes:
        return ()
    return (_activation(f"{g.name}.out", last.out_shapes[0], last.out_dtype, shape),)


def _activation(name: str, dims: Sequence[int], dtype: str, shape: Shape) -> Activation:
    if dtype in INTEGER:
        return Activation(name, tuple(dims), INTEGER[dtype], math.prod(dims) * WIDTHS[dtype])
    return Activation(name, tuple(dims), shape.dtype, math.prod(dims) * shape.width)


def _fused_experts(module: Any) -> bool:
    """A leaf experts module of fused [E, ...] weights that runs their matrix products itself
    (LFM2-MoE's, HY-V4's: no act_fn child): a layer per product, as a module with children has
    (the experts' up and down projections are two GEMMs, not one layer of the first's shape)."""
    return module.path.rsplit(".", 1)[-1] == "experts" and any(len(s) == 3 for _, s in module.params)


def _is_norm(cls: str) -> bool:
    return "Norm" in cls


def _class_kind(cls: str) -> Kind:
    if "Embedding" in cls:
        return Kind.EMBEDDING
    if _is_norm(cls):
        return Kind.NORM
    if "Conv" in cls:
        return Kind.CONV
    return Kind.LINEAR


def _leaf_kind(module: Any, op: Any) -> Kind:
    if _is_norm(module.cls):
        return Kind.NORM
    if "Embedding" in module.cls or op.category == "embedding":
        return Kind.EMBEDDING
    if "Conv" in module.cls or op.name == "convolution":
        return Kind.CONV
    if module.params:
        return Kind.LINEAR
    return _op_kind(op)


def _op_kind(op: Any) -> Kind:
    return {
        "norm": Kind.NORM,
        "softmax": Kind.REDUCE,
        "reduce": Kind.REDUCE,
        "embedding": Kind.EMBEDDING,
        "pointwise": Kind.ELEMENTWISE,
        "data": Kind.DATA,
    }.get(op.category, Kind.OTHER)


def _op_type(g: _Group) -> str:
    if g.kind is Kind.LINEAR:
        return "Gemm" if any(op.name == "addmm" for op in g.ops) else "MatMul"
    return {
        Kind.MATMUL: "MatMul",
        Kind.NORM: "Normalization",
        Kind.EMBEDDING: "Gather",
        Kind.CONV: "Conv",
    }.get(g.kind, g.ops[0].name if g.ops else "Identity")


def _role(key: str, rank: int, kind: Kind) -> Role:
    leaf = key.rsplit(".", 1)[-1]
    if "bias" in leaf:
        return Role.SHIFT if kind is Kind.NORM else Role.BIAS
    if kind is Kind.NORM or rank == 1:
        return Role.SCALE
    return Role.WEIGHT


def _join(module: str, name: str) -> str:
    return f"{module}.{name}" if module else name
