"""Pair the layers of two workloads: by name, then by content, then by position; find the moves.

Pure functions on sequences of hashable keys, O(n log n) in the number of layers (no quadratic
step, so two 100,000-layer files align in well under a second):

1. names     the k-th layer called X on one side pairs with the k-th called X on the other;
2. content   layers left over pair with a left-over layer of identical compared fields, in order,
             then (weaker keys) of identical communication fields only; among equal fields, a
             layer whose name ends in the same word first (layer1.0.conv3 with layer_64_1_conv3,
             not with the shortcut conv of the same size listed before it);
3. position  between consecutive in-order pairs (anchors), the layers still unpaired on both
             sides pair up in order (a renamed and changed layer); the rest are added / removed;
4. moves     the pairs outside a longest increasing subsequence of the second side's positions
             are the moved ones: the fewest layers whose moving explains the order.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import defaultdict, deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Alignment:
    pairs: dict[int, int]  # index in the first -> index in the second
    moved: frozenset[int]  # first-side indices of pairs that are out of order
    added: tuple[int, ...]  # first-side indices without a partner
    removed: tuple[int, ...]  # second-side indices without a partner


def align(
    names_a: Sequence[str],
    names_b: Sequence[str],
    content_a: Sequence[Hashable],
    content_b: Sequence[Hashable],
    *,
    use_names: bool = True,
    weaker: Sequence[tuple[Sequence[Hashable], Sequence[Hashable]]] = (),
) -> Alignment:
    """`weaker` are further (first, second) keys tried after the full content, in order: a subset
    of the fields (the communication) that still identifies a layer whose compute times changed."""
    pairs: dict[int, int] = {}
    if use_names:
        _match(_occurrences(names_a), _occurrences(names_b), range(len(names_a)), range(len(names_b)), pairs)
    tails_a, tails_b = [_tail(n) for n in names_a], [_tail(n) for n in names_b]
    for keys_a, keys_b in ((content_a, content_b), *weaker):
        # among equal keys, layers whose names end alike first (conv3 and conv3): a choice among
        # equals, so also with use_names off (names then decide no pair that content does not)
        by_tail = (list(zip(keys_a, tails_a, strict=True)), list(zip(keys_b, tails_b, strict=True)))
        for round_a, round_b in (by_tail, (keys_a, keys_b)):
            taken_b = set(pairs.values())
            free_a = [i for i in range(len(content_a)) if i not in pairs]
            free_b = [j for j in range(len(content_b)) if j not in taken_b]
            _match(round_a, round_b, free_a, free_b, pairs)
    _by_position(pairs, len(content_a), len(content_b))
    in_order = _increasing(sorted(pairs.items()))
    taken_b = set(pairs.values())
    return Alignment(
        pairs=pairs,
        moved=frozenset(a for a in pairs if a not in in_order),
        added=tuple(i for i in range(len(content_a)) if i not in pairs),
        removed=tuple(j for j in range(len(content_b)) if j not in taken_b),
    )


def _tail(name: str) -> str:
    """A name's last word (`conv3` of `layer1.0.conv3` and of `layer_64_1_conv3`): what two naming
    schemes of one model may share."""
    return re.split(r"[._/:]", name)[-1]


def _occurrences(names: Sequence[str]) -> list[tuple[str, int]]:
    """(name, k) for the k-th layer of that name, so repeated names pair in order."""
    seen: dict[str, int] = defaultdict(int)
    keys = []
    for name in names:
        keys.append((name, seen[name]))
        seen[name] += 1
    return keys


def _match(
    keys_a: Sequence[Hashable],
    keys_b: Sequence[Hashable],
    free_a: Sequence[int],
    free_b: Sequence[int],
    pairs: dict[int, int],
) -> None:
    """Pair free layers with equal keys, each key's occurrences in order."""
    waiting: dict[Hashable, deque[int]] = defaultdict(deque)
    for j in free_b:
        waiting[keys_b[j]].append(j)
    for i in free_a:
        queue = waiting.get(keys_a[i])
        if queue:
            pairs[i] = queue.popleft()


def _by_position(pairs: dict[int, int], count_a: int, count_b: int) -> None:
    """Pair the unpaired layers between consecutive in-order anchors, in order."""
    anchors = sorted(_increasing(sorted(pairs.items())).items())
    taken_b = set(pairs.values())
    bounds = [(-1, -1), *anchors, (count_a, count_b)]
    for (a0, b0), (a1, b1) in itertools.pairwise(bounds):
        gap_a = [i for i in range(a0 + 1, a1) if i not in pairs]
        gap_b = [j for j in range(b0 + 1, b1) if j not in taken_b]
        for i, j in zip(gap_a, gap_b, strict=False):
            pairs[i] = j


def _increasing(items: Sequence[tuple[int, int]]) -> dict[int, int]:
    """A longest subsequence of (a, b) pairs, sorted by a, whose b also increases (patience sort)."""
    tails: list[int] = []  # smallest b ending an increasing run of each length
    tail_at: list[int] = []  # index into items of that b
    parent = [-1] * len(items)
    for k, (_, b) in enumerate(items):
        length = bisect.bisect_left(tails, b)
        if length == len(tails):
            tails.append(b)
            tail_at.append(k)
        else:
            tails[length] = b
            tail_at[length] = k
        parent[k] = tail_at[length - 1] if length else -1
    chosen: dict[int, int] = {}
    k = tail_at[-1] if tail_at else -1
    while k != -1:
        a, b = items[k]
        chosen[a] = b
        k = parent[k]
    return chosen
