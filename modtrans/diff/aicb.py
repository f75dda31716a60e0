"""AICB's workloads (aliyun/aicb 23eec3c, workload_generator/SimAI_training_workload_generator.py):
which of their lines are AICB's own conventions, and which Megatron-LM collectives AICB leaves
out, so that `diff` can name every difference in communication between a translation and an
AICB file of the same setup. Pure: no rich, no I/O.

AICB writes, besides one line per role and block (attention_column_layer, mlp_row_layer ...):

    norm            BROADCAST of the batch over the tensor group (Megatron's get_batch ->
                    tensor_parallel.broadcast_data); no simulator runs BROADCAST: not written here
    grad_norm       the distributed optimizer, always: ALLGATHER of 2 B per parameter in the
                    forward column (SimAI gives that column to the tensor group; Megatron gathers
                    over the data ranks) and REDUCESCATTER of 4 B per parameter (workload_generate:
                    forward_comm "ALLGATHER", dp_comm "REDUCESCATTER", whatever the options)
    layernorm       without SP, ALLREDUCE of 2 B per parameter of the model over the tensor group;
                    Megatron all-reduces the norms' (and row-parallel biases') gradients only,
                    and only under SP (finalize_model_grads.py,
                    _allreduce_non_tensor_model_parallel_grads)
    embedding_norm  ALLREDUCE of vocabulary x hidden x 2 B over the tensor group in every micro-batch
                    copy; Megatron all-reduces the word embedding's gradient only between the first
                    and last pipeline stages, when they differ (_allreduce_word_embedding_grads)
    cross_entropy*  the vocabulary-parallel loss's three all-reduces, once per iteration (Megatron:
                    per micro-batch, tensor_parallel/cross_entropy.py); written here too
    optimizer*      four 4-byte ALLREDUCEs: the optimizer step's statistics (Megatron: the gradient
                    norm, clip_grads.py get_grad_norm_fp32, and train_step's update and norm checks
                    over the model-parallel group); latency only, not written here
and under SP leaves out what Megatron sends: a column-parallel layer's input all-gathered again in
the backward (tensor_parallel/layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward)
and the all-reduce of the norms' and the row-parallel biases' gradients.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from modtrans.comm import CommType
from modtrans.diff.compare import Traffic
from modtrans.workload.model import Layer, Workload
from modtrans.workload.traffic import collective_key, collectives

_LINES = re.compile(
    r"^(embedding_layer|attention(_column|_row|_q_column|_kv_column|_o_row)?_layer|"
    r"mlp(_column|_row|_moelayer)?_layer|final_column|grad_norm|grad_gather|grad_param_comm)"
)
_NORM = re.compile(r"(^|[._/])(ln_\d+|ln_f|\w*norm\w*)($|[._/])", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Named:
    """Collectives of one side that a convention explains: `count` collectives of `bytes` in all,
    of one type over one group (to `regroup` instead, where the other side counts them there)."""

    comm: str
    group: str
    reference: bool  # the reference's (else the first side's)
    count: int
    bytes: int
    why: str
    regroup: str | None = None


def is_aicb(reference: Workload) -> bool:
    """Two or more of AICB's line names."""
    return sum(bool(_LINES.match(layer.name)) for layer in reference.layers) >= 2


def named(first: Workload, reference: Workload) -> list[Named]:
    """Every AICB convention the two sides show (empty when the reference is not AICB's)."""
    if not is_aicb(reference):
        return []
    found = _merge(_reference(reference))
    found += _merge(_ends(first))
    if sum(_sp_column(layer) for layer in reference.layers):
        found += _merge(_first_under_sp(first, reference))
    return _held(found + _model(first, reference), first, reference)


def _held(found: list[Named], first: Workload, reference: Workload) -> list[Named]:
    """The conventions each side's own collectives hold, in order: one that names more than its
    side has left of that type and group (a convention of a layout the side was not translated
    with: SP's re-gathers at T = 1) explains nothing, and the difference stays in the residual,
    counted on the side that has more. So no count the residual leaves is negative."""
    left = {
        side: {k: list(v) for k, v in collectives(w).items()}
        for side, w in ((False, first), (True, reference))
    }
    held = []
    for n in found:
        have = left[n.reference].setdefault((n.comm, n.group), [0, 0])
        if n.count > have[0] or n.bytes > have[1]:
            continue
        have[0] -= n.count
        have[1] -= n.bytes
        if n.regroup is not None:
            moved = left[n.reference].setdefault((n.comm, n.regroup), [0, 0])
            moved[0] += n.count
            moved[1] += n.bytes
        held.append(n)
    return held


