"""What one rank computes of a unit: the one function every technique and preset asks
(`rank_share`), and the GEMM shard and token scaling it is made of.

A unit is a workload layer: the IR layer holding its parameters and the parameter-free layers
folded into it (groups.py). Techniques say how a unit is divided (LayerDraft.ways, split, role);
this module turns that into the IR layers a cost model times.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from fractions import Fraction
from typing import Protocol

from modtrans.ir.document import Flops, Gemm, Kind, Param, Role
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.groups import Group
from modtrans.strategy.roles import LayerRole, Split

SHARDABLE = frozenset({Kind.CONV, Kind.CONV_TRANSPOSE, Kind.LINEAR, Kind.EMBEDDING, Kind.RNN})


class Divided(Protocol):
    """A unit as a technique divided it (draft.LayerDraft is one): what rank_share reads."""

    @property
    def group(self) -> Group: ...
    @property
    def ways(self) -> int: ...
    @property
    def split(self) -> Split: ...
    @property
    def role(self) -> LayerRole: ...


class Folded(enum.StrEnum):
    """What a rank computes of the parameter-free layers folded into a column-parallel unit
    (rank_share's convention).

    MEGATRON   1/T of them, as Megatron-LM runs tensor parallelism: the attention core on the
               rank's heads / T (megatron/core/transformer/dot_product_attention.py,
               DotProductAttention.__init__: num_attention_heads_per_partition =
               divide(num_attention_heads, world_size)), the MLP activation on the rank's
               ffn_hidden_size / T features (megatron/core/transformer/mlp.py, MLP.forward: the
               activation_func of linear_fc1's ColumnParallelLinear output, gather_output=False).
    GEMM_ONLY  whole: only the GEMM is divided, as ASTRA-sim 1.0's workload generator sizes a
               layer (scripts/workload_generator/gen_astrasim_workload_input.py: a layer is one
               M x N x K GEMM costed by SCALE-Sim; nothing else in it is split).
    """

    MEGATRON = "megatron"
    GEMM_ONLY = "gemm-only"


def whole(role: Role, split: Split) -> bool:
    """Whether every rank of a layer divided by `split` holds a parameter of this role whole: a
    row-parallel layer's bias (Split.K), which the ranks add to the reduced output, not to their
    partial sums. Megatron-LM, megatron/core/tensor_parallel/layers.py (core_v0.14.0),
    RowParallelLinear.__init__: `self.bias = Parameter(torch.empty(self.output_size, ...))`, not
    output_size_per_partition ("Note that bias is not parallelized"), and forward: `output =
    (output_ + self.bias)` after the all-reduce or reduce-scatter; Transformer Engine's row-parallel
    Linear keeps its bias whole too (transformer_engine/pytorch/module/linear.py at d0067d0,
    Linear.__init__: only in_features divided, and "For RPL, bias has to be added after TP
    collectives"), and so does PyTorch's RowwiseParallel, transformers' rowwise style
    (torch/distributed/tensor/parallel/style.py, torch 2.13, RowwiseParallel._partition_linear_fn:
    "Rowwise shard weight to Shard(1), bias to Replicate()"). A column-parallel layer's bias is
    split with its output features (ColumnParallelLinear: output_size_per_partition)."""
    return split is Split.K and role is Role.BIAS


def divided(p: Param, ways: int, split: Split) -> Param:
    """The part of a parameter one of `ways` ranks holds (whole() decides which stay whole)."""
    if ways == 1 or whole(p.role, split):
        return p
    return dataclasses.replace(p, elements=math.ceil(p.elements / ways), bytes=math.ceil(p.bytes / ways))


def shard(layer: IRLayer, ways: int, *, split: Split = Split.N, sequence: int = 1) -> IRLayer:
    """The part of a GEMM layer one NPU computes when split `ways` ways (output features, or the
    reduction for row-parallel layers). A row-parallel layer's bias is whole (whole()), and so is its
    add and its gradient's sum over the tokens (ir/flops.py: the forward's and weight gradient's
    FLOPs beyond the GEMM's 2 macs, which the input gradient's are): they run on the reduced
    output, all of it, or 1/`sequence` of it after SP's reduce-scatter (RowParallelLinear.forward)."""
    if ways == 1 or layer.kind not in SHARDABLE:
        return layer
    gemm = layer.gemm
    if gemm is not None:
        gemm = (
            Gemm(gemm.m, math.ceil(gemm.k / ways), gemm.n, gemm.groups)
            if split == Split.K
            else Gemm(gemm.m, gemm.k, math.ceil(gemm.n / ways), gemm.groups)
        )
    f = layer.flops
    # the bias add's and its gradient's FLOPs, on the whole (SP: 1/sequence) output
    added = whole_bias(layer, split)
    f = Flops(f.forward - added[0], f.input_grad, f.weight_grad - added[1])
    flops = Flops(
        math.ceil(f.forward / ways) + math.ceil(added[0] / sequence),
        math.ceil(f.input_grad / ways),
        math.ceil(f.weight_grad / ways) + math.ceil(added[1] / sequence),
    )
    params = tuple(divided(p, ways, split) for p in layer.params)
    return dataclasses.replace(layer, gemm=gemm, flops=flops, params=params)


def whole_bias(layer: IRLayer, split: Split) -> tuple[int, int]:
    """A GEMM's bias add's and bias gradient's FLOPs (forward, weight gradient) where the split
    leaves its bias whole on every rank (a row-parallel layer's: whole()), else (0, 0)."""
    f = layer.flops
    if layer.gemm is None or not any(whole(p.role, split) for p in layer.params):
        return (0, 0)
    return (max(0, f.forward - f.input_grad), max(0, f.weight_grad - f.input_grad))


def resize(layer: IRLayer, factor: Fraction) -> IRLayer:
    """The layer on `factor` times its tokens: FLOPs, activations and the GEMM's M scaled (a
    sequence shard under SP, an expert's tokens from every expert-parallel rank); parameters kept."""
    if factor == 1:
        return layer

    def scaled(n: int) -> int:
        return math.ceil(n * factor)

    f = layer.flops
    gemm = layer.gemm
    if gemm is not None:
        gemm = Gemm(scaled(gemm.m), gemm.k, gemm.n, gemm.groups)
    acts = [
        tuple(dataclasses.replace(a, bytes=None if a.bytes is None else scaled(a.bytes)) for a in side)
        for side in (layer.inputs, layer.outputs)
    ]
    flops = Flops(scaled(f.forward), scaled(f.input_grad), scaled(f.weight_grad))
    return dataclasses.replace(layer, flops=flops, gemm=gemm, inputs=acts[0], outputs=acts[1])


def regroup(layer: IRLayer, holds: int) -> IRLayer:
    """A grouped experts' layer on a rank that holds 1 / `holds` of its experts, each on `holds`
    times the tokens (what every expert-parallel rank routes to them): the grouped GEMM's groups
    / holds, its M x holds, the same FLOPs; the weights of its own experts only."""
    gemm = layer.gemm
    if holds == 1 or gemm is None or gemm.groups % holds:
        return layer
    params = tuple(
        dataclasses.replace(p, elements=math.ceil(p.elements / holds), bytes=math.ceil(p.bytes / holds))
        for p in layer.params
    )
    return dataclasses.replace(
        layer, gemm=Gemm(gemm.m * holds, gemm.k, gemm.n, gemm.groups // holds), params=params
    )


def shape(layer: IRLayer) -> tuple[object, ...]:
    """Everything of a layer that rank_share and a shape-only cost model (cost/base.py by_shape)
    read, without its names (the layer's, its node's, its tensors', its producers') and block
    number: the layers of identical transformer blocks have one shape."""
    block = layer.block
    return (
        layer.op_type,
        layer.kind,
        tuple((p.role, p.shape, p.dtype, p.elements, p.bytes, p.trainable, p.counted) for p in layer.params),
        tuple((a.shape, a.dtype, a.bytes) for a in layer.inputs),
        tuple((a.shape, a.dtype, a.bytes) for a in layer.outputs),
        layer.flops,
        layer.gemm,
        layer.moe,
        layer.repeats,
        layer.flops_known,
        None if block is None else (block.part, block.heads),
    )


def replicated(x: Divided, folded: Folded, sp: bool) -> tuple[bool, ...]:
    """Which of a dense unit's parts (its owner, then its folded layers: Group.members) every one
    of the T > 1 tensor ranks computes whole, as rank_share divides them: without SP a replicated
    unit (a norm with its weight) and the layers folded into a row-parallel or embedding unit but
    its linears (residual add, dropout, the next norm: Megatron-LM's layers outside the parallel
    regions run on every tensor rank), under Folded.GEMM_ONLY a column-parallel unit's folded
    layers, a keyword preset's split unit's (MODEL's: rank_share leaves them whole), and a router
    and the experts T does not split (a model's own plan without SP, the only MoE over T > 1
    ranks modtrans runs without it: every tensor rank routes the whole sequence, tensor.py); with
    SP none (a sequence shard each). A row-parallel owner's whole bias: row_bias."""
    parts = (x.group.owner, *x.group.folded)
    if sp:
        return (False,) * len(parts)
    if x.role is LayerRole.REPLICATED:
        return (True,) * len(parts)
    if x.role is LayerRole.ROUTER or (x.role is LayerRole.EXPERT and x.ways == 1):
        return (True,) * len(parts)  # a plan's MoE without SP: the whole sequence on every tensor rank
    if x.role in (LayerRole.ROW, LayerRole.EMBEDDING):
        return (False, *(m.kind is not Kind.LINEAR for m in x.group.folded))
    if x.role is LayerRole.COLUMN and folded is Folded.GEMM_ONLY:
        return (False, *(m.kind not in SHARDABLE for m in x.group.folded))
    if x.role is LayerRole.SPLIT:  # a keyword's split GEMM: its folded layers whole (rank_share)
        return (False, *(m.kind not in SHARDABLE for m in x.group.folded))
    return (False,) * len(parts)


def row_bias(x: Divided, tokens: Fraction, sp: bool) -> Flops:
    """The FLOPs of a row-parallel unit's bias add and bias gradient on this rank's `tokens`, which
    every one of its T > 1 tensor ranks computes whole without SP (shard(): on the all-reduced
    output); none under SP (1/T of the sequence each) or for any other unit."""
    if sp or x.role is not LayerRole.ROW or x.ways < 2:
        return Flops()
    forward, weight_grad = whole_bias(resize(x.group.owner, tokens), x.split)
    return Flops(forward, 0, weight_grad)


def rank_share(
    x: Divided,
    folded: Folded = Folded.MEGATRON,
    *,
    tokens: Fraction = Fraction(1),
    sequence: int = 1,
    experts: int = 1,
) -> Group:
    """What one rank computes of a unit (a workload layer: the IR layer holding its parameters and
    the parameter-free layers folded into it), for the keywords and the LLM layout alike.

    the GEMM          1/ways of N (column-parallel, split, embedding) or of K (row-parallel): shard()
    folded layers     of a column-parallel unit: 1/ways under Folded.MEGATRON (the attention core,
                      the MLP activation), whole under Folded.GEMM_ONLY; of any other unit whole
                      (a row-parallel unit's residual add and dropout see the all-reduced output)
    tokens            the share of the micro-batch's tokens the unit sees (sequence parallelism: a
                      replicated unit or a router 1/T; an expert E_p/T); a router's or expert's
                      folded layers that are not the experts' own keep every token
    sequence          sequence parallelism's T: the layers folded into a row-parallel or embedding
                      unit (norm, residual add, dropout; not a linear) run on 1/T of the sequence
                      (Korthikanti et al. 2022, section 4.2.2), and so do a row-parallel unit's
                      bias add and bias gradient (shard())
    experts           a grouped experts' layer held 1 / experts on this rank: regroup()
    """
    g = x.group
    sharded = x.ways > 1 and g.owner.kind in SHARDABLE
    whole_on = sequence if x.role is LayerRole.ROW else 1  # SP: a row-parallel bias on the shard
    owner = shard(g.owner, x.ways, split=x.split, sequence=whole_on) if sharded else g.owner
    members = []
    for m in g.folded:
        factor = (
            tokens if x.role not in (LayerRole.EXPERT, LayerRole.ROUTER) or m.moe is not None else Fraction(1)
        )
        column = x.role is LayerRole.COLUMN or (
            x.role is LayerRole.EXPERT and x.split == Split.N
        )  # ETP: an expert's w1 / w3
        if sharded and column and folded is Folded.MEGATRON:
            # a folded GEMM (DeBERTa's query_proj_1: the unit's weight on its relative positions)
            # is divided by shard() below, as its owner is: once, not again here
            if m.kind not in SHARDABLE:
                factor /= x.ways
        elif x.role in (LayerRole.ROW, LayerRole.EMBEDDING) and m.kind is not Kind.LINEAR:
            factor /= sequence
        members.append(resize(shard(m, x.ways) if sharded else m, factor))
    return dataclasses.replace(g, owner=regroup(resize(owner, tokens), experts), folded=tuple(members))
