"""FSDP2's all-gather outputs in their own stream's pool (strategy/llm/memory.py, gather_pool), held
to PyTorch's caching allocator replaying torchtitan's order of them (tests/caching.py, one pool per
stream: CUDACachingAllocator never hands a block of one stream's pool to another stream's request).

The order, from torch/distributed/fsdp/_fully_shard (torch 2.13): each FSDP unit's all-gather output
is one flat tensor allocated on the all-gather copy-in stream (_fsdp_collectives.py,
foreach_all_gather); in the forward its unit's wait_for_unshard first frees the previous unit's
output (kept in comm_ctx.all_gather_state "to allow for overlap of this copy-out with next
all-gather") and keeps its own, after its own was allocated by unshard (_fsdp_param_group.py); the
root, fully_shard(model) in torchtitan's apply_fsdp, gathers first. In the backward each output is
freed right after its copy-out and the next block's is prefetched (_backward_prefetch), so the
backward never holds more than the forward's last kept output and one more block."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tests.caching import Allocator

Run = Callable[..., Result]

# Llama 3 8B (its config.json), in bf16: the root's parameters (the embedding, the output layer, the
# final norm) and one block's (q, k, v, o; gate, up, down; two norms)
H, FFN, KV, VOCAB, LAYERS = 4096, 14336, 1024, 128256, 32
ROOT = 2 * (2 * VOCAB * H + H)
BLOCK = 2 * (H * (H + KV + KV + H) + 3 * H * FFN + 2 * H)


def _copy_in_pool() -> int:
    """The all-gather copy-in stream's pool, its segments' bytes at most, over one iteration."""
    pool, kept = Allocator(), None
    units = [("root", ROOT)] + [(f"block{i}", BLOCK) for i in range(LAYERS)]
    peak = 0
    for serial, (_, size) in enumerate(units, start=1):  # forward: unshard, then wait_for_unshard
        pool.malloc(serial, size)
        if kept is not None:
            pool.free(kept)
        kept = serial
        peak = max(peak, pool.reserved)
    for i in reversed(range(LAYERS - 1)):  # backward: the prefetched block, freed after its copy-out
        pool.malloc(1000 + i, BLOCK)
        peak = max(peak, pool.reserved)
        pool.free(1000 + i)
    return peak


def test_torchtitans_all_gathers_keep_the_root_and_a_block_in_their_own_pool(
    run_cli: Run, tmp_path: Path
) -> None:
    """The pool peaks at the root's output and the first block's, kept together, and the model's
    reserved bytes beside the peak add exactly that (the loss's cached logits apart)."""
    pool = _copy_in_pool()
    assert pool == pytest.approx(ROOT + BLOCK, abs=2 * (2 << 20))  # each segment rounded up to 2 MiB
    out = tmp_path / "t"
    args = ("--framework", "torchtitan", "--zero", "3", "--dp", "8", "--seq-len", "1024")
    done = run_cli("translate", "llama-3-8b", *args, "--format", "chakra-et", "-o", out)
    assert done.exit_code == 0, done.output
    stage = json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"][0]
    logits = 1024 * VOCAB * 2  # torchtitan's freed bf16 logits, cached at the loss (frameworks.py)
    assert stage["reserved_bytes"] - stage["total_bytes"] - logits == pytest.approx(pool, abs=2 * (2 << 20))


def test_fsdp1_and_megatron_add_no_all_gather_pool(run_cli: Run, tmp_path: Path) -> None:
    """llm-foundry's FSDP1 keeps its gathered flat parameters in its unshard stream's pool
    themselves (counted as the gathered working set), Megatron gathers none: nothing added."""
    for framework, zero in (("llm-foundry", "3"), ("megatron", "1")):
        out = tmp_path / framework
        args = ("--framework", framework, "--zero", zero, "--dp", "8", "--seq-len", "1024")
        done = run_cli("translate", "llama-3-8b", *args, "--format", "chakra-et", "-o", out)
        assert done.exit_code == 0, done.output
        stage = json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"][0]
        assert stage["reserved_bytes"] == stage["total_bytes"]
