"""An LLM plan -> SimAI's text workload, as AICB writes it for SimAI (aliyun/aicb's generator;
../shared/reference/chakra-contract.md, "SimAI / AICB conventions").

SimAI simulates one pipeline stage's layers and adds the pipeline by formula: the header carries
`model_parallel_NPU_group: T ep: E pp: P vpp: V ga: GA all_gpus: N` and `pp_comm`, the bytes of one
stage-boundary transfer; SimAI then charges 2·V·GA·pp_comm / bandwidth of exposed pipeline
traffic and a bubble of (P - 1) / (GA·V) of the stage's time (Layer.cc). SimAI runs every line's
forward in file order, then every line's backward in reverse, each line's collectives once
(aliyun/SimAI astra-sim-alibabacloud/astra-sim/workload/Workload.cc,
iterate_hybrid_parallel_Transformer_fwd_in_bckwd); it neither loops over GA nor divides by it.
So the file holds the first stage's units once per micro-batch (AICB's `for _ in
range(self.ga_num)`; the copies' names end in .mb1, .mb2 ...), and what a framework sends once per
iteration (the data-parallel gradient reduction, ZeRO's and the distributed optimizer's
reduce-scatter and all-gather: the plan's tail collectives) only in the first copy, whose
backward SimAI runs last. AICB writes the data-parallel lines once too (grad_gather,
grad_param_comm); a copy in each micro-batch would move GA times the bytes (D311).

Per line, the columns a collective can take, and the group SimAI gives it (Workload.cc's prefix
and suffix decoding; workload-format spec section 6.2):

    fwd, ig     plain type: the tensor-parallel group; _EP: the expert group; _DP_EP: the
                experts' data-parallel group (the whole data-parallel group when ep is 1)
    wg          plain type: the data-parallel group; _DP_EP, _EP as above

A unit's collectives go where SimAI issues them in the same order as the plan: those after its
forward in its fwd column, those after its gradients in its ig or wg column (wg for the
data-parallel group). One column holds one collective, so the others go on lines with no
compute around the unit's: before it, what precedes its forward (a sequence-parallel or ZeRO-3
all-gather) and what follows its backward; after it, what follows its forward and what precedes
its backward (the backward runs the lines in reverse). They are named UNIT.pre1, UNIT.post1 ...
(plan/lines.py, which ASTRA-sim 1.0 text shares).

Sizes are the plan's whole buffers: SimAI's default collective model (NcclFlowModel, MockNccl's
genAllGatherFlowModels) reads an all-gather's size as the gathered result (plan/sizes.py).
Refused (D310): selective recomputation, and a data-parallel collective in the forward when the
data-parallel group is not one SimAI can name there (ep > 1).
"""

from __future__ import annotations

from modtrans.comm import CommType, Policy
from modtrans.plan.lines import (
    FWD,
    IG,
    WG,
    Line,
    Placed,
    ProjectionError,
    arrange,
    backward_column,
    first_stage,
    recomputed_units,
    segment,
    settle,
)
from modtrans.plan.model import Collective, Plan, Purpose, Recompute, Schedule, Step
from modtrans.plan.sizes import Consumer, written
from modtrans.workload.model import Header, Layer, Phase, Workload

_SAID = frozenset({Purpose.TENSOR, Purpose.EXPERT, Purpose.PIPELINE, Purpose.DATA})  # the header's fields
_EXPERT_DATA = frozenset({Purpose.DATA})  # the experts' data-parallel group, SimAI's DP_EP (D / E)


def refusal(plan: Plan) -> str | None:
    """Why SimAI's text cannot say a layout's plan (its recomputation, schedule, or a degree its
    header has no field for: context parallelism), or None; a keyword's plan is always said (its
    header keyed: pipeline.py)."""
    layout = plan.layout
    if layout is None:
        return None
    if layout.recompute is Recompute.SELECTIVE:
        return "selective recomputation: SimAI's FWD_IN_BCKWD recomputes whole segments only"
    if layout.recompute_placed is not None:
        return f"{layout.recompute_placed}: SimAI's FWD_IN_BCKWD recomputes every layer; write Chakra traces"
    if layout.schedule in (Schedule.ZB_H1, Schedule.DUALPIPE, Schedule.DUALPIPE_V):
        return (
            f"--schedule {layout.schedule}: SimAI runs its own 1F1B pipeline from the pp: header; write "
            "Chakra traces (--format chakra-et) for this schedule's order"
        )
    other = next((a.purpose for a in plan.mesh.axes if a.purpose not in _SAID and a.size > 1), None)
    if other is not None:  # a degree SimAI's header has no field for (context parallelism)
        return (
            f"{other} parallelism: SimAI's workload has no {other}-parallel group (its columns run over "
            "the tensor, data and expert groups): write Chakra traces (--format chakra-et)"
        )
    return None


