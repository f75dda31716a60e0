"""Dialects: which consumer a file was written for, and what each consumer does with a layer.

Facts from workload-format.md: section 4 (which phases ASTRA-sim 1.0's training loop issues per
keyword), section 9 (dialect history) and section 11 (which phases Chakra's converter emits).
"""

from __future__ import annotations

import operator

from modtrans.comm import CommType, Policy
from modtrans.workload import vocabulary
from modtrans.workload.model import Dialect, Layer, Workload

CHAKRA_POLICIES = frozenset(
    {
        Policy.MICRO,
        Policy.DATA,
        Policy.MODEL,
        Policy.HYBRID_DATA_MODEL,
        Policy.HYBRID_MODEL_DATA,
        Policy.HYBRID_DLRM,
        Policy.HYBRID_DLRM_ENHANCED,
    }
)

PHASES = ("fwd", "input_grad", "weight_grad")


def detect(workload: Workload) -> Dialect:
    """SimAI when the file uses anything only SimAI reads (header keys, _EP types); else ASTRA-sim.

    Chakra is never detected: its input is an ASTRA-sim file; it only matters as a target.
    """
    header = workload.header
    if header.simai_parameters:
        return Dialect.SIMAI
    layout = header.layout
    if layout is not None and vocabulary.DLRM.key in layout.line.tokens:
        return Dialect.SIMAI
    used = {comm for comm, _ in phase_kinds(workload.layers)}
    return Dialect.SIMAI if any(c.is_simai_only for c in used) else Dialect.ASTRA_SIM


_TYPE, _SIZE = operator.attrgetter("comm_type"), operator.attrgetter("comm_size")
_last_kinds: tuple[tuple[Layer, ...], frozenset[tuple[CommType, bool]]] | None = None


def phase_kinds(layers: tuple[Layer, ...]) -> frozenset[tuple[CommType, bool]]:
    """Every (comm type, size is zero) a phase of `layers` has: one pass in C (map, zip) that
    detection and the per-layer checks share (the last tuple's is kept). The checks look at the
    layers one by one only when it holds what they look for, which most files do not."""
    global _last_kinds
    if _last_kinds is not None and _last_kinds[0] is layers and type(layers) is tuple:  # not a list
        return _last_kinds[1]  # that could have changed since
    kinds: set[tuple[CommType, bool]] = set()
    for name in PHASES:
        phases = list(map(operator.attrgetter(name), layers))
        kinds.update(zip(map(_TYPE, phases), map(operator.not_, map(_SIZE, phases)), strict=True))
    _last_kinds = (layers, frozenset(kinds))
    return _last_kinds[1]


def chakra_phases(policy: Policy, index: int, layer: Layer) -> tuple[str, ...]:
    """Phases for which Chakra's text converter emits a COMM_COLL node (section 11)."""
    if policy in (Policy.MICRO, Policy.DATA):
        return ("weight_grad",)
    if policy is Policy.MODEL:
        return ("fwd", "input_grad") if index > 0 else ("fwd",)
    if policy in (Policy.HYBRID_DATA_MODEL, Policy.HYBRID_MODEL_DATA):
        return PHASES if index > 0 else ("fwd", "weight_grad")
    if policy.is_dlrm:
        emitted = []
        if layer.fwd.comm_type is CommType.ALLTOALL:
            emitted.append("fwd")
        if index == 0:
            emitted.append("input_grad")
        if layer.weight_grad.comm_type is not CommType.NONE:
            emitted.append("weight_grad")
        return tuple(emitted)
    return ()


def astra_sim_phases(policy: Policy, index: int, layer: Layer) -> tuple[str, ...]:
    """Phases whose collective ASTRA-sim 1.0's training loop issues (section 4)."""
    if policy is Policy.HYBRID_CUSTOMIZED:
        policy = layer.policy or policy
    if policy is Policy.MICRO:
        return ("weight_grad",) if index == 0 else ()
    if policy is Policy.DATA:
        return ("weight_grad",)
    if policy is Policy.MODEL:
        return ("fwd", "input_grad") if index > 0 else ("fwd",)
    if policy is Policy.DISTRIBUTED_INFERENCE:
        return ("fwd",)
    if policy.is_dlrm:
        fwd = ("fwd",) if layer.fwd.comm_type is CommType.ALLTOALL else ()
        return (*fwd, *(("input_grad",) if index == 0 else ()), "weight_grad")
    return ("fwd", "input_grad", "weight_grad") if index > 0 else ("fwd", "weight_grad")


def stray_policy(layer: str, field: str, header: Policy) -> tuple[str, str]:
    """V220's message and hint: a layer's 13th field under a header other than HYBRID_CUSTOMIZED,
    whether the field is a parallelism keyword (this check) or not (the parser, which builds no
    layer from the line)."""
    return f"layer `{layer}` has a 13th field `{field}` but the header is {header}", "remove the 13th field"
