"""Sliding-window attention: which layers slide (llm/config.windows for the families read by hand,
hf/blocks._windows through transformers), and what a fused kernel's local mode costs
(cost/gpu.windowed).

A fused kernel visits, for each query tile, only the key tiles the window reaches
(Dao-AILab/flash-attention csrc/flash_attn/src/flash_fwd_kernel.h, compute_attn_1rowblock:
n_block_min = (m_block * kBlockM - window_size_left) / kBlockN, n_block_max up to the diagonal),
where eager attention computes the whole s x s square and masks it. Gemma 3 (5 of 6 layers at a
window of 512 or 1,024), gpt-oss (every other at 128) and Phi-3 mini (every layer at 2,047) were
charged their whole causal square at any sequence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from modtrans import cost
from modtrans.cost.gpu import TILE, Gpu, windowed
from modtrans.ir.document import Activation, Block, Flops, Gemm, Heads, Kind, Layer, Part
from modtrans.llm.config import from_hf

CONFIGS = Path(__file__).parent.parent / "fixtures" / "configs"


def _tiles_visited(sequence: int, window: int) -> int:
    """The key tiles FlashAttention's causal local kernel runs, query tile by query tile, as
    flash_fwd_kernel.h bounds them (seqlen_q = seqlen_k; window_size_left = window - 1, the keys
    transformers' sliding_window lets a query see besides itself; window_size_right 0)."""
    total = 0
    rows = -(-sequence // TILE)
    for m in range(rows):
        n_min = max(0, (m * TILE - (window - 1)) // TILE)
        n_max = min(rows, -(-((m + 1) * TILE) // TILE))  # causal: up to the diagonal tile
        total += n_max - n_min
    return total


@pytest.mark.parametrize(
    ("sequence", "window"), [(8192, 1024), (4096, 128), (8192, 512), (4096, 2047), (2048, 4000)]
)
def test_a_windows_share_is_the_tiles_flashattention_visits(sequence: int, window: int) -> None:
    local = windowed(sequence, window, causal=True)
    rows = -(-sequence // TILE)
    visited = _tiles_visited(sequence, window)
    if visited >= rows * (rows + 1) // 2:  # the window reaches every key: the causal rule
        assert local is None
        return
    assert local is not None
    share, keys = local
    assert share == pytest.approx(visited / rows**2)
    assert keys == (1 + -(-(window - 1) // TILE)) * TILE


def test_a_sliding_layer_runs_its_share_at_the_dense_kernels_rate() -> None:
    """Gemma 3 4B's local layer at 8,192 tokens (window 1,024; 8 heads of 256): the forward is
    its visited share of the square's FLOPs at the noncausal kernel's rate at the window's span."""
    gpu = cost.get("gpu", cost.Settings(device="h100", attention="flash2"))
    assert isinstance(gpu, Gpu)
    s, d, heads = 8192, 256, 8
    flops = 2 * s * s * d * heads
    layer = Layer(
        "scores", "", "MatMul", Kind.MATMUL,
        outputs=(Activation("x", (1, heads, s, s), "bfloat16", None),),
        flops=Flops(flops, 2 * flops, 0), gemm=Gemm(s, d, s, heads),
        block=Block(0, Part.ATTENTION, Heads(heads, 4, True, window=1024)),
    )  # fmt: skip
    full = Layer(
        **{
            **{f: getattr(layer, f) for f in layer.__slots__},
            "block": Block(0, Part.ATTENTION, Heads(heads, 4, True)),
        }
    )
    attention = gpu.kernels.attention
    assert attention is not None
    rate, _ = attention.rates(d, 1152, False)
    share = _tiles_visited(s, 1024) / (s // TILE) ** 2
    assert gpu.times(layer).forward * 1e-9 == pytest.approx(flops * share / rate, rel=1e-5)  # whole ns
    assert gpu.times(layer).forward < gpu.times(full).forward / 2


def _expected(config: Any, layers: int) -> tuple[int | None, ...]:
    """transformers' own decision: its configuration's layer_types (sliding_attention layers at
    config.sliding_window), or, for Mistral, Mixtral, Phi-3 and Starcoder2, which name none, every
    layer wherever config.sliding_window is set (modeling_mistral.py and the others: the mask is
    create_sliding_window_causal_mask when config.sliding_window is not None)."""
    window = config.sliding_window
    kinds = getattr(config, "layer_types", None)
    if not window:
        return ()
    found = (
        tuple(window if k == "sliding_attention" else None for k in kinds) if kinds else (window,) * layers
    )
    return found if any(found) else ()


CASES: list[tuple[str, dict[str, Any]]] = [
    ("gemma2", {}),
    ("gemma3_text", {}),
    ("gemma3_text", {"sliding_window_pattern": 4, "sliding_window": 512}),
    ("olmo3", {}),
    ("olmo3", {"layer_types": ["sliding_attention", "full_attention"] * 4}),
    ("qwen2", {}),
    ("qwen2", {"use_sliding_window": True, "max_window_layers": 3}),
    ("qwen3", {"use_sliding_window": True, "max_window_layers": 5}),
    ("qwen2_moe", {"use_sliding_window": True, "max_window_layers": 5}),
    ("mistral", {}),
    ("mistral", {"sliding_window": None}),
    ("mixtral", {}),
    ("phi3", {"sliding_window": 2047}),
    ("starcoder2", {"sliding_window": 4096}),
]


@pytest.mark.hf
@pytest.mark.parametrize(("family", "keys"), CASES)
def test_the_families_read_by_hand_slide_where_transformers_does(family: str, keys: dict[str, Any]) -> None:
    from transformers import AutoConfig

    config = AutoConfig.for_model(family, num_hidden_layers=8, **keys)
    ours = from_hf({**config.to_dict(), "model_type": family}).windows
    assert ours == _expected(config, 8)


@pytest.mark.hf
@pytest.mark.parametrize(
    "name", ["gemma-2-9b", "gemma-3-1b-pt", "gemma-3-4b-it", "phi-3-mini-4k-instruct", "starcoder2-3b"]
)
def test_real_configurations_slide_where_transformers_does(name: str) -> None:
    from transformers import AutoConfig

    data = json.loads((CONFIGS / f"{name}.json").read_text())
    config = AutoConfig.for_model(**data)
    text = config.get_text_config()
    assert from_hf(data).windows == _expected(text, text.num_hidden_layers)


def _visible_keys(model: Any, sequence: int) -> dict[int, int]:
    """Run `model` (real weights, CPU, eager attention) on `sequence` tokens and read, in the mask
    each layer's softmax attention receives, how many keys the last query sees: transformers' own
    masks, independent of how ModTrans reads them."""
    import torch

    seen: dict[int, int] = {}

    def grab(module: Any, args: Any, kwargs: Any) -> None:
        mask = kwargs.get("attention_mask")
        index = getattr(module, "layer_idx", None)
        if isinstance(mask, torch.Tensor) and mask.dim() == 4 and isinstance(index, int):
            row = mask[0, 0, -1]  # additive (0 where seen) or boolean (True where seen)
            seen[index] = int((row == 0).sum() if row.is_floating_point() else row.sum())

    handles = [
        m.register_forward_pre_hook(grab, with_kwargs=True)
        for m in model.modules()
        if type(m).__name__.endswith("Attention")
    ]
    with torch.no_grad():
        model(input_ids=torch.zeros(1, sequence, dtype=torch.long))
    for h in handles:
        h.remove()
    return seen


@pytest.mark.hf
@pytest.mark.parametrize("family", ["mistral", "phimoe", "doge", "minimax", "gemma2", "llama"])
def test_a_traced_model_slides_where_its_own_masks_do(family: str) -> None:
    """A family read through transformers (hf/) slides where the masks its forward builds do:
    Mistral, PhiMoE, Doge and MiniMax name no sliding layer_types and mask every softmax layer by
    sliding_window (library._masks); Gemma 2 names its layers; Llama never slides."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from modtrans.hf import built, library

    keys = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}
    config = AutoConfig.for_model(family, num_hidden_layers=2, vocab_size=256, sliding_window=16, **keys)
    config._attn_implementation = "eager"
    theirs = _visible_keys(AutoModelForCausalLM.from_config(config).eval(), 64)
    assert theirs, "no layer's mask was read"
    ours: dict[int, int] = {}
    for layer in built.read(library.build(config), 1, 64).ir.layers:
        block = layer.block
        if block is not None and block.heads is not None and block.index is not None:
            ours[block.index] = min(block.heads.window or 64, 64)
    assert {i: ours[i] for i in theirs} == theirs
