"""Pipeline stages: the layers cut into P x V chunks at transformer-block boundaries.

Blocks are the IR's (Layer.block.index: set by the configuration reader, and by ONNX extraction
from the module paths). Layers before the first block (embeddings) join the first chunk, layers
after the last (final norm, head) the last; a model with no blocks is cut between any layers.
Without --stages a transformer is cut as Megatron-LM cuts it: num_layers / (P x V) blocks per
chunk (megatron/core/transformer/transformer_block.py, get_num_layers_to_build), the embedding in
the first chunk and the final norm and head in the last; blocks that do not divide are a usage
error naming the rule (Megatron asserts it; --stages is its --decoder-first/last-pipeline-num-layers).
Megatron does not balance compute, so neither does a transformer's cut (a balanced cut gives
Llama-3-70B at P 8 10, 11, ..., 11, 4 blocks). A model without blocks (a CNN) is cut where
compute balances: the contiguous partition whose largest chunk is smallest (binary search over
the bound, greedy fill).
"""

from __future__ import annotations

from collections.abc import Sequence

from modtrans.ir.document import Layer
from modtrans.plan.model import Purpose
from modtrans.strategy.llm.degrees import Degree, divisors, register
from modtrans.strategy.llm.options import LayoutError

# the pipeline degree P, the mesh's slowest axis; a sweep tries no more stages than blocks
register(
    Degree(
        "pp",
        Purpose.PIPELINE,
        listed=1,
        tried=lambda left, model: (p for p in divisors(left) if p <= model.blocks),
    )
)


def block_of(layer: Layer) -> int | None:
    """The transformer block a layer belongs to (None: outside the blocks, or nothing says)."""
    return None if layer.block is None else layer.block.index


def blocks(keys: Sequence[int | None]) -> list[list[int]]:
    """Layer indices grouped into blocks, in order (prefix and suffix joined to their neighbour),
    from each layer's block index."""
    if all(k is None for k in keys):
        return [[i] for i in range(len(keys))]
    out: list[list[int]] = []
    current: int | None = None
    prefix: list[int] = []
    for i, key in enumerate(keys):
        if key is None:
            if out:
                out[-1].append(i)  # final norm, head: with the last block
            else:
                prefix.append(i)
            continue
        if key != current:
            out.append([])
            current = key
        out[-1].append(i)
    out[0][:0] = prefix
    return out


def partition(
    weights: Sequence[int], parts: int, explicit: Sequence[int] | None = None, *, even: bool = False
) -> list[range]:
    """Contiguous ranges of block indices, one per chunk: `explicit` sizes, or (`even`, a
    transformer's blocks) Megatron-LM's equal cut, or the cut that balances `weights`."""
    n = len(weights)
    if parts > n:
        raise LayoutError(f"{parts} pipeline chunks (P x V) but the model has {n} blocks to share")
    if explicit is not None:
        _check_stages(explicit, parts, n)
        out, start = [], 0
        for size in explicit:
            out.append(range(start, start + size))
            start += size
        return out
    if even:
        if n % parts:
            raise LayoutError(
                f"Megatron-LM cuts the {n} transformer blocks evenly: they must divide by the {parts} "
                "pipeline chunks (P x V; megatron/training/arguments.py, validate_args: num_layers % "
                "pipeline_model_parallel_size == 0, and by V for interleaving); give --stages to cut "
                "unevenly, as its --decoder-first/last-pipeline-num-layers do"
            )
        size = n // parts
        return [range(i * size, (i + 1) * size) for i in range(parts)]
    low, high = max(weights), sum(weights)
    while low < high:
        bound = (low + high) // 2
        if _fits(weights, parts, bound):
            high = bound
        else:
            low = bound + 1
    return _fill(weights, parts, low)


def _check_stages(explicit: Sequence[int], parts: int, n: int) -> None:
    """A usage error naming the rule a --stages list breaks: its length, an empty chunk, its sum."""
    given = f"--stages {','.join(map(str, explicit))}"
    if len(explicit) != parts:
        raise LayoutError(f"{given} lists {len(explicit)} chunks; the pipeline has {parts} (P x V)")
    empty = [i for i, size in enumerate(explicit, 1) if size < 1]
    if empty:
        which = ", ".join(f"chunk {i} has {explicit[i - 1]}" for i in empty)
        raise LayoutError(f"{given}: every chunk needs at least 1 block ({which})")
    total = sum(explicit)
    if total != n:
        raise LayoutError(f"{given} adds up to {total} blocks; the model has {n}")


def _fits(weights: Sequence[int], parts: int, bound: int) -> bool:
    used, load = 1, 0
    for w in weights:
        if load + w > bound:
            used, load = used + 1, 0
        load += w
    return used <= parts


def _fill(weights: Sequence[int], parts: int, bound: int) -> list[range]:
    """Greedy under the bound, leaving at least one block for every chunk still to open."""
    out: list[range] = []
    start, load, n = 0, 0, len(weights)
    for i, w in enumerate(weights):
        after = parts - len(out) - 1  # chunks to open after the current one
        if i > start and after > 0 and (load + w > bound or n - i <= after):
            out.append(range(start, i))
            start, load = i, 0
        load += w
    out.append(range(start, n))
    return out
