"""Megatron-Core's --recompute-modules: what `--recompute-granularity selective` reruns, module by
module, mapped onto the IR's layers (NVIDIA/Megatron-LM core_r0.14.0; the choices and default
["core_attn"] are megatron/training/arguments.py's and TransformerConfig.__post_init__'s).

Two kinds of checkpoint (transformer_config.py's docstring of recompute_modules):
tensor_parallel.checkpoint keeps its input and reruns a whole module's forward before its backward,
collectives and all (core_attn, mlp, moe, shared_experts): `forwards`, the units of the module run
again; tensor_parallel.CheckpointWithoutOutput runs a function, frees its output's storage once
its consumer has run (discard_output_and_register_recompute) and computes it again when the
consumer's backward starts (moe_act, layernorm, mla_up_proj): `reruns`, compute alone.

    core_attn      attention.py, Attention: `self.checkpoint_core_attention` (recompute_granularity
                   selective and "core_attn" in recompute_modules): the scores, softmax and context
                   products (program.in_attention_core) rerun; their s^2 tensors, or FlashAttention's
                   statistics, not stored (Korthikanti et al. 2022, section 5).
    layernorm      transformer_layer.py, TransformerLayer.__init__: recompute_input_layernorm where
                   `not isinstance(self.input_layernorm, IdentityOp)`, recompute_pre_mlp_layernorm
                   where `not isinstance(self.pre_mlp_layernorm, IdentityOp)`. In Megatron-Core's
                   Transformer Engine spec (models/gpt/gpt_layer_specs.py,
                   get_gpt_layer_with_transformer_engine_spec) the input norm is a module of its own
                   only under multi-latent attention (else fused into TELayerNormColumnParallelLinear)
                   and the pre-MLP norm only in a MoE layer (`backend.layer_norm() if num_experts else
                   IdentityOp`): those norms rerun and their outputs (the hidden state normed, w sbh)
                   are not stored; elsewhere the module changes nothing.
    mla_up_proj    multi_latent_attention.py, MLASelfAttention.get_query_key_value_tensors:
                   qkv_up_proj_and_rope_apply under CheckpointWithoutOutput, its output discarded
                   after the core attention: the up projections of the latents and the rotary
                   embedding rerun; the decompressed Q, K and V not stored. Refused without
                   multi-latent attention (TransformerConfig: "mla_up_proj in recompute_modules is
                   only supported with multi_latent_attention").
    mlp            transformer_layer.py, _forward_mlp: `tensor_parallel.checkpoint(self.mlp, False,
                   pre_mlp_layernorm_output)` where the MLP is not a MoELayer: the dense MLP's
                   forward reruns (its tensor-parallel collectives too); its input (the normed
                   hidden state) and inner tensors not stored, the checkpoint's input is the norm's.
    moe            moe/moe_layer.py, MoELayer.forward: `tensor_parallel.checkpoint(custom_forward,
                   False, hidden_states)` (moe_layer_recompute): router, dispatch, experts, shared
                   experts and combine rerun, all-to-alls included; the router's probabilities, the
                   routed copies, the experts' and shared experts' tensors not stored.
    shared_experts moe_layer.py, experts_compute: `tensor_parallel.checkpoint(self.shared_experts,
                   False, residual)`: the shared experts' forward reruns; their inner tensors not
                   stored.
    moe_act        moe/experts.py, TEGroupedMLP.forward: bias_act_func (the activation, times the
                   routing probabilities) under CheckpointWithoutOutput, discarded after linear_fc2:
                   the experts' activation reruns; its output, the down projection's input, not
                   stored (Megatron requires --moe-grouped-gemm for it: the IR's experts are one
                   grouped GEMM).

A module the model lacks altogether (moe, moe_act, shared_experts without experts or shared
experts, mlp without a dense MLP, mla_up_proj without latents) is refused; layernorm and core_attn
never are (Megatron applies them where the modules exist).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from modtrans.ir.document import Kind, Layer, ModelIR, Part

CORE_ATTN, MOE_ACT, LAYERNORM, MLA_UP_PROJ, MLP, MOE, SHARED_EXPERTS = (
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
)  # fmt: skip
MODULES = (CORE_ATTN, MOE_ACT, LAYERNORM, MLA_UP_PROJ, MLP, MOE, SHARED_EXPERTS)  # arguments.py's order
DEFAULT = (CORE_ATTN,)  # TransformerConfig.__post_init__: `self.recompute_modules = ["core_attn"]`
FORWARDS = frozenset({MLP, MOE, SHARED_EXPERTS})  # tensor_parallel.checkpoint: a module's forward again


def blocks(ir: ModelIR) -> dict[int, list[Layer]]:
    """The transformer's blocks, each its layers in order."""
    out: dict[int, list[Layer]] = {}
    for x in ir.layers:
        if x.block is not None and x.block.index is not None:
            out.setdefault(x.block.index, []).append(x)
    return out


