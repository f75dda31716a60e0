"""What a block under torch.compile keeps for its backward with torchtitan's 'op' selective
recomputation (strategy/llm/selective.py, `unread`), held to what PyTorch's own partitioner saves.

torchtitan 9dec370 (torchtitan/parallelisms/parallelize_llama.py): _apply_ac_to_transformer_block
wraps each block in torch.utils.checkpoint with create_selective_checkpoint_contexts and its
_custom_policy (the outputs of the ops in _save_list, every second aten.mm left out), then
apply_compile runs `torch.compile(transformer_block, fullgraph=True)` on each. The block here is
torchtitan's (torchtitan/models/llama/model.py at 9dec370: TransformerBlock, Attention with
apply_rotary_emb's complex product and repeat_kv, FeedForward's `w2(F.silu(w1(x)) * w3(x))`; its
RMSNorm, torchtitan/models/norms.py) transcribed at a small size, in bf16. Inductor's partition is
recorded as it happens (torch._inductor.compile_fx's min_cut_rematerialization_partition): the
forward graph's outputs beyond the block's own are what the backward is handed. On the CPU SDPA's
flash kernel is aten._scaled_dot_product_flash_attention_for_cpu, saved where torchtitan's list
names the CUDA one. Eager, the same policy keeps w2's output too
(tests/test_memory_selective_measured.py).

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import (  # noqa: E402
    checkpoint,
)

from modtrans.plan.model import Recompute  # noqa: E402
from modtrans.strategy.llm import activations  # noqa: E402
from tests import plans  # noqa: E402
from tests.titan_policy import torchtitans_policy  # noqa: E402

pytestmark = [
    pytest.mark.hf,
    # Inductor's own imports (torch.jit's deprecation) and its note that it emits no code for the
    # rotary's complex product (it runs the eager op there)
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Torchinductor does not support code generation:UserWarning"),
]

DIM, HEADS, KV_HEADS, FFN, BATCH, SEQ = 256, 8, 2, 896, 2, 128


class RMSNorm(nn.Module):  # type: ignore[misc]
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Any) -> Any:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def _rotary(xq: Any, xk: Any, freqs_cis: Any) -> tuple[Any, Any]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def _repeat_kv(x: Any, n_rep: int) -> Any:
    bs, slen, n_kv_heads, head_dim = x.shape
    expanded = torch.unsqueeze(x, dim=3).expand(bs, slen, n_kv_heads, n_rep, head_dim)
    return expanded.reshape(bs, slen, n_kv_heads * n_rep, head_dim)


class Block(nn.Module):  # type: ignore[misc]
    """torchtitan's TransformerBlock: attention and feed-forward, each after its RMSNorm, each
    added to the residual."""

    def __init__(self) -> None:
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, HEADS * self.head_dim, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * self.head_dim, bias=False)
        self.wo = nn.Linear(HEADS * self.head_dim, DIM, bias=False)
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)
        self.attention_norm, self.ffn_norm = RMSNorm(DIM), RMSNorm(DIM)

    def attention(self, x: Any, freqs_cis: Any) -> Any:
        bs, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bs, seqlen, -1, self.head_dim)
        xk = xk.view(bs, seqlen, -1, self.head_dim)
        xv = xv.view(bs, seqlen, -1, self.head_dim)
        xq, xk = _rotary(xq, xk, freqs_cis)
        keys, values = _repeat_kv(xk, HEADS // KV_HEADS), _repeat_kv(xv, HEADS // KV_HEADS)
        out = F.scaled_dot_product_attention(
            xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2), is_causal=True
        )
        return self.wo(out.transpose(1, 2).contiguous().view(bs, seqlen, -1))

    def forward(self, x: Any, freqs_cis: Any) -> Any:
        h = x + self.attention(self.attention_norm(x), freqs_cis)
        ffn = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(ffn)) * self.w3(ffn))


def _saved_by_the_partitioner(
    monkeypatch: pytest.MonkeyPatch, selective: bool = True
) -> tuple[int, list[Any]]:
    """The bytes of the tensors the compiled block's forward hands its backward, its parameters and
    the frequencies left out (the block's input counted: the checkpoint's), and those tensors;
    `selective`: torchtitan's op policy, else its full recomputation (checkpoint_wrapper without a
    context_fn)."""
    import torch._inductor.compile_fx as compile_fx

    partitions: list[Any] = []
    real = compile_fx.min_cut_rematerialization_partition

    def recorded(*args: Any, **kwargs: Any) -> Any:
        partitions.append(real(*args, **kwargs))
        return partitions[-1]

    monkeypatch.setattr(compile_fx, "min_cut_rematerialization_partition", recorded)
    torch.manual_seed(0)
    block = Block().to(torch.bfloat16)
    x = torch.randn(BATCH, SEQ, DIM, dtype=torch.bfloat16, requires_grad=True)
    freqs = torch.outer(torch.arange(SEQ).float(), 1.0 / (500000.0 ** (torch.arange(0, 32, 2).float() / 32)))
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)

    def checkpointed(h: Any) -> Any:
        if not selective:
            return checkpoint(block, h, freqs_cis, use_reentrant=False)
        return checkpoint(block, h, freqs_cis, use_reentrant=False, context_fn=torchtitans_policy)

    torch.compile(checkpointed, fullgraph=True)(x).sum().backward()
    forward_graph = partitions[-1][0]
    outputs = forward_graph.graph.find_nodes(op="output")[0].args[0]
    inputs = {o.name for o in forward_graph.graph.find_nodes(op="placeholder")}
    # of the graph's inputs handed on, only the block's input is an activation (the others: the
    # parameters, and the frequencies every block shares)
    stored = [
        o.meta["val"]
        for o in outputs[1:]
        if hasattr(o, "meta") and (o.name not in inputs or tuple(o.meta["val"].shape) == tuple(x.shape))
    ]
    return sum(v.numel() * v.element_size() for v in stored), stored


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    """Each compile lowered and partitioned anew: no graph from Inductor's or AOTAutograd's caches
    on disk (a cached graph is neither partitioned nor lowered again)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield
    torch._dynamo.reset()


