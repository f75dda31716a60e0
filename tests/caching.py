"""PyTorch's CUDA caching allocator as it serves one stream's requests, enough to replay a
sequence of allocations and frees and read what torch.cuda.max_memory_reserved reports: the
segments it asked the device for, which it keeps after their blocks are freed.

From c10/cuda/CUDACachingAllocator.cpp (pytorch/pytorch, v2.5 to main), with its default
configuration (no max_split_size, no expandable segments, no garbage collection threshold):

    round_size           every request rounded up to a multiple of kMinBlockSize, 512 B
    pools                requests up to kSmallSize (1 MiB) from the small pool, the rest the large
    get_free_block       the smallest free block of the request's pool at least its size
                         (BlockComparatorSize: by size, then address)
    get_allocation_size  without one, a new segment: kSmallBuffer (2 MiB) for a small request,
                         kLargeBuffer (20 MiB) under kMinLargeAlloc (10 MiB), else the request
                         rounded up to kRoundLarge (2 MiB)
    should_split         the rest of a block becomes a free block of its own where it is at least
                         kMinBlockSize (small pool) or more than kSmallSize (large pool)
    free_block           a freed block merges with the free blocks beside it in its segment

Segments are returned to the device only when an allocation would otherwise fail
(release_cached_blocks), which a replay below the device's capacity never reaches. A test's
helper, as tests/livebytes.py: the independent side the memory model's reserved bytes are held to.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_BUFFER = 2 << 20
LARGE_BUFFER = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


@dataclass
class _Block:
    segment: int
    offset: int
    size: int
    small: bool
    free: bool = True


def _round(size: int) -> int:
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def _segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class Allocator:
    """One stream's pools: `reserved` the bytes of its segments, `allocated` of its live blocks."""

    def __init__(self) -> None:
        self.blocks: list[_Block] = []
        self.reserved = self.allocated = self.peak_allocated = 0
        self._live: dict[int, _Block] = {}

    def malloc(self, ident: int, requested: int) -> None:
        size = _round(requested)
        small = size <= SMALL_SIZE
        fits = [b for b in self.blocks if b.free and b.small == small and b.size >= size]
        if fits:
            block = min(fits, key=lambda b: (b.size, b.segment, b.offset))
        else:
            block = _Block(len({b.segment for b in self.blocks}), 0, _segment_size(size), small)
            self.blocks.append(block)
            self.reserved += block.size
        rest = block.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            self.blocks.append(_Block(block.segment, block.offset + size, rest, small))
            block.size = size
        block.free = False
        self._live[ident] = block
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def free(self, ident: int) -> None:
        block = self._live.pop(ident)
        block.free = True
        self.allocated -= block.size
        for other in sorted(self.blocks, key=lambda b: b.offset):
            if other is block or not other.free or other.segment != block.segment:
                continue
            if other.offset + other.size == block.offset or block.offset + block.size == other.offset:
                block.offset = min(block.offset, other.offset)
                block.size += other.size
                self.blocks.remove(other)

    def replay(self, events: Iterable[tuple[int, int]]) -> Allocator:
        """Each (serial, bytes) an allocation, (-serial, bytes) its free (tests/livebytes.py)."""
        for serial, size in events:
            if serial > 0:
                self.malloc(serial, size)
            elif -serial in self._live:
                self.free(-serial)
        return self
