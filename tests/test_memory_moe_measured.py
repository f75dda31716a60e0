"""A MoE layer's stored bytes (strategy/llm/mlps.py `of`, activations.routing) held to what PyTorch
keeps: Megatron-Core's MoE layer at core_r0.10.0 transcribed op for op (megatron/core/transformer/
moe/router.py TopKRouter with aux_loss load balancing; moe_utils.py topk_softmax_with_capacity
without a capacity, permute, unpermute; token_dispatcher.py's alltoall path at EP 1; experts.py
SequentialMLP's experts with megatron/core/fusions/fused_bias_swiglu.py's SwiGLUFunction, which
saves its input alone), run in bf16 on the CPU, the bytes alive after its forward
(tests/livebytes.py) against the model's for the same configuration, read from a Mixtral
config.json.

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from modtrans.strategy.llm import activations  # noqa: E402
from tests import plans  # noqa: E402
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
    """MoELayer.forward at core_r0.10.0 for [tokens, h] input, its router and experts."""
    tokens = x.shape[0]
    logits = torch.nn.functional.linear(x, router)  # TopKRouter.gating
    scores, top_indices = torch.topk(logits, k=K, dim=1)  # topk_softmax_with_capacity, post-softmax
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).type_as(logits)
    probs = torch.zeros_like(logits).scatter(1, top_indices, probs)  # topk_masked_gates
    routing_map = torch.zeros_like(logits).int().scatter(1, top_indices, 1).bool()
    tokens_per_expert = routing_map.sum(dim=0)
    # aux_loss_load_balancing: the softmax over every expert for switch_load_balancing_loss_func
    every = torch.softmax(logits, dim=-1, dtype=torch.float32)
    aux_loss = torch.sum(every.sum(dim=0) * tokens_per_expert) * (E * 1e-2 / (tokens**2 * K))
    probs = probs + 0 * aux_loss  # MoEAuxLossAutoScaler.apply(probs, aux_loss): keeps the loss's graph
    by_expert = routing_map.T.contiguous()  # moe_utils.permute
    sorted_indices = torch.arange(tokens).unsqueeze(0).expand(E, -1).masked_select(by_expert)
    permuted = x.index_select(0, sorted_indices)
    output = torch.zeros_like(permuted)  # SequentialMLP: each expert on its tokens' rows
    start = 0
    for expert, count in enumerate(tokens_per_expert.tolist()):
        rows = permuted[start : start + count]
        inner = SwiGLUFunction.apply(torch.nn.functional.linear(rows, fc1[expert]))
        output[start : start + count] = torch.nn.functional.linear(inner, fc2[expert])
        start += count
    permuted_probs = probs.T.contiguous().masked_select(routing_map.T.contiguous())  # unpermute
    output = output * permuted_probs.unsqueeze(-1)
    combined = torch.zeros(tokens, H, dtype=output.dtype)
    return combined.scatter_add_(0, sorted_indices.unsqueeze(1).expand(-1, H), output)


def test_a_moe_layer_keeps_its_routed_copies_outputs_and_router_scores(tmp_path: Path) -> None:
    """After the MoE layer's forward PyTorch holds the routed copies of its input, each expert's
    SwiGLU input and output, the experts' outputs the probabilities multiply (2 k sbh in all,
    beside the experts' 3 k sbf), and for every expert the router's fp32 softmax, the dense
    probabilities unpermute's masked_select reads and its routing map (7 sbE): the model's bytes,
    but for the top-k indices and probabilities, under 32 bytes a routed copy."""
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

    d = plans.dims_of(tmp_path, MIXTRAL, (batch, seq))
    m = d.mlp(0)
    ours = activations.routing(d, m) + d.width * tokens * m.experts
    small = 32 * K * tokens  # the top-k indices and probabilities
    assert 0 <= measured - ours <= small, (measured, ours)
    # without the experts' kept outputs, or the router's scores, the model falls short
    assert measured - (ours - d.width * tokens * K * H) > small
    assert measured - (ours - 7 * tokens * E) > small
