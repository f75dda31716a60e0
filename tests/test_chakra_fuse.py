"""chakra/fuse.py: each chain of computes one node, for traces ASTRA-sim 2.x can hold at scale.
The traces are read back with Chakra's own reader (mlc-chakra) and timed by the exact tier's
reading of trace files (estimate.trace_set); test_estimate_simulator.py runs both sets on the
simulator itself where a binary is given."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

import modtrans.estimate as estimate
from modtrans.chakra import fuse, write
from modtrans.plan.model import Plan
from modtrans.request import prepare, request_of
from tests.chakra_io import read_trace
from tests.conftest import planned

COMP, COLL, SEND, RECV = 4, 7, 5, 6  # Chakra's NodeType (et_def.proto)

LAYOUTS = [
    ("llama-3-8b", {"tp": 2, "pp": 2, "dp": 2, "sp": True, "global_batch": 8}),
    (
        "mixtral-8x7b",
        {"npus": 8, "tp": 2, "pp": 2, "ep": 2, "sp": True, "global_batch": 16, "vpp": 2, "zero": 1},
    ),
    # every compute waits for its parameters' all-gather too: nothing to fuse
    ("llama-3-8b", {"framework": "fsdp", "zero": 3, "dp": 8, "global_batch": 16}),
    ("llama-3-8b", {"tp": 1, "pp": 2, "dp": 4, "global_batch": 8, "zero": 1, "recompute": "full"}),
]


def both(model: str, options: dict[str, object], folder: Path) -> tuple[str, str, Plan]:
    """The layout's traces written plain and fused: their prefixes, and the plan."""
    prepared = prepare(request_of(model, {**options, "format": "chakra-et", "output": str(folder / "x")}))
    plan = planned(prepared)
    write(plan, folder / "plain", tick_ns=1.0)
    write(fuse.fused(plan), folder / "fused", tick_ns=1.0)
    return str(folder / "plain"), str(folder / "fused"), plan


@pytest.mark.parametrize(
    ("model", "options"), LAYOUTS, ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x.values()))
)
def test_fused_traces_keep_every_communication_and_the_time(
    model: str, options: dict[str, object], tmp_path: Path
) -> None:
    """Every rank: the same collectives, sends and receives in the same order with the same
    attributes; its computes' durations summing to the same microseconds (Chakra's reader), fewer
    nodes; the set timed alike, each stage to the nanosecond (estimate.trace_set)."""
    plain, fused, plan = both(model, options, tmp_path)
    ranks = len(list(tmp_path.glob("plain.*.et")))
    fewer = 0
    counted = {"plain": 0, "fused": 0}
    for rank in range(ranks):
        _, before = read_trace(Path(f"{plain}.{rank}.et"))
        _, after = read_trace(Path(f"{fused}.{rank}.et"))
        assert len(after) <= len(before)
        fewer += len(before) - len(after)
        counted["plain"] += len(before)
        counted["fused"] += len(after)

        def comms(nodes: list) -> list:  # type: ignore[type-arg]
            return [
                (n.type, n.name, sorted((a.name, str(a)) for a in n.attr))
                for n in nodes
                if n.type in (COLL, SEND, RECV)
            ]

        assert comms(after) == comms(before)
        assert sum(n.duration_micros for n in after if n.type == COMP) == sum(
            n.duration_micros for n in before if n.type == COMP
        )
        assert (
            Counter(n.type for n in after)[COMP] + len(before) - len(after)
            == Counter(n.type for n in before)[COMP]
        )
    assert (fewer > 0) is (options.get("framework") != "fsdp")
    assert fuse.nodes(plan) == counted["plain"]  # what ASTRA-sim's feeder holds, from the plan
    assert fuse.nodes(fuse.fused(plan)) == counted["fused"]
    a = estimate.trace_set(plain, network="hgx-h100")
    b = estimate.trace_set(fused, network="hgx-h100")
    assert [round(s.wall_s * 1e9) for s in b.stages] == [round(s.wall_s * 1e9) for s in a.stages]
    assert [round(s.compute_s * 1e9) for s in b.stages] == [round(s.compute_s * 1e9) for s in a.stages]


@pytest.mark.skipif(not Path("/proc/meminfo").is_file(), reason="no /proc/meminfo")
def test_a_finalist_the_memory_cannot_hold_is_a_reason_not_a_killed_run() -> None:
    """A set of 10^12 nodes (1.25 KB each, bench/bench_sweep_finalists.py) is more than any
    machine holds: the finalist's row says so in one line; one node fits."""
    from modtrans.sweep.finalists import _short

    said = _short(10**12)
    assert said is not None
    assert "GiB available" in said
    assert "\n" not in said
    assert _short(1) is None
