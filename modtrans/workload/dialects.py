"""Dialects: which consumer a file was written for, and what each consumer does with a layer.

Facts from workload-format.md: section 4 (which phases ASTRA-sim 1.0's training loop issues per
keyword), section 9 (dialect history) and section 11 (which phases Chakra's converter emits).
"""

from __future__ import annotations

from modtrans.workload.model import CommType, Dialect, Layer, Policy, Workload

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
    if layout is not None and "DLRM_LAST_BOTTOM_LAYER:" in layout.line.tokens:
        return Dialect.SIMAI
    used = {x.fwd.comm_type for x in workload.layers}
    used.update(x.input_grad.comm_type for x in workload.layers)
    used.update(x.weight_grad.comm_type for x in workload.layers)
    return Dialect.SIMAI if any(c.is_simai_only for c in used) else Dialect.ASTRA_SIM


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
