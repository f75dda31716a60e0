"""A trace set on disk as the walk's actors: each trace read is an actor, its nodes as ASTRA-sim 2.x
reads them (chakra/read.py decodes them; ../shared/reference/chakra-contract.md):

    COMP_NODE       duration_micros x 1000 ns, 1 ns for 0 (replay mode: astra2.replay_ns)
    COMM_COLL_NODE  comm_type, comm_size as written (an all-gather's one rank's part), the group
                    its pg_name names in the set's comm_groups.json (none: every rank)
    COMM_SEND_NODE  comm_dst, comm_tag, comm_size; the link from this rank to comm_dst
    COMM_RECV_NODE  comm_src, comm_tag, comm_size

A rank not read is stood for by the rank read that `stands_for` names (a pipeline stage's first
rank: its ranks run one program).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from modtrans.chakra.read import Trace
from modtrans.comm import CommType
from modtrans.estimate.collectives import Fabric
from modtrans.estimate.result import Estimate, combine, peak_of, stage_time
from modtrans.estimate.walk import COLLECTIVE, COMPUTE, RECV, SEND, EstimateError, Node, walk
from modtrans.simulate import astra2
from modtrans.simulate.network import Network

COMP, SEND_NODE, RECV_NODE, COLL = 4, 5, 6, 7  # Chakra's NodeType (chakra/validate.py)
_TYPES = {
    0: CommType.ALLREDUCE,
    2: CommType.ALLGATHER,
    6: CommType.ALLTOALL,
    7: CommType.REDUCESCATTER,
}  # Chakra's CollectiveCommType values the ring runs (chakra/schema.py)


def actors(
    traces: Sequence[Trace],
    stands_for: Callable[[int], int],
    groups: Mapping[str, Sequence[int]],
    fabric: Fabric,
) -> list[list[Node]]:
    """One actor per trace (in the order given); `stands_for(rank)` the index of the trace that
    stands for a rank; `groups` the set's communicator groups by pg_name."""
    everyone = tuple(range(fabric.npus))
    out = []
    for trace in traces:
        if trace.rank is None:
            raise EstimateError(f"{trace.path}: no rank in its name (PREFIX.<rank>.et)")
        out.append(_actor(trace, stands_for, groups, everyone, fabric))
    return out


def _actor(
    trace: Trace,
    stands_for: Callable[[int], int],
    groups: Mapping[str, Sequence[int]],
    everyone: tuple[int, ...],
    fabric: Fabric,
) -> list[Node]:
    rank = trace.rank
    assert rank is not None
    nodes = sorted(trace.nodes, key=lambda n: n.id)  # ASTRA-sim issues ready nodes by id
    index = {n.id: i for i, n in enumerate(nodes)}
    out = []
    for n in nodes:
        deps = tuple(sorted({index[d] for d in (*n.data_deps, *n.ctrl_deps) if d in index}))
        if n.type == COMP:
            out.append(Node(COMPUTE, astra2.replay_ns(int(n.duration)), deps))
        elif n.type == COLL:
            kind = _TYPES.get(_integer(trace, n, "comm_type"))
            if kind is None:
                raise EstimateError(f"{trace.path}: {n.where()}: a collective type the ring does not run")
            size = _integer(trace, n, "comm_size")
            name = n.value("pg_name")
            members = tuple(groups[str(name)]) if name not in (None, "") and str(name) in groups else everyone
            if name not in (None, "") and str(name) not in groups:
                raise EstimateError(f"{trace.path}: {n.where()}: group {name} is not in the set's group file")
            parties = tuple(sorted({stands_for(m) for m in members}))
            time = fabric.collective_ns(kind, size, members)
            out.append(Node(COLLECTIVE, time, deps, (name, parties), len(parties)))
        elif n.type in (SEND_NODE, RECV_NODE):
            size, tag = _integer(trace, n, "comm_size"), _integer(trace, n, "comm_tag")
            if n.type == SEND_NODE:
                peer = _integer(trace, n, "comm_dst")
                key = (stands_for(rank), stands_for(peer), tag, size)
                out.append(Node(SEND, fabric.send_ns(rank, peer, size), deps, key))
            else:
                peer = _integer(trace, n, "comm_src")
                out.append(Node(RECV, 0, deps, (stands_for(peer), stands_for(rank), tag, size)))
        else:  # metadata and other nodes take no time: kept so that dependencies pass through them
            out.append(Node(COMPUTE, 0, deps))
    return out


