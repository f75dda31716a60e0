"""A gated delta net's chunk recurrence recorded as one pass over the chunks (scans.py's rule for
a scan's Python loop, for the linear attention of Qwen3-Next, Qwen3.5, OLMo hybrid and their
copies).

transformers' torch_chunk_gated_delta_rule (models/qwen3_next/modeling_qwen3_next.py; the same
function in qwen3_5, qwen3_5_moe, olmo_hybrid, lara_mini, qwen4_exp) computes each 64-token
chunk's attention in parallel, then carries the recurrent state S from chunk to chunk in a Python
loop (`for i in range(num_chunks)`): four matmuls and four element-wise ops on one chunk per step,
the loop FLA's chunk_gated_delta_rule kernel runs on the GPU. On meta, every chunk's step is a
dispatch of the same ops and its own IR layers (Qwen3-Next's default at 8,192 tokens: 33,775
layers, 15 s). The one-pass form runs transformers' code up to the loop unchanged, then the step's
ops once over [batch, heads, chunks, ...] with S before each chunk an empty tensor of that shape:
the same matmul FLOPs (a chunk's product, batched over the chunks), the same element-wise
elements, the output in the loop's layout (zeros_like, written), the last state the last chunk's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from modtrans.hf.values import META


def on_meta(*tensors: Any) -> bool:
    """Whether every tensor among `tensors` is on meta: only then is a loop recorded in one pass
    (a call with real values runs transformers' own; scans.py's rules ask the same)."""
    return all(t.device == META for t in tensors if isinstance(t, torch.Tensor))


def l2norm(x: Any, dim: int = -1, eps: float = 1e-6) -> Any:
    """The modeling module's own l2norm (modeling_qwen3_next.py, FLA's): its two ops."""
    return x * torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def _chunked(original: Callable[..., Any], one_pass: Callable[..., Any]) -> Callable[..., Any]:
    """The rule both chunk loops are replaced by (their signatures are one, as transformers and its
    copies write them): `one_pass` on meta, transformers' own for any call off meta."""

    def rule(
        query: Any,
        key: Any,
        value: Any,
        g: Any,
        beta: Any,
        chunk_size: int = 64,
        initial_state: Any = None,
        output_final_state: bool = False,
        use_qk_l2norm_in_kernel: bool = False,
        **kwargs: Any,
    ) -> Any:
        if not on_meta(query, key, value, g, beta, initial_state):
            return original(
                query,
                key,
                value,
                g,
                beta,
                chunk_size=chunk_size,
                initial_state=initial_state,
                output_final_state=output_final_state,
                use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel,
                **kwargs,
            )
        return one_pass(query, key, value, g, beta, chunk_size, output_final_state, use_qk_l2norm_in_kernel)

    return rule


def gated_delta(original: Callable[..., Any], scope: Any) -> Callable[..., Any]:
    """torch_chunk_gated_delta_rule in one pass over its chunks (any call off meta runs
    transformers' own)."""
    return _chunked(original, _gated_pass)


def _gated_pass(
    query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int, final: bool, normed: bool
) -> Any:
    """torch_chunk_gated_delta_rule's chunk loop, every chunk at once."""
    initial_dtype = query.dtype
    batch_size, sequence_length = key.shape[:2]
    num_v_heads, v_head_dim = value.shape[-2:]
    query, key, new_values, k_cumdecay, intra_chunk_attn, chunk_decay = _chunks(
        query, key, value, g, beta, chunk_size, normed
    )
    core_attn_out = torch.zeros_like(new_values)
    # the loop's step, every chunk at once: S before chunk i, [batch, heads, chunks, k, v]
    state = new_values.new_empty((*new_values.shape[:3], key.shape[-1], v_head_dim))
    v_new = new_values - k_cumdecay @ state
    inter_chunk_attn = query @ state
    core_attn_out.copy_(inter_chunk_attn + intra_chunk_attn @ v_new)
    state = state * chunk_decay + key.transpose(-1, -2) @ v_new
    last_recurrent_state = state[:, :, -1] if final else None
    core_attn_out = core_attn_out.reshape(batch_size, num_v_heads, -1, v_head_dim)[:, :, :sequence_length]
    core_attn_out = core_attn_out.transpose(1, 2).to(initial_dtype, memory_format=torch.contiguous_format)
    return core_attn_out, last_recurrent_state


