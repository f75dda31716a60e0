"""Whether a plan's ranks can meet: what the trace-set checks would find across ranks, decided
on the plan itself (one representative rank per program), for sets too large to decode whole.
It reads each program's outline (plan/programs.py): its transfers and the groups it spans.

    consistency(plan)  ->  [("T707", "..."), ("T706", "...")]   (empty: consistent)

T707: every communicator group's ranks must run one program (so they issue the same collectives
in the same order). T706: every transfer of a program must meet, on the peer's program, the
opposite transfer with the same tag and size, pointing back. The transfers of each program are
counted by that key once, so the check is linear in the size of the plan (a 280-rank pipeline of
280 micro-batches holds some 10^5 transfers per program).
"""

from __future__ import annotations

from collections import Counter

from modtrans.plan.model import Direction, Op, Plan, Purpose, Transfer

_Key = tuple[Direction, int, int, Purpose, int]


def consistency(plan: Plan) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for group in plan.groups():
        programs = {plan.program_of[r] for r in group.ranks}
        if len(programs) > 1:
            problems.append(("T707", f"group {group.id} ({group.purpose}) spans programs {sorted(programs)}"))
    for over in plan.overs():
        if plan.mesh.span(over) == plan.npus and len(plan.programs) > 1:
            problems.append(
                ("T707", "a collective of every rank in a plan whose ranks run different programs")
            )
    first = {p: plan.program_of.index(p) for p in set(plan.program_of)}
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


def _transfers(program: tuple[Op, ...]) -> Counter[_Key]:
    """How many transfers of the program have each (direction, tag, bytes, axis, offset)."""
    return Counter(
        (op.direction, op.tag, op.bytes, op.along, op.offset) for op in program if isinstance(op, Transfer)
    )