def _experts(members: list[Layer]) -> bool:
    return any(x.block is not None and x.block.part in (Part.EXPERT, Part.ROUTER) for x in members)


def _mlp_linears(members: list[Layer]) -> list[Layer]:
    """The dense MLP's linears (a MoE block's: its shared experts')."""
    return [x for x in members if x.kind is Kind.LINEAR and x.block is not None and x.block.part is Part.MLP]


def _up_projections(members: list[Layer]) -> list[Layer]:
    """Multi-latent attention's up projections: the attention's linears before its output
    projection that read a latent, not the hidden state (its first linear's input width)."""
    linears = [
        x for x in members if x.kind is Kind.LINEAR and x.gemm and x.block and x.block.part is Part.ATTENTION
    ]
    if not linears or linears[0].gemm is None:
        return []
    h = linears[0].gemm.k
    return [x for x in linears[:-1] if x.gemm is not None and x.gemm.k != h]


def lacks(ir: ModelIR, modules: Iterable[str]) -> str | None:
    """Why the model cannot take one of `modules` (the module's docstring), or None."""
    found = blocks(ir).values()
    has = {
        MLA_UP_PROJ: any(_up_projections(m) for m in found),
        MOE: any(_experts(m) for m in found),
        MOE_ACT: any(_experts(m) for m in found),
        SHARED_EXPERTS: any(_experts(m) and _mlp_linears(m) for m in found),
        MLP: any(not _experts(m) and _mlp_linears(m) for m in found),
    }
    what = {
        MLA_UP_PROJ: "multi-latent attention (Megatron: mla_up_proj needs multi_latent_attention)",
        MOE: "MoE layer",
        MOE_ACT: "routed experts",
        SHARED_EXPERTS: "shared experts",
        MLP: "dense MLP",
    }
    for module in modules:
        if not has.get(module, True):
            return f"--recompute-modules {module}: the model has no {what[module]}"
    return None


def _norms(members: list[Layer]) -> list[Layer]:
    """The block's norms that are modules of their own in Megatron-Core's Transformer Engine spec
    (layernorm in the module's docstring): the input norm under multi-latent attention, the
    pre-MLP norm before a MoE layer."""
    out = []
    first = members[0] if members else None
    if first is not None and first.kind is Kind.NORM and _up_projections(members):
        out.append(first)
    routed = next(
        (i for i, x in enumerate(members) if x.block and x.block.part in (Part.ROUTER, Part.EXPERT)), None
    )
    if routed is not None:
        before = [
            x for x in members[:routed] if x.kind is Kind.NORM and x.block and x.block.part is Part.NORM
        ]
        out.extend(before[-1:])
    return out


def reruns(ir: ModelIR, modules: Iterable[str], in_attention_core: Callable[[Layer], bool]) -> frozenset[str]:
    """The IR layers whose forward reruns alone before their unit's backward (compute only):
    core_attn's attention core (`in_attention_core`: program.py's, which this module cannot import:
    program -> draft -> the Layout -> here), layernorm's norms, mla_up_proj's up projections and
    rotary embedding, moe_act's experts' activation."""
    chosen = set(modules)
    names: set[str] = set()
    for members in blocks(ir).values():
        if CORE_ATTN in chosen:
            names |= {x.name for x in members if in_attention_core(x)}
        if LAYERNORM in chosen:
            names |= {x.name for x in _norms(members)}
        if MLA_UP_PROJ in chosen and (ups := _up_projections(members)):
            rotary = [
                x for x in members if x.block and x.block.part is Part.ATTENTION and "Rotary" in x.op_type
            ]
            names |= {x.name for x in (*ups, *rotary)}
        if MOE_ACT in chosen:
            names |= {
                x.name
                for x in members
                if x.kind is Kind.ELEMENTWISE and x.block and x.block.part is Part.EXPERT
            }
    return frozenset(names)


def reforwarded(ir: ModelIR, modules: Iterable[str]) -> dict[int, frozenset[str]]:
    """Per block, the IR layers owning the units whose forward (collectives and all) runs again
    before the module's backward: mlp's dense MLP, moe's router, experts and shared experts,
    shared_experts' shared experts (the module's docstring)."""
    chosen = set(modules) & FORWARDS
    out: dict[int, frozenset[str]] = {}
    for index, members in blocks(ir).items():
        moe = _experts(members)
        if moe and MOE in chosen:
            parts = (Part.ROUTER, Part.EXPERT, Part.MLP)
            names = {x.name for x in members if x.block and x.block.part in parts and x.kind is Kind.LINEAR}
        elif (moe and SHARED_EXPERTS in chosen) or (not moe and MLP in chosen):
            names = {x.name for x in _mlp_linears(members)}
        else:
            continue
        if names:
            out[index] = frozenset(names)
    return out
