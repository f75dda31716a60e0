"""A trace set read back as one program per pipeline stage, for the timeline (plan/timeline.py)
of a set on disk: `modtrans inspect PREFIX --timeline FILE.svg`.

A stage's ranks run one program, so its first rank's trace is read. Its nodes become the plan's
operations in trace order (the writer's program order), their data and control dependencies the
operations' `deps`:

  COMP_NODE        a Compute: its layer and step from the name the writer gives it
                   (COMP_NODE_<layer>_<FWD|BWD_IG|BWD_WG|FWD_RECOMPUTE>), its time the node's
                   duration_micros, its micro-batch from its output tensors' `#m<k>` (write.py)
  COMM_SEND_NODE   a Transfer to the stage of its comm_dst, matched by comm_tag
  COMM_RECV_NODE   a Transfer from the stage of its comm_src
  COMM_COLL_NODE   a Collective (untimed: the timeline's network is free)

The stage of a rank is its coordinate on the mesh's last axis, pipeline (the .meta.json's mesh,
the first axis the fastest: plan/model.py). A model chunk's layers are the range the .meta.json's
`chunks` names for it (interleaved: P x V ranges, range v stage v % P's chunk v // P), as
sidecar.llm_of reads it from either version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from modtrans.chakra.read import Trace
from modtrans.plan.model import Collective, Compute, Direction, Op, Purpose, Step, Tensor, Transfer
from modtrans.workload.model import CommType

COMP, SEND, RECV, COLL = 4, 5, 6, 7
STEPS = {
    "FWD_RECOMPUTE": Step.RECOMPUTE,
    "BWD_IG": Step.INPUT_GRAD,
    "BWD_WG": Step.WEIGHT_GRAD,
    "FWD": Step.FWD,
    "UPDATE": Step.UPDATE,
    "GRAD_SYNC": Step.GRAD_SYNC,
}


TICK_NS = 1000.0
"""A program's times are the traces' duration_micros: a tick is a microsecond."""


class ProgramsError(ValueError):
    """A trace set whose traces the timeline cannot read (another tool's, or not one schedule)."""


def stage_of(rank: int, mesh: Mapping[str, int]) -> int:
    """A rank's pipeline stage: its coordinate on the last axis of the mesh (pipeline)."""
    size = math.prod(mesh.values()) if mesh else 1
    stages = mesh.get("pipeline", 1)
    return rank // (size // stages) if stages > 1 and size % stages == 0 else 0


def programs(
    traces: Sequence[Trace], mesh: Mapping[str, int], llm: Mapping[str, Any]
) -> tuple[list[list[Op]], dict[int, int]]:
    """One program per stage (`traces`: each stage's first rank, in stage order) and the model chunk
    of each layer index, as plan/timeline.py's `schedule` takes them; `llm` as sidecar.llm_of reads it."""
    layers: dict[str, int] = {}
    out = []
    for trace in traces:
        if trace.rank is None:
            raise ProgramsError(f"{trace.path}: no rank in its name")
        out.append(_program(trace, stage_of(trace.rank, mesh), mesh, layers))
    return out, _chunks(out, layers, llm)


def _program(trace: Trace, stage: int, mesh: Mapping[str, int], layers: dict[str, int]) -> list[Op]:
    index = {node.id: i for i, node in enumerate(trace.nodes)}
    ops: list[Op] = []
    for node in trace.nodes:
        deps = tuple(index[d] for d in (*node.data_deps, *node.ctrl_deps) if d in index)
        if node.type == COMP:
            layer, step = _named(node.name)
            number = layers.setdefault(layer, len(layers))
            outputs = node.attrs.get("outputs", (None, []))[1]
            tensor = (Tensor(str(outputs[0]), 0),) if isinstance(outputs, list) and outputs else ()
            ops.append(Compute(number, step, int(node.duration), 0, (), tensor, deps))
        elif node.type in (SEND, RECV):
            peer_key = "comm_dst" if node.type == SEND else "comm_src"
            peer, tag = node.attrs.get(peer_key, (None, None))[1], node.attrs.get("comm_tag", (None, 0))[1]
            if not isinstance(peer, int):
                raise ProgramsError(f"{trace.path}: node {node.id} has no {peer_key}")
            direction = Direction.SEND if node.type == SEND else Direction.RECV
            offset = stage_of(peer, mesh) - stage
            ops.append(Transfer(0, Step.FWD, direction, Purpose.PIPELINE, offset, int(tag or 0), 0, deps))
        else:  # a collective, or a node the timeline does not time
            ops.append(Collective(0, Step.FWD, CommType.ALLREDUCE, 0, frozenset(), deps=deps))
    return ops


def step_of(name: str) -> Step:
    """The step of a COMP_NODE modtrans wrote, from its name (COMP_NODE_<layer>_<phase>)."""
    return _named(name)[1]


def _named(name: str) -> tuple[str, Step]:
    """COMP_NODE_<layer>_<phase> -> (layer, step)."""
    body = name.removeprefix("COMP_NODE_")
    for suffix, step in STEPS.items():
        if body.endswith("_" + suffix):
            return body[: -len(suffix) - 1], step
    return body, Step.FWD


def _chunks(
    programs: Sequence[Sequence[Op]], layers: Mapping[str, int], llm: Mapping[str, Any]
) -> dict[int, int]:
    """Layer index -> its model chunk: where a stage's forward reaches the first layer of the
    range of its chunk v, chunk v begins (a stage runs chunk 0's layers before chunk 1's)."""
    ranges = [str(c.get("first")) for c in llm.get("chunks", []) if isinstance(c, dict)]
    stages = len(programs)
    if len(ranges) <= stages or not stages:
        return {}
    starts = {layers[first]: v // stages for v, first in enumerate(ranges) if first in layers}
    out: dict[int, int] = {}
    for program in programs:
        chunk = 0
        for op in program:
            if isinstance(op, Compute) and op.step is Step.FWD and op.layer not in out:
                chunk = starts.get(op.layer, chunk)
                out[op.layer] = chunk
    return out
