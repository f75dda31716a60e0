"""Activation checkpointing (HYBRID_TRANSFORMER_FWD_IN_BCKWD), as ASTRA-sim 1.0 runs it.

Checkpoints split the layers into segments, each starting at a checkpoint. When the backward
pass reaches a layer in `checkpoint_initiates`, the forward of its segment from the nearest
checkpoint at or before it up to the layer before the initiating one is computed again, with its
forward collectives, and the backward goes on. ASTRA-sim 1.0 does not run the initiating layer's
forward again (astra-sim/astra-sim, branch ASTRA-sim-1.0, astra-sim/workload/Workload.cc,
Workload::iterate_hybrid_parallel_Transformer_fwd_in_bckwd, LoopState::Forward_In_BackPass: after
each recomputed forward `index++; if (layers[index]->needs_fwd_in_bckwd_initiation)
current_state = LoopState::Input_Gradient;`), so neither do the traces: their compute equals the
text's on 1.0 (GPT-2: lm_head's forward, 126,679 ns, is not recomputed). A segment of
one layer (the checkpoint is the initiating layer) recomputes that layer: 1.0 starts its
Forward_In_BackPass there and then runs on into the next segment, which no trace imitates.
The plan carries the lists (Preset.checkpoints: the text's header writes them) and the
recomputed operations.

Default: one checkpoint at layer 0, the recomputation started at the last layer (the whole
forward recomputed once, at the start of the backward), in every dialect; --checkpoint-every K
puts a checkpoint every K layers, each segment recomputed when the backward reaches its end.
"""

from __future__ import annotations

from modtrans.plan.model import Checkpoints
from modtrans.strategy.draft import Draft, StrategyError


def checkpoint(draft: Draft) -> None:
    """Set the checkpoints and the recomputed segments."""
    count = len(draft.layers)
    starts, initiates = checkpoints(draft, count)
    draft.checkpoints = Checkpoints(starts, initiates)
    for end in initiates:
        begin = max((s for s in starts if s <= end), default=0)
        draft.recompute[end] = tuple(range(begin, end)) or (end,)


def checkpoints(draft: Draft, count: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Each segment starts at a checkpoint; its forward is recomputed when the backward pass
    reaches the segment's last layer (the layer before the next checkpoint)."""
    p = draft.parallelism
    if p.checkpoints is not None:
        if any(not 0 <= i < count for i in (*p.checkpoints, *(p.checkpoint_initiates or ()))):
            raise StrategyError(f"checkpoint indices must be layers 0..{count - 1}")
        starts = tuple(sorted(set(p.checkpoints)))
        if p.checkpoint_initiates is not None:
            return starts, tuple(p.checkpoint_initiates)
    else:
        every = p.checkpoint_every or count
        if every < 1:
            raise StrategyError("--checkpoint-every must be at least 1")
        starts = tuple(range(0, count, every))
    ends = [s - 1 for s in starts[1:]] + [count - 1]
    return starts, tuple(reversed(ends))
