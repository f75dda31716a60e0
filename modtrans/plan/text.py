"""Plan -> the text workload model (ASTRA-sim 1.0, SimAI and Chakra's text dialect all read it).

The text holds one program for every NPU: per layer one compute time and at most one collective
in each of forward, input gradient and weight gradient, each over the group the header's keyword
gives that column (ASTRA-sim 1.0's decode_involved_dimensions; workload-format spec section 8):

    DATA                          weight gradient over every axis
    MODEL                         forward and input gradient over every axis
    HYBRID_DATA_MODEL, _TRANSFORMER*  forward, input gradient over the first (fastest) axis;
                                  weight gradient over the others
    HYBRID_MODEL_DATA             the reverse
    HYBRID_CUSTOMIZED             each layer's own keyword

The header is derived from the plan: a keyword preset's plan is labelled with its keyword and
checkpoints; a layout's with HYBRID_TRANSFORMER, or HYBRID_TRANSFORMER_FWD_IN_BCKWD when it
recomputes (the transformer keywords' groups are the layout's tensor x the rest); the
model_parallel_NPU_group of a transformer keyword is the tensor axis.

Axes of size 1 span nothing: a group is compared by the axes it really spans, so a layout that
keeps a unit axis (`--dp 2` is tensor 1 x expert 1 x data 2 x pipeline 1, its gradients over
expert+data) says what the same group says on the keyword's mesh (DATA over every axis).

Anything else cannot be said and is refused with the reason (D310): ranks with different
programs (pipeline stages), point-to-point transfers, a second collective in one column, a
collective over another group, a recomputed forward without FWD_IN_BCKWD's checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from modtrans.comm import Policy
from modtrans.plan.lines import (
    FWD,
    IG,
    WG,
    Line,
    ProjectionError,
    arrange,
    first_stage,
    recomputed_units,
    segment,
    settle,
)
from modtrans.plan.model import Collective, Compute, Mesh, Plan, Purpose, Recompute, Step, Transfer
from modtrans.plan.sizes import Consumer, written
from modtrans.workload.model import Header, Layer, Phase, Workload

_COLUMNS = (Step.FWD, Step.INPUT_GRAD, Step.WEIGHT_GRAD)


def spanned(over: frozenset[Purpose], mesh: Mesh) -> frozenset[Purpose]:
    """The axes of `over` that hold more than one rank (the group's real extent)."""
    return frozenset(a.purpose for a in mesh.axes if a.purpose in over and a.size > 1)


def columns(policy: Policy, mesh: Mesh) -> Mapping[Step, frozenset[Purpose]]:
    """The group each column's collective spans under a keyword (axes of size 1 left out)."""
    every = spanned(frozenset(a.purpose for a in mesh.axes), mesh)
    first = spanned(frozenset({mesh.axes[0].purpose}), mesh)
    rest = every - first
    if policy in (Policy.MODEL, Policy.DISTRIBUTED_INFERENCE):
        return {Step.FWD: every, Step.INPUT_GRAD: every}
    if policy is Policy.HYBRID_DATA_MODEL or policy.is_transformer:
        return {Step.FWD: first, Step.INPUT_GRAD: first, Step.WEIGHT_GRAD: rest}
    if policy is Policy.HYBRID_MODEL_DATA:
        return {Step.FWD: rest, Step.INPUT_GRAD: rest, Step.WEIGHT_GRAD: first}
    return {Step.WEIGHT_GRAD: every}


def keyword(plan: Plan) -> Policy:
    """The keyword a workload file labels the plan with."""
    if plan.layout is not None:
        none = plan.layout.recompute is Recompute.NONE
        return Policy.HYBRID_TRANSFORMER if none else Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD
    assert plan.preset is not None
    return plan.preset.policy


def header(plan: Plan) -> Header:
    """The workload file's header line for the plan (ASTRA-sim 1.0's fields)."""
    policy = keyword(plan)
    group = plan.mesh.extent(Purpose.TENSOR) if policy.is_transformer else None
    segments = plan.preset.checkpoints if plan.preset is not None else None
    if segments is None:
        return Header(policy, model_parallel_group=group)
    return Header(
        policy,
        model_parallel_group=group,
        checkpoints=segments.starts,
        checkpoint_initiates=segments.initiates,
    )


def project(plan: Plan, reader: Consumer = Consumer.ASTRA_SIM) -> Workload:
    """The workload file that says what `plan` says, its sizes as `reader` reads them (sizes.py);
    ProjectionError when it cannot."""
    if len(plan.programs) > 1:
        raise ProjectionError(
            f"the ranks run {len(plan.programs)} different programs (pipeline stages); an ASTRA-sim 1.0 "
            "workload file holds one program for every NPU: write --dialect simai (its pp: header) or "
            "Chakra traces (--format chakra-et)"
        )
    if plan.micro_batches != 1:
        raise ProjectionError(
            f"the plan runs {plan.micro_batches} micro-batches per iteration; an ASTRA-sim 1.0 workload file "
            "runs one: write --dialect simai (its ga: header) or Chakra traces (--format chakra-et)"
        )
    _refuse_partial_recomputation(plan)
    head = header(plan)
    # a transformer keyword's plan as a layout's: the loss's all-reduces after the LM head's own
    # on lines of their own (lines.py places them by each collective's place; a plan made by hand
    # has none, and keeps one collective per column)
    collectives = [op for op in plan.programs[0] if isinstance(op, Collective)]
    placed = bool(collectives) and all(c.place is not None for c in collectives)
    if plan.layout is not None or (head.policy.is_transformer and placed):
        lines, recomputed = _layout_lines(plan, head.policy, reader)
        head = _segment(head, plan, recomputed)
        return Workload(head, settle(head, lines, reader))
    times, comms = _cells(plan, head.policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD)
    layers = []
    for i, info in enumerate(plan.layers):
        policy = info.policy or head.policy
        phases = []
        for step in _COLUMNS:
            time = times.get((i, step), info.unexecuted_input_grad if step is Step.INPUT_GRAD else 0)
            phases.append(_phase(plan, info.name, policy, step, time, comms.get((i, step)), reader))
        custom = info.policy if head.policy is Policy.HYBRID_CUSTOMIZED else None
        fwd, ig, wg = phases
        layers.append(Layer(info.name, fwd, ig, wg, info.update_column, policy=custom))
    return Workload(head, settle(head, layers, reader))


def _refuse_partial_recomputation(plan: Plan) -> None:
    """ProjectionError for a layout that recomputes some of a block's forward (selective) or some
    blocks (--recompute-fraction, --recompute-method): FWD_IN_BCKWD reruns whole lines from a
    checkpoint (ASTRA-sim 1.0's Workload::iterate_hybrid_parallel_Transformer_fwd_in_bckwd)."""
    layout = plan.layout
    if layout is None:
        return
    if layout.recompute is Recompute.SELECTIVE:
        raise ProjectionError(
            "selective recomputation: an ASTRA-sim 1.0 workload file's FWD_IN_BCKWD reruns whole layers "
            "from its checkpoints: write Chakra traces (--format chakra-et)"
        )
    if layout.recompute_placed is not None:
        raise ProjectionError(
            f"{layout.recompute_placed}: an ASTRA-sim 1.0 workload file's FWD_IN_BCKWD recomputes every "
            "layer alike: write Chakra traces (--format chakra-et)"
        )


def _segment(head: Header, plan: Plan, recomputed: Sequence[bool]) -> Header:
    """A recomputing layout's header with FWD_IN_BCKWD's lists: one checkpoint at the first line
    of the blocks the plan recomputes, the rerun started at the line after their last
    (lines.segment; plan/simai.py writes the same). ASTRA-sim 1.0 reads both lists after the group
    whatever they hold (astra-sim ASTRA-sim-1.0 07d5d19, Workload::initialize_workload: `inFile >>
    tmp; inFile >> i` twice): without them it takes the layer count for the first key and a
    layer's name for its length, and no pass finishes (V240)."""
    if plan.layout is None or head.policy is not Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        return head
    starts, initiates = segment(recomputed)
    return Header(
        head.policy,
        model_parallel_group=head.model_parallel_group,
        checkpoints=starts,
        checkpoint_initiates=initiates,
    )


def _layout_lines(plan: Plan, policy: Policy, reader: Consumer) -> tuple[tuple[Layer, ...], list[bool]]:
    """A one-stage layout's or a transformer keyword's units, several collectives in one column on
    lines of their own (lines.py): the LM head's loss all-reduces, sequence parallelism's
    all-gathers, ZeRO's pairs; and per line whether its unit is recomputed."""
    expected = columns(policy, plan.mesh)

    def column(c: Collective, forward: bool) -> int:
        if forward:
            return FWD
        return WG if expected.get(Step.WEIGHT_GRAD) == spanned(c.over, plan.mesh) else IG

    _, times, placed = first_stage(plan, 1)
    again = recomputed_units(plan)
    out: list[Layer] = []
    marks: list[bool] = []
    for i, info in enumerate(plan.layers):
        lines = arrange(placed.get(i, {}), column)
        own = tuple(times.get((i, c), info.unexecuted_input_grad if c == IG else 0) for c in (FWD, IG, WG))

        def layer(name: str, line: Line, compute: tuple[int, ...] = (0, 0, 0), update: int = 0) -> Layer:
            fwd, ig, wg = (
                _phase(plan, name, policy, step, time, line.comms.get(col), reader)
                for col, step, time in zip((FWD, IG, WG), _COLUMNS, compute, strict=True)
            )
            return Layer(name, fwd, ig, wg, update)

        pre = lines.pre
        out += [layer(f"{info.name}.pre{len(pre) - k}", line) for k, line in enumerate(reversed(pre))]
        out.append(layer(info.name, lines.main, own, info.update_column))
        out += [layer(f"{info.name}.post{k + 1}", line) for k, line in enumerate(lines.post)]
        marks += [i in again] * (len(pre) + 1 + len(lines.post))
    return tuple(out), marks


def _phase(
    plan: Plan, name: str, policy: Policy, step: Step, time: int, comm: Collective | None, reader: Consumer
) -> Phase:
    """One column: its compute time and collective, the collective's group checked against the one
    the keyword gives that column and its size as `reader` reads it."""
    if comm is None:
        return Phase(time)
    if spanned(comm.over, plan.mesh) != columns(policy, plan.mesh).get(step):
        over = "+".join(sorted(comm.over)) or "no axis"
        # SimAI's columns run over the data group too (ZeRO-3's parameter all-gathers in the forward)
        simai = (
            " or SimAI's text (--dialect simai)"
            if reader is Consumer.ASTRA_SIM and "data" in comm.over
            else ""
        )
        raise ProjectionError(
            f"layer {name}: a {step} {comm.comm} over the {over} group; under {policy} "
            "that column's collective spans another group: write Chakra traces (--format chakra-et), where "
            f"each collective names its own group{simai}"
        )
    size = written(comm.comm, comm.bytes, plan.mesh.span(comm.over), reader)
    return Phase(time, comm.comm, size) if size > 0 else Phase(time)


def _cells(
    plan: Plan, recomputes: bool
) -> tuple[dict[tuple[int, Step], int], dict[tuple[int, Step], Collective]]:
    """Each (layer, step)'s compute time and collective in the one program; ProjectionError for
    what a workload file cannot say (transfers, recomputation without checkpoints, a second
    compute or collective in one cell)."""
    names = [info.name for info in plan.layers]
    times: dict[tuple[int, Step], int] = {}
    comms: dict[tuple[int, Step], Collective] = {}
    for op in plan.programs[0]:
        where = f"layer {names[op.layer]}"
        if isinstance(op, Transfer):
            raise ProjectionError(
                f"{where} has a point-to-point {op.direction} ({op.along} peer); the text formats "
                "have no send or receive: write Chakra traces (--format chakra-et)"
            )
        if op.step is Step.RECOMPUTE:
            if not recomputes:
                raise ProjectionError(
                    f"{where} recomputes its forward; only HYBRID_TRANSFORMER_FWD_IN_BCKWD's "
                    "checkpoints say that in a workload file"
                )
            continue  # the header's checkpoints say it; the consumer recomputes
        if op.step in (Step.UPDATE, Step.GRAD_SYNC):
            continue  # the layers' update column holds the optimizer step and the bucket kernels
        key = (op.layer, op.step)
        if isinstance(op, Compute):
            if key in times:
                raise ProjectionError(f"{where} computes its {op.step} twice; a workload file has one time")
            times[key] = op.time
            continue
        if key in comms:
            raise ProjectionError(
                f"{where} issues two collectives in its {op.step} ({comms[key].comm}, {op.comm}); "
                "a workload file has one per column"
            )
        comms[key] = op
    return times, comms
