"""The bytes torchtitan's per-iteration kernels around FSDP2 move, counted as torch 2.13 runs them
(every aten kernel dispatched under a TorchDispatchMode: each tensor argument read, an argument it
writes in place read and written, an `out=` argument written, each result written; views move
nothing), against what ModTrans charges for them:

    the optimizer step    torch.optim.AdamW(foreach=True) (torchtitan/optimizer.py at 9dec370,
                          build_optimizers: "foreach": not fused) and torch.nn.utils.
                          clip_grad_norm_(foreach=True) (train.py: utils.clip_grad_norm_ every
                          step) over fp32 parameters: cost/gemm.py FOREACH_ADAMW, FOREACH_CLIP
    FSDP2's copies        foreach_reduce_scatter_copy_in (FSDP2's own function, bf16 gradients
                          into an fp32 input) and torch.ops.fsdp.split_with_sizes_copy as
                          foreach_all_gather_copy_out calls it: strategy/llm/fsdp.py, copy_bytes
    separate projections  autograd's sum of the input gradients of torchtitan's wq, wk, wv (and
                          w1, w3) on one input: strategy/llm/projections.py, ADD
    repeat_kv             torchtitan's copy of the key/value heads to every query head and its
                          backward's sum: strategy/llm/gqa.py, (1 + n_rep) x the heads' bytes

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.distributed.fsdp._fully_shard import _fsdp_collectives  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from modtrans.cost.gemm import FOREACH_ADAMW, FOREACH_CLIP  # noqa: E402
from modtrans.strategy.llm.fsdp import COPY_OUT  # noqa: E402
from modtrans.strategy.llm.projections import ADD  # noqa: E402

pytestmark = pytest.mark.hf

ELEMENTS = 1 << 16
WORLD = 8
# a Llama 3 block's parameters scaled down 16-fold (q, k, v, o; gate, up, down; a norm): FSDP2's
# dim-0 shards of each, over 8 ranks
SHAPES = [(256, 256), (64, 256), (64, 256), (256, 256), (896, 256), (896, 256), (256, 896), (256,)]


def _tensors(value: Any) -> list[Any]:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _bytes(value: Any) -> int:
    return sum(int(min(t.numel() * t.element_size(), t.untyped_storage().nbytes())) for t in _tensors(value))


class _Moved(TorchDispatchMode):  # type: ignore[misc]
    """The bytes each dispatched aten kernel reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        writes = [a.alias_info is not None and a.alias_info.is_write for a in schema.arguments]
        if any(r.alias_info is not None for r in schema.returns) and not any(writes):
            return out  # a view
        if func.overloadpacket is torch.ops.aten._unsafe_view:
            return out  # a view its schema does not say is one (reshape's of a copy it made)
        for i, (argument, written) in enumerate(zip(schema.arguments, writes, strict=True)):
            value = args[i] if i < len(args) else kwargs.get(argument.name)
            only_out = written and argument.kwarg_only and argument.name.startswith("out")
            self.moved += _bytes(value) * (1 if only_out or not written else 2)
        if not any(r.alias_info is not None for r in schema.returns):
            self.moved += _bytes(out)
        return out


def _params() -> list[Any]:
    params = [torch.nn.Parameter(torch.randn(ELEMENTS)) for _ in range(3)]
    for p in params:
        p.grad = torch.randn(ELEMENTS)
    return params


def test_torchs_foreach_adamw_moves_what_the_step_is_charged() -> None:
    """A step after the first (the moments exist), weight decay on, as torchtitan's AdamW."""
    params = _params()
    optimizer = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, foreach=True)
    optimizer.step()
    with _Moved() as step:
        optimizer.step()
    assert step.moved / (3 * ELEMENTS) == pytest.approx(FOREACH_ADAMW, abs=0.01)


def test_torchs_foreach_clip_moves_what_the_step_is_charged() -> None:
    """The norm read, then every gradient scaled, under the limit or not."""
    params = _params()
    with _Moved() as clip:
        torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
    assert clip.moved / (3 * ELEMENTS) == pytest.approx(FOREACH_CLIP, abs=0.01)


def test_fsdp2s_reduce_scatter_copy_in_reads_bf16_and_writes_fp32() -> None:
    """2 B read and 4 B written a gradient element: the gradients' bf16 and reduce_dtype fp32
    (what copy_bytes charges: the parameters' bytes and the reduce-scatter's)."""
    grads = [torch.randn(s, dtype=torch.bfloat16) for s in SHAPES]
    numel = sum(g.numel() for g in grads)
    reduce_input = torch.empty(numel, dtype=torch.float32)
    with _Moved() as copy:
        _fsdp_collectives.foreach_reduce_scatter_copy_in(grads, reduce_input, WORLD)
    assert copy.moved == numel * (2 + 4)


