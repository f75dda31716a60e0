"""Tensor parallelism (Megatron column / row; Shoeybi et al. 2019, section 3) and sequence
parallelism (Korthikanti et al. 2022, section 4.2.2) over the T ranks of the tensor axis.

Without SP, per unit (A = the micro-batch's hidden activation, b x s x h x bytes):
    column-parallel linear (Q, K, V, gate, up, first MLP layer, LM head): ig ALLREDUCE of its
        input's gradient, once per shared input;  compute N / T
    row-parallel linear (attention output, down projection): fwd ALLREDUCE A;  compute K / T
    vocabulary-parallel embedding: fwd ALLREDUCE A
With SP the all-reduces become their halves on sequence-sharded activations (Korthikanti et
al. 2022, section 4.2.2; Megatron-LM megatron/core/tensor_parallel/layers.py and mappings.py):
    column-parallel: all-gather A before the forward (once per shared input); all-gather it again
        in the backward for the weight gradient (only the sequence shard is saved:
        LinearWithGradAccumulationAndAsyncCommunication.backward); reduce-scatter the input's
        gradient
    row-parallel: reduce-scatter the output; all-gather the output's gradient before the backward
        (_ReduceScatterToSequenceParallelRegion.backward)
    word embedding: reduce-scatter the output, all-gather its gradient; but where a learned
        position embedding is added (GPT-2, BERT), all-reduce the output, then split it with no
        communication, all-gather the gradient (language_model_embedding.py,
        LanguageModelEmbedding: reduce_scatter_embeddings needs `not add_position_embedding`;
        _ScatterToSequenceParallelRegion.backward)
    norms, residual adds and dropout compute 1/T of the sequence.
A column-parallel linear whose output a vision-language model's language model takes in whole
(the image features its masked_scatter places: Gemma 3's one-matrix projector) gathers its output
after the forward, as Megatron-LM's one-layer projector does (megatron/core/models/vision/
multimodal_projector.py, projector_type "affine": a ColumnParallelLinear with gather_output=True;
tensor_parallel/mappings.py, _GatherFromModelParallelRegion: its backward splits, no collective).
The loss on vocabulary-parallel logits (a column-parallel last layer's output: the LM head)
all-reduces three fp32 values per token over the tensor ranks in the forward (cross_entropy).
Experts and routers are left to expert parallelism (not split over T).
Under Megatron-Core's --tp-comm-overlap a block's column- and row-parallel collectives above are
no collectives: Transformer Engine's userbuffers run them inside the GEMMs (userbuffers.py).
The layout (--tp) and the HYBRID_TRANSFORMER keywords (techniques/megatron.py, no SP) both call
apply(): one implementation, its roles from roles_of (the Megatron layer class of each GEMM), or,
for a model read through transformers, from the model's own plan (planned_roles; hf/plans.py):
each layer then sends the collectives of its style's Megatron layer, a gathered output
(colwise_gather_output: an all-gather after the forward) and a split whole input
(rowwise_split_input: its gradient all-gathered) included. Such a plan runs without SP, a
mixture of experts too (transformers routes the whole sequence on every tensor rank: expert.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

from modtrans import dtypes
from modtrans.comm import CommType
from modtrans.cost.fp8 import WIDTH as fp8_width
from modtrans.cost.fp8 import te_linear
from modtrans.hf import plans
from modtrans.ir.document import Kind, ModelIR, Part, Role
from modtrans.ir.document import Layer as IRLayer
from modtrans.plan.model import Place, Purpose
from modtrans.strategy.draft import Comm, a_in, a_out
from modtrans.strategy.llm import userbuffers
from modtrans.strategy.llm.degrees import Degree, register
from modtrans.strategy.llm.options import LayoutError
from modtrans.strategy.llm.unit import TENSOR, Unit
from modtrans.strategy.roles import LayerRole, Split
from modtrans.strategy.share import SHARDABLE

# the tensor-parallel degree T, the mesh's fastest axis
register(Degree("tp", Purpose.TENSOR, listed=0, shards=True))


def apply(
    units: list[Unit],
    ir: ModelIR,
    tp: int,
    sp: bool,
    *,
    tokens: int = 1,
    option: str = "--tp",
    overlap: bool = False,
    fp8: bool = False,
) -> None:
    """Each unit's role, shard and tensor-parallel collectives, for the layout (--tp) and the
    HYBRID_TRANSFORMER keywords (techniques/megatron.py: sp False, `option` the flag that set T).
    `tokens`: the context-parallel ranks the sequence is split over (context.py): every activation
    these collectives move is 1/tokens of the IR's (built for the whole sequence). `overlap`:
    --tp-comm-overlap, a block's linears' collectives run by userbuffers inside their GEMMs
    (userbuffers.py: Unit.fused, not NCCL collectives). `fp8`: --precision fp8, a block's linears'
    sequence-parallel all-gathers in FP8 (_gathered)."""
    check(ir, tp, sp, option)
    dense = [u.x.owner for u in units if u.x.owner.moe is None]
    planned = plans.styled(ir)
    roles = planned_roles(ir, dense) if planned else roles_of(ir, dense)
    sharing = _sharing(units, roles) if overlap else {}
    positions = _added_positions(units, roles)
    whole = {p for x in ir.layers if x.op_type == "ScatterND" for p in x.producers}
    model_inputs = frozenset(ir.provenance.input_shapes)
    seen: set[tuple[int | None, str]] = set()
    for u in units:
        if u.x.owner.moe is not None:
            u.role = LayerRole.EXPERT if u.x.owner.moe.expert is not None else LayerRole.ROUTER
            continue
        u.role = roles.get(u.name, LayerRole.REPLICATED)
        if tp == 1:
            continue
        style = plans.of(u.x.owner) if planned else None
        if u.role is LayerRole.REPLICATED:
            if style is not None and style.reduce_output:
                u.attach(Place.AFTER_FWD, Comm(CommType.ALLREDUCE, -(-a_out(u.x.owner) // tokens), TENSOR))
            if style is not None and style.reduce_grads and not sp:  # under SP: replicated_grads
                u.attach(Place.TAIL, Comm(CommType.ALLREDUCE, u.grad_bytes(), TENSOR))
            if sp:
                u.scale = Fraction(1, tp)
            continue
        u.x.ways, u.x.split = tp, Split.K if u.role is LayerRole.ROW else Split.N
        if u.role in (LayerRole.ROW, LayerRole.EMBEDDING):
            out = -(-a_out(u.x.owner) // tokens)
            scatter = sp and not (u.role is LayerRole.EMBEDDING and positions)
            reduced = Comm(CommType.REDUCESCATTER if scatter else CommType.ALLREDUCE, out, TENSOR)
            _attach(u, Place.AFTER_FWD, reduced, overlap)
            if sp:
                gradient = Comm(CommType.ALLGATHER, _gathered(out, u, fp8), TENSOR)
                _attach(u, Place.BEFORE_BWD, gradient, overlap)
            if style is not None and style.split_input:
                size = -(-a_in(u.x.owner, model_inputs) // tokens)
                u.attach(Place.AFTER_IG, Comm(CommType.ALLGATHER, size, TENSOR))
        elif u.role is LayerRole.COLUMN:
            if u.name in whole or (style is not None and style.gather_output):
                u.attach(Place.AFTER_FWD, Comm(CommType.ALLGATHER, -(-a_out(u.x.owner) // tokens), TENSOR))
            # one collective per input and block: Megatron fuses the projections of one input in a
            # block (linear_qkv; T5's cross-attention linear_kv), but each block's reads the
            # encoder's output with a collective of its own (megatron/core/transformer/attention.py,
            # CrossAttention.get_query_key_value_tensors: self.linear_kv(key_value_states))
            shared = frozenset((u.block, a.name) for a in u.x.owner.inputs)
            if shared & seen:
                continue
            seen |= shared
            size = -(-a_in(u.x.owner, model_inputs) // tokens)
            if style is not None and not size:  # token ids (embedding_colwise): no gradient to reduce
                continue
            peers = tuple(dict.fromkeys(n for key in shared for n in sharing.get(key, ()) if n != u.name))
            if sp:
                gathered = Comm(CommType.ALLGATHER, _gathered(size, u, fp8), TENSOR)
                _attach(u, Place.BEFORE_FWD, gathered, overlap, peers)
                _attach(u, Place.BEFORE_BWD, gathered, overlap, peers)
            reduce = Comm(CommType.REDUCESCATTER if sp else CommType.ALLREDUCE, size, TENSOR)
            _attach(u, Place.AFTER_IG, reduce, overlap, peers)
    cross_entropy(units, tp, tokens)


def _gathered(size: int, u: Unit, fp8: bool) -> int:
    """The bytes a sequence-parallel all-gather of `size` moves for unit `u`: under --precision fp8
    a Transformer Engine linear's (cost/fp8.py, te_linear) moves FP8, 1 B an element. TE v1.8
    (3ec998e, transformer_engine/pytorch/module/): a column-parallel linear casts its input before
    gathering it, forward and backward (linear.py, _Linear.forward: cast_to_fp8 then
    gather_along_first_dim; layernorm_linear.py: the norm's FP8 ln_out gathered), a row-parallel
    one its output gradient (base.py, grad_output_preprocess, "FP8 case with gather": cast_to_fp8,
    then gather_along_first_dim); under --tp-comm-overlap userbuffers' all-gather buffers are FP8
    too (base.py, initialize_ub: "AllGather buffers use fp8 when using fp8 recipe",
    layers_all_gather_overlap). Reduce-scatters and all-reduces move the bf16 outputs and gradients."""
    if not fp8 or not te_linear(u.x.owner) or not u.x.owner.outputs:
        return size
    return -(-size * fp8_width // max(1, dtypes.width(u.x.owner.outputs[0].dtype)))


def _attach(u: Unit, place: Place, comm: Comm, overlap: bool, peers: tuple[str, ...] = ()) -> None:
    """The collective as NCCL's, or under --tp-comm-overlap, where Transformer Engine's userbuffers
    run it inside the unit's GEMM (userbuffers.METHODS), as the unit's fused work."""
    how = userbuffers.overlapped(u.role, place, u.block) if overlap else None
    if how is None:
        u.attach(place, comm)
    elif comm.bytes > 0:
        u.fused.append(userbuffers.Fused(how[0], how[1], comm, peers))


def _sharing(
    units: Sequence[Unit], roles: Mapping[str, LayerRole]
) -> dict[tuple[int | None, str], list[str]]:
    """The column-parallel units of each block by input: Megatron's one GEMM of them (linear_qkv,
    linear_fc1), whose collectives the first of them carries."""
    sharing: dict[tuple[int | None, str], list[str]] = {}
    for u in units:
        if u.x.owner.moe is None and roles.get(u.name) is LayerRole.COLUMN:
            for a in u.x.owner.inputs:
                sharing.setdefault((u.block, a.name), []).append(u.name)
    return sharing


def _added_positions(units: list[Unit], roles: dict[str, LayerRole]) -> bool:
    """Whether a replicated embedding's output is added to the word embedding's, as learned
    positions and token types are (GPT-2, BERT): an embedding of the word embedding's output
    shape. T5's relative position biases ([1, heads, s, s], added to the attention scores) are
    not: Megatron-LM's T5 with relative positions builds LanguageModelEmbedding without position
    embeddings (add_position_embedding False), so its output is reduce-scattered under SP."""
    words = {
        u.x.owner.outputs[0].shape
        for u in units
        if roles.get(u.name) is LayerRole.EMBEDDING and u.x.owner.outputs
    }
    return any(
        u.x.owner.kind is Kind.EMBEDDING
        and u.name not in roles
        and u.x.owner.outputs  # a module the forward did not run has none (M804)
        and u.x.owner.outputs[0].shape in words
        for u in units
    )


def cross_entropy(units: list[Unit], tp: int, tokens: int = 1) -> None:
    """Megatron-LM's loss on logits split over the vocabulary: three all-reduces over the tensor
    group per micro-batch, each of one fp32 value per token (the logits are cast to fp32 first):
    the maximum logit, the target's logit and the sum of exponentials
    (megatron/core/tensor_parallel/cross_entropy.py, _VocabParallelCrossEntropy.forward and
    VocabParallelCrossEntropy.calculate_logits_max; the default, unfused loss: --cross-entropy-loss-
    fusion is off by default in megatron/training/arguments.py). Attached after the forward of the
    model's last layer when it is column-parallel, its logits split over the ranks (an LM head, a
    classifier); a row-parallel last layer all-reduced them, and a norm's output is whole."""
    last = units[-1] if units else None
    if tp == 1 or last is None or last.role is not LayerRole.COLUMN or not last.x.owner.outputs:
        return
    shape = last.x.owner.outputs[0].shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return
    per_token = dtypes.size_bytes(
        math.prod(int(d) for d in shape[:-1]) // tokens, dtypes.BY_NAME["float"].code
    )
    for _ in range(3):
        last.attach(Place.AFTER_FWD, Comm(CommType.ALLREDUCE, per_token, TENSOR))


