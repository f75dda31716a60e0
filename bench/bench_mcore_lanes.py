"""Where bench_today's Megatron-Core runs lose or gain time, by two what-ifs on the exact tier's
walk (issue 37). An ANALYSIS, never a model: nothing here feeds translate or estimate.

Run by hand: `python bench/bench_mcore_lanes.py [--only mcore-32b-h100,...]`. For each run, the
iteration of the exact tier (what ASTRA-sim 2.x reports), then:

    lanes   a communication lane per communicator (tensor, data, pipeline, expert ...) instead of
            one per rank: ASTRA-sim's workload layer runs one collective or send at a time on a
            rank (astra-sim 518bd51, HardwareResource::is_available; modtrans/estimate/walk.py),
            where NCCL runs each communicator on its own stream beside the others, so a
            data-parallel bucket on InfiniBand and a tensor-parallel all-gather on NVLink overlap
    notp    the tensor-parallel collectives free: the bound of Megatron-Core's --tp-comm-overlap
            (Transformer Engine's userbuffers run them inside the GEMMs they feed), which the
            README's benchmark ran ("Fine-grained overlapping with ... TP (--tp-comm-overlap)") and
            ModTrans does not model (its TP collectives run in series with the compute)
    both    the two together

Latest (2026-12-06, branch nemorows on main b02debe, before bench_today's rows at TP > 1 took
--tp-comm-overlap (strategy/llm/userbuffers.py), which now leaves `notp` only the TP collectives
outside the blocks):

    run                      published  exact tier   lanes     notp     both
    mcore-1.7b-h100            0.452 s   -26.4 %   -26.4 %  -26.4 %  -26.4 %
    mcore-7.1b-h100            0.800 s   -18.2 %   -21.2 %  -24.4 %  -27.4 %
    mcore-16b-h100             0.850 s    -6.2 %    -9.5 %  -21.0 %  -24.3 %
    mcore-32b-h100             0.892 s   +56.7 %   +35.9 %  +24.6 %  +12.2 %
    mcore-70b-h100             2.177 s   +35.5 %   +17.3 %  +23.7 %   -7.8 %
    mcore-119b-h100            3.648 s   +19.3 %   +11.4 %  +21.0 %  -10.8 %
    mcore-177b-h100            5.259 s   +12.8 %    +7.4 %  +21.6 %  -12.1 %
    mcore-314b-h100            8.399 s   +13.1 %    +8.8 %  +30.5 %   -7.2 %
    mcore-462b-h100           12.716 s    +6.5 %    +4.2 %  +27.4 %  -10.1 %
    mcore-mixtral-8x7b-h100    2.903 s    +5.1 %    -1.9 %   +5.1 %   -1.9 %

The tensor-parallel 8 rows (32B to 462B) run slow only because of those two; with both, every
dense row but the 32B runs 7-27 % fast, the smallest the fastest: what is left is the compute
class the docstring of bench_today.py describes. The 32B stays 12 % slow: its data-parallel
group has one rank per node (TP 8), so its fp32 gradient reduce-scatter (15.4 GB) crosses one
400 Gb/s NIC per GPU (bench_dp_account.py: 328 ms, NCCL's ring 321 ms), of which only the last
micro-batch's backward (4 per iteration) hides part. Freeing the TP collectives alone slows the
pipelined rows (462B +6.5 % -> +27.4 %): on one lane per rank the pipeline's sends and receives
then queue behind the data-parallel buckets the earlier backward reaches sooner.
"""

from __future__ import annotations

import argparse
import heapq
import tempfile
from collections.abc import Hashable, Sequence
from pathlib import Path

import bench_today as today  # the runs, as bench_today defines them (bench/ is on sys.path)

from modtrans.estimate import exact, walk
from modtrans.estimate.collectives import Fabric
from modtrans.plan.model import Purpose
from modtrans.simulate.network import network

TENSOR = frozenset({Purpose.TENSOR})


class _Lanes(walk._Walk):
    """The exact tier's walk with a communication lane per collective channel's communicator
    (sends one lane): each lane runs one operation at a time, the lanes beside each other."""

    def __init__(self, actors: Sequence[Sequence[walk.Node]]) -> None:
        super().__init__(actors)
        self.lane_busy: list[set[Hashable]] = [set() for _ in actors]

    @staticmethod
    def lane(node: walk.Node) -> Hashable:
        return node.key[0] if node.kind == walk.COLLECTIVE else "send"  # type: ignore[index]

    def converse(self, a: int, comms: list[int], t: int) -> None:
        held = []
        while comms:
            i = heapq.heappop(comms)
            lane = self.lane(self.actors[a][i])
            if lane in self.lane_busy[a]:
                held.append(i)
                continue
            self.lane_busy[a].add(lane)
            self.communicate(a, i, t)
        for i in held:
            heapq.heappush(comms, i)

    def release(self, a: int, node: walk.Node) -> None:
        self.lane_busy[a].discard(self.lane(node))


def _free_tensor(actors: list[list[walk.Node]]) -> list[list[walk.Node]]:
    """The actors with every tensor-parallel collective taking no time."""
    return [
        [
            walk.Node(n.kind, 0, n.deps, n.key, n.parties)
            if n.kind == walk.COLLECTIVE and n.key[0] == TENSOR  # type: ignore[index]
            else n
            for n in nodes
        ]
        for nodes in actors
    ]


def whatifs(run: today.Run, folder: Path) -> list[float]:
    """The run's iteration (s): the exact tier, lanes, notp, both."""
    plan = today.plan_of(run, folder)
    actors = exact.actors(plan, Fabric.of(network(run.network, plan.npus)))
    free = _free_tensor(actors)
    out = []
    for nodes, walker in ((actors, walk._Walk), (actors, _Lanes), (free, walk._Walk), (free, _Lanes)):
        out.append(max(lane.finish for lane in walker(nodes).run()) * 1e-9)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = ",".join(r.name for r in today.RUNS if r.name.startswith("mcore-"))
    parser.add_argument("--only", default=default, help="bench_today's runs, comma-separated")
    args = parser.parse_args()
    runs = today.chosen(args.only)
    print(f"{'run':<24} {'published':>10} {'exact tier':>10} {'lanes':>9} {'notp':>8} {'both':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            published = run.published_s()
            cells = " ".join(f"{100 * (s / published - 1):+7.1f} %" for s in whatifs(run, Path(tmp)))
            print(f"{run.name:<24} {published:>8.3f} s {cells}", flush=True)


if __name__ == "__main__":
    main()
