"""Megatron-LM's data-parallel reduction of a fast-tier chunk: its gradient buffers filled as
strategy/llm/buckets.py fills one bucket per buffer (the default, without --overlap-grad-reduce),
each block's fill made once and a chunk's the sum of its blocks', the collectives timed on the
layout's groups; a weight tied across stages (build.py's _tied) in its copy's buffer, or all-reduced
on its own under the other frameworks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from modtrans.estimate.collectives import Fabric
from modtrans.estimate.units import Skeleton, Tie
from modtrans.plan.model import Place, Purpose
from modtrans.plan.sizes import Consumer, written
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.options import Layout

Fill = dict[
    frozenset[Purpose], tuple[int, float, float]
]  # buffer -> (elements, gradient bytes, parameter bytes)


def fill(sk: Skeleton, units: Sequence[int], zero: int) -> Fill:
    """What `units` put in Megatron's buffers, filled as buckets.py fills a bucket (backward order,
    each parameter started on a multiple of 64 elements under the distributed optimizer); a chunk's
    bucket is its blocks' fills added (the blocks' parameter counts are multiples of 64 in every
    model modtrans plans, so the starts do not move)."""
    from modtrans.strategy.llm.buckets import Bucket

    buckets: dict[frozenset[Purpose], Any] = {}
    padded = zero in (1, 2)
    for i in reversed(units):
        shard = sk.shards[i]
        if shard is None:
            continue
        bucket = buckets.setdefault(sk.buffers[i], Bucket())
        for n in reversed(shard.elements):
            bucket.add(n, shard, padded)
    return {b: (x.filled, x.grad_bytes, x.param_bytes) for b, x in buckets.items() if x.filled}


def tied_fill(sk: Skeleton, tie: Tie, zero: int) -> Fill:
    """What a tied copy adds to its stage's Megatron buffer (buckets.buffer_share with the copy)."""
    from modtrans.strategy.llm.buckets import Bucket

    if tie.shard is None:
        return {}
    bucket = Bucket()
    for n in reversed(tie.shard.elements):
        bucket.add(n, tie.shard, zero in (1, 2))
    return (
        {sk.buffers[tie.copy]: (bucket.filled, bucket.grad_bytes, bucket.param_bytes)}
        if bucket.filled
        else {}
    )


def tied_ns(
    sk: Skeleton,
    tie: Tie,
    layout: Layout,
    fabric: Fabric,
    members: Callable[[frozenset[Purpose]], tuple[int, ...]],
) -> int:
    """The other frameworks' all-reduce of a tied copy's gradient over the data ranks (build.py's _tied)."""
    from modtrans.comm import CommType
    from modtrans.strategy.llm.degrees import dense_data

    if layout.framework.family is Framework.MEGATRON or layout.gradient_ranks < 2:
        return 0
    ranks = members(dense_data())
    return fabric.collective_ns(CommType.ALLREDUCE, tie.bytes, ranks) if len(ranks) > 1 else 0


def bucket_times(
    fills: Sequence[Fill],
    zero_broadcast: tuple[int, bool],
    fabric: Fabric,
    members: Callable[[frozenset[Purpose]], tuple[int, ...]],
    prepare: Callable[[int], int] | None = None,
) -> tuple[dict[frozenset[Purpose], tuple[int, list[int]]], int]:
    """Megatron's reduction of one chunk (its blocks' fills): one bucket per buffer, the ns of
    the kernels before its collective (`prepare`: build.sync_kernels, Comm.kernel) and its
    collectives as buckets.py makes them (Bucket.reduce: the all-reduce, or the reduce-scatter),
    timed, per buffer; and the distributed optimizer's all-gathers of the buckets' parameters, or
    ZeroRedundancyOptimizer's broadcast (`zero_broadcast`: buckets.stage), which follow the
    optimizer step (Place.AFTER_STEP), their ns summed."""
    zero, broadcast = zero_broadcast
    import math

    from modtrans.strategy.llm.buckets import BUCKET_ALIGN, Bucket

    total: dict[frozenset[Purpose], list[float]] = {}
    for f in fills:
        for buffer, values in f.items():
            sums = total.setdefault(buffer, [0, 0.0, 0.0])
            for k in range(3):
                sums[k] += values[k]
    out: dict[frozenset[Purpose], tuple[int, list[int]]] = {}
    after_step = 0
    for buffer, (filled, grads, params) in total.items():
        ranks = members(buffer)
        alone = len(ranks) < 2  # its kernels alone, where the framework runs them at D = 1
        if alone and prepare is None:
            continue
        bucket = Bucket(int(filled), grads, params)
        attached = _Attached()
        divisor = math.lcm(len(ranks), BUCKET_ALIGN) if zero in (1, 2) else None
        gathers = bucket.reduce(attached, buffer, divisor, broadcast, prepare, alone)  # type: ignore[arg-type]

        def ns(c: Any, ranks: tuple[int, ...] = ranks) -> int:
            return fabric.collective_ns(
                c.comm, written(c.comm, c.bytes, len(ranks), Consumer.ASTRA_SIM), ranks
            )

        issued = [ns(c) for c in attached.comms if c.comm.moves_data]
        out[buffer] = (sum(c.kernel for c in attached.comms), issued)
        after_step += sum(ns(c) for c in gathers)
    return out, after_step


class _Attached:
    """Where buckets.py's Bucket.reduce attaches a bucket's collective: kept here instead."""

    def __init__(self) -> None:
        self.comms: list[Any] = []

    def attach(self, place: Place, comm: Any) -> None:
        self.comms.append(comm)
