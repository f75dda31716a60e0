"""torchtitan's 'op' selective activation checkpointing as a torch checkpoint policy (torchtitan
9dec370, torchtitan/parallelisms/parallelize_llama.py, _apply_ac_to_transformer_block's
_custom_policy): the outputs of the ops in _save_list saved, every second aten.mm left out, the rest
recomputed. On the CPU SDPA's flash kernel is aten._scaled_dot_product_flash_attention_for_cpu,
saved where torchtitan's list names the CUDA one. Imported by tests that skip without torch."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

SAVED = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def torchtitans_policy() -> Any:
    """torchtitan's _custom_policy: save what _save_list names but every second matmul."""
    count: dict[str, int] = defaultdict(int)

    def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            count[mode] += 1
        save = func in SAVED and not (func == torch.ops.aten.mm.default and count[mode] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)
