"""A recurrent model's reference scan recorded as one pass over the sequence, not a step per token.

Without its fused kernel (mamba-ssm's selective_scan_fn, RWKV's wkv CUDA kernel) or off CUDA,
transformers runs a linear recurrence h_t = a_t * h_(t-1) + b_t as a Python loop, one token a
step, the same few ops on the same shapes per step:

    mamba_selective_scan        transformers/models/mamba/modeling_mamba.py (and its copies in
                                falcon_mamba, jamba, zamba): `for index in range(seq_len)`, a
                                multiply and an add on [batch, inner, state], a matmul by C_t
    RecurrentGemmaRglru._rnn_scan   models/recurrent_gemma/modeling_recurrent_gemma.py: a
                                multiply and an add on [batch, width] per token
    rwkv_linear_attention_cpu   models/rwkv/modeling_rwkv.py: the wkv recurrence's 14
                                element-wise ops on [batch, hidden] per token
    mlstm_chunkwise_recurrent_fw_C  models/xlstm/modeling_xlstm.py: the mLSTM's states carried
                                from one 64-token chunk to the next, a loop over the chunks
    torch_chunk_gated_delta_rule    models/qwen3_next/modeling_qwen3_next.py and its copies: a
                                gated delta net's state carried from chunk to chunk (deltas.py)
    chunk_kimi_delta_attention  models/kimi_linear/modeling_kimi_linear.py and its copies: Kimi
                                Delta Attention's, likewise (deltas.py)

On meta every step computes shapes only, and L steps dispatch L times the step's ops (Zamba's
default at 2,048 tokens: ~4 million ops, 152 s), each step its own IR layers. While the forward is
recorded (library.record), each of these functions, called on meta operands, runs its step's ops
once on the whole sequence: the state read at step t, h_(t-1), is an empty meta tensor of the
states' shape (meta has no values to carry; made like an operand whose value is unknown, so
values.py gives it none), so each op covers L steps' elements, the matmul by C
is one batched product over the L steps (the same FLOPs: flop_registry counts 2·b·d·n per step,
2·b·L·d·n at once; transformers' own parallel branch, `use_mambapy`, forms it the same way), and
the outputs (the scan's, the last state) have the loop's shapes and dtypes. The IR then holds the
scan as one element-wise group and one matmul per call: the loop's element-wise work charged as one
memory-bound kernel group, as the fused kernel runs it.

Any other call (a tensor off meta, one token, a state handed in) runs transformers' own code.
FlopCounterMode's check (library.count_forward) runs the loops unchanged: the independent count.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F

from modtrans.hf.deltas import gated_delta, kimi_delta, on_meta

Scope = Callable[[str], AbstractContextManager[None]]
"""The recording's module stack entered under a name (library.record's: its ops' module path)."""
Form = Callable[[Callable[..., Any], Scope], Callable[..., Any]]