def replicated_grads(units: list[Unit], tp: int, sp: bool) -> None:
    """Under SP the parameters every tensor rank holds whole (norms, MoE routers, a row-parallel
    layer's bias: share.whole) see 1/T of the sequence each, so their gradients are partial and
    are summed over the tensor group once per iteration (partial_grad_bytes). This is the rule of
    the frameworks outside Megatron's family (DeepSpeed's, FSDP's), not read from their sources:
    one all-reduce a transformer block, issued with the block's first such unit, whose gradient
    the backward finishes last, and one for each unit outside the blocks. Megatron's family
    issues one for the whole rank instead (finalized_grads)."""
    if not sp or tp == 1:
        return
    by_block: dict[int, tuple[Unit, int]] = {}
    for u in units:
        size = partial_grad_bytes(u)
        if not size:
            continue
        if u.block is None:
            u.attach(Place.TAIL, Comm(CommType.ALLREDUCE, size, TENSOR))
            continue
        first, total = by_block.get(u.block, (u, 0))
        by_block[u.block] = (first, total + size)
    for first, total in by_block.values():
        first.attach(Place.TAIL, Comm(CommType.ALLREDUCE, total, TENSOR))


def finalized_grads(units: Sequence[Unit], tp: int, sp: bool, ranks: Sequence[Sequence[int]]) -> None:
    """Megatron's family: under SP every partial gradient a rank holds (partial_grad_bytes), of
    all its model chunks, flattened into ONE all-reduce over the tensor group, after the last
    micro-batch's backward. `ranks`: per pipeline rank, the indices of the units it holds in
    forward order, its first chunk's first (the unit the backward finishes last) holding the
    all-reduce, issued after that unit's last weight gradient with its tails (Place.TAIL), after
    its data-parallel buckets (Megatron-Core's finish_grad_sync first; megatron-2022 and NeMo
    reduce the norms before their data-parallel reduction, not modelled: the lane's order alone)
    and, on a pipeline stage but the first, after the last backward's send (program.py,
    Pipeline.reduce_after_send), so that nothing but the optimizer step waits for it.

        Megatron-Core   megatron/core/distributed/finalize_model_grads.py at core_v0.14.0,
                        finalize_model_grads: model_chunk.finish_grad_sync() for every chunk, then
                        _allreduce_non_tensor_model_parallel_grads(model, config, tp_group): the
                        grads of every parameter with `sequence_parallel` set, of every chunk in
                        `model`, `coalesced = _flatten_dense_tensors(grads)`, one
                        torch.distributed.all_reduce over tp_group, in the gradient buffer's dtype
                        (main_grad); at core_r0.8.0 _allreduce_layernorm_grads, the same
                        coalesced all-reduce after finish_grad_sync. Parameters marked:
                        tensor_parallel/layers.py, RowParallelLinear.__init__,
                        `setattr(self.bias, "sequence_parallel", self.sequence_parallel)`;
                        Transformer Engine's norms and row-parallel Linear the same
                        (transformer_engine/pytorch/module/linear.py at d0067d0,
                        Linear.reset_parameters)
        megatron-2022   NVIDIA/Megatron-LM fc7f4f0 (2022-09-30), megatron/optimizer/optimizer.py,
                        MegatronOptimizer.reduce_model_grads -> allreduce_layernorm_grads: the
                        same one coalesced all-reduce over self.models, before the data-parallel one
        nemo            NVIDIA/NeMo r2.0.0rc1, megatron_gpt_model.py, MegatronGPTModel.training_step
                        -> allreduce_sequence_parallel_gradients (distributed_fused_adam, not Mcore's
                        optimizer): one coalesced all-reduce over every module of self.model, before
                        _finish_bucket_grad_sync

    Position embeddings see the whole sequence and are left alone, as Megatron leaves them; so
    are experts, whose tokens every rank of their tensor group gathers (Megatron marks no expert
    parameter `sequence_parallel`)."""
    if not sp or tp == 1:
        return
    for held in ranks:
        total = sum(partial_grad_bytes(units[i]) for i in held)
        if total:
            units[held[0]].attach(Place.TAIL, Comm(CommType.ALLREDUCE, total, TENSOR))


