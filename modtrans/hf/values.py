"""The values a forward on the meta device reads: computed on the CPU for the few tensors that have
one, chosen by a stated rule for the ones that cannot.

A meta tensor has a shape and no value; a model that reads one (`lengths.max().item()`, a router's
`expert_size.tolist()`, `torch.nonzero(mask)`) stops there. Most such values depend on the inputs
alone, not on any weight: XLM's lengths are `(input_ids != pad).sum(1)`, a vision-language model's
image positions `input_ids == image_token_id`. Values keeps a CPU copy beside each meta tensor
whose value is known: the integer inputs (token ids the configuration's special tokens are not:
no padding; each made by carrying()), factories (arange, full, zeros), and every op whose
operands all have one, run again on the copies (up to LIMIT elements: a larger one goes
without). An op meta has no kernel for (a data-dependent shape: nonzero, masked_select, unique)
takes its output's shape from its value.
A CPU tensor the model's code makes (torch.tensor without a device) and mixes with meta ones
becomes a meta tensor with its value as the copy; torch.tensor(data, device=meta) keeps its data.

A value computed from weights is unknown on meta. The ones a forward reads are a router's choice
of experts; they are taken balanced: top-k row r chooses (r * k + j) mod n for j < k, an argmax
row r mod n, so each of the n experts gets tokens x k / n rows. That is the load the routers'
auxiliary balancing loss trains for (Switch Transformers, Fedus et al. 2021, eq. 4) and what
Megatron-LM's FLOP count assumes (megatron/training/training.py num_floating_point_operations:
`moe_router_topk` experts per token); it is also what batched_mm experts compute (library.build).
A boolean read of an unknown value keeps the forward on its training path: all() true, any()
false (no padding to mask, no inf or nan to clamp).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.weak import WeakIdKeyDictionary

aten = torch.ops.aten
LIMIT = 1 << 23
"""The most elements a tensor's CPU copy holds (a 2048 x 2048 mask is 4 Mi, Idefics3's 17 tiles of
364 x 364 pixels from one image 6.8 Mi): beyond it no value."""

META = torch.device("meta")
"""The meta device: shapes and dtypes, no storage (the hf modules' one definition)."""
CPU = torch.device("cpu")
CHOICES = frozenset({aten.topk, aten.argmax, aten.max})
"""Ops that choose indices from their operand's values: a router's top-k, argmax (Switch
Transformers), max over a dim; balanced where the values are unknown."""


def flat(x: Any) -> Iterator[Any]:
    """The leaves of nested lists, tuples and dicts."""
    if isinstance(x, list | tuple):
        for y in x:
            yield from flat(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from flat(y)
    else:
        yield x


class _Copies(WeakIdKeyDictionary):  # type: ignore[misc]
    """A weak-keyed table whose `in` answers no from the ids ever stored, without the weak
    reference a look-up makes: every operand of every op is asked about, few are in it. An id
    stored once may belong to a dead tensor: that yes is checked by the table itself."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[int] = set()

    def __setitem__(self, key: Any, value: Any) -> None:
        self.ids.add(id(key))
        super().__setitem__(key, value)

    def __contains__(self, key: Any) -> bool:
        return id(key) in self.ids and super().__contains__(key)


class Values(TorchDispatchMode):  # type: ignore[misc]
    """The CPU copies of the meta tensors whose values are known, kept through every op."""

    def __init__(self, given: Mapping[str, Any]) -> None:
        super().__init__()
        self.copies: WeakIdKeyDictionary = _Copies()  # meta tensor -> its CPU copy
        self.made: WeakIdKeyDictionary = WeakIdKeyDictionary()  # a boolean tensor -> the op that made it
        self.kernels: Any = _run  # each op's kernel (library's recording remembers them: kernels.py)
        for t in given.values():
            value = getattr(t, "modtrans_value", None)  # the value an input carries (carrying)
            if value is not None:
                self.copies[t] = value

    def __enter__(self) -> Any:
        self.lists = _Lists(self)
        self.lists.__enter__()
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            self.lists.__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return self.run(func, args, kwargs or {})

    def run(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """`func` on meta, with its outputs' CPU copies where its operands have theirs."""
        packet = func._overloadpacket
        if packet is aten._local_scalar_dense:
            return self.scalar(args[0])
        if packet is aten._to_copy and args[0] in self.copies and kwargs.get("device", META) != META:
            return self.copies[args[0]].to(**kwargs)  # .cpu() of a tensor whose value is known
        copy = self.copy_of(func, args, kwargs)
        try:
            out = (
                func(*args, **kwargs)
                if copy is not None or packet in CHOICES
                else self.kernels(func, args, kwargs)
            )
        except (NotImplementedError, RuntimeError):
            moved = self.moved(args, kwargs)
            if moved is not None:  # a CPU tensor beside meta ones: on meta, its value kept
                return self.run(func, *moved)
            picked = self.picked(func, args)
            if picked is not None:  # a known boolean mask: its indices
                return self.run(func, picked, kwargs)
            if copy is None:  # a data-dependent shape with unknown operands: said as torch says it
                raise
            out = tree_map(_like, copy)
        if copy is None and packet in CHOICES:
            copy = _balanced(func, args, kwargs, out)
        if copy is None and func._schema.is_mutable:  # written by an op whose values are unknown
            for t in _written(func, args, kwargs):
                self.copies.pop(t, None)
        if copy is not None:
            for t, c in zip(flat(out), flat(copy), strict=False):
                if isinstance(t, torch.Tensor) and isinstance(c, torch.Tensor) and t.is_meta:
                    self.copies[t] = c
        for t in flat(out):
            if isinstance(t, torch.Tensor) and t.dtype == torch.bool:
                self.made[t] = packet
        return out

    def moved(self, args: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
        """The operands with each CPU tensor on meta, its value as its copy, where an op mixes
        them (SEW-D's masked_fill(mask, torch.tensor(finfo.min)): a CPU scalar the GPU kernels
        take, meta's checks refuse); None where none is on the CPU or none on meta."""
        tensors = [t for t in flat((args, kwargs)) if isinstance(t, torch.Tensor)]
        if not any(t.is_meta for t in tensors) or all(t.is_meta for t in tensors):
            return None

        def meta(x: Any) -> Any:
            if not isinstance(x, torch.Tensor) or x.is_meta:
                return x
            made = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=META)
            if x.numel() <= LIMIT:
                self.copies[made] = x
            return made

        return tree_map(meta, args), tree_map(meta, kwargs)

    def picked(self, func: Any, args: Any) -> Any:
        """aten.index's operands with each boolean mask whose value is known as the long indices
        it selects (GLM-ASR's audio_embeds[valid_mask]: the shape is the mask's count, whatever
        the values it selects); None where the op is another or a mask's value is unknown."""
        if func._overloadpacket is not aten.index or len(args) < 2:
            return None
        masks = [i for i in args[1] if isinstance(i, torch.Tensor) and i.dtype == torch.bool]
        if not masks or any(i not in self.copies for i in masks):
            return None
        indices: list[Any] = []
        for i in args[1]:
            if isinstance(i, torch.Tensor) and i.dtype == torch.bool:
                for column in self.copies[i].nonzero().unbind(1):
                    made = torch.empty(column.shape, dtype=torch.long, device=META)
                    self.copies[made] = column
                    indices.append(made)
            else:
                indices.append(i)
        return (args[0], indices, *args[2:])

    def copy_of(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """`func` run on the CPU copies of its operands (None where one has none, or too big)."""
        copies, meta, tensors = self.copies, False, False
        for t in flat((args, kwargs)):  # one pass, out at the first operand of unknown value
            if isinstance(t, torch.Tensor):
                tensors = True
                if t.is_meta:
                    if t not in copies or t.numel() > LIMIT:
                        return None
                    meta = True
        if not meta and not _on_meta(args, kwargs):
            return None
        if torch.Tag.nondeterministic_seeded in func.tags or (not tensors and _elements(args) > LIMIT):
            return None

        def cpu(x: Any) -> Any:
            if isinstance(x, torch.Tensor):
                return copies[x] if x.is_meta else x
            return CPU if isinstance(x, torch.device) and x == META else x

        try:
            return func(*tree_map(cpu, args), **tree_map(cpu, kwargs))
        except Exception:  # an op the CPU will not run on these operands: its value stays unknown
            return None

    def scalar(self, t: Any) -> Any:
        """A tensor's value where the model reads one: its own (a CPU tensor), its copy's, or for an
        unknown boolean the training path's (all() true, any() false)."""
        if t.device != META:
            return t.item()
        if t in self.copies:
            return self.copies[t].item()
        if t.dtype == torch.bool and t.numel() == 1:
            return self.made.get(t) is not aten.any
        raise RuntimeError("the model reads a value computed from its weights (Tensor.item()): meta has none")


class _Lists(TorchFunctionMode):  # type: ignore[misc]
    """The Tensor methods that read a meta tensor's values before any op is dispatched (tolist,
    numpy, format: NLLB-MoE's f"expert_{index}"), answered from its copy."""

    def __init__(self, values: Values) -> None:
        super().__init__()
        self.values = values

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in READS and isinstance(args[0], torch.Tensor) and args[0].device == META:
            copy = self.values.copies.get(args[0])
            if copy is None:
                raise RuntimeError("the model reads the values of a tensor computed from its weights")
            return func(copy, *args[1:], **(kwargs or {}))
        kwargs = kwargs or {}
        if func in MADE and str(kwargs.get("device")) == "meta" and args:
            data = tree_map(self._value, args[0])  # Qwen3-ASR's list of ints and 0-d tensors
            if not any(isinstance(x, torch.Tensor) and x.is_meta for x in flat(data)):
                return func(data, *args[1:], **{**kwargs, "device": CPU}).to(META)  # copy kept (_to_copy)
        return func(*args, **kwargs)

    def _value(self, x: Any) -> Any:
        """A meta tensor's copy where it has one (else itself)."""
        if isinstance(x, torch.Tensor) and x.is_meta:
            return self.values.copies.get(x, x)
        return x


READS = frozenset({torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__format__})
MADE = frozenset({torch.tensor, torch.as_tensor})
"""Tensors made from Python data: made on meta directly they carry no value (torch.tensor does
not dispatch its data: Qwen2-VL's torch.tensor([merge_size], device=grid.device)); made on the
CPU (each meta tensor among the data as its copy) and moved, their copy is kept."""


def _run(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    return func(*args, **kwargs)


def _written(func: Any, args: Any, kwargs: dict[str, Any]) -> Iterator[Any]:
    """The tensors an op writes in place (its schema's mutable arguments)."""
    for i, argument in enumerate(func._schema.arguments):
        if argument.alias_info is not None and argument.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(argument.name)
            yield from (t for t in flat(value) if isinstance(t, torch.Tensor))


def _on_meta(args: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a factory makes its tensor on meta (device=meta among its arguments)."""
    return any(isinstance(x, torch.device) and x == META for x in flat((args, kwargs)))


def _elements(args: Any) -> int:
    """The elements a factory makes, from its size argument (0 where its first is no size)."""
    size = args[0] if args and isinstance(args[0], list | tuple) else ()
    count = 1
    for x in size:
        count *= int(x) if isinstance(x, int) else 0
    return count


def _like(x: Any) -> Any:
    """A meta tensor of a CPU tensor's shape and dtype (an op meta cannot run, run on values)."""
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=META)
    return x


def _balanced(func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> Any:
    """The balanced choice of an op that picks indices from unknown values: top-k row r takes
    (r * k + j) mod n, argmax row r mod n; its values stay unknown (None)."""
    packet = func._overloadpacket
    source = args[0]
    if packet is aten.topk:
        k = args[1]
        dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    elif packet in (aten.argmax, aten.max) and (len(args) > 1 or "dim" in kwargs):
        k = 1
        dim = args[1] if len(args) > 1 else kwargs["dim"]
    else:
        return None
    dim = dim % max(source.dim(), 1)
    n = source.shape[dim] if source.dim() else 1
    if n == 0 or source.numel() > LIMIT:
        return None
    moved = list(source.shape)
    moved.pop(dim)
    rows = 1
    for x in moved:
        rows *= x
    chosen = (torch.arange(rows).unsqueeze(1) * k + torch.arange(k)) % n
    chosen = chosen.reshape(*moved, k).movedim(-1, dim)
    indices = list(flat(out))[-1]
    chosen = chosen.reshape(indices.shape).to(indices.dtype)
    return [None] * (len(list(flat(out))) - 1) + [chosen]


def carrying(value: Any) -> Any:
    """A meta tensor of a CPU tensor's shape and dtype that carries the CPU tensor as its value."""
    meta = torch.empty(value.shape, dtype=value.dtype, device=META)
    meta.modtrans_value = value
    return meta


def parameters_of(function: Any) -> set[str]:
    """The names `function` takes."""
    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def forward_args(model: Any) -> set[str]:
    """The names the model's forward takes."""
    return parameters_of(model.forward)
