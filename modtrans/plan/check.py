"""Whether a plan's ranks can meet: what the trace-set checks would find across ranks, decided
on the plan itself (one representative rank per program), for sets too large to decode whole.
It reads each program's outline (plan/programs.py): its transfers and the groups it spans.

    consistency(plan)  ->  [("T707", "..."), ("T706", "...")]   (empty: consistent)

T707: a communicator group's ranks must issue the same collectives in it in the same order: where
they run one program they do; where a group spans programs (Megatron's all-reduces of one number
before the step over the tensor and pipeline ranks, or every rank: strategy/llm/clipping.py) each
program's collectives over the group's axes are compared, (type, bytes) in order.
T706: every transfer of a program must meet, on the peer's program, the
opposite transfer with the same tag and size, pointing back. The transfers of each program are
counted by that key once, so the check is linear in the size of the plan (a 280-rank pipeline of
280 micro-batches holds some 10^5 transfers per program).
"""

from __future__ import annotations

from collections import Counter

from modtrans.plan.model import Collective, Direction, Op, Plan, Purpose, Transfer

_Key = tuple[Direction, int, int, Purpose, int]


def consistency(plan: Plan) -> list[tuple[str, str]]:
    first = {p: plan.program_of.index(p) for p in set(plan.program_of)}
    problems = _groups(plan, first)
    counted: dict[int, Counter[_Key]] = {}
    for p, rank in first.items():
        for op in plan.outline(p):
            if not isinstance(op, Transfer):
                continue
            peer = plan.mesh.peer(rank, op.along, op.offset)
            if peer is None:
                problems.append(("T706", f"rank {rank}: no {op.along} peer at offset {op.offset}"))
                continue
            q = plan.program_of[peer]
            if q not in counted:
                counted[q] = _transfers(plan.outline(q))
            wanted = Direction.RECV if op.direction is Direction.SEND else Direction.SEND
            partners = counted[q][(wanted, op.tag, op.bytes, op.along, -op.offset)]
            if partners != 1:
                what = f"rank {rank}'s {op.direction} tag {op.tag} ({op.bytes} bytes)"
                problems.append(("T706", f"{what} has {partners} partners on rank {peer}"))
    return problems


def _groups(plan: Plan, first: dict[int, int]) -> list[tuple[str, str]]:
    """T707 for each group spanning programs that issue different collectives in it: per axis set
    the plan's collectives span, each program's first rank's group over it, its programs' sequences
    of (type, bytes) over those axes compared with the program's own."""
    problems: list[tuple[str, str]] = []
    issued: dict[int, dict[frozenset[Purpose], list[tuple[object, int]]]] = {}

    def sequence(program: int, over: frozenset[Purpose]) -> list[tuple[object, int]]:
        if program not in issued:  # one read of the program's outline for every axis set
            by: dict[frozenset[Purpose], list[tuple[object, int]]] = {}
            for op in plan.outline(program):
                if isinstance(op, Collective):
                    by.setdefault(op.over, []).append((op.comm, op.bytes))
            issued[program] = by
        return issued[program].get(over, [])

    for over in plan.overs():
        told: set[tuple[int, ...]] = set()
        for p, rank in sorted(first.items()):
            programs = tuple(sorted({plan.program_of[r] for r in plan.mesh.members(rank, over)}))
            if len(programs) < 2 or programs in told:
                continue
            told.add(programs)
            differ = [q for q in programs if sequence(q, over) != sequence(p, over)]
            if differ:
                group = plan.group(rank, over)
                name = f"group {group.id} ({group.purpose})" if group.id else "the group of every rank"
                problems.append(
                    ("T707", f"{name} spans programs {list(programs)} that issue different collectives in it")
                )
    return problems


def _transfers(program: tuple[Op, ...]) -> Counter[_Key]:
    """How many transfers of the program have each (direction, tag, bytes, axis, offset)."""
    return Counter(
        (op.direction, op.tag, op.bytes, op.along, op.offset) for op in program if isinstance(op, Transfer)
    )