def _integer(trace: Trace, node: object, name: str) -> int:
    value = node.value(name)  # type: ignore[attr-defined]
    if not isinstance(value, int):
        raise EstimateError(f"{trace.path}: {node.where()}: no {name}")  # type: ignore[attr-defined]
    return value


def estimate(prefix: str, members: Sequence[Path], meta: Mapping[str, Any], net: Network) -> Estimate:
    """The iteration of the trace set PREFIX (its files `members`, its .meta.json `meta`): one
    trace per pipeline stage read where the .meta.json gives the mesh, else every trace."""
    from modtrans import sidecar
    from modtrans.chakra.programs import stage_of
    from modtrans.chakra.summary import representatives

    npus = len(members)
    if math.prod(net.dims) != npus:
        raise EstimateError(f"the network holds {math.prod(net.dims)} NPUs, the set {npus} traces")
    parallel = sidecar.parallel_of(meta)
    mesh = {k: v for k, v in (parallel.get("mesh") or {}).items() if isinstance(v, int) and v > 0}
    chosen = representatives(members, mesh)
    traces = [_read(path) for path in chosen]
    if len(chosen) == npus:
        order = {t.rank: i for i, t in enumerate(traces)}
        stands_for: Callable[[int], int] = lambda rank: order[rank]  # noqa: E731
    else:
        stands_for = lambda rank: stage_of(rank, mesh)  # noqa: E731
    groups = _groups(Path(f"{prefix}.comm_groups.json"))
    lanes = walk(actors(traces, stands_for, groups, Fabric.of(net)))
    share = npus // len(traces)
    flops = share * sum(_flops(t) for t in traces)
    llm = sidecar.llm_of(meta)
    stages = tuple(stage_time(i, lane, *_memory(llm, i)) for i, lane in enumerate(lanes))
    return combine(
        stages, npus=npus, flops=flops, tokens=_tokens(meta, llm), peak_flops=peak_of(meta.get("compute"))
    )


def _read(path: Path) -> Trace:
    from modtrans.chakra.read import read
    from modtrans.fileio import read_binary

    data, problem = read_binary(path)
    if data is None:
        raise EstimateError(problem.message if problem else f"{path}: cannot be read")
    trace = read(data, str(path))
    if trace.problem is not None:
        raise EstimateError(f"{path}: {trace.problem.message}")
    return trace


def _groups(path: Path) -> dict[str, tuple[int, ...]]:
    """The set's communicator groups (pg_name -> ranks), {} without a group file."""
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_bytes())
    except (OSError, ValueError) as error:
        raise EstimateError(f"{path}: not a group file ({error})") from None
    if not isinstance(found, dict) or not all(isinstance(v, list) for v in found.values()):
        raise EstimateError(f"{path}: not a group file (an object of lists of ranks)")
    return {str(k): tuple(int(r) for r in v) for k, v in found.items()}


def _flops(trace: Trace) -> int:
    """The trace's model FLOPs, as `inspect PREFIX` and `simulate` read them (summary.node_flops)."""
    from modtrans.chakra.summary import node_flops

    return sum(node_flops(n)[1] for n in trace.nodes if n.type == COMP)


def _memory(llm: Mapping[str, Any], stage: int) -> tuple[int | None, int | None]:
    """One rank's memory of the stage as the metadata holds it, and what the caching allocator
    reserves at it (files written before reserved_bytes: the total)."""
    memory = llm.get("memory")
    if isinstance(memory, list) and stage < len(memory) and isinstance(memory[stage], dict):
        total, reserved = memory[stage].get("total_bytes"), memory[stage].get("reserved_bytes", None)
        if isinstance(total, int):
            return total, reserved if isinstance(reserved, int) else total
    return None, None


def _tokens(meta: Mapping[str, Any], llm: Mapping[str, Any]) -> int:
    """Sequences per iteration x tokens per sequence (the model's first input's last dimension)."""
    model = meta.get("model")
    shapes = model.get("input_shapes") if isinstance(model, dict) else None
    first = next(iter(shapes.values()), None) if isinstance(shapes, dict) and shapes else None
    sequence = first[-1] if isinstance(first, list) and first and isinstance(first[-1], int) else 0
    batch = llm.get("global_batch")
    return sequence * batch if isinstance(batch, int) else 0
