"""Megatron-style tensor parallelism over G NPUs (the tensor axis), data parallelism across
(HYBRID_TRANSFORMER and HYBRID_TRANSFORMER_FWD_IN_BCKWD; Shoeybi et al. 2019, section 3):

    column-parallel linear (Q/K/V, fused QKV, first MLP layer, LM head):
                  fwd NONE; ig ALLREDUCE A_in (once per shared input); wg ALLREDUCE ceil(P/G)
    row-parallel linear (attention output, second MLP layer: fed by a column-parallel one):
                  fwd ALLREDUCE A_out; ig NONE; wg ALLREDUCE ceil(P/G)
    vocabulary-parallel (word) embedding: fwd ALLREDUCE A_out; ig NONE; wg ALLREDUCE ceil(P/G)
    replicated (normalisation, position embedding): fwd NONE; ig NONE; wg ALLREDUCE P
Weight gradients are all-reduced over the data axis; compute is the shard's (N or K / G), and
of a column-parallel unit's folded attention core and MLP activation 1/G (share.rank_share, the
same function the LLM layout's --tp uses: this keyword is the layout --tp G --dp N/G).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from modtrans.comm import CommType, Policy
from modtrans.ir.document import Kind, ModelIR, Part, Role
from modtrans.ir.document import Layer as IRLayer
from modtrans.plan.model import Axis, Mesh, Purpose, Step
from modtrans.strategy.draft import Draft
from modtrans.strategy.recompute import checkpoint
from modtrans.strategy.roles import LayerRole, Split
from modtrans.strategy.share import SHARDABLE
from modtrans.strategy.techniques.data import reduce_gradients
from modtrans.strategy.techniques.hybrid import DATA, TENSOR
from modtrans.strategy.techniques.registry import technique


@technique(Policy.HYBRID_TRANSFORMER, Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD)
def megatron(draft: Draft) -> None:
    g = draft.group_size
    draft.mesh = Mesh((Axis(Purpose.TENSOR, g), Axis(Purpose.DATA, draft.npus // g)))
    roles = roles_of(draft.ir, [x.owner for x in draft.layers])
    seen_inputs: set[str] = set()
    for x in draft.layers:
        role = x.role = roles.get(x.owner.name, LayerRole.REPLICATED)
        if role is LayerRole.REPLICATED:
            reduce_gradients(x, DATA)
            continue
        x.ways, x.split = g, Split.K if role is LayerRole.ROW else Split.N
        if g > 1 and role in (LayerRole.ROW, LayerRole.EMBEDDING):
            x.add(Step.FWD, CommType.ALLREDUCE, draft.a_out(x.owner), TENSOR)
        if g > 1 and role is LayerRole.COLUMN:
            shared = frozenset(a.name for a in x.owner.inputs)
            if not shared & seen_inputs:
                x.add(Step.INPUT_GRAD, CommType.ALLREDUCE, draft.a_in(x.owner), TENSOR)
            seen_inputs |= shared
        reduce_gradients(x, DATA, math.ceil(x.group.comm_bytes / g))
    if draft.parallelism.policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        checkpoint(draft)


def roles_of(ir: ModelIR, owners: Sequence[IRLayer]) -> dict[str, LayerRole]:
    """column / row / embedding for each GEMM owner: a linear layer fed (through layers without
    parameters) by a column-parallel one is row-parallel; every other linear layer is column-parallel.

    Only the word embedding is vocabulary-parallel: the embedding with the most rows (the
    vocabulary). Position and token-type embeddings are replicated, as Megatron-LM builds them
    (megatron/core/models/common/embeddings/language_model_embedding.py,
    LanguageModelEmbedding.__init__: word_embeddings a tensor_parallel.VocabParallelEmbedding,
    position_embeddings and tokentype_embeddings a torch.nn.Embedding), so they send nothing
    over the tensor axis. A vision transformer's patch embedding (a convolution whose block part is
    the embedding: llm/vision.py) is replicated too: Megatron's CLIPViTModel builds conv1 as a
    torch.nn.Conv2d and its class token and position embeddings as plain parameters
    (megatron/core/models/vision/clip_vit_model.py, CLIPViTModel.__init__)."""
    by_name = {layer.name: layer for layer in ir.layers}
    vocabulary = max((_rows(o) for o in owners if o.kind is Kind.EMBEDDING), default=0)
    roles: dict[str, LayerRole] = {}
    for owner in owners:
        if owner.kind is Kind.EMBEDDING:
            if _rows(owner) == vocabulary:
                roles[owner.name] = LayerRole.EMBEDDING
        elif owner.kind in SHARDABLE and not _patch_embedding(owner):
            fed_by = _parameterised_ancestors(owner, by_name)
            roles[owner.name] = (
                LayerRole.ROW if any(roles.get(x) is LayerRole.COLUMN for x in fed_by) else LayerRole.COLUMN
            )
    return roles


def _patch_embedding(layer: IRLayer) -> bool:
    return layer.kind is Kind.CONV and layer.block is not None and layer.block.part is Part.EMBEDDING


def _rows(embedding: IRLayer) -> int:
    """The rows of an embedding's table (its first weight's first dimension)."""
    return next((p.shape[0] for p in embedding.params if p.role is Role.WEIGHT and p.shape), 0)


def _parameterised_ancestors(layer: IRLayer, by_name: Mapping[str, IRLayer]) -> set[str]:
    """The nearest layers with parameters upstream of `layer` (through parameter-free layers)."""
    found: set[str] = set()
    stack = list(layer.producers)
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        source = by_name[name]
        if source.params and source.kind is not Kind.ELEMENTWISE:
            found.add(name)
        else:
            stack.extend(source.producers)
    return found
