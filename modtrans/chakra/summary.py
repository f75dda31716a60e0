"""Per-rank totals of a trace set (modtrans inspect PREFIX): what each rank computes and moves.

rows = summarize(traces)
rows[0]  RankTotals(rank=0, nodes=215, compute_us=21930, flops=..., collectives={("ALL_REDUCE",
         "all"): (54, 102228992)}, sends=(0, 0), recvs=(0, 0))
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modtrans import sidecar
from modtrans.chakra.encode import MODEL_OPS
from modtrans.chakra.programs import step_of
from modtrans.chakra.read import Trace, TraceNode, rank_of
from modtrans.chakra.validate import COLL, COMP, NAMES, RECV, SEND


@dataclass
class RankTotals:
    rank: int | None
    path: str
    stage: int | None = None  # the pipeline stage (program) modtrans wrote the rank for
    nodes: int = 0
    compute_us: int = 0  # the sum of duration_micros (what replay mode runs)
    flops: int = 0  # the sum of num_ops (what roofline mode runs), recomputation's too (node_flops)
    model_flops: int = 0  # the model's of them: no recomputed forward's (what MFU counts: node_flops)
    collectives: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # (type, group) -> [n, bytes]
    sends: list[int] = field(default_factory=lambda: [0, 0])  # count, bytes
    recvs: list[int] = field(default_factory=lambda: [0, 0])


def representatives(paths: Sequence[Path], mesh: Mapping[str, int]) -> list[Path]:
    """One trace per pipeline stage: the first rank of each (the mesh's first axis the fastest, the
    pipeline the slowest: a stage's ranks run one program, so its first tells its totals). Every
    path when the mesh is not known or the files are not numbered PREFIX.<rank>.et."""
    if not mesh or "pipeline" not in mesh:
        return list(paths)
    per_stage = math.prod(v for k, v in mesh.items() if k != "pipeline")
    by_rank = {}
    for path in paths:
        rank = rank_of(str(path))
        if rank is None:
            return list(paths)
        by_rank[rank] = path
    if sorted(by_rank) != list(range(per_stage * mesh["pipeline"])):
        return list(paths)
    return [by_rank[p * per_stage] for p in range(mesh["pipeline"])]


def node_flops(node: TraceNode) -> tuple[int, int]:
    """A compute node's FLOPs and the model's FLOPs of it, as modtrans wrote it: its num_ops, but
    none for the 1 the writer gives a node of no FLOPs that moves bytes (chakra/write.py: roofline
    mode's divisor) and, of the model's, none of a recomputed forward (FWD_RECOMPUTE:
    Step.modelled, what MFU and TFLOP/s per GPU leave out) and its model_ops where written (a part
    every tensor rank computes whole, 1/T of it: Compute.model, chakra/encode.py). The one reading
    of num_ops that `inspect PREFIX`, `estimate PREFIX` and `simulate` share."""
    ops = node.value("num_ops", 0)
    flops = ops if isinstance(ops, int) and ops > 1 else 0
    if not step_of(node.name).modelled:
        return flops, 0
    model = node.value(MODEL_OPS, -1)
    return flops, model if isinstance(model, int) and model >= 0 else flops


def summarize(traces: Sequence[Trace]) -> list[RankTotals]:
    rows = []
    for trace in sorted(traces, key=lambda t: (t.rank is None, t.rank or 0, t.path)):
        row = RankTotals(trace.rank, trace.path, _info(trace).get("stage"), nodes=len(trace.nodes))
        for node in trace.nodes:
            if node.type == COMP:
                row.compute_us += node.duration
                flops, model = node_flops(node)
                row.flops += flops
                row.model_flops += model
            elif node.type == COLL:
                kind = node.value("comm_type")
                pg = str(node.value("pg_name", "") or "all")
                name = NAMES.get(kind, str(kind)) if isinstance(kind, int) else str(kind)
                entry = row.collectives.setdefault((name, pg), [0, 0])
                entry[0] += 1
                size = node.value("comm_size", 0)
                entry[1] += size if isinstance(size, int) else 0
            elif node.type in (SEND, RECV):
                entry = row.sends if node.type == SEND else row.recvs
                size = node.value("comm_size", 0)
                entry[0] += 1
                entry[1] += size if isinstance(size, int) else 0
        rows.append(row)
    return rows


def lines(rows: Sequence[RankTotals], peak: float | None = None) -> list[str]:
    """A plain table: one line per rank, then one per (collective, group) of each rank. Each rank's
    achieved TFLOP/s while it computes (every FLOP it runs, recomputation's too, over its compute
    time: what the compute model assumes) and, given the device's `peak` FLOP/s, that as a share
    of the peak ("peak%"): not the MFU, which `modtrans estimate` gives over the iteration's
    time of the model's FLOPs alone (estimate/result.py)."""
    mfu = f" {'peak%':>6}" if peak else ""
    head = f"{'rank':>5} {'nodes':>7} {'compute us':>12} {'GFLOP':>10} {'TFLOP/s':>8}{mfu}"
    out = [f"{head} {'sends':>14} {'receives':>14}"]
    for r in rows:
        rank = "?" if r.rank is None else str(r.rank)
        sends = f"{r.sends[0]} / {_bytes(r.sends[1])}"
        recvs = f"{r.recvs[0]} / {_bytes(r.recvs[1])}"
        rate = r.flops / r.compute_us / 1e6 if r.compute_us else 0.0
        used = f" {rate * 1e12 / peak:>6.1%}" if peak else ""
        out.append(
            f"{rank:>5} {r.nodes:>7} {r.compute_us:>12,} {r.flops / 1e9:>10.2f} {rate:>8.1f}{used} "
            f"{sends:>14} {recvs:>14}"
        )
        for (kind, group), (count, size) in sorted(r.collectives.items()):
            where = "every rank" if group == "all" else f"group {group}"
            out.append(f"{'':>5} {kind:>18} x{count:<5} {_bytes(size):>12} in {where}")
    return out


def _info(trace: Trace) -> dict[str, Any]:
    """What modtrans wrote in the trace's metadata (nothing for other generators' traces)."""
    text = trace.metadata.get("modtrans", (None, None))[1]
    try:
        info = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def stages(traces: Sequence[Trace], rows: Sequence[RankTotals], per_stage: int | None = None) -> list[str]:
    """Per pipeline stage: its ranks, their compute, and the schedule's bubble (Narayanan et al.
    2021, section 2.2: (P - 1) / (V m) of the ideal time for P stages, V chunks, m micro-batches)."""
    by_stage: dict[int, list[RankTotals]] = {}
    for r in rows:
        if r.stage is not None:
            by_stage.setdefault(r.stage, []).append(r)
    llm = sidecar.llm_of(_info(traces[0])) if traces else {}
    if len(by_stage) < 2:
        return memory(llm)
    out = ["", f"{'stage':>5} {'ranks':>6} {'compute us':>12} {'sends':>14} {'receives':>14}"]
    for stage, members in sorted(by_stage.items()):
        first = members[0]
        sends, recvs = (
            f"{first.sends[0]} / {_bytes(first.sends[1])}",
            f"{first.recvs[0]} / {_bytes(first.recvs[1])}",
        )
        count = per_stage or len(members)  # the stage's ranks, where only its first was read
        out.append(f"{stage:>5} {count:>6} {first.compute_us:>12,} {sends:>14} {recvs:>14}")
    if llm:
        out.append(_bubble(llm, len(by_stage)))
    return [*out, *memory(llm)]


def _bubble(llm: dict[str, Any], p: int) -> str:
    """The schedule's bubble as a share of the ideal time, forward, input and weight gradients
    taking equal times (as the schedules' papers compare them):
        1F1B, GPipe, interleaved  (P - 1) / (V m)           (Narayanan et al. 2021, section 2.2)
        ZB-H1                     (P - 1)(F + B - W) of m (F + B + W): a third of 1F1B's
                                  (Qi et al. 2024, section 3.1)
        DualPipe, DualPipeV       (S/2 - 1)(F&B + B - 3W) with S model stages (P; 2P), F&B = F + B
                                  (no compute overlaps in a trace), of a stage's m (F + B) x S / P
                                  (deepseek-ai/DualPipe, README's table)"""
    schedule, v, m = str(llm.get("schedule")), int(llm.get("vpp", 1)), int(llm.get("ga", 1))
    if schedule in ("dualpipe", "dualpipev"):
        stages = p if schedule == "dualpipe" else 2 * p
        share = (stages / 2 - 1) * 2 / (m * 3 * stages / p)
        what = f"{schedule}, P={p}, {m} micro-batches"
    else:
        share = (p - 1) / (v * m * (3 if schedule == "zb-h1" else 1))
        what = f"{schedule}, P={p}, V={v}, {m} micro-batches"
    return f"pipeline bubble ({what}): {share:.1%} of the ideal time"


def memory(llm: dict[str, Any]) -> list[str]:
    """One rank's memory per stage, as the translation estimated it (strategy/llm/memory.py)."""
    out = []
    for m in llm.get("memory", []):
        w, g, o, a = (m[f"{part}_bytes"] / 2**30 for part in sidecar.MEMORY_PARTS)
        reserved = m.get("reserved_bytes", m["total_bytes"])
        more = f"; reserved {reserved / 2**30:,.1f}" if reserved > m["total_bytes"] else ""
        out.append(
            f"memory per rank, stage {m['stage']}: {m['total_bytes'] / 2**30:,.1f} GiB (weights {w:.1f}, "
            f"gradients {g:.1f}, optimizer {o:.1f}, activations {a:.1f}{more})"
        )
    return ["", *out] if out else []


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"
