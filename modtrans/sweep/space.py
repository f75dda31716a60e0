"""The search space of a sweep and its enumeration: every layout of N GPUs that Megatron-LM
accepts, as the Layout object (strategy/llm/options.py) and the model's own rules
(strategy/llm/footprint.py: its heads, experts, sequence and blocks) judge it, with a count of
those refused under each rule.

    space = Space.of(tp=(1, 2, 4, 8), recompute=(Recompute.NONE, Recompute.FULL))
    found = enumerate_layouts(space, npus=1024, global_batch=1024, model=Model(blocks=80, experts=0),
                              check=footprint.check)
    found.layouts, found.refused     # the layouts, and {rule: how many it refused}

The degrees searched are the registry's (strategy/llm/degrees.py), each but D (which follows from
N) tried in the rank order, those carved from D last. An option the user leaves out takes every
value that can be valid: each degree's choices (the divisors of what is left of N for T, C and P,
P at most the blocks; the divisors of the experts for E), 1 and each V >= 2 that divides the blocks
per stage, the divisors of the micro-batches per replica for M, every recomputation, the
distributed optimizer on and off (other frameworks: each ZeRO stage they have, zero_stages), and
sequence parallelism where T > 1 (Megatron-Core's MoE
layer refuses T > 1 without it; a dense model trains faster with it: Korthikanti et al. 2022), and
--tp-comm-overlap off (the plain Megatron-LM run; `on,off` tries Transformer Engine's
userbuffers too, each layout the rule refuses it, without SP, counted under that rule).
Values are given as a list or an inclusive range (`1,2,4,8`, `1:16`, `1,2,8:16`: rules.integers);
each is tried, and the rules say which hold (one that does not divide N is refused by that rule).
V = 1 runs Megatron's 1F1B schedule, V >= 2 its interleaved one.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.degrees import Degree, divisors, registered, sizes
from modtrans.strategy.llm.options import Layout, LayoutError, Recompute, Schedule, ordered


def searched() -> tuple[Degree, ...]:
    """The degrees a sweep tries, in the order it tries them: the rank order's (options.ORDER),
    the factors of N beside D first (what is left of N bounds the next), those carved from D
    after; D itself follows from N."""
    tried = [d for d in ordered() if not d.data]
    return tuple(sorted(tried, key=lambda d: d.carved))


@dataclass(frozen=True)
class Space:
    """The values tried of each layout option (None, or a degree not in `degrees`: every value
    that can be valid); `degrees` by token (strategy/llm/degrees.py)."""

    degrees: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    vpp: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] | None = None
    recompute: tuple[Recompute, ...] = tuple(Recompute)
    distributed_optimizer: tuple[bool, ...] = (True, False)
    sp: tuple[bool, ...] | None = None
    tp_comm_overlap: tuple[bool, ...] = (False,)  # Megatron-Core's userbuffers (strategy/llm/userbuffers.py)
    zero: tuple[int, ...] | None = None  # None: zero_stages()

    @classmethod
    def of(cls, **given: Any) -> Space:
        """A space from the options by name, a registered degree's (--tp ...) among them
        (TypeError: a name that is neither a degree nor a field)."""
        known = registered()
        return cls(
            degrees={k: v for k, v in given.items() if k in known},
            **{k: v for k, v in given.items() if k not in known},
        )


@dataclass(frozen=True)
class Model:
    """What of the model the defaults read: its transformer blocks and routed experts (0: dense)."""

    blocks: int
    experts: int = 0


@dataclass
class Found:
    layouts: list[Layout] = field(default_factory=list)
    refused: Counter[str] = field(default_factory=Counter)  # rule -> layouts it refused


def _rule(message: str) -> str:
    """A refusal's rule: its message with the numbers taken out, so that one rule counts once."""
    return re.sub(r"[0-9][0-9,]*", "N", message)


def enumerate_layouts(
    space: Space,
    *,
    npus: int,
    global_batch: int,
    model: Model,
    check: Callable[[Layout], None] | None = None,
    **fixed: Any,
) -> Found:
    """Every layout of the space that the rules accept; `check` the model's (LayoutError);
    `fixed`: the Layout fields every layout shares (framework, overlap_grad_reduce ...)."""
    found = Found()
    for layout in _candidates(space, npus, global_batch, model, found.refused, fixed):
        try:
            if check is not None:
                check(layout)
        except LayoutError as error:
            found.refused[_rule(str(error))] += 1
            continue
        found.layouts.append(layout)
    return found


