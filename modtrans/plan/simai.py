"""An LLM plan -> SimAI's text workload, as AICB writes it for SimAI (aliyun/aicb's generator;
../shared/reference/chakra-contract.md, "SimAI / AICB conventions").

SimAI simulates one pipeline stage's layers and adds the pipeline by formula: the header carries
`model_parallel_NPU_group: T ep: E pp: P vpp: V ga: GA all_gpus: N` and `pp_comm`, the bytes of one
stage-boundary transfer; SimAI then charges 2·V·GA·pp_comm / bandwidth of exposed pipeline
traffic and a bubble of (P - 1) / (GA·V) of the stage's time (Layer.cc). The file holds the first
stage's layers, the block repeated GA times (one copy per micro-batch, the copies' names ending in
.mb1, .mb2 ...), with per column:

    fwd, ig     the unit's tensor-parallel collective (plain type: SimAI's TP group) or its
                expert all-to-all (ALLTOALL_EP)
    wg          its gradient all-reduce: plain (the DP group) for dense layers, _DP_EP for experts

What it cannot say is refused (D310): two collectives in one column (ZeRO-1/2's reduce-scatter
and all-gather, ZeRO-3's parameter gathers beside tensor-parallel traffic) and recomputation
other than FWD_IN_BCKWD's checkpoints (selective).
"""

from __future__ import annotations

import dataclasses

from modtrans.plan.model import Collective, Compute, Plan, Purpose, Recompute, Step, Transfer
from modtrans.plan.text import ProjectionError
from modtrans.workload.model import CommType, Header, Layer, Phase, Policy, Workload

_PLACE = {Step.FWD: 0, Step.INPUT_GRAD: 1, Step.WEIGHT_GRAD: 2}


def project_simai(plan: Plan) -> Workload:
    """The SimAI workload of a plan built from a layout (Plan.is_llm)."""
    layout = plan.layout
    if layout is None:
        raise ValueError(
            "SimAI's pipeline header describes a layout's plan (--tp/--pp/--dp), not a keyword's"
        )
    if layout.recompute is Recompute.SELECTIVE:
        raise ProjectionError("selective recomputation: SimAI's FWD_IN_BCKWD recomputes whole segments only")
    program = plan.programs[0]
    first_micro: list[int] = []  # the first stage's units, in order
    times: dict[tuple[int, int], int] = {}
    comms: dict[tuple[int, int], Collective] = {}
    compute_seen: set[tuple[int, Step]] = set()
    for op in program:
        if isinstance(op, Transfer) or op.step is Step.RECOMPUTE:
            continue  # the pipeline is SimAI's formula; recomputation the header's checkpoints
        column = _PLACE[op.step]
        if isinstance(op, Compute):
            if (op.layer, op.step) in compute_seen:
                continue  # a later micro-batch: the same numbers
            compute_seen.add((op.layer, op.step))
            if op.step is Step.FWD:
                first_micro.append(op.layer)
            times[(op.layer, column)] = op.time
            continue
        if Purpose.DATA in op.over and (op.step is not Step.WEIGHT_GRAD or op.comm is not CommType.ALLREDUCE):
            raise ProjectionError(
                f"layer {plan.layers[op.layer].name}: ZeRO's {op.comm} of gradients or parameters; SimAI's "
                "weight-gradient column holds one all-reduce: write Chakra traces (--format chakra-et)"
            )
        key = (op.layer, column)
        previous = comms.get(key)
        if previous is not None and (previous.comm, previous.bytes, previous.over) != (
            op.comm,
            op.bytes,
            op.over,
        ):
            raise ProjectionError(
                f"layer {plan.layers[op.layer].name} issues {previous.comm} and {op.comm} in one column; "
                "a SimAI layer line has one collective per column: write Chakra traces (--format chakra-et)"
            )
        comms[key] = op
    block = []
    for index in first_micro:
        info = plan.layers[index]
        phases = []
        for column in range(3):
            time = times.get((index, column), 0)
            c = comms.get((index, column))
            phases.append(Phase(time, _simai_type(c), c.bytes) if c is not None else Phase(time))
        block.append(Layer(info.name, phases[0], phases[1], phases[2], info.update))
    ga = layout.micro_batches
    count = len(block) * ga
    recomputed = layout.recompute is not Recompute.NONE
    checkpoints: tuple[tuple[int, ...], tuple[int, ...]] = ((0,), (count - 1,)) if recomputed else ((), ())
    header = Header(
        Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD,
        model_parallel_group=plan.mesh.extent(Purpose.TENSOR),
        checkpoints=checkpoints[0],
        checkpoint_initiates=checkpoints[1],
        ep=plan.mesh.extent(Purpose.EXPERT),
        pp=plan.mesh.extent(Purpose.PIPELINE),
        vpp=layout.virtual_stages,
        ga=ga,
        all_gpus=plan.npus,
        pp_comm=layout.boundary_bytes,
    )
    copies = [
        layer if m == 0 else dataclasses.replace(layer, name=f"{layer.name}.mb{m}")
        for m in range(ga)
        for layer in block
    ]
    return Workload(header, tuple(copies))


def _simai_type(c: Collective) -> CommType:
    if c.over == frozenset({Purpose.EXPERT}):
        return CommType(f"{c.comm.value}_EP")
    if c.over == frozenset({Purpose.DATA}):  # the experts' data-parallel group
        return CommType(f"{c.comm.value}_DP_EP")
    return c.comm
