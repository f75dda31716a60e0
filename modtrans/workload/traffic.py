"""What a workload file moves: each column's collective as (type, group), the group being the one
its consumer gives that column, and the count and bytes per (type, group) over the file (one
iteration, whatever the layers' granularity). `diff` compares two files by it (diff/compare.py,
diff/aicb.py); `inspect` totals one (workload/summary.py)."""

from __future__ import annotations

from modtrans.comm import CommType
from modtrans.workload.model import Phase, Workload


def collectives(w: Workload) -> dict[tuple[str, str], tuple[int, int]]:
    """(type, group) -> (count, bytes) over the workload's collectives (collective_key)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for layer in w.layers:
        for phase_name, phase in layer.phases:
            key = collective_key(w, phase_name, phase)
            if key is not None:
                count, size = out.get(key, (0, 0))
                out[key] = (count + 1, size + phase.comm_size)
    return out


def collective_key(w: Workload, phase_name: str, phase: Phase) -> tuple[str, str] | None:
    """A column's collective as (type, group), None without one. The group is the one the consumer
    gives the column: SimAI's and the transformer keywords' tensor group for fwd / ig and data group
    for wg; _EP the expert group, _DP_EP the experts' data group; other keywords name the column."""
    if not phase.comm_type.moves_data and phase.comm_type is not CommType.BROADCAST:
        return None
    base, _, suffix = phase.comm_type.value.partition("_")
    if phase.comm_type is CommType.BROADCAST:
        group = "none: no consumer runs it"
    elif suffix:
        group = {"EP": "expert", "DP_EP": "expert-data"}.get(suffix, suffix.lower())
    elif w.header.policy.is_transformer:
        group = "data" if phase_name == "weight_grad" else "tensor"
    else:
        group = f"{phase_name} column"
    return base, group