def _candidates(
    space: Space, npus: int, batch: int, model: Model, refused: Counter[str], fixed: dict[str, Any]
) -> Iterator[Layout]:
    framework = fixed.get("framework", Framework.MEGATRON)
    for chosen in _sizes(space, searched(), npus, model, {}, framework):
        beside = math.prod(chosen[d.token] for d in searched() if d.beside_data)
        data = npus // beside if npus % beside == 0 else 1
        pp = chosen.get("pp", 1)
        for vpp in space.vpp or _chunks(pp, model.blocks):
            for mb in space.micro_batch or divisors(max(batch // data, 1)):
                yield from _variants(space, refused, fixed, npus, batch, chosen, vpp, mb)


def _sizes(
    space: Space,
    rest: tuple[Degree, ...],
    npus: int,
    model: Model,
    chosen: dict[str, int],
    framework: Framework,
) -> Iterator[dict[str, int]]:
    """Each combination of the degrees' sizes, the first degree's slowest: a degree's choices
    bounded by what the factors of N chosen before it leave, 1 alone for a degree the framework
    does not run (Degree.runs: no context parallelism under DeepSpeed)."""
    if not rest:
        yield dict(chosen)
        return
    first, known = rest[0], registered()
    left = npus // math.prod(size for token, size in chosen.items() if known[token].beside_data)
    for size in space.degrees.get(first.token) or first.choices(max(left, 1), model, framework):
        yield from _sizes(space, rest[1:], npus, model, {**chosen, first.token: size}, framework)


def _chunks(pp: int, blocks: int) -> tuple[int, ...]:
    """V = 1, and each V >= 2 dividing the blocks of a stage (P > 1)."""
    if pp == 1 or blocks % pp:
        return (1,)
    return (1, *(v for v in divisors(blocks // pp) if v >= 2))


def _variants(
    space: Space,
    refused: Counter[str],
    fixed: dict[str, Any],
    npus: int,
    batch: int,
    chosen: Mapping[str, Any],  # each degree's size, by token
    vpp: int,
    mb: int,
) -> Iterator[Layout]:
    schedule = Schedule.INTERLEAVED if vpp > 1 else Schedule.ONE_F_ONE_B
    stages = zero_stages(space, fixed.get("framework", Framework.MEGATRON))
    for sp in space.sp or ((True,) if chosen.get("tp", 1) > 1 else (False,)):
        for recompute, zero, overlap in itertools.product(space.recompute, stages, space.tp_comm_overlap):
            try:
                yield Layout(
                    npus=npus,
                    **chosen,
                    vpp=vpp,
                    schedule=schedule,
                    micro_batch=mb,
                    global_batch=batch,
                    recompute=recompute,
                    zero=zero,
                    sp=sp,
                    tp_comm_overlap=overlap,
                    **fixed,
                )
            except LayoutError as error:  # --tp-comm-overlap without SP among them
                refused[_rule(str(error))] += 1


def zero_stages(space: Space, framework: Framework) -> tuple[int, ...]:
    """The ZeRO stages tried: --zero's; else the framework's own (own_stages), or Megatron-LM's
    distributed optimizer on (ZeRO-1) and off (0) as --distributed-optimizer says."""
    if space.zero is not None:
        return space.zero
    return own_stages(framework) or tuple(1 if on else 0 for on in space.distributed_optimizer)


def own_stages(framework: Framework) -> tuple[int, ...] | None:
    """The ZeRO stages a framework has where --distributed-optimizer does not choose them:
    DeepSpeed's 0-3, FSDP's NO_SHARD (0), SHARD_GRAD_OP (2) and FULL_SHARD (3) (it has no
    ZeRO-1), NeMo's distributed_fused_adam (1); None for Megatron-LM's."""
    if framework.family is Framework.DEEPSPEED:
        return (0, 1, 2, 3)
    if framework.family is Framework.FSDP:
        return (0, 2, 3)
    if framework is Framework.NEMO:  # its distributed_fused_adam (frameworks.py)
        return (1,)
    return None


DERIVED = ("micro_batches", "distributed_optimizer")
"""The table's columns of a layout that follow from its other options (B / (M D); ZeRO >= 1):
shown, not given to `modtrans translate` (finalists.translation_options)."""


def options_of(layout: Layout) -> dict[str, Any]:
    """A layout as the sweep's table names its options (rows.Row's fields; and, but for D and
    DERIVED, as `modtrans translate` takes them): every degree's size (degrees.sizes: `dp` is D),
    then the others."""
    return {
        **sizes(lambda d: d.ranks(layout)),
        "vpp": layout.vpp,
        "schedule": layout.schedule.value,
        "micro_batch": layout.micro_batch,
        "micro_batches": layout.micro_batches,
        "recompute": layout.recompute.value,
        "distributed_optimizer": layout.zero >= 1,
        "zero": layout.zero,
        "sp": layout.sp,
        "tp_comm_overlap": layout.tp_comm_overlap,
    }