def test_inductor_leaves_torchtitans_complex_rotary_to_eager_kernels() -> None:
    """cost/eager.py charges torchtitan's rotary op by op under --compile: Inductor says it
    generates no code for its complex product."""
    import torch._inductor.lowering as lowering

    lowering._warn_complex_not_supported.cache_clear()  # warned once a process
    xq = torch.randn(BATCH, SEQ, HEADS, DIM // HEADS, dtype=torch.bfloat16)
    xk = torch.randn(BATCH, SEQ, KV_HEADS, DIM // HEADS, dtype=torch.bfloat16)
    freqs = torch.outer(torch.arange(SEQ).float(), torch.ones(DIM // HEADS // 2))
    with pytest.warns(UserWarning, match="does not support code generation for complex operators"):
        torch.compile(_rotary, fullgraph=True)(xq, xk, torch.polar(torch.ones_like(freqs), freqs))


def test_a_compiled_block_keeps_what_the_backward_reads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The partitioner saves the block's input, q, v, w1's output, SDPA's output and logsumexp, not
    w2's output (eager keeps it): the model's bytes for the compiled block, one hidden-width tensor
    a token fewer than eager."""
    nbytes, stored = _saved_by_the_partitioner(monkeypatch)
    tokens = BATCH * SEQ
    # q, v and w1's outputs (tokens x width); not w2's
    assert sorted(tuple(v.shape) for v in stored if v.dim() == 2) == [
        (tokens, 64),
        (tokens, DIM),
        (tokens, FFN),
    ]
    config = {
        "model_type": "llama", "torch_dtype": "bfloat16", "hidden_size": DIM, "intermediate_size": FFN,
        "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "vocab_size": 128,
        "num_hidden_layers": 2, "max_position_embeddings": 1024,
    }  # fmt: skip
    d = plans.dims_of(tmp_path, config, (BATCH, SEQ))
    compiled = activations.layer(d, 0, 1, False, Recompute.SELECTIVE, "flash2", 1, True, compiled=True)
    eager = activations.layer(d, 0, 1, False, Recompute.SELECTIVE, "flash2", 1, True)
    assert compiled == nbytes
    assert eager - compiled == tokens * DIM * 2


def test_a_compiled_block_under_full_recomputation_keeps_its_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchtitan's full recomputation compiled: the partitioner hands the backward the block's input
    alone (and the checkpoint's saved CPU RNG state, a few kB of uint8 whatever the size), the
    model's full-recomputation bytes, compiled or not (tests/test_compile_option.py)."""
    _, stored = _saved_by_the_partitioner(monkeypatch, selective=False)
    tensors = [v for v in stored if v.dtype != torch.uint8]
    assert [tuple(v.shape) for v in tensors] == [(BATCH, SEQ, DIM)]
    assert sum(v.numel() for v in stored if v.dtype == torch.uint8) < 10_000