def partial_grad_bytes(u: Unit) -> int:
    """The bytes of a unit's gradients that SP leaves partial on each tensor rank (0: none)."""
    if u.role in (LayerRole.REPLICATED, LayerRole.ROUTER) and u.x.owner.kind is not Kind.EMBEDDING:
        return u.grad_bytes()
    if u.role is LayerRole.ROW and u.keeps(Role.BIAS):
        return u.x.group.bias_comm_bytes
    return 0


def check(ir: ModelIR, tp: int, sp: bool, option: str = "--tp") -> None:
    """Megatron-Core's refusals of a model split over T tensor ranks: the attention heads
    (check_heads), a Mamba mixer, and a mixture of experts without sequence parallelism
    (megatron/core/transformer/moe/moe_layer.py, MoELayer.forward: "During training, performance
    may degrade if MoE and tensor parallelism are enabled without also enabling sequence
    parallelism", a ValueError when the tensor group has more than one rank)."""
    check_heads(ir, tp, option)
    if tp == 1:
        return
    if any(x.op_type == "SelectiveScan" for x in ir.layers):
        raise LayoutError(
            f"{option} {tp}: a selective state-space (Mamba) mixer split over tensor ranks is not modelled "
            "(its conv1d, x_proj and scan shard by channel, which Megatron's MambaMixer does with "
            "collectives of its own)"
        )
    if sp and plans.styled(ir):
        whole = sorted(
            {str(x.tp_style) for x in ir.layers if (s := plans.of(x)) and (s.gather_output or s.split_input)}
        )
        if whole:
            raise LayoutError(
                f"--sp: the model's tensor-parallel plan gives whole activations ({', '.join(whole)}), "
                "which Megatron-LM splits with no sequence parallelism (ColumnParallelLinear.forward: "
                "gather_output asserts not sequence_parallel; RowParallelLinear: input_is_parallel must be "
                "True); transformers' plan runs without it"
            )
    if not sp and not plans.styled(ir) and any(x.moe is not None for x in ir.layers):
        raise LayoutError(
            f"{option} {tp}: a mixture of experts over tensor ranks needs --sp (Megatron-Core's MoELayer "
            "refuses to train without it: each tensor-parallel rank routes its own sequence shard)"
        )


