"""A mixture read through transformers (modtrans/hf/) stores, holds and places its experts as the
built model's modules say, in the families whose experts the activation model and expert
parallelism read otherwise before: experts run as a bmm over [E, tokens, h] (Llama 4: each on
its routed tokens, as a training framework runs them), layers run more than once a forward
(Inkling 2 loop; ALBERT's shared block), heads given per layer (Dots3 Note), an attention class
not named Attention (LongCat-Flash's MLA), a router with an MLP of its own and scores beyond E
(Zaya, LongCat-Flash), attention experts (JetMoE), an [E x f, h] weight run an expert at a time
(DBRX). Each against the configuration's numbers and transformers' modeling files, and the
parameters and FLOPs still transformers' own (hfcheck.agrees: dense experts at their routed run).
tools/hf_moe_marks.py holds every MoE family transformers defines to the same reading.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.comm import CommType
from modtrans.hf import classes, library
from modtrans.ir.document import Gemm, Kind, Part
from modtrans.plan import Collective
from modtrans.plan.model import Compute, Recompute, Step
from modtrans.strategy.llm import Layout, activations
from tests import plans
from tests.hfcheck import GEMMS, agrees
from tests.test_hf_moe_marks import FIXTURES, _moe_blocks, _read

pytestmark = pytest.mark.hf

TOKENS = 8  # _read's sequence, one sample


def _text(config: Any) -> Any:
    return config.get_text_config()


def _llama4(layers: int = 2) -> Any:
    """Llama 4's default configuration (Llama-4-Scout's sizes: E 16, top-1, h 5120, f 8192), its
    first `layers` text layers."""
    config = classes.default_config("llama4")
    text = _text(config)
    text.num_hidden_layers = layers
    text.layer_types = text.layer_types[:layers]
    return config


ROUTED = 32  # a sequence of tokens x top-k a multiple of Llama 4's 16 experts (2 rows each)


def test_a_bmm_over_the_experts_is_each_experts_gemm_on_its_routed_tokens() -> None:
    """Llama4TextExperts (modeling_llama4.py) views its input as [E, tokens, h] and runs
    bmm(hidden, gate_up_proj [E, h, 2 f]) and bmm(., down_proj [E, f, h]) on every token
    (Llama4TextMoe's routed_in = hidden.repeat(E, 1)): each expert's GEMM is [rows, h] x [h, 2 f]
    on its routed tokens, rows = tokens x k / E (Megatron-Core's GroupedMLP, torchtitan's
    grouped_mm), not one of N = tokens x 2 f nor one of every token; its stored width per routed
    token the gated 3 f."""
    config = _llama4()
    _, _, ir = _read(config, ROUTED)
    text = _text(config)
    e, h, f, k = text.num_local_experts, text.hidden_size, text.intermediate_size, text.num_experts_per_tok
    rows = ROUTED * k // e
    assert rows * e == ROUTED * k
    dims = activations.dims(ir, 1)
    assert dims is not None
    sparse = _moe_blocks(ir)
    assert sparse
    for index, xs in sparse.items():
        gemms = {x.name.rsplit(".", 1)[-1]: x.gemm for x in xs if x.block.part is Part.EXPERT and x.gemm}
        assert gemms["gate_up_proj"] == Gemm(rows, h, 2 * f, e)
        assert gemms["down_proj"] == Gemm(rows, f, h, e)
        assert dims.mlps[index].experts == k * 3 * f


def test_experts_run_densely_by_transformers_cost_the_routed_run() -> None:
    """Transformers' FlopCounterMode counts Llama4TextExperts' two bmm over all E experts on every
    token, 2 x tokens x E x (h x 2 f + f x h); a training framework runs each token on its k experts
    only (Megatron-Core megatron/core/transformer/moe/experts.py, GroupedMLP and TEGroupedMLP:
    grouped GEMMs over tokens_per_expert; torchtitan's MoE: torch._grouped_mm over the routed
    tokens), k / E of it. The IR's expert FLOPs are that, from the configuration; every other
    layer's FLOPs are transformers' own count of the model without its experts modules; the
    experts' tensors are the routed tokens' (tokens x k rows, 2 f and f and h wide); the
    parameters are the model's."""
    config = _llama4()
    model, given, ir = _read(config, ROUTED)
    text = _text(config)
    e, h, f, k = text.num_local_experts, text.hidden_size, text.intermediate_size, text.num_experts_per_tok
    dense = 2 * ROUTED * e * (h * 2 * f + f * h)  # per MoE block, from the configuration
    sparse = _moe_blocks(ir)
    experts = [x for xs in sparse.values() for x in xs if x.block.part is Part.EXPERT]
    linears = [x for x in experts if x.kind is Kind.LINEAR]
    assert sum(x.flops.forward for x in linears) == len(sparse) * dense * k // e
    counted = library.count_modules(model, given)
    name = type(model).__name__
    paths = [n for n, m in model.named_modules() if type(m).__name__ == "Llama4TextExperts"]
    theirs = [counted[f"{name}.{p}"] for p in paths]
    assert theirs == [dense] * len(sparse)  # transformers' dense count, as the configuration says
    rest = library.count_forward(model, given) - sum(theirs)
    ours = sum(x.flops.forward for x in ir.layers if x.kind in GEMMS and x not in linears)
    assert abs(ours - rest) <= 0.02 * rest, (ours, rest)
    agrees(model, given, ir)  # hfcheck: the dense experts counted at k / E
    width = {"bfloat16": 2, "float16": 2}.get(str(text.dtype).removeprefix("torch."), 4)
    for x in linears:
        n = x.gemm.n if x.gemm else 0
        assert [a.shape for a in x.outputs] == [(ROUTED * k, n)]
        assert [a.bytes for a in x.outputs] == [ROUTED * k * n * width]
    # Llama4TextMoe's own ops: hidden.repeat(E, 1) weighted by the scores, the experts' sum over E;
    # a framework's permute and unpermute of the tokens x k routed (Megatron-Core's moe_utils)
    moe = [x for x in ir.layers if x.node.endswith(".feed_forward") and x.moe is None]
    assert {x.name.rsplit(".", 1)[-1] for x in moe} >= {"mul", "sum"}
    for x in moe:
        for a in (*x.inputs, *x.outputs):
            assert a.shape is not None
            rows = math.prod(int(d) for d in a.shape[:-1])
            assert rows in (ROUTED, ROUTED * k), (x.name, a.shape)


def test_dense_run_experts_split_over_the_expert_ranks(tmp_path: Path) -> None:
    """Under --ep 2 Llama 4's experts read as the routed run are still 1 / E_p of the experts a
    rank (gate_up_proj and down_proj, [E, ...] each: half of them held), each rank computes its
    E / E_p experts on the tokens every rank routes to them (k x tokens rows in all: the IR's
    routed FLOPs of one micro-batch, the experts' activation and product folded in), and the
    dispatch and combine all-to-alls move tokens x k x h x bytes (Megatron-Core's
    MoEAlltoAllTokenDispatcher), as before."""
    config = _llama4()
    text = _text(config)
    e, h, f, k = text.num_local_experts, text.hidden_size, text.intermediate_size, text.num_experts_per_tok
    model = library.build(config)
    total, experts = _split(model, ".experts.")
    assert experts == 2 * e * 3 * h * f  # two MoE blocks of E gated experts
    assert _rank_parameters(config, tmp_path, 2, ROUTED) == total - experts // 2
    width = {"bfloat16": 2, "float16": 2}.get(str(text.dtype).removeprefix("torch."), 4)
    path = plans.config(tmp_path, config.to_dict())
    plan = plans.plan(path, Layout(npus=2, dp=2, ep=2, global_batch=2, micro_batch=1), (1, ROUTED))
    program = plan.program(0)
    a2a = [op for op in program if isinstance(op, Collective) and op.comm is CommType.ALLTOALL]
    assert a2a
    assert {c.bytes for c in a2a} == {ROUTED * k * h * width}
    forward = [
        op
        for op in program
        if isinstance(op, Compute)
        and op.step is Step.FWD
        and plan.layers[op.layer].name.rsplit(".", 1)[-1] in ("gate_up_proj", "down_proj")
        and ".experts." in plan.layers[op.layer].name
    ]
    _, _, ir = _read(config, ROUTED)
    routed = [x for x in ir.layers if x.block and x.block.part is Part.EXPERT]
    assert sum(op.flops for op in forward) == sum(x.flops.forward for x in routed)
    linears = sum(x.flops.forward for x in routed if x.kind is Kind.LINEAR)
    assert linears == 2 * 2 * ROUTED * k * 3 * h * f  # two blocks' routed GEMMs


def test_a_looped_layer_stores_each_pass() -> None:
    """Inkling2LoopTextModel.forward runs layers loop_layer_index_start .. end - 1 loop_num_passes
    times (modeling_inkling2_loop.py), each pass keeping its own tensors for the backward: a looped
    block stores loop_num_passes times its terms (its attention's, norms' and experts'), the others
    once; a pass's experts k x 3 f a token (f the experts' moe_intermediate_size, gated)."""
    config = classes.default_config("inkling2_loop")
    _, _, ir = _read(config)
    text = _text(config)
    k, f, passes = text.num_experts_per_tok, text.moe_intermediate_size, text.loop_num_passes
    looped = range(text.loop_layer_index_start, text.loop_layer_index_end)
    dims = activations.dims(ir, 1)
    assert dims is not None
    assert dims.passes == dict.fromkeys(looped, passes)
    sparse = _moe_blocks(ir)
    assert set(looped) < set(sparse)
    for index in sparse:
        assert dims.mlps[index].experts == k * 3 * f, index
    once = dataclasses.replace(dims, passes={})
    for index in looped:
        stored = activations.layer(dims, index, 1, False, Recompute.NONE, activations.FLASH, 1)
        one = activations.layer(once, index, 1, False, Recompute.NONE, activations.FLASH, 1)
        assert stored == passes * one


def test_heads_given_per_layer_are_each_blocks() -> None:
    """Dots3NoteTextConfig holds num_attention_heads per layer (per_layer_config: transformers'
    heterogeneity refuses the global value): each block's attention has its own layer's heads, and
    the model's activations are read (they were not: no heads, no attention)."""
    config = classes.default_config("dots3_note")
    _, _, ir = _read(config)
    text = _text(config)
    per_layer = text.per_layer_config
    heads = {
        x.block.index: x.block.heads
        for x in ir.layers
        if x.block and x.block.heads and x.block.index is not None
    }
    assert sorted(heads) == list(range(text.num_hidden_layers))
    assert {i: (h.query, h.key_value) for i, h in heads.items()} == {
        i: (per_layer[i].num_attention_heads, per_layer[i].num_key_value_heads) for i in heads
    }
    assert len({h.query for h in heads.values()}) > 1  # the layers differ
    dims = activations.dims(ir, 1)
    assert dims is not None
    for index in _moe_blocks(ir):
        assert dims.mlps[index].experts == text.num_experts_per_tok * 3 * text.moe_intermediate_size


def test_a_router_beyond_e_and_an_mla_class_are_read() -> None:
    """LongCat-Flash: LongcatFlashMLA is its attention (a class named for MLA alone), with the
    configuration's heads; LongcatFlashTopkRouter's classifier scores n_routed_experts +
    zero_expert_num (the zero experts compute nothing) and is the router; the experts store k x 3 f."""
    config = classes.default_config("longcat_flash")
    _, _, ir = _read(config)
    e, k, f = config.n_routed_experts, config.num_experts_per_tok, config.expert_ffn_hidden_size
    attention = [x for x in ir.layers if x.block and x.block.part is Part.ATTENTION and x.block.index == 0]
    assert attention
    heads = {x.block.heads.query for x in attention if x.block and x.block.heads}
    assert heads == {config.num_attention_heads}
    dims = activations.dims(ir, 1)
    assert dims is not None
    for index, xs in _moe_blocks(ir).items():
        routers = [x for x in xs if x.block.part is Part.ROUTER]
        assert [x.gemm.n for x in routers if x.gemm] == [e + config.zero_expert_num]
        assert {x.moe.experts for x in xs if x.moe} == {e}
        assert dims.mlps[index].experts == k * 3 * f


def test_a_router_with_an_mlp_of_its_own_is_the_router() -> None:
    """ZayaRouter (modeling_zaya.py) runs down_proj, then ZayaRouterMLP's fc1, fc2 and out_proj
    (num_experts + 1 scores: a skip expert): all its linears are the router's (replicated over the
    tensor ranks, seeing every token), none the block's dense MLP; the block has no other MLP than
    its experts (ZayaExperts: gate_up_proj [E, 2 f, h], f moe_intermediate_size; k x 3 f a token)."""
    config = classes.default_config("zaya")
    model, given, ir = _read(config)
    agrees(model, given, ir)
    e, k, f = config.num_experts, config.num_experts_per_tok, config.moe_intermediate_size
    dims = activations.dims(ir, 1)
    assert dims is not None
    sparse = _moe_blocks(ir)
    assert sparse
    for index, xs in sparse.items():
        gate = [x for x in xs if x.kind is Kind.LINEAR and ".mlp.gate." in f"{x.node}."]
        assert sorted(x.node.rsplit(".", 1)[-1] for x in gate) == ["down_proj", "fc1", "fc2", "out_proj"]
        assert {x.block.part for x in gate} == {Part.ROUTER}
        assert {(x.moe.experts, x.moe.top_k, x.moe.expert) for x in gate if x.moe} == {(e, k, None)}
        assert dims.mlps[index].inner == 0
        assert dims.mlps[index].experts == k * 3 * f


def _rank_parameters(config: Any, tmp_path: Path, ep: int, tokens: int = TOKENS) -> int:
    """Parameters rank 0 holds with the experts over `ep` data ranks (plan.memory)."""
    path = plans.config(tmp_path, config.to_dict())
    layout = Layout(npus=ep, dp=ep, ep=ep, global_batch=ep, micro_batch=1)
    plan = plans.plan(path, layout, (1, tokens))
    return plan.memory[0].parameters


def _split(model: Any, routed: str) -> tuple[int, int]:
    """(the model's parameters, those of its routed experts: under a module path matching `routed`)."""
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if routed in n)
    return total, experts


