"""A workload file's contents at a glance (`modtrans inspect FILE.txt`): per layer its compute and
collectives, then totals per phase and per collective type and group (the group its consumer gives
the column: workload/traffic.py). Pure: no printing."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from modtrans.workload.model import Workload
from modtrans.workload.traffic import collective_key, collectives

PHASES = ("fwd", "input_grad", "weight_grad")


@dataclass(frozen=True)
class Summary:
    rows: tuple[dict[str, object], ...]  # per layer: name, each phase's compute, comm and size, update
    compute: dict[str, int]  # phase -> ticks
    comm_bytes: dict[str, int]  # phase -> bytes
    collectives: tuple[tuple[str, str, int, int], ...]  # (type, group, count, bytes)


def summarize(w: Workload) -> Summary:
    rows = []
    compute: Counter[str] = Counter()
    moved: Counter[str] = Counter()
    for layer in w.layers:
        row: dict[str, object] = {"layer": layer.name}
        for name, phase in layer.phases:
            row[f"{name}_compute"] = phase.compute_time
            row[f"{name}_comm"] = phase.comm_type.value
            row[f"{name}_size"] = phase.comm_size
            compute[name] += phase.compute_time
            if collective_key(w, name, phase) is not None:
                moved[name] += phase.comm_size
        row["update"] = layer.update_time
        compute["update"] += layer.update_time
        rows.append(row)
    per_type = tuple((kind, group, n, size) for (kind, group), (n, size) in sorted(collectives(w).items()))
    return Summary(tuple(rows), dict(compute), dict(moved), per_type)


def lines(s: Summary, title: str) -> list[str]:
    """A plain table: the layers, then the totals."""
    out = [title, f"{'layer':<40} {'fwd':>10} {'ig':>10} {'wg':>10} {'update':>8}  collectives"]
    for row in s.rows:
        comms = [
            f"{p}:{row[f'{p}_comm']} {row[f'{p}_size']:,}"
            for p in PHASES
            if row[f"{p}_comm"] != "NONE" and row[f"{p}_size"]
        ]
        name = str(row["layer"])
        out.append(
            f"{name[:40]:<40} {row['fwd_compute']:>10,} {row['input_grad_compute']:>10,} "
            f"{row['weight_grad_compute']:>10,} {row['update']:>8,}  {', '.join(comms)}"
        )
    out.append("")
    total = " ".join(f"{p} {s.compute.get(p, 0):,}" for p in (*PHASES, "update"))
    out.append(f"compute per phase (ticks): {total}")
    out.append("communication per iteration, by type and group (count / bytes):")
    out += [f"  {kind} over {group}: {n} / {b:,} B" for kind, group, n, b in s.collectives]
    return out
