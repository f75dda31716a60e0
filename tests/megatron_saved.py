"""What one Megatron-Core TransformerLayer stores for its backward, by --recompute-modules,
measured on CPU: run as `python tests/megatron_saved.py OUT_JSON` (megatron-core importable) by
tests/test_recompute_modules_measured.py. A layer of the local spec
(megatron/core/models/gpt/gpt_layer_specs.py, get_gpt_layer_local_spec: no Transformer Engine),
RMSNorm, SwiGLU with the fused bias_swiglu (bias_activation_fusion), no dropout, fp32, runs one
forward under torch.autograd.graph.saved_tensors_hooks; the bytes are the storages still allocated
after it (CheckpointWithoutOutput frees its outputs' storages once their consumer has run), the
layer's parameters and input aside. Its CUDA-only helpers are stood in for on the CPU: the global
memory buffer (a plain tensor), the RNG state (the CPU generator's) and Transformer Engine's FP8
state (off; CheckpointWithoutOutput asks it: its `self.fp8 = fp8 is not None`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings
from typing import Any

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
from megatron.core import parallel_state  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.core.tensor_parallel import random as mrandom  # noqa: E402
from megatron.core.transformer import dot_product_attention  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402
from megatron.core.transformer.transformer_layer import TransformerLayer  # noqa: E402

SEQ, HIDDEN, HEADS, FFN = 32, 64, 4, 128  # tests/torchrun.py's LLAMA (its 2 key/value heads aside)


class _Buffer:
    def get_tensor(self, shape: Any, dtype: Any, name: str) -> Any:
        return torch.empty(shape, dtype=dtype)


class _FP8:
    is_fp8_enabled = staticmethod(lambda: False)
    get_fp8_recipe = staticmethod(lambda: None)


def _on_cpu() -> None:
    dot_product_attention.parallel_state.get_global_memory_buffer = lambda: _Buffer()
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda *a, **k: None
    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom.FP8GlobalStateManager = _FP8
    mrandom.activation_recompute_forward = lambda **k: contextlib.nullcontext()
    mrandom.fp8_autocast = lambda **k: contextlib.nullcontext()
    mrandom.get_cuda_rng_tracker().add("model-parallel-rng", 1234)


def stored(modules: list[str] | None) -> int:
    """Bytes the layer keeps for its backward under these --recompute-modules (None: none)."""
    config = TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=HEADS, ffn_hidden_size=FFN,
        gated_linear_unit=True, activation_func=F.silu, bias_activation_fusion=True, add_bias_linear=False,
        hidden_dropout=0.0, attention_dropout=0.0, normalization="RMSNorm", use_cpu_initialization=True,
        recompute_granularity="selective" if modules is not None else None, recompute_modules=modules,
    )  # fmt: skip
    layer = TransformerLayer(config, get_gpt_layer_local_spec(normalization="RMSNorm").submodules)
    x = torch.randn(SEQ, 1, HIDDEN, requires_grad=True)
    saved: list[Any] = []

    def pack(t: Any) -> Any:
        saved.append(t)
        return t

    mask = torch.triu(torch.ones(1, 1, SEQ, SEQ, dtype=torch.bool), 1)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out, _ = layer(x, attention_mask=mask)
    seen = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    seen.add(x.untyped_storage().data_ptr())
    total = 0
    for t in saved:
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen and storage.nbytes():
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    out.sum().backward()  # the recomputation runs: the layer is whole
    return total


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", sys.argv[2])
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    _on_cpu()
    found = {"none": stored(None)}
    for module in ("core_attn", "mlp"):
        found[module] = stored([module])
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(found, f)


if __name__ == "__main__":
    main()
