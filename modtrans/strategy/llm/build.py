"""The LLM layout applied: units, techniques, stages and one program per pipeline stage -> Plan
(the modules this package's docstring lists, composed)."""

from __future__ import annotations

from modtrans.cost import CostModel
from modtrans.ir.document import Flops, ModelIR
from modtrans.plan.model import Axis, Chunk, LayerInfo, LayoutFacts, Mesh, Plan, Purpose
from modtrans.strategy.draft import Folded, LayerDraft, _ios, rank_share
from modtrans.strategy.groups import Params, group, group_times
from modtrans.strategy.llm import data, expert, tensor
from modtrans.strategy.llm.options import Layout, LayoutError
from modtrans.strategy.llm.program import Costed, StageProgram, attention_core
from modtrans.strategy.llm.stages import block_of, blocks, partition
from modtrans.strategy.llm.unit import Unit


def plan(
    ir: ModelIR,
    cost: CostModel,
    layout: Layout,
    *,
    params: Params,
    dtype_bytes: int | None,
    folded: Folded = Folded.MEGATRON,
) -> Plan:
    layout.check()
    t, e = layout.tp, layout.ep
    units = [Unit(LayerDraft(g), block_of(g.owner)) for g in group(ir, params, dtype_bytes)]
    if not units:
        raise LayoutError("the model has no layer with parameters to distribute")
    tensor.apply(units, ir, t, layout.sp)
    units = expert.apply(units, e, t, layout.sp)
    data.apply(units, layout.zero, layout.d, layout.d // e)
    inputs = frozenset(ir.provenance.input_shapes)
    ios = _ios([u.x for u in units], inputs)
    costed = []
    for index, (u, io) in enumerate(zip(units, ios, strict=True)):
        u.index = index
        g = rank_share(u.x, folded, tokens=u.scale, sequence=t if layout.sp else 1)
        times = group_times(g, cost, inputs)
        member_times = [cost.times(m) for m in g.members]
        fl = Flops(
            *(sum(getattr(m.flops, k) for m in g.members) for k in ("forward", "input_grad", "weight_grad"))
        )
        costed.append(
            Costed(
                index,
                u.name,
                u.block,
                times,
                fl,
                attention_core(g.members, member_times),
                io,
                u.comms,
                index == 0,
            )
        )
    weights = []
    grouped = blocks([c.block for c in costed])
    for members in grouped:
        weights.append(
            sum(
                costed[i].times.forward + costed[i].times.input_grad + costed[i].times.weight_grad
                for i in members
            )
        )
    cuts = partition(weights, layout.chunks, layout.stages)
    chunks = [[costed[i] for b in cut for i in grouped[b]] for cut in cuts]
    boundary = [_boundary(units[chunk[-1].index], t if layout.sp else 1) for chunk in chunks]
    programs = tuple(StageProgram(s, layout, chunks, boundary).build() for s in range(layout.pp))
    mesh = Mesh(
        (
            Axis(Purpose.TENSOR, t),
            Axis(Purpose.EXPERT, e),
            Axis(Purpose.DATA, layout.d // e),
            Axis(Purpose.PIPELINE, layout.pp),
        )
    )
    program_of = tuple(mesh.coords(r)[3] for r in range(mesh.size))
    # the first unit's input gradient: written in the text as the keywords write it, run by nobody
    infos = tuple(
        LayerInfo(c.name, c.times.update, unexecuted_input_grad=c.times.input_grad if c.first else 0)
        for c in costed
    )
    facts = LayoutFacts(
        sequence_parallel=layout.sp,
        zero=layout.zero,
        micro_batch=layout.micro_batch,
        global_batch=layout.batch,
        micro_batches=layout.ga,
        schedule=layout.schedule,
        virtual_stages=layout.vpp,
        recompute=layout.recompute,
        boundary_bytes=boundary[0] if len(boundary) > 1 else 0,
        chunks=tuple(Chunk(c[0].name, c[-1].name, len(cut)) for c, cut in zip(chunks, cuts, strict=True)),
    )
    return Plan(mesh, infos, programs, program_of, layout=facts)


def _boundary(u: Unit, ways: int) -> int:
    """Bytes of the activation a chunk ending with `u` hands on (its last layer's output)."""
    last = u.x.group.members[-1]
    size = last.outputs[0].bytes or 0 if last.outputs else 0
    return -(-size // ways)
