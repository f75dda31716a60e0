"""Workload -> Chakra execution traces for ASTRA-sim 2.x.

The messages come from etschema.py (Chakra's schema, declared on protobuf: no Chakra package is
needed to write traces; the tests read them back with Chakra's own). One trace per NPU,
`<prefix>.<npu>.et`: a GlobalMetadata message, then
the nodes of `passes` training iterations, built like Chakra's own text converter (same node names,
same forward -> weight-gradient -> input-gradient order) but for every strategy, the transformer
keywords and HYBRID_CUSTOMIZED included, and with a communication node only where a collective
really moves data (Chakra's converter turns NONE into a 0-byte all-reduce).

Units: `duration_micros` holds whole microseconds, and ASTRA-sim 2.x multiplies it by 1000 (astra-sim
f7bd62c). The workload handed in is in ticks of `tick_ns` nanoseconds (`translate --format chakra-et`
computes in ns, tick_ns 1; a workload in microseconds has tick_ns 1000). No node is rounded on its
own: the rounding is carried from node to node in file order (each node gets the whole microseconds
its end adds to the running total), so every trace's durations sum to the workload's compute time
to within 1 us, where rounding each node up made ResNet-50 6 % and GPT-2 21 % slower in 2.x.

Dependencies (data_deps): each forward compute waits for the previous layer's forward (its
collective, when it has one); the backward pass starts after the last forward; each layer's
weight-gradient compute waits for the input gradient of the layer after it (its collective, when
it has one); the input-gradient compute waits for the weight-gradient compute; collectives wait for
their compute. Layer 0 has no input-gradient work. With several passes, a layer's forward also
waits for its previous weight-gradient collective.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from modtrans.workload.model import CommType, Layer, Phase, Policy, Workload

SCHEMA = "1.0.2-chakra.1.0.0"


class ChakraError(RuntimeError):
    """The traces cannot be written (network dims that do not fit, a folder that is not there)."""


def _schema() -> Any:
    from modtrans.etschema import schema

    return schema()


def _collective(pb: Any, comm: CommType) -> int:
    base = comm.value.split("_")[0]  # ALLREDUCE_EP -> ALLREDUCE: the group is not in the trace
    return int(
        {
            "ALLREDUCE": pb.ALL_REDUCE,
            "ALLGATHER": pb.ALL_GATHER,
            "REDUCESCATTER": pb.REDUCE_SCATTER,
            "ALLTOALL": pb.ALL_TO_ALL,
            "ALLREDUCEALLTOALL": pb.ALL_REDUCE,
        }[base]
    )


def involved_dims(
    workload: Workload, dims: Sequence[int] | None
) -> Callable[[Layer, str], tuple[bool, ...] | None]:
    """The network dimensions each collective spans, as ASTRA-sim 1.0's decode_involved_dimensions
    masks them (workload-format spec, section 8), for the `involved_dim` attribute ASTRA-sim 2.x
    reads; without `dims` the attribute is left out (ASTRA-sim 2.x then uses every dimension).

      DATA (and DLRM, MICRO): wg on all.   MODEL: fwd, ig on all.
      HYBRID_DATA_MODEL: fwd, ig on dim 0; wg on dims 1..   HYBRID_MODEL_DATA: the reverse.
      HYBRID_TRANSFORMER*: fwd, ig on the leading dims holding model_parallel_NPU_group NPUs; wg on
      the rest.   HYBRID_CUSTOMIZED: each layer's own keyword.
    """
    if not dims:
        return lambda layer, phase: None
    n = len(dims)
    everything, nothing = (True,) * n, (False,) * n
    first = (True,) + (False,) * (n - 1)
    rest = (False,) + (True,) * (n - 1)
    split = n
    header = workload.header
    if header.policy.is_transformer:
        group, product, split = header.model_parallel_group or 1, 1, 0
        while split < n and product < group:
            product *= dims[split]
            split += 1
        if product != group:
            leading = list(dims)
            raise ChakraError(
                f"model_parallel_NPU_group {group} is not a product of leading network dims {leading}"
            )
    tp = (True,) * split + (False,) * (n - split)
    dp = (False,) * split + (True,) * (n - split)

    def masks(policy: Policy) -> dict[str, tuple[bool, ...]]:
        if policy is Policy.MODEL or policy is Policy.DISTRIBUTED_INFERENCE:
            return {"fwd": everything, "input_grad": everything, "weight_grad": nothing}
        if policy is Policy.HYBRID_DATA_MODEL:
            return {"fwd": first, "input_grad": first, "weight_grad": rest}
        if policy is Policy.HYBRID_MODEL_DATA:
            return {"fwd": rest, "input_grad": rest, "weight_grad": first}
        if policy.is_transformer:
            return {"fwd": tp, "input_grad": tp, "weight_grad": dp}
        return {"fwd": nothing, "input_grad": nothing, "weight_grad": everything}

    def choose(layer: Layer, phase: str) -> tuple[bool, ...] | None:
        policy = layer.policy if header.policy is Policy.HYBRID_CUSTOMIZED and layer.policy else header.policy
        return masks(policy)[phase]

    return choose


def _moves(phase: Phase) -> bool:
    return phase.comm_type.moves_data and phase.comm_size > 0


def trace(
    workload: Workload,
    *,
    passes: int = 1,
    metadata: dict[str, Any] | None = None,
    dims: Sequence[int] | None = None,
    tick_ns: float = 1000.0,
) -> bytes:
    """One NPU's trace (every NPU runs the same program in these symmetric strategies)."""
    from modtrans.etschema import encode as encodeMessage

    pb = _schema()
    out = io.BytesIO()
    attrs = [
        pb.AttributeProto(name="schema", string_val=SCHEMA),
        pb.AttributeProto(name="modtrans", string_val=json.dumps(metadata or {}, sort_keys=True)),
    ]
    encodeMessage(out, pb.GlobalMetadata(attr=attrs))
    for node in _nodes(pb, workload, passes, involved_dims(workload, dims), tick_ns):
        encodeMessage(out, node)
    return out.getvalue()


