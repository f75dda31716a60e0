"""Which transformer blocks full recomputation checkpoints: every one, or a fraction p of them
spread evenly (--recompute full --recompute-fraction p), as fms-fsdp's selective activation
checkpointing picks them.

fms-fsdp (foundation-model-stack/fms-fsdp ed74fd5), fms_fsdp/policies/ac_handler.py,
apply_fsdp_checkpointing: blocks are counted in the model's order from 1 (`block_idx += 1` for each
LLaMABlock that apply_activation_checkpointing visits), `cut_off` starts at 1/2, and a block is
wrapped in a non-reentrant checkpoint_wrapper when `block_idx * p >= cut_off`, which then grows by
one: the checkpointed blocks are the (k + 1/2) / p-th, rounded up, for k = 0, 1, ... Its
docstring's examples: p = 1/2 [ac, no-ac, ac, no-ac, ...], p = 1/3 [no-ac, ac, no-ac, no-ac, ac,
no-ac, ...], p = 2/3 [ac, no-ac, ac, ac, no-ac, ac, ...]; p = 1 every block (full recomputation).
A checkpointed block keeps its input alone and runs its forward again before its backward
(activations.py, build.py's rerun); the others keep what they store without recomputation.

The fraction is read exactly from its decimal text (Fraction(str(p))), so that 0.5 and 0.25 fall
on the rule's half-way cut-offs as 1/2 and 1/4 do; fms-fsdp's own float is what `eval("1/3")`
gives, which picks the same blocks as 0.3333 for any model of fewer than 10,000 blocks."""

from __future__ import annotations

import functools
from fractions import Fraction


def recomputes(fraction: float, block: int) -> bool:
    """Whether the block of index `block` (from 0) is checkpointed: the rule reads the blocks
    before it alone, so the model's length does not matter."""
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
