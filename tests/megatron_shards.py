"""What one rank of two holds of a Megatron-Core GPT layer, built on CPU: run as
`python tests/megatron_shards.py OUT_JSON PORT` (megatron-core importable) by
tests/test_row_bias_megatron.py. Two processes (gloo) initialise a tensor-parallel group of 2
(parallel_state.initialize_model_parallel(2, 1)) and build a TransformerLayer of the local spec
(megatron/core/models/gpt/gpt_layer_specs.py, get_gpt_layer_local_spec: no Transformer Engine)
with GPT-2's choices: LayerNorm, biases on every linear (add_bias_linear), GeLU; and, beside it,
a RowParallelLinear and a ColumnParallelLinear under sequence parallelism (the local spec's torch
LayerNorm refuses SP), whose parameters Megatron marks `sequence_parallel` for
finalize_model_grads.py's all-reduce. Rank 0 writes each parameter's elements on its rank. The
CUDA RNG tracker is stood in for by the CPU generator's state."""

from __future__ import annotations

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
from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402
from megatron.core.transformer.transformer_layer import TransformerLayer  # noqa: E402

HIDDEN, HEADS, FFN, TP = 64, 4, 256, 2  # tests/test_row_bias.py's GPT-2


def _on_cpu() -> None:
    torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda *a, **k: None
    mrandom.get_cuda_rng_tracker().add("model-parallel-rng", 1234)


def held(rank: int, port: str, out: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", port
    torch.distributed.init_process_group("gloo", rank=rank, world_size=TP)
    parallel_state.initialize_model_parallel(TP, 1)
    _on_cpu()
    common: dict[str, Any] = {
        "num_layers": 1, "hidden_size": HIDDEN, "num_attention_heads": HEADS, "ffn_hidden_size": FFN,
        "add_bias_linear": True, "activation_func": F.gelu, "normalization": "LayerNorm",
        "use_cpu_initialization": True, "tensor_model_parallel_size": TP,
    }  # fmt: skip
    layer = TransformerLayer(TransformerConfig(**common), get_gpt_layer_local_spec().submodules)
    sp = TransformerConfig(**common, sequence_parallel=True)
    init = sp.init_method
    row = RowParallelLinear(
        FFN, HIDDEN, config=sp, init_method=init, bias=True, input_is_parallel=True, skip_bias_add=False
    )
    column = ColumnParallelLinear(HIDDEN, FFN, config=sp, init_method=init, bias=True, gather_output=False)
    marked = {
        f"{kind}.{name}": bool(getattr(p, "sequence_parallel", False))
        for kind, module in (("row", row), ("column", column))
        for name, p in module.named_parameters()
    }
    if rank == 0:
        found = {"layer": {n: p.numel() for n, p in layer.named_parameters()}, "sequence_parallel": marked}
        with open(out, "w", encoding="utf-8") as f:
            json.dump(found, f)


if __name__ == "__main__":
    torch.multiprocessing.spawn(held, args=(sys.argv[2], sys.argv[1]), nprocs=TP)