def _ends(first: Workload) -> Iterator[Named]:
    """Our embedding's backward and output layer's collectives, which AICB does not write: AICB
    has no line for the output layer, and its embedding_layer line all-reduces in the backward
    what Megatron does not send (both named on the reference's side in _WHY)."""
    if not first.layers:
        return
    for end, why in ((first.layers[-1], _HEAD), (first.layers[0], _EMBEDDING)):
        base = _base(end.name)
        for layer in first.layers:
            if _base(layer.name) != base or layer.name.split(".")[-1].startswith("mb"):
                continue
            for phase_name, phase in layer.phases:
                key = collective_key(first, phase_name, phase)
                if key is None or key[1] != "tensor":
                    continue  # the data-parallel buckets sit on the first unit's lines too
                if why is _HEAD:  # all but the loss's all-reduces after its forward
                    named = phase_name != "fwd" or phase.comm_type is not CommType.ALLREDUCE
                else:  # the embedding: what it sends in the backward
                    named = phase_name != "fwd"
                if named:
                    yield Named(*key, False, 1, phase.comm_size, why)


_HEAD = (
    "AICB writes no line for the output layer (column-parallel over the vocabulary): Megatron "
    "all-reduces its input gradient, or with SP gathers its input before the forward and again in "
    "the backward and reduce-scatters its input gradient (tensor_parallel/layers.py, "
    "ColumnParallelLinear)"
)
_EMBEDDING = (
    "with SP Megatron all-gathers the word embedding's output gradient in the backward "
    "(LanguageModelEmbedding: scatter_to_sequence_parallel_region, whose backward gathers)"
)


def _base(name: str) -> str:
    """A line's unit: its name without the .preN / .postN / .mbN of the lines around it."""
    return re.sub(r"(\.(pre|post|mb)\d+)+$", "", name)


def _model(first: Workload, reference: Workload) -> list[Named]:
    """The distributed optimizer's two collectives on both sides, when only their sizes differ:
    the two models' parameters (AICB's mocked model against this one) and gradient dtypes (AICB
    writes 4 B per parameter, Megatron's fp32 reduction of bf16 gradients; an fp16 model reduces
    in 2 B). Named with both sides' parameters per tensor-parallel rank and bytes per gradient."""
    sides = [_optimizer(w) for w in (first, reference)]
    ours, theirs = sides
    if ours is None or theirs is None or ours == theirs:
        return []
    if not all(gather > 1 and scatter in (gather, 2 * gather) for gather, scatter in (ours, theirs)):
        return []  # not 2 or 4 B gradients per 2 B parameter: something else than a model's size
    (gather_a, scatter_a), (gather_b, scatter_b) = ours, theirs
    why = (
        f"the models differ: {gather_b // 2:,} parameters per tensor-parallel rank in the reference, "
        f"reduced in {scatter_b / gather_b * 2:.0f} B each (AICB's mocked model, bf16 with fp32 "
        f"gradients), {gather_a // 2:,} here in {scatter_a / gather_a * 2:.0f} B (this model's "
        "parameters and dtype; --dtype-bytes sets the gradients')"
    )
    return [
        Named(comm.value, "data", reference, 1, size, why)
        for reference, pair in ((False, ours), (True, theirs))
        for comm, size in zip((CommType.ALLGATHER, CommType.REDUCESCATTER), pair, strict=True)
    ]


def _optimizer(w: Workload) -> tuple[int, int] | None:
    """The bytes of a side's one distributed-optimizer all-gather and reduce-scatter over the data
    ranks (its single bucket), None unless it has exactly one of each."""
    found: dict[str, list[int]] = {}
    for layer in w.layers:
        for phase_name, phase in layer.phases:
            key = collective_key(w, phase_name, phase)
            regrouped = layer.name == "grad_norm" and phase.comm_type is CommType.ALLGATHER
            if key is not None and (key[1] == "data" or regrouped):
                found.setdefault(key[0], []).append(phase.comm_size)
    gathers, scatters = found.get(CommType.ALLGATHER.value, []), found.get(CommType.REDUCESCATTER.value, [])
    if len(gathers) != 1 or len(scatters) != 1 or set(found) - {"ALLGATHER", "REDUCESCATTER"}:
        return None
    return gathers[0], scatters[0]


