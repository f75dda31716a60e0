"""Where full recomputation checkpoints: the segments of a model chunk's transformer blocks that
each keep their input alone and run their forward again before their backward, the blocks in
none of them storing what they store without recomputation. One concept, three placements:

Megatron-Core's --recompute-method and --recompute-num-layers N (NVIDIA/Megatron-LM core_r0.14.0,
megatron/core/transformer/transformer_block.py, TransformerBlock._checkpointed_forward; one
TransformerBlock a model chunk, so a pipeline stage's, or under the interleaved schedule each of
its V chunks', num_layers_per_pipeline_rank layers):
    uniform   `while layer_idx < self.num_layers_per_pipeline_rank: checkpoint_handler(custom(
              layer_idx, layer_idx + recompute_num_layers))`: consecutive segments of N layers, each
              one checkpoint (its input kept, the N layers rerun together). custom_forward indexes
              `self._get_layer(index)` for every index of the segment, so N must divide the chunk's
              layers (else an IndexError past the last one): refused here.
    block     `if layer_idx < recompute_num_layers: checkpoint_handler(custom(layer_idx,
              layer_idx + 1))`, else the layer runs plainly: the first N layers of the chunk, each
              a segment of one, the rest not recomputed (fp8's skipped layers aside).
Megatron-LM runs --recompute-granularity full with `--recompute-method uniform
--recompute-num-layers 1` as its usual full recomputation: every layer its own segment, the
placement without either option here (Placement()).

fms-fsdp's spread (--recompute-fraction p; foundation-model-stack/fms-fsdp ed74fd5,
fms_fsdp/policies/ac_handler.py, apply_fsdp_checkpointing): blocks are counted in the model's order
from 1 (`block_idx += 1` for each LLaMABlock that apply_activation_checkpointing visits), `cut_off`
starts at 1/2, and a block is wrapped in a non-reentrant checkpoint_wrapper when `block_idx * p >=
cut_off`, which then grows by one: the checkpointed blocks are the (k + 1/2) / p-th, rounded up,
for k = 0, 1, ... Its docstring's examples: p = 1/2 [ac, no-ac, ac, no-ac, ...], p = 1/3 [no-ac,
ac, no-ac, no-ac, ac, no-ac, ...], p = 2/3 [ac, no-ac, ac, ac, no-ac, ac, ...]; p = 1 every block.
Each picked block is a segment of one; the rule counts the model's blocks (FSDP has no chunks).
The fraction is read exactly from its decimal text (Fraction(str(p))), so that 0.5 and 0.25 fall
on the rule's half-way cut-offs as 1/2 and 1/4 do; fms-fsdp's own float is what `eval("1/3")`
gives, which picks the same blocks as 0.3333 for any model of fewer than 10,000 blocks.

What a segment costs (build.py's rerun, memory.py): its blocks' forward again when the backward
reaches its last block; its input kept per micro-batch in flight (Korthikanti et al. 2022, arXiv
2205.05198, section 5: 2 sbh a checkpoint in 16 bits), and while its backward runs the whole
segment's activations, one segment at a time.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

UNIFORM, BLOCK, SPREAD = "uniform", "block", "spread"
METHODS = (UNIFORM, BLOCK)  # Megatron's --recompute-method choices (arguments.py at core_r0.14.0)


class PlacementError(ValueError):
    """A placement the chunk cannot take (one line)."""


@dataclass(frozen=True)
class Placement:
    """How full recomputation places its segments: `method` uniform (segments of `layers` blocks),
    block (the first `layers` blocks of a chunk, one each) or spread (fms-fsdp's `fraction`)."""

    method: str = UNIFORM
    layers: int = 1
    fraction: float = 1.0

    @property
    def every_block(self) -> bool:
        """Every block a segment of its own: what --recompute full alone means."""
        return self.method == UNIFORM and self.layers == 1

    @property
    def option(self) -> str:
        """The options that say it, as a message names them."""
        if self.method == SPREAD:
            return f"--recompute-fraction {self.fraction:g}"
        return f"--recompute-method {self.method} --recompute-num-layers {self.layers}"


def segments(chunk: Sequence[int], placement: Placement) -> tuple[tuple[int, ...], ...]:
    """The checkpointed segments of one model chunk's blocks (their indices in the model, in
    order), each a tuple of consecutive blocks (the module's docstring); PlacementError where
    Megatron's uniform segments do not tile the chunk."""
    n = placement.layers
    if placement.method == SPREAD:
        return tuple((b,) for b in chunk if recomputes(placement.fraction, b))
    if placement.method == BLOCK:
        return tuple((b,) for b in chunk[:n])
    if len(chunk) % n:
        raise PlacementError(
            f"--recompute-method uniform --recompute-num-layers {n} does not divide a model chunk of "
            f"{len(chunk)} blocks (Megatron's _checkpointed_forward indexes past its last layer)"
        )
    return tuple(tuple(chunk[i : i + n]) for i in range(0, len(chunk), n))


def recomputes(fraction: float, block: int) -> bool:
    """Whether fms-fsdp's rule checkpoints the block of index `block` (from 0): it reads the
    blocks before it alone, so the model's length does not matter."""
    return block in checkpointed(fraction, block + 1)


@functools.cache
def checkpointed(fraction: float, blocks: int) -> frozenset[int]:
    """The indices (from 0, in the model's order) of the first `blocks` blocks that fms-fsdp's
    ac_handler checkpoints at `fraction` (0 < fraction <= 1)."""
    p = Fraction(str(fraction))
    cut_off = Fraction(1, 2)
    chosen = set()
    for index in range(blocks):
        if (index + 1) * p >= cut_off:  # block_idx * p >= cut_off, block_idx counted from 1
            cut_off += 1
            chosen.add(index)
    return frozenset(chosen)