def test_fsdp2s_all_gather_copy_out_reads_and_writes_the_parameters_once() -> None:
    """split_with_sizes_copy of the all-gather output into each parameter, as
    foreach_all_gather_copy_out calls it (dim=1 over the ranks' rows)."""
    sizes = [torch.Size(s).numel() for s in SHAPES]
    gathered = torch.randn(sum(sizes), dtype=torch.bfloat16)
    out = [torch.empty(n, dtype=torch.bfloat16).view(WORLD, -1) for n in sizes]
    with _Moved() as copy:
        torch.ops.fsdp.split_with_sizes_copy(
            gathered.view(WORLD, -1), [n // WORLD for n in sizes], dim=1, out=out
        )
    assert copy.moved == COPY_OUT * gathered.numel() * gathered.element_size()


@pytest.mark.parametrize("linears", [3, 2])
def test_autograd_sums_the_input_gradients_of_separate_projections(linears: int) -> None:
    """torchtitan's q, k, v (three linears on the normed input) and w1, w3 (two): the backward's
    kernels beyond the linears' own GEMMs are linears - 1 adds of a bf16 gradient of the input's
    size, ADD x its bytes each (the projections' outputs summed here to reach one loss)."""
    tokens, hidden = 64, 256
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    weights = [torch.randn(hidden, hidden, dtype=torch.bfloat16, requires_grad=True) for _ in range(linears)]
    outputs = [torch.nn.functional.linear(x, w) for w in weights]
    grads = [torch.randn_like(o) for o in outputs]
    with _Adds() as backward:
        torch.autograd.backward(outputs, grads)
    assert backward.moved == (linears - 1) * ADD * x.numel() * x.element_size()


class _Adds(_Moved):
    """The bytes of the adds (aten.add) dispatched, alone."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket not in (torch.ops.aten.add, torch.ops.aten.add_):
            return func(*args, **(kwargs or {}))
        return super().__torch_dispatch__(func, types, args, kwargs)


def _repeat_kv(x: Any, n_rep: int) -> Any:
    """torchtitan/models/llama/model.py at 9dec370, repeat_kv, as written there."""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        torch.unsqueeze(x, dim=3)
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


@pytest.mark.parametrize("n_rep", [4, 2])
def test_repeat_kv_copies_the_heads_out_and_sums_them_back(n_rep: int) -> None:
    """Llama 3's 8 key/value heads for 32 query heads (n_rep 4), and 2 for 4: each way (1 + n_rep)
    x the heads' bytes (gqa.py's charge)."""
    heads = torch.randn(1, 128, 8, 128, dtype=torch.bfloat16, requires_grad=True)
    with _Moved() as forward:
        repeated = _repeat_kv(heads, n_rep)
    grad = torch.randn_like(repeated)
    with _Moved() as backward:
        repeated.backward(grad)
    size = heads.numel() * heads.element_size()
    assert forward.moved == (1 + n_rep) * size
    assert backward.moved == (1 + n_rep) * size


@pytest.mark.parametrize("module", ["mlp", "attention"])
def test_transformers_llama_sums_its_projections_input_gradients(module: str) -> None:
    """transformers' own Llama modules, which --framework fsdp and deepspeed train as they are
    (Framework.wraps_module, separate_projections): LlamaMLP.forward (transformers 5.25:
    `self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))`) adds one gradient of its
    input, LlamaAttention's q_proj, k_proj and v_proj of the normed hidden states two (the three
    projections called as its forward calls them), ADD x the input's bytes each."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(
        hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2
    )
    x = torch.randn(2, 32, 256, dtype=torch.bfloat16, requires_grad=True)
    if module == "mlp":
        mlp = modeling_llama.LlamaMLP(config).to(torch.bfloat16)
        outputs, adds = [mlp(x)], 1
    else:
        attn = modeling_llama.LlamaAttention(config, layer_idx=0).to(torch.bfloat16)
        outputs, adds = [attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)], 2
    grads = [torch.randn_like(o) for o in outputs]
    with _Adds() as backward:
        torch.autograd.backward(outputs, grads)
    assert backward.moved == adds * ADD * x.numel() * x.element_size()