_WHY = {
    "norm": "AICB's norm line: Megatron's broadcast of the batch over the tensor group "
    "(get_batch -> broadcast_data); no simulator runs BROADCAST, so it is not written here",
    "grad_norm": "AICB writes the distributed optimizer's parameter all-gather in the forward "
    "column, which SimAI gives to the tensor group; Megatron gathers over the data ranks",
    "layernorm": "AICB's layernorm line all-reduces 2 B per parameter over the tensor group; "
    "Megatron all-reduces only the norms' and row-parallel biases' gradients, and only under SP "
    "(finalize_model_grads.py)",
    "embedding_norm": "AICB's embedding_norm all-reduces the whole word embedding over the tensor "
    "group per micro-batch; Megatron all-reduces its gradient only between the first and last "
    "pipeline stages, when they differ (_allreduce_word_embedding_grads)",
    "embedding_layer": "AICB's embedding_layer all-reduces in the backward; an embedding's input is "
    "token ids and Megatron's VocabParallelEmbedding sends nothing there (mappings.py: "
    "reduce_from_tensor_model_parallel_region's backward is the identity)",
    "optimizer": "AICB's optimizer lines: the optimizer step's 4-byte statistics all-reduces "
    "(gradient norm, update checks: clip_grads.py, training.py train_step), latency only; not "
    "written here",
}


def _reference(reference: Workload) -> Iterator[Named]:
    for layer in reference.layers:
        kind = "optimizer" if re.fullmatch(r"optimizer\d+", layer.name) else layer.name
        if kind not in _WHY:
            continue
        for phase_name, phase in layer.phases:
            key = collective_key(reference, phase_name, phase)
            if key is None:
                continue
            regroup = "data" if kind == "grad_norm" and phase.comm_type is CommType.ALLGATHER else None
            if (kind == "grad_norm" and regroup is None) or (
                kind == "embedding_layer" and phase_name == "fwd"
            ):
                continue  # over the data ranks as Megatron's; the embedding's forward as Megatron's
            yield Named(*key, True, 1, phase.comm_size, _WHY[kind], regroup)


def _first_under_sp(first: Workload, reference: Workload) -> Iterator[Named]:
    """What Megatron sends under SP and AICB does not: the backward all-gathers of column-parallel
    inputs (one per AICB column line, of its forward all-gather's size) and the gradients of the
    norms and of the row-parallel layers' biases."""
    for layer in reference.layers:
        if _sp_column(layer):
            yield Named(
                CommType.ALLGATHER.value,
                "tensor",
                False,
                1,
                layer.fwd.comm_size,
                "with SP Megatron all-gathers a column-parallel layer's input again in the backward "
                "for its weight gradient (tensor_parallel/layers.py, LinearWithGradAccumulation"
                "AndAsyncCommunication.backward); AICB's column lines do not",
            )
    for layer in first.layers:
        if layer.input_grad.comm_type is not CommType.ALLREDUCE:
            continue
        if _NORM.search(layer.name.split(".pre")[0]):
            why = "the norms' gradients"
        elif layer.fwd.comm_type is CommType.REDUCESCATTER:  # a row-parallel line: its whole bias
            why = "a row-parallel layer's bias gradient (RowParallelLinear marks it sequence_parallel)"
        else:
            continue
        yield Named(
            CommType.ALLREDUCE.value,
            "tensor",
            False,
            1,
            layer.input_grad.comm_size,
            f"with SP Megatron all-reduces {why} over the tensor group once per iteration "
            "(finalize_model_grads.py, _allreduce_non_tensor_model_parallel_grads); AICB does not",
        )


def _sp_column(layer: Layer) -> bool:
    """A column-parallel line under sequence parallelism: fwd ALLGATHER, ig REDUCESCATTER."""
    return layer.fwd.comm_type is CommType.ALLGATHER and layer.input_grad.comm_type is CommType.REDUCESCATTER


def _merge(items: Iterator[Named]) -> list[Named]:
    """One entry per (type, group, side, reason, regroup), counts and bytes summed."""
    counts: Counter[tuple[str, str, bool, str, str | None]] = Counter()
    sizes: Counter[tuple[str, str, bool, str, str | None]] = Counter()
    for n in items:
        key = (n.comm, n.group, n.reference, n.why, n.regroup)
        counts[key] += n.count
        sizes[key] += n.bytes
    return [Named(c, g, r, counts[k], sizes[k], w, x) for k in counts for c, g, r, w, x in [k]]


def residual(traffic: tuple[Traffic, ...], explained: list[Named]) -> tuple[Traffic, ...]:
    """The traffic rows that still differ once each side's named collectives are taken out (and
    regrouped ones put where the other side counts them)."""
    rows = {(t.comm, t.group): [t.count_a, t.count_b, t.bytes_a, t.bytes_b] for t in traffic}
    for n in explained:
        side = 1 if n.reference else 0
        row = rows.setdefault((n.comm, n.group), [0, 0, 0, 0])
        row[side] -= n.count
        row[side + 2] -= n.bytes
        if n.regroup is not None:
            moved = rows.setdefault((n.comm, n.regroup), [0, 0, 0, 0])
            moved[side] += n.count
            moved[side + 2] += n.bytes
    return tuple(
        Traffic(comm, group, *values)
        for (comm, group), values in sorted(rows.items())
        if values[0] != values[1] or values[2] != values[3]
    )
