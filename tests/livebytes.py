"""Bytes PyTorch keeps alive, measured: every storage an aten op makes under `Live`, from its
allocation to its last reference (a TorchDispatchMode and weakref finalizers), and the peak of
their sum; storages made before (parameters, inputs) are left out (`Live(existing)`). `events`
keeps each allocation and free in order (an allocation's serial number, its bytes; a free's
number negated), for a caching allocator to replay (tests/caching.py). What the memory tests hold
the activation and loss models to; imported by tests that skip without torch."""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class Live(TorchDispatchMode):  # type: ignore[misc]
    """Live bytes of the storages the ops under it make (`live`), and their peak (`peak`)."""

    def __init__(self, existing: Iterable[Any] = ()) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.events: list[tuple[int, int]] = []
        self._seen = {t.untyped_storage().data_ptr() for t in existing}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
            if size and key not in self._seen:
                self._seen.add(key)
                self.live += size
                self.peak = max(self.peak, self.live)
                serial = len(self.events) + 1
                self.events.append((serial, size))
                weakref.finalize(storage, self._free, key, size, serial)
        return out

    def _free(self, key: int, size: int, serial: int) -> None:
        self.live -= size
        self._seen.discard(key)
        self.events.append((-serial, size))
