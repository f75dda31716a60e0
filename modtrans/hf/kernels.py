"""Meta kernels' outputs remembered by what they read: an op on the meta device computes only its
outputs' shapes, strides and dtypes, from its operands' and its other arguments; the same op on
operands alike gives outputs alike. A model's blocks run the same ops on the same shapes, block
after block, and a sequential loop scans.py does not replace (xLSTM's token loop over the tokens
past its last 64-token chunk) step after step; each run after the first is a dictionary look-up
and an empty meta tensor, where torch's meta kernel runs its Python reference (torch/_refs,
torch/_prims_common: two thirds of the recording's dispatch time in a Mamba scan's steps,
cProfile).

Only ops whose outputs are new tensors are remembered (no mutation, no output aliasing an input:
the schema's alias annotations), with every operand on meta and every argument hashable; any
other runs its kernel each time.
"""

from __future__ import annotations

from typing import Any

import torch

from modtrans.hf.values import META

PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


class Kernels:
    """`func(*args, **kwargs)` on meta, from its first run's output metadata where it ran on
    operands with the same metadata before."""

    def __init__(self) -> None:
        self.pure: dict[Any, bool] = {}  # op overload -> whether its outputs are fresh tensors
        self.seen: dict[Any, Any] = {}  # (op, operands' metadata) -> its outputs' metadata
        self.ran = 0  # kernels run
        self.reused = 0  # outputs made from a remembered run's

    def __call__(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        pure = self.pure.get(func)
        if pure is None:
            pure = self.pure[func] = _pure(func)
        if not pure:
            return func(*args, **kwargs)
        key = signature(func, args, kwargs)
        if key is None:
            return func(*args, **kwargs)
        made = self.seen.get(key)
        if made is not None:
            self.reused += 1
            return _make(made)
        self.ran += 1
        out = func(*args, **kwargs)
        spec = _spec(out)
        if spec is not None:
            self.seen[key] = spec
        return out


def signature(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """`func` with its operands' metadata (shape, strides, dtype) and its other arguments: all an
    op on meta computes from, and all flop_registry's formulas read; None where an argument is
    not such metadata."""
    try:
        return (func, _key(args), _key(tuple(kwargs.items())))
    except _Unkeyed:
        return None


class _Unkeyed(Exception):
    """An argument that is not hashable metadata (a CPU tensor, a SymInt, an object)."""


def _pure(func: Any) -> bool:
    schema = func._schema
    if schema.is_mutable or not schema.returns:
        return False
    return all(r.alias_info is None and isinstance(r.type, torch.TensorType) for r in schema.returns)


def _key(items: Any) -> tuple[Any, ...]:
    key: list[Any] = []
    for x in items:
        if isinstance(x, torch.Tensor):
            if not x.is_meta or x.is_conj() or x.is_neg():
                raise _Unkeyed
            key.append((x.shape, x.stride(), x.dtype, x.requires_grad))
        elif isinstance(x, list | tuple):
            key.append((type(x), _key(x)))
        elif isinstance(x, PLAIN):
            key.append((type(x), x))
        else:
            raise _Unkeyed
    return tuple(key)


def _spec(out: Any) -> Any:
    outs = out if isinstance(out, tuple) else (out,)
    if not all(isinstance(t, torch.Tensor) and t.is_meta for t in outs):
        return None
    specs = tuple((tuple(t.shape), t.stride(), t.dtype) for t in outs)
    return (isinstance(out, tuple), specs)


def _make(made: Any) -> Any:
    many, specs = made
    outs = tuple(torch.empty_strided(s, st, dtype=d, device=META) for s, st, d in specs)
    return outs if many else outs[0]
