"""The exact tier: a built plan walked as ASTRA-sim 2.x runs its traces (walk.py), each node as the
trace writer writes it (chakra/write.py): compute in the whole microseconds of duration_micros
(the rounding carried from node to node), a collective of a group of one rank left out (its
dependents wait for its dependencies), a collective's size as ASTRA-sim reads it (plan/sizes.py),
and its time on the network (collectives.py). One actor per program, standing for its first rank.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from modtrans.chakra.write import durations
from modtrans.estimate.collectives import Fabric
from modtrans.estimate.result import Estimate, combine, stage_time
from modtrans.estimate.walk import COLLECTIVE, COMPUTE, RECV, SEND, EstimateError, Node, walk
from modtrans.plan.model import Collective, Compute, Direction, Plan, Purpose, Transfer
from modtrans.plan.sizes import Consumer, written
from modtrans.simulate import astra2
from modtrans.simulate.network import Network


def actors(
    plan: Plan, fabric: Fabric, tick_ns: float = 1.0, flops: list[int] | None = None
) -> list[list[Node]]:
    """One actor per program of the plan: its first rank's nodes; `flops`, where given, gets each
    program's model FLOPs (Compute.model_flops: no recomputed forward's), read while the program
    is built (a big plan keeps only its latest few: plan/programs.py)."""
    firsts: dict[int, int] = {}
    for rank, p in enumerate(plan.program_of):
        firsts.setdefault(p, rank)
    out = []
    for p in range(len(plan.programs)):
        out.append(_nodes(plan, p, firsts[p], fabric, tick_ns))
        if flops is not None:
            flops.append(sum(op.model_flops for op in plan.programs[p] if isinstance(op, Compute)))
    return out


def _nodes(plan: Plan, p: int, rank: int, fabric: Fabric, tick_ns: float) -> list[Node]:
    program = plan.programs[p]
    micros = durations(program, tick_ns)[0]
    mesh = plan.mesh
    node_of: list[tuple[int, ...]] = []
    nodes: list[Node] = []
    groups: dict[frozenset[Purpose], tuple[tuple[int, ...], tuple[int, ...]]] = {}
    for i, op in enumerate(program):
        deps = tuple(sorted({d for j in op.deps for d in node_of[j]}))
        if isinstance(op, Compute):
            node = Node(COMPUTE, astra2.replay_ns(micros[i]), deps)
        elif isinstance(op, Collective):
            if mesh.span(op.over) < 2:
                node_of.append(deps)
                continue
            if op.over not in groups:
                members = plan.group(rank, op.over).ranks
                groups[op.over] = (members, tuple(sorted({plan.program_of[m] for m in members})))
            members, parties = groups[op.over]
            size = written(op.comm, op.bytes, len(members), Consumer.ASTRA_SIM)
            channel: Hashable = (op.over, parties)
            node = Node(COLLECTIVE, fabric.collective_ns(op.comm, size, members), deps, channel, len(parties))
        elif isinstance(op, Transfer):
            peer = mesh.peer(rank, op.along, op.offset)
            if peer is None:
                raise EstimateError(f"rank {rank} has no {op.along} peer at offset {op.offset}")
            src, dst = (rank, peer) if op.direction is Direction.SEND else (peer, rank)
            key = (plan.program_of[src], plan.program_of[dst], op.tag, op.bytes)
            kind = SEND if op.direction is Direction.SEND else RECV
            node = Node(kind, fabric.send_ns(src, dst, op.bytes) if kind == SEND else 0, deps, key)
        else:
            raise EstimateError(f"an operation the estimate does not know: {type(op).__name__}")
        node_of.append((len(nodes),))
        nodes.append(node)
    return nodes


def estimate(
    plan: Plan,
    net: Network,
    *,
    tick_ns: float = 1.0,
    tokens: int = 0,
    peak_flops: float | None = None,
) -> Estimate:
    """The iteration of `plan` on `net` as ASTRA-sim 2.x would run its traces; `tick_ns` the plan's
    tick (1: translate builds trace plans in ns), `tokens` the iteration's, for tokens/s."""
    if net.dims and math.prod(net.dims) != plan.npus:
        raise EstimateError(f"the network holds {math.prod(net.dims)} NPUs, the plan {plan.npus}")
    fabric = Fabric.of(net)
    flops_of: list[int] = []
    lanes = walk(actors(plan, fabric, tick_ns, flops_of))
    stage_of: dict[int, int] = {}
    count: dict[int, int] = {}
    pipeline = _pipeline_axis(plan)
    for rank, p in enumerate(plan.program_of):
        count[p] = count.get(p, 0) + 1
        if p not in stage_of:
            stage_of[p] = plan.mesh.coords(rank)[pipeline] if pipeline is not None else 0
    memory = plan.memory
    by_stage: dict[int, int] = {}
    for p, lane in enumerate(lanes):
        s = stage_of[p]
        if s not in by_stage or lane.finish > lanes[by_stage[s]].finish:
            by_stage[s] = p
    stages = tuple(
        stage_time(s, lanes[p], *((memory[s].total, memory[s].reserved) if s < len(memory) else ()))
        for s, p in sorted(by_stage.items())
    )
    flops = sum(count[p] * flops_of[p] for p in count)
    return combine(stages, npus=plan.npus, flops=flops, tokens=tokens, peak_flops=peak_flops)


def _pipeline_axis(plan: Plan) -> int | None:
    try:
        return plan.mesh.index(Purpose.PIPELINE)
    except KeyError:
        return None