def test_attention_experts_are_the_attentions(tmp_path: Path) -> None:
    """JetMoE: JetMoeMoA (self_attention.experts: input_linear and output_linear [E, ...], a query
    and an output projection per expert over the shared kv_proj, modeling_jetmoe.py) is the
    attention's, with the configuration's heads, not a routed MLP: under --ep 2 each rank holds it
    whole and half the MLP's experts (JetMoeMoE: mlp.input_linear, mlp.output_linear), whose
    router (mlp.router.layer) is the block's only one; the experts store k x 3 f (a GLU:
    input_linear 2 f wide), the attention the k copies of its input its experts read."""
    config = classes.default_config("jetmoe")
    config.num_hidden_layers = 2
    model, given, ir = _read(config)
    agrees(model, given, ir)
    e, k, f = config.num_local_experts, config.num_experts_per_tok, config.intermediate_size
    dims = activations.dims(ir, 1)
    assert dims is not None
    for index, xs in _moe_blocks(ir).items():
        moa = [x for x in xs if ".self_attention." in x.node]
        assert moa
        assert {x.block.part for x in moa if x.kind is Kind.LINEAR} == {Part.ATTENTION}
        assert all(x.moe is None for x in moa)
        assert [x.node for x in xs if x.block.part is Part.ROUTER] == [
            f"model.layers.{index}.mlp.router.layer"
        ]
        up = next(x for x in moa if x.node.endswith("experts.input_linear"))
        assert up.gemm is not None
        assert up.gemm.m * up.gemm.groups == TOKENS * k  # balanced: tokens x k rows over E experts
        assert dims.mlps[index].experts == k * 3 * f
    # JetMoeMoA.map gathers each token's input for its k experts, kept by input_linear: k h a token
    assert dims.copies == k
    total, experts = _split(model, ".mlp.")
    experts -= sum(p.numel() for n, p in model.named_parameters() if ".mlp.router." in n or ".mlp.bias" in n)
    assert _rank_parameters(config, tmp_path, 2) == total - experts // 2
    assert e % 2 == 0


