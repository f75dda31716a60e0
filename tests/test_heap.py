"""heap.paused and heap.frozen against CPython's collector itself (gc.isenabled,
gc.get_freeze_count): the collector is off inside, as the caller had it after, an exception
included; what `frozen` built is in the permanent generation."""

from __future__ import annotations

import gc
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from modtrans import heap


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("block", [heap.paused, heap.frozen])
def test_the_collector_is_off_inside_and_as_it_was_after(
    enabled: bool, block: Callable[[], AbstractContextManager[None]]
) -> None:
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        with block():
            assert not gc.isenabled()
        assert gc.isenabled() is enabled
        with pytest.raises(KeyError), block():
            raise KeyError("a failure inside")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_what_frozen_builds_is_frozen_and_what_paused_builds_is_not() -> None:
    try:
        before = gc.get_freeze_count()
        with heap.paused():
            kept = [[i] for i in range(1000)]
        assert gc.get_freeze_count() == before
        with heap.frozen():
            kept += [[i] for i in range(1000)]
        assert gc.get_freeze_count() >= before + 1000
    finally:
        gc.unfreeze()
