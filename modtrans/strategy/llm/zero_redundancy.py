"""PyTorch's ZeroRedundancyOptimizer's partition of the parameters over the data ranks
(`--framework flash-attn --zero 1`; its collectives: buckets.py), as it sets the optimizer state
the first rank keeps (memory.py).

Read from pytorch/pytorch torch/distributed/optim/zero_redundancy_optimizer.py (013a31b7; the
same in torch 2.13), ZeroRedundancyOptimizer._partition_parameters without params_per_rank:

    sizes = [0] * world_size
    for param_group in self.param_groups:
        params_sorted = sorted(param_group["params"], key=lambda t: t.numel(), reverse=True)
        for param in params_sorted:
            rank = self._get_min_index(sizes)          # the first of the smallest
            param_group_params_per_rank[rank].append(param)
            sizes[rank] += param.numel()

Each parameter goes whole to one rank. The groups are flash-attention's (4a6eaa9f, training/src/
optim/param_grouping.py, group_parameters_for_optimizer, with base.yaml's weight_decay 0.1,
bias_weight_decay and normalization_weight_decay False): first the weights of its nn.Linear
modules (decayed), then every other parameter (biases, norms, embeddings; a weight tied to an
embedding is the embedding's, once). So the linear weights split evenly and the word embedding, the
second group's largest, lands on rank 0 on top: GPT3-2.7B's rank 0 keeps 1.34 x the mean at D = 8.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

from modtrans.ir.document import Kind, Role
from modtrans.strategy.llm.options import Layout
from modtrans.strategy.llm.unit import Unit


def partition(groups: Sequence[Sequence[int]], ranks: int) -> list[int]:
    """The elements each rank is given: `groups`, each parameter group's parameter sizes
    (numel), in the optimizer's order (_partition_parameters, the module's docstring). The ranks
    by (size, index) on a heap: its smallest is _get_min_index's first of the smallest."""
    heap = [(0, rank) for rank in range(ranks)]
    for group in groups:
        for numel in sorted(group, reverse=True):  # a stable sort: equal sizes in either order alike
            size, rank = heap[0]
            heapq.heapreplace(heap, (size + numel, rank))
    sizes = [0] * ranks
    for size, rank in heap:
        sizes[rank] = size
    return sizes


def parameters(u: Unit) -> list[tuple[int, bool]]:
    """The unit's parameters as this rank holds them (its tensor-parallel share), each with
    whether flash-attention's grouping decays it (a linear layer's weight)."""
    linear = u.x.owner.kind is Kind.LINEAR
    return [
        (u.held(p), linear and p.role is Role.WEIGHT)
        for p in u.x.owner.params
        if p.trainable and p.counted and p.elements > 0
    ]


def first_share(params: Iterable[tuple[int, bool]], layout: Layout) -> float | None:
    """The fraction of the parameters (and so of the optimizer state) rank 0 of the data ranks
    keeps under `layout` where it runs ZeroRedundancyOptimizer, else None: `params` every
    parameter (size, decayed) the optimizer holds, parameters() of the rank's units."""
    if not (layout.framework.zero_broadcast and layout.zero == 1):
        return None
    listed = list(params)
    decayed = [n for n, decay in listed if decay]
    rest = [n for n, decay in listed if not decay]
    sizes = partition([decayed, rest], layout.gradient_ranks)
    total = sum(sizes)
    return sizes[0] / total if total else 1 / layout.gradient_ranks