def test_fused_rows_of_experts_split_over_the_expert_ranks(tmp_path: Path) -> None:
    """DBRX's w1, v1 and w2 are each one [E x ffn_hidden_size, d_model] parameter (DbrxExperts,
    modeling_dbrx.py), run an expert at a time on its rows: each expert's layer holds its 1 / E
    (ffn_config.moe_num_experts), the model's count unchanged, and --ep 4 holds a quarter of them
    on a rank (was: the whole on each)."""
    data = json.loads((FIXTURES / "testers" / "dbrx.json").read_text())
    config = classes.config_of(data)
    model, given, ir = _read(config)
    agrees(model, given, ir)
    e = config.ffn_config.moe_num_experts
    f, h = config.ffn_config.ffn_hidden_size, config.d_model
    runs = [x for x in ir.layers if x.node.endswith("ffn.experts.mlp") and x.params]
    assert {x.params[0].shape for x in runs} == {(f, h)}
    assert len(runs) == 3 * e * config.n_layers
    total, experts = _split(library.build(config), ".experts.")
    assert experts == 3 * e * f * h * config.n_layers
    assert _rank_parameters(config, tmp_path, 4) == total - experts + experts // 4


def test_a_layer_shared_by_the_forward_stores_each_run() -> None:
    """AlbertTransformer.forward runs its num_hidden_groups groups' layers num_hidden_layers /
    num_hidden_groups times each (modeling_albert.py: group_idx = int(i / (num_hidden_layers /
    num_hidden_groups)) for i < num_hidden_layers), the same class as a looped layer: ALBERT's one
    block stores num_hidden_layers times its terms."""
    config = classes.default_config("albert")
    _, _, ir = _read(config)
    dims = activations.dims(ir, 1)
    assert dims is not None
    groups = config.num_hidden_groups
    assert dims.passes == dict.fromkeys(range(groups), config.num_hidden_layers // groups)


def test_a_router_with_an_mlp_of_its_own_dispatches_the_hidden_state(tmp_path: Path) -> None:
    """Under --ep 2 Zaya's dispatch and combine all-to-alls move each token's hidden state to its
    k experts, tokens x k x hidden_size x bytes (expert.py, as Megatron-Core's
    MoEAlltoAllTokenDispatcher), not the router MLP's router_hidden_size state its scores come from."""
    data = classes.default_config("zaya").to_dict()
    data.update(num_hidden_layers=2, layer_types=data["layer_types"][:2])
    config = classes.config_of(data)
    width = {"bfloat16": 2, "float16": 2}.get(str(config.dtype).removeprefix("torch."), 4)
    path = plans.config(tmp_path, config.to_dict())
    plan = plans.plan(path, Layout(npus=2, dp=2, ep=2, global_batch=2, micro_batch=1), (1, TOKENS))
    a2a = [op for op in plan.program(0) if isinstance(op, Collective) and op.comm is CommType.ALLTOALL]
    assert a2a
    assert {c.bytes for c in a2a} == {TOKENS * config.num_experts_per_tok * config.hidden_size * width}