def _chunks(
    query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int, normed: bool
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """transformers' code up to the chunk loop, as written there: the decayed queries and keys,
    the UT transform's new values and decayed keys, the intra-chunk attention and each chunk's
    decay, [batch, heads, chunks, chunk, ...]."""
    _, sequence_length, num_k_heads, _ = key.shape
    num_v_heads = value.shape[-2]
    decay = g
    if num_k_heads != num_v_heads:
        query = query.repeat_interleave(num_v_heads // num_k_heads, dim=2)
        key = key.repeat_interleave(num_v_heads // num_k_heads, dim=2)
    query, key, value, beta, decay = [
        x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        for x in (query, key, value, beta, decay)
    ]
    if normed:
        query = l2norm(query, dim=-1, eps=1e-6)
        key = l2norm(key, dim=-1, eps=1e-6)
    query = query * query.shape[-1] ** -0.5
    pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad_size)) for x in (query, key, value))
    beta, decay = (F.pad(x, (0, pad_size)) for x in (beta, decay))
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, k_beta, v_beta = [
        x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1]) for x in (query, key, k_beta, v_beta)
    ]
    decay = decay.reshape(decay.shape[0], decay.shape[1], -1, chunk_size)
    upper = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).triu(1)
    cum_decay = decay.cumsum(dim=3)
    pairwise_decay = cum_decay.unsqueeze(4) - cum_decay.unsqueeze(3)
    pairwise_decay = pairwise_decay.masked_fill(upper, float("-inf"))
    pairwise_decay = pairwise_decay.exp()
    ut_system = (k_beta @ key.transpose(-1, -2)) * pairwise_decay
    intra_chunk_attn = (query @ key.transpose(-1, -2)) * pairwise_decay
    decayed_k_beta = k_beta * cum_decay.exp().unsqueeze(-1)
    new_values = torch.linalg.solve_triangular(ut_system, v_beta, upper=False, unitriangular=True)
    k_cumdecay = torch.linalg.solve_triangular(ut_system, decayed_k_beta, upper=False, unitriangular=True)
    query = query * cum_decay.exp().unsqueeze(-1)
    key = key * (cum_decay[..., -1:] - cum_decay).exp().unsqueeze(-1)
    chunk_decay = cum_decay[..., -1].exp()[..., None, None]
    return query, key, new_values, k_cumdecay, intra_chunk_attn, chunk_decay


def kimi_delta(original: Callable[..., Any], scope: Any) -> Callable[..., Any]:
    """chunk_kimi_delta_attention (models/kimi_linear/modeling_kimi_linear.py; its copies in
    bailing_hybrid and glm5_next): Kimi Delta Attention's chunk loop, its per-channel decay g, in
    one pass over the chunks as torch_chunk_gated_delta_rule's (any call off meta runs
    transformers' own)."""
    return _chunked(original, _kimi_pass)


def _kimi_pass(
    query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int, final: bool, normed: bool
) -> Any:
    """chunk_kimi_delta_attention's chunk loop, every chunk at once."""
    initial_dtype = query.dtype
    sequence_length = key.shape[1]
    query, key, value, g, k_cumdecay, decay_mask = _kimi_chunks(
        query, key, value, g, beta, chunk_size, normed
    )
    core_attn_out = torch.zeros_like(value)
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), diagonal=1)
    # the loop's step, every chunk at once: S before chunk i, [batch, heads, chunks, k, v]
    state = value.new_empty((*value.shape[:3], key.shape[-1], value.shape[-1]))
    attn_inter = (query * g.exp()) @ state
    attn_intra = (query.unsqueeze(-2) * key.unsqueeze(-3) * decay_mask).sum(dim=-1).masked_fill(mask, 0)
    v_new = value - k_cumdecay @ state
    core_attn_out.copy_(attn_inter + attn_intra @ v_new)
    state = (
        state * g[:, :, :, -1].exp().unsqueeze(-1)
        + (key * (g[:, :, :, -1:] - g).exp()).transpose(-1, -2) @ v_new
    )
    last_recurrent_state = state[:, :, -1] if final else None
    core_attn_out = core_attn_out.reshape(
        core_attn_out.shape[0], core_attn_out.shape[1], -1, core_attn_out.shape[-1]
    )
    core_attn_out = core_attn_out[:, :, :sequence_length]
    return core_attn_out.transpose(1, 2).contiguous().to(initial_dtype), last_recurrent_state


def _kimi_chunks(
    query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int, normed: bool
) -> tuple[Any, Any, Any, Any, Any, Any]:
    """chunk_kimi_delta_attention's code up to its chunk loop, as written there: the chunked
    queries, keys, UT-transformed values, cumulative decays, decayed keys and intra-chunk decay
    mask, [batch, heads, chunks, chunk, ...]."""
    query, key, value, beta, g = [
        x.transpose(1, 2).contiguous().to(torch.float32) for x in (query, key, value, beta, g)
    ]
    if normed:
        query = l2norm(query, dim=-1, eps=1e-6)
        key = l2norm(key, dim=-1, eps=1e-6)
    sequence_length = key.shape[2]
    scale = 1 / (query.shape[-1] ** 0.5)
    pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size
    query = F.pad(query, (0, 0, 0, pad_size)) * scale
    key = F.pad(key, (0, 0, 0, pad_size))
    value = F.pad(value, (0, 0, 0, pad_size))
    g = F.pad(g, (0, 0, 0, pad_size))
    beta = F.pad(beta, (0, pad_size))
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, value, g, k_beta, v_beta = [
        x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1])
        for x in (query, key, value, g, k_beta, v_beta)
    ]
    g = g.cumsum(dim=-2)
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), diagonal=0)
    strict_mask = torch.triu(
        torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), diagonal=1
    )
    decay_mask = (
        (g.unsqueeze(-2) - g.unsqueeze(-3)).masked_fill(strict_mask[..., None], float("-inf")).exp().float()
    )
    attn = -(k_beta.unsqueeze(-2) * key.unsqueeze(-3) * decay_mask).sum(dim=-1).masked_fill(mask, 0)
    for i in range(1, chunk_size):  # the forward substitution: chunk_size steps, whatever the length
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    attn = attn + torch.eye(chunk_size, dtype=attn.dtype, device=attn.device)
    value = attn @ v_beta
    k_cumdecay = attn @ (k_beta * g.exp())
    return query, key, value, g, k_cumdecay, decay_mask