def check_heads(ir: ModelIR, tp: int, option: str = "--tp") -> None:
    """Megatron-Core's rules for splitting attention over T ranks: each rank holds whole query heads
    and whole key/value groups. megatron/core/transformer/attention.py, Attention.__init__:
    `num_attention_heads_per_partition = divide(num_attention_heads, world_size)` and
    `num_query_groups_per_partition = divide(num_query_groups, world_size)` (divide asserts the
    division; dot_product_attention.py does the same). transformer_config.py alone would also let
    the groups divide T, but the attention modules refuse that. A model whose heads nothing
    records (an ONNX export) is not checked."""
    held = {id(x.block.heads): x.block.heads for x in ir.layers if x.block is not None and x.block.heads}
    heads = set(held.values())  # the blocks share their Heads (llm/build.py): hashed once each
    for h in sorted(heads, key=lambda h: (h.query, h.key_value)):
        if h.query % tp:
            raise LayoutError(
                f"{option} {tp}: the {h.query} attention heads must divide by it (Megatron-Core: "
                "num_attention_heads_per_partition = divide(num_attention_heads, world_size))"
            )
        if h.key_value % tp:
            raise LayoutError(
                f"{option} {tp}: the {h.key_value} key/value heads must divide by it (Megatron-Core: "
                "num_query_groups_per_partition = divide(num_query_groups, world_size))"
            )


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