def _nodes(
    pb: Any,
    workload: Workload,
    passes: int,
    involved: Callable[[Layer, str], tuple[bool, ...] | None],
    tick_ns: float,
) -> Iterator[Any]:
    next_id = 0
    elapsed = Fraction(0)  # compute so far, in ns, exact

    def node(name: str, kind: int, deps: list[int]) -> Any:
        nonlocal next_id
        n = pb.Node(id=next_id, name=name, type=kind)
        n.data_deps.extend(d for d in deps if d >= 0)
        next_id += 1
        return n

    def comp(layer: str, phase: str, ticks: int, deps: list[int]) -> Any:
        nonlocal elapsed
        n = node(f"COMP_NODE_{layer}_{phase}", pb.COMP_NODE, deps)
        before = elapsed
        elapsed += ticks * Fraction(tick_ns)
        n.duration_micros = math.floor(elapsed / 1000) - math.floor(before / 1000)  # the carry
        return n

    def comm(layer: Layer, which: str, phase: Phase, deps: list[int]) -> Any:
        n = node(f"COMM_COLL_NODE_{layer.name}_{phase.comm_type.value}", pb.COMM_COLL_NODE, deps)
        n.attr.append(pb.AttributeProto(name="comm_type", int64_val=_collective(pb, phase.comm_type)))
        n.attr.append(pb.AttributeProto(name="comm_size", int64_val=phase.comm_size))
        mask = involved(layer, which)
        if mask is not None:
            n.attr.append(pb.AttributeProto(name="involved_dim", bool_list=pb.BoolList(values=list(mask))))
        return n

    layers = workload.layers
    last_wg_comm = [-1] * len(layers)
    for _ in range(passes):
        tail = -1
        for i, layer in enumerate(layers):
            fwd = comp(layer.name, "FWD", layer.fwd.compute_time, [tail, last_wg_comm[i]])
            yield fwd
            tail = fwd.id
            if _moves(layer.fwd):
                c = comm(layer, "fwd", layer.fwd, [fwd.id])
                yield c
                tail = c.id
        for i in reversed(range(len(layers))):
            layer = layers[i]
            wg = comp(layer.name, "BWD_WG", layer.weight_grad.compute_time, [tail])
            yield wg
            if _moves(layer.weight_grad):
                c = comm(layer, "weight_grad", layer.weight_grad, [wg.id])
                yield c
                last_wg_comm[i] = c.id
            tail = wg.id
            if i > 0:
                ig = comp(layer.name, "BWD_IG", layer.input_grad.compute_time, [wg.id])
                yield ig
                tail = ig.id
                if _moves(layer.input_grad):
                    c = comm(layer, "input_grad", layer.input_grad, [ig.id])
                    yield c
                    tail = c.id


def files(
    workload: Workload,
    prefix: Path,
    *,
    npus: int,
    passes: int = 1,
    metadata: dict[str, Any] | None = None,
    dims: Sequence[int] | None = None,
    tick_ns: float = 1000.0,
) -> list[tuple[Path, bytes]]:
    """`<prefix>.<npu>.et` for every NPU, with its bytes (for fileio.write_all with the sidecar)."""
    if dims and math.prod(dims) != npus:
        raise ChakraError(f"the network dims {list(dims)} hold {math.prod(dims)} NPUs, not --npus {npus}")
    data = trace(workload, passes=passes, metadata=metadata, dims=dims, tick_ns=tick_ns)
    folder = prefix.parent if str(prefix.parent) else Path(".")
    if not folder.is_dir():
        raise ChakraError(f"the folder {folder} does not exist")
    return [(prefix.with_name(f"{prefix.name}.{npu}.et"), data) for npu in range(npus)]


def write(workload: Workload, prefix: Path, *, npus: int, passes: int = 1, **options: Any) -> list[Path]:
    """Write `<prefix>.<npu>.et` for every NPU, all or nothing."""
    from modtrans.fileio import write_all

    outputs = files(workload, prefix, npus=npus, passes=passes, **options)
    try:
        write_all(outputs)
    except OSError as error:
        raise ChakraError(f"cannot write the traces: {error.strerror or error}") from None
    return [target for target, _ in outputs]
