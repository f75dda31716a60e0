"""Pausing Python's cyclic garbage collector while a large acyclic structure is built (`paused`),
and freezing one that lives on (`frozen`).

The collector scans every tracked object of the older generations each time their allocations
grow by a quarter, so building a 280-stage pipeline's millions of operations, tuples and tensors
(none of them in a cycle: reference counting frees them) scanned the growing heap again and again:
a third of the plan's build at 70 micro-batches of GPT 530B (4.1 s of CPU, 2.6 s with the
collector paused; bench/bench_bigpipe.py builds the full 280)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection inside the block (its garbage is freed by reference counting, any cycle
    at the next collection after it); the collector is left as the caller had it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """`paused`, and what the block built then frozen (gc.freeze: later collections skip it,
    reference counting still frees it): for a structure that outlives the block. The young garbage
    is collected first, which is cheap, so no earlier cycle is frozen with it."""
    gc.collect(1)
    with paused():
        try:
            yield
        finally:
            gc.freeze()
