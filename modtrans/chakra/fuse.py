"""A plan whose programs run each chain of compute one node after another as one node, for
traces ASTRA-sim 2.x can hold: its feeder (FeederV3, et_feeder.cpp: build_index_dependancy_cache)
keeps an index entry and three dependency-graph entries for every node of every rank's trace
before it runs, so its memory grows with the nodes of the whole set.

Two computes fuse where the second's only dependency is the first, the first's only dependent is
the second and no other compute comes between them in the program. A rank runs one compute at a
time (HardwareResource: one GPU compute op in flight) and the programs order every compute after
the one before it, so the second starts when the first ends either way: the fused node takes
their summed time. Each keeps its whole microseconds (chakra/write.py's durations: the rounding
carried in file order, and no compute moves past another), and none of 0 us fuses (ASTRA-sim
runs a node of 0 us for 1 ns). A collective of one rank, which the writer leaves out, is passed
through as the writer passes it (its dependents wait for its dependencies).

For traces of one pass (--passes 1: the next pass's dependencies name layers' computes).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence

from modtrans.chakra.write import durations
from modtrans.plan.model import Collective, Compute, Op, Plan
from modtrans.plan.programs import Programs


def fused(plan: Plan, tick_ns: float = 1.0) -> Plan:
    """`plan` with each program's compute chains fused, each built when read (plan/programs.py);
    `tick_ns` the plan's tick (1 for a plan translated for traces)."""

    def alone(op: Collective) -> bool:
        return plan.mesh.span(op.over) < 2

    def build(p: int, outline: bool) -> tuple[Op, ...]:
        ops = plan.programs[p]
        return program(ops, durations(ops, tick_ns)[0], alone)

    return dataclasses.replace(plan, programs=Programs(len(plan.programs), build))


def nodes(plan: Plan) -> int:
    """The nodes of the plan's trace set, every rank's (what ASTRA-sim's feeder holds): each
    program's operations but its collectives of one rank, times the ranks running it."""
    ranks = Counter(plan.program_of)
    total = 0
    for p, count in ranks.items():
        ops = plan.programs[p]
        alone = sum(1 for op in ops if isinstance(op, Collective) and plan.mesh.span(op.over) < 2)
        total += (len(ops) - alone) * count
    return total


def program(ops: Sequence[Op], micros: Sequence[int], alone: Callable[[Collective], bool]) -> tuple[Op, ...]:
    """`ops` with each chain of computes fused into its first (the module's rule); `micros` each
    operation's whole microseconds as the writer gives them, `alone` a collective the writer
    leaves out."""
    stands: list[tuple[int, ...]] = []  # per operation: the operations its dependents wait for
    deps: list[tuple[int, ...] | None] = []  # per operation the writer keeps: its dependencies
    children = [0] * len(ops)
    for i, op in enumerate(ops):
        found = tuple(sorted({k for d in op.deps for k in stands[d]}))
        if isinstance(op, Collective) and alone(op):
            stands.append(found)
            deps.append(None)
            continue
        stands.append((i,))
        deps.append(found)
        for d in found:
            children[d] += 1
    head = list(range(len(ops)))  # each operation's chain's first
    members: dict[int, list[int]] = {}
    previous = -1  # the last compute
    for i, op in enumerate(ops):
        if not isinstance(op, Compute):
            continue
        if deps[i] == (previous,) and children[previous] == 1 and micros[i] > 0 and micros[previous] > 0:
            head[i] = head[previous]
            members[head[i]].append(i)
        else:
            members[i] = [i]
        previous = i
    index: dict[int, int] = {}
    for i in range(len(ops)):
        if head[i] == i:
            index[i] = len(index)
    out: list[Op] = []
    for i, op in enumerate(ops):
        if head[i] != i:
            continue
        kept = deps[i]
        own = op.deps if kept is None else kept
        after = tuple(sorted({index[head[d]] for d in own}))
        if isinstance(op, Compute) and len(members[i]) > 1:
            out.append(_joined([ops[m] for m in members[i]], after))  # type: ignore[misc]
        else:
            out.append(dataclasses.replace(op, deps=after))
    return tuple(out)


def _joined(chain: Sequence[Compute], deps: tuple[int, ...]) -> Compute:
    """One compute for a chain: the first's layer and step, the summed time and FLOPs (and the
    model's of them: Compute.model), what the chain reads from outside it and everything it
    writes."""
    written = {t.name for c in chain for t in c.outputs}
    inputs = tuple(dict.fromkeys(t for c in chain for t in c.inputs if t.name not in written))
    outputs = tuple(t for c in chain for t in c.outputs)
    first = chain[0]
    shares = any(c.model >= 0 for c in chain)  # the model's FLOPs of one of them are not its own
    return Compute(
        first.layer,
        first.step,
        sum(c.time for c in chain),
        sum(c.flops for c in chain),
        inputs,
        outputs,
        deps,
        sum(c.flops if c.model < 0 else c.model for c in chain) if shares else -1,
    )