def project_simai(plan: Plan) -> Workload:
    """The SimAI workload of a plan built from a layout (Plan.is_llm)."""
    layout = plan.layout
    if layout is None:
        raise ValueError(
            "SimAI's pipeline header describes a layout's plan (--tp/--pp/--dp), not a keyword's"
        )
    reason = refusal(plan)
    if reason is not None:
        raise ProjectionError(reason)
    ga = layout.micro_batches
    units, times, placed = first_stage(plan, ga)
    first = [_unit_lines(plan, index, times, placed.get(index, {}), first_copy=True) for index in units]
    later = (
        [_unit_lines(plan, index, times, placed.get(index, {}), first_copy=False) for index in units]
        if ga > 1
        else []
    )
    lines: list[Layer] = []
    again, marks = recomputed_units(plan), []
    for m in range(ga):  # the copies after the first are one copy's lines, renamed
        for index, unit in zip(units, first if m == 0 else later, strict=True):
            name = plan.layers[index].name if m == 0 else f"{plan.layers[index].name}.mb{m}"
            lines += [Layer(name + suffix, fwd, ig, wg, update) for suffix, fwd, ig, wg, update in unit]
            marks += [index in again] * len(unit)
    recomputed = layout.recompute is not Recompute.NONE
    checkpoints = segment(marks) if recomputed else ((), ())
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
    return Workload(header, settle(header, lines, Consumer.SIMAI))


_Line = tuple[str, Phase, Phase, Phase, int]  # a line of a unit: its name's suffix, fwd, ig, wg, update


def _unit_lines(
    plan: Plan, index: int, times: dict[tuple[int, int], int], placed: Placed, *, first_copy: bool
) -> list[_Line]:
    """The unit's line and the lines of its further collectives, in file order; the first copy
    holds the once-per-iteration collectives too."""
    lines = arrange(placed, backward_column, tail=first_copy)
    pre = lines.pre
    out = [_layer(plan, f".pre{len(pre) - i}", line) for i, line in enumerate(reversed(pre))]
    fwd, ig, wg = (
        _phase(plan, times.get((index, col), 0), lines.main.comms.get(col)) for col in (FWD, IG, WG)
    )
    update = plan.layers[index].update_column if first_copy else 0  # the optimizer steps once an iteration
    out.append(("", fwd, ig, wg, update))  # (lines.settle puts it in the weight-gradient compute)
    out += [_layer(plan, f".post{i + 1}", line) for i, line in enumerate(lines.post)]
    return out


def _layer(plan: Plan, suffix: str, line: Line) -> _Line:
    fwd, ig, wg = (_phase(plan, 0, line.comms.get(col)) for col in (FWD, IG, WG))
    return suffix, fwd, ig, wg, 0


def _phase(plan: Plan, time: int, c: Collective | None) -> Phase:
    if c is None:
        return Phase(time)
    return Phase(time, _simai_type(plan, c), written(c.comm, c.bytes, plan.mesh.span(c.over), Consumer.SIMAI))


def _simai_type(plan: Plan, c: Collective) -> CommType:
    if c.over == frozenset({Purpose.EXPERT}):
        return CommType(f"{c.comm.value}_EP")
    if c.over == _EXPERT_DATA:
        return CommType(f"{c.comm.value}_DP_EP")
    if c.over == frozenset({Purpose.TENSOR, Purpose.DATA}):
        raise ProjectionError(
            f"layer {plan.layers[c.layer].name}: expert gradients over tensor x data ranks (--etp 1); "
            "SimAI's DP_EP group is D / E, experts split over the tensor ranks as AICB and Megatron-Core "
            "default to: leave --etp at T, or write Chakra traces (--format chakra-et)"
        )
    if Purpose.DATA in c.over and c.step is Step.FWD:
        if plan.mesh.extent(Purpose.EXPERT) > 1:
            raise ProjectionError(
                f"layer {plan.layers[c.layer].name}: a forward {c.comm} over the data-parallel group; "
                "SimAI's forward column names that group only as DP_EP, the experts' one when ep > 1: "
                "write Chakra traces (--format chakra-et)"
            )
        return CommType(f"{c.comm.value}_DP_EP")  # ep 1: DP_EP is the data-parallel group
    return c.comm