def planned_roles(ir: ModelIR, owners: Sequence[IRLayer]) -> dict[str, LayerRole]:
    """The roles the model's own tensor-parallel plan gives (hf/plans.py): each layer it names
    gets its style's role, every other one is replicated (transformers' apply_tensor_parallelism
    touches only the plan's modules), but for the vocabulary pair the plan leaves out: the word
    embedding and the head on the vocabulary stay Megatron's VocabParallelEmbedding and output
    layer (a ColumnParallelLinear with parallel_output, its loss vocabulary-parallel:
    cross_entropy). transformers' own head plan (LlamaForCausalLM._tp_plan, lm_head:
    colwise_gather_output) gathers the logits whole for generation; a plan that names either
    layer wins. The head: a linear layer outside the blocks whose output is vocabulary wide."""
    vocabulary = max((_rows(o) for o in owners if o.kind is Kind.EMBEDDING), default=0)
    roles: dict[str, LayerRole] = {}
    for owner in owners:
        style = plans.of(owner)
        if style is not None:
            if style.role is not LayerRole.EXPERT:  # experts: expert parallelism's (expert.py)
                roles[owner.name] = style.role
        elif owner.kind is Kind.EMBEDDING and vocabulary and _rows(owner) == vocabulary:
            roles[owner.name] = LayerRole.EMBEDDING
        elif owner.kind in SHARDABLE and vocabulary and _width(owner) == vocabulary and _outside(owner):
            roles[owner.name] = LayerRole.COLUMN
    return roles


def _outside(layer: IRLayer) -> bool:
    """Whether a layer sits outside the blocks (a head: no block index)."""
    return layer.block is None or layer.block.index is None


def _width(layer: IRLayer) -> int:
    """The last dimension of a layer's output (a head's: the vocabulary)."""
    shape = layer.outputs[0].shape if layer.outputs else None
    return shape[-1] if shape and isinstance(shape[-1], int) else 0


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