def mamba(original: Callable[..., Any], scope: Scope) -> Callable[..., Any]:
    """mamba_selective_scan (modeling_mamba.py): the discretisation as transformers writes it, the
    recurrence's multiply and add over [batch, inner, L, state] and the output's matmul by C over
    the L steps as one batched product (its `use_mambapy` branch's `all_states @ C.unsqueeze(-1)`),
    these two recorded under MIXER.selective_scan: the scan's own layers, as the fused kernel is
    one, apart from the discretisation's (which reads the parameter A)."""

    def scan(
        hidden_states: Any,
        dt: Any,
        A: Any,
        B: Any,
        C: Any,
        D: Any = None,
        z: Any = None,
        delta_bias: Any = None,
        delta_softplus: bool = False,
        return_last_state: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if args or not on_meta(hidden_states, dt, A, B, C, D, z, delta_bias):
            return original(
                hidden_states,
                dt,
                A,
                B,
                C,
                D,
                z,
                delta_bias,
                delta_softplus,
                return_last_state,
                *args,
                **kwargs,
            )
        input_dtype = hidden_states.dtype
        if delta_bias is not None:
            dt = dt + delta_bias.to(dt.dtype)[..., None]
        if delta_softplus:
            dt = F.softplus(dt)
        B = B.transpose(1, 2)
        C = C.transpose(1, 2)
        discrete_A = torch.exp(A[None, :, None, :] * dt[:, :, :, None])
        discrete_B = dt[:, :, :, None] * B[:, None, :, :].float()
        deltaB_u = discrete_B * hidden_states[:, :, :, None].float()
        with scope("selective_scan"):
            previous = torch.empty_like(deltaB_u)  # h_(t-1), every t: no value (values.py)
            states = discrete_A * previous + deltaB_u  # [batch, inner, L, state]
            scan_output = torch.matmul(states.transpose(1, 2).to(input_dtype), C.unsqueeze(-1))
            scan_output = scan_output.squeeze(-1).transpose(1, 2).contiguous()  # torch.stack's layout
        if D is not None:
            scan_output = scan_output + hidden_states * D[None, :, None]
        if z is not None:
            scan_output = scan_output * F.silu(z)
        if return_last_state:
            return scan_output, states[:, :, -1]
        return scan_output

    return scan


def rglru(original: Callable[..., Any], scope: Scope) -> Callable[..., Any]:
    """RecurrentGemmaRglru._rnn_scan: the gate's multiply and the input's add over [batch, L,
    width], the contextualised states the sums' copies, the last state the last step's (in the
    RG-LRU module, a leaf with parameters: its one layer, as the loop's)."""

    def scan(
        self: Any,
        hidden_states: Any,
        recurrent_gate: Any,
        reset: Any,
        recurrent_states: Any,
        acc_dtype: Any = torch.float32,
    ) -> Any:
        if hidden_states.shape[1] == 1 or not on_meta(hidden_states, recurrent_gate, reset, recurrent_states):
            return original(self, hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype)
        recurrent_gate = recurrent_gate * ~reset
        previous = torch.empty_like(recurrent_gate, dtype=acc_dtype)  # h_(t-1), every t: no value
        states = recurrent_gate.type(acc_dtype) * previous
        states = states + hidden_states.type(acc_dtype)
        contextualized_states = torch.zeros_like(hidden_states)  # the loop's output, its strides
        contextualized_states.copy_(states.type(hidden_states.dtype))
        return contextualized_states, states[:, -1]

    return scan


def rwkv(original: Callable[..., Any], scope: Scope) -> Callable[..., Any]:
    """rwkv_linear_attention_cpu (modeling_rwkv.py): the wkv step's ops over [batch, L, hidden],
    its numerator, denominator and running maximum read at t-1 as empty states of that shape (in
    the attention module's element-wise group, as the loop's steps were)."""

    def scan(
        time_decay: Any, time_first: Any, key: Any, value: Any, state: Any = None, return_state: bool = False
    ) -> Any:
        if state is not None or key.shape[1] == 1 or not on_meta(time_decay, time_first, key, value):
            return original(time_decay, time_first, key, value, state=state, return_state=return_state)
        _ = torch.zeros_like(key[:, 0], dtype=torch.float32) - 1e38  # the loop's initial maximum, its one op
        num_state, den_state, max_state = (torch.empty_like(key, dtype=torch.float32) for _ in range(3))
        time_decay = -torch.exp(time_decay)
        current_key = key.float()
        current_value = value
        max_for_output = torch.maximum(max_state, current_key + time_first)
        e1 = torch.exp(max_state - max_for_output)
        e2 = torch.exp(current_key + time_first - max_for_output)
        numerator = e1 * num_state + e2 * current_value
        denominator = e1 * den_state + e2
        output = torch.zeros_like(key)  # the loop's output, its strides
        output.copy_((numerator / denominator).to(output.dtype))
        max_for_state = torch.maximum(max_state + time_decay, current_key)
        e1 = torch.exp(max_state + time_decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        num_state = e1 * num_state + e2 * current_value
        den_state = e1 * den_state + e2
        last = [num_state[:, -1], den_state[:, -1], max_for_state[:, -1]] if return_state else None
        return output, last

    return scan


def xlstm(original: Callable[..., Any], scope: Scope) -> Callable[..., Any]:
    """mlstm_chunkwise_recurrent_fw_C (modeling_xlstm.py): the mLSTM's inter-chunk recurrence, a
    loop over the sequence's 64-token chunks, its step's ops over [batch, heads, chunks, ...]: the
    gated keys' product with the values one batched matmul over the chunks, each chunk's C, n and
    m states before it the states tensors' first `chunks` rows, the last chunk's after it the
    last row (where the loop writes them). The initial states the loop starts from are values
    only: on meta, none to carry."""

    def scan(
        matK: Any,
        matV: Any,
        vecB: Any,
        vecI: Any,
        matC_states: Any = None,
        vecN_states: Any = None,
        scaMinter_states: Any = None,
        matC_initial: Any = None,
        vecN_initial: Any = None,
        scaMinter_initial: Any = None,
        qk_scale: float | None = None,
        chunk_size: int = 64,
        num_chunks: int = 1,
    ) -> Any:
        initial = (matC_initial, vecN_initial, scaMinter_initial)
        if num_chunks < 2 or not on_meta(matK, matV, vecB, vecI, *initial):
            states = (
                matC_states,
                vecN_states,
                scaMinter_states,
                matC_initial,
                vecN_initial,
                scaMinter_initial,
            )
            return original(matK, matV, vecB, vecI, *states, qk_scale, chunk_size, num_chunks)
        batch_size, nh, _, dhqk = matK.shape
        dhhv, nc, dtype = matV.shape[-1], num_chunks, matK.dtype
        if matC_states is None:
            matC_states = matK.new_zeros((batch_size, nh, (nc + 1) * dhqk, dhhv))
        if vecN_states is None:
            vecN_states = matK.new_zeros((batch_size, nh, (nc + 1) * dhqk))
        if scaMinter_states is None:
            scaMinter_states = matK.new_zeros((batch_size, nh, nc + 1))
        vecA = vecB[..., -1, None] - vecB + vecI
        scaG = vecB[..., -1]
        scaA_max = vecA.max(-1).values
        # each chunk's states before it (the loop's running C_k, n_k, m_k), every chunk at once
        matC_k = torch.empty_like(matK, dtype=dtype).new_empty((batch_size, nh, nc, dhqk, dhhv))
        vecN_k = torch.empty_like(vecA).new_empty((batch_size, nh, nc, dhqk))
        scaM_inter_k = torch.empty_like(scaG)
        scaM_inter_k_next = torch.max(scaG + scaM_inter_k, scaA_max)
        matK_chunk = matK.view(batch_size, nh, nc, chunk_size, dhqk)
        matV_chunk = matV.view(batch_size, nh, nc, chunk_size, dhhv)
        vecAbar_k = torch.exp(vecA - scaM_inter_k_next[..., None])[..., None]
        matK_chunk_gated = matK_chunk * vecAbar_k
        scaGbar_k = torch.exp(scaG + scaM_inter_k - scaM_inter_k_next)[..., None]
        matC_k_next = scaGbar_k[..., None] * matC_k + matK_chunk_gated.transpose(-2, -1) @ matV_chunk
        vecN_k_next = scaGbar_k * vecN_k + matK_chunk_gated.transpose(-2, -1).sum(-1)
        matC_states[:, :, : nc * dhqk, :] = matC_k.reshape(batch_size, nh, nc * dhqk, dhhv)
        vecN_states[:, :, : nc * dhqk] = vecN_k.reshape(batch_size, nh, nc * dhqk)
        scaMinter_states[:, :, :nc] = scaM_inter_k
        matC_states[:, :, -dhqk:, :] = matC_k_next[:, :, -1]
        vecN_states[:, :, -dhqk:] = vecN_k_next[:, :, -1]
        scaMinter_states[:, :, -1] = scaM_inter_k_next[:, :, -1]
        return matC_states, vecN_states, scaMinter_states

    return scan


FUNCTIONS: dict[str, Form] = {
    "mamba_selective_scan": mamba,
    "rwkv_linear_attention_cpu": rwkv,
    "mlstm_chunkwise_recurrent_fw_C": xlstm,
    "torch_chunk_gated_delta_rule": gated_delta,
    "chunk_kimi_delta_attention": kimi_delta,
}
"""A modeling module's scan function, by the name transformers gives it, -> its one-pass form."""

METHODS: dict[str, Form] = {
    "RecurrentGemmaRglru._rnn_scan": rglru,
}
"""A module class's scan method, as Class.method -> its one-pass form."""


@contextlib.contextmanager
def one_pass(model: Any, stack: list[str] | None = None) -> Iterator[int]:
    """The scans of `model`'s modeling modules (the modules its module classes are defined in)
    in their one-pass form while the context runs; it gives how many were replaced. `stack`: the
    recording's module stack, where a scan's own ops are recorded under MODULE.NAME."""

    @contextlib.contextmanager
    def scope(name: str) -> Iterator[None]:
        if stack is None:
            yield
            return
        stack.append(f"{stack[-1]}.{name}" if stack[-1] else name)
        try:
            yield
        finally:
            stack.pop()

    replaced: list[tuple[Any, str, Any]] = []
    classes = {type(m) for m in model.modules()}
    for source in {sys.modules.get(c.__module__) for c in classes} - {None}:
        for name, form in FUNCTIONS.items():
            original = vars(source).get(name)
            if callable(original):
                replaced.append((source, name, original))
                setattr(source, name, form(original, scope))
    for cls in classes:
        for key, form in METHODS.items():
            owner, name = key.split(".")
            original = vars(cls).get(name)
            if cls.__name__ == owner and callable(original):
                replaced.append((cls, name, original))
                setattr(cls, name, form(original, scope))
    try:
        yield len(replaced)
    finally:
        for where, name, original in reversed(replaced):
            setattr(where, name, original)
