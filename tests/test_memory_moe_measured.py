"""A MoE layer's stored bytes (strategy/llm/mlps.py `of`, activations.routing) held to what PyTorch
keeps: Megatron-Core's MoE layer at core_r0.8.0 transcribed op for op (megatron/core/transformer/
moe/router.py TopKRouter with aux_loss load balancing; moe_utils.py topk_softmax_with_capacity
without a capacity, permute, unpermute; token_dispatcher.py's alltoall path at EP 1; experts.py
SequentialMLP's experts with megatron/core/fusions/fused_bias_swiglu.py's SwiGLUFunction, which
saves its input alone), run in bf16 on the CPU, the bytes alive after its forward
(tests/livebytes.py) against the model's for the same configuration, read from a Mixtral
config.json.

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from modtrans import pipeline  # noqa: E402
from modtrans.strategy.llm import activations  # noqa: E402
from tests.livebytes import Live  # noqa: E402

pytestmark = pytest.mark.hf

H, F, E, K = 256, 512, 64, 2  # hidden, an expert's MLP width, experts, experts a token goes to
MIXTRAL = {
    "model_type": "mixtral", "torch_dtype": "bfloat16", "hidden_size": H, "intermediate_size": F,
    "num_local_experts": E, "num_experts_per_tok": K, "num_attention_heads": 4,
    "num_key_value_heads": 4, "num_hidden_layers": 1, "vocab_size": 128,
    "max_position_embeddings": 1024,
}  # fmt: skip


class SwiGLUFunction(torch.autograd.Function):  # type: ignore[misc,name-defined]
    """fused_bias_swiglu.py's: saves the input (the gate and up halves), returns silu(a) * b."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        a, b = torch.chunk(x, 2, dim=-1)
        return torch.nn.functional.silu(a) * b

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:  # pragma: no cover - the test runs the forward only
        raise NotImplementedError


def _megatrons_moe_layer(x: Any, router: Any, fc1: list[Any], fc2: list[Any]) -> Any:
    """MoELayer.forward at core_r0.8.0 for [tokens, h] input, its router and experts."""
    logits = torch.nn.functional.linear(x, router)  # TopKRouter.gating
    scores, top_indices = torch.topk(logits, k=K, dim=1)  # topk_softmax_with_capacity, post-softmax
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    tokens_per_expert = torch.bincount(top_indices.view(-1), minlength=E)
    # aux_loss_load_balancing: the softmax over every expert for switch_load_balancing_loss_func
    every = torch.softmax(logits, dim=-1, dtype=torch.float32)
    aux_loss = torch.sum(every.sum(dim=0) * tokens_per_expert) * (E * 1e-2 / (x.shape[0] ** 2 * K))
    probs = probs + 0 * aux_loss  # MoEAuxLossAutoScaler.apply(probs, aux_loss): keeps the loss's graph
    sorted_indices = torch.argsort(top_indices.view(-1), stable=True)  # moe_utils.permute
    permuted = x.index_select(0, sorted_indices // K)
    output = torch.zeros_like(permuted)  # SequentialMLP: each expert on its tokens' rows
    start = 0
    for expert, count in enumerate(tokens_per_expert.tolist()):
        rows = permuted[start : start + count]
        inner = SwiGLUFunction.apply(torch.nn.functional.linear(rows, fc1[expert]))
        output[start : start + count] = torch.nn.functional.linear(inner, fc2[expert])
        start += count
    unpermuted = torch.zeros_like(output)  # moe_utils.unpermute
    unpermuted.index_copy_(0, sorted_indices, output)
    unpermuted = unpermuted.reshape(-1, K, H) * probs.unsqueeze(-1)
    return unpermuted.sum(dim=1)


def test_a_moe_layer_keeps_its_routed_copies_outputs_and_router_scores(tmp_path: Path) -> None:
    """After the MoE layer's forward PyTorch holds the routed copies of its input, each expert's
    SwiGLU input and output, the experts' outputs twice (the source unpermute's index_copy_
    saves, the copy the probabilities multiply: 3 k sbh in all, beside the experts' 3 k sbf) and
    the router's fp32 softmax over every expert (4 sbE): the model's bytes, but for the top-k
    indices and probabilities, under 32 bytes a routed copy."""
    batch, seq = 2, 512
    tokens = batch * seq
    torch.manual_seed(0)
    x = torch.randn(tokens, H, dtype=torch.bfloat16, requires_grad=True)
    router = torch.randn(E, H, dtype=torch.bfloat16, requires_grad=True)
    fc1 = [torch.randn(2 * F, H, dtype=torch.bfloat16, requires_grad=True) for _ in range(E)]
    fc2 = [torch.randn(H, F, dtype=torch.bfloat16, requires_grad=True) for _ in range(E)]
    live = Live([x, router, *fc1, *fc2])
    with live:
        y = _megatrons_moe_layer(x, router, fc1, fc2)
    assert y.shape == x.shape
    measured = live.live - y.untyped_storage().nbytes()  # beside the layer's output

    written = tmp_path / "config.json"
    written.write_text(json.dumps(MIXTRAL))
    ir, found = pipeline.extract_checked(written, input_shapes={"input_ids": (batch, seq)})
    assert ir is not None, [d.message for d in found]
    d = activations.dims(ir, batch)
    assert d is not None
    m = d.mlp(0)
    ours = activations.routing(d, m) + d.width * tokens * m.experts
    assert 0 <= measured - ours <= 32 * K * tokens, (measured, ours)
    # without either copy of the experts' outputs, or the router's scores, the model falls short
    assert measured - (ours - d.width * tokens * K * H) > 32 * K * tokens
    assert measured - (ours - 4 * tokens * E) > 32 * K * tokens
