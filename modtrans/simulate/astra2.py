"""Run ASTRA-sim 2.x on a trace set and read its results back (`modtrans simulate PREFIX`).

ModTrans never vendors or builds the simulator: the user gives the binary (`--astra-sim PATH` or
MODTRANS_ASTRA_SIM), built as astra-sim/astra-sim's README says (the analytical backend:
build/astra_analytical/build.sh; the binary AstraSim_Analytical_Congestion_Unaware). ModTrans
writes the three configurations it reads, from a named network preset (network.py):

    system    one collective implementation per network dimension (ring), 1 active chunk and 1
              split, replay mode (`roofline-enabled` 0: the traces' durations run as written). One
              entry per dimension: with fewer, ASTRA-sim 2.x silently leaves the other dimensions
              unused (found running it)
    network   a Switch per dimension, its NPU count, bandwidth and latency (ns); the bandwidth in
              the unit ASTRA-sim reads, 2^30 B/s (BIBYTES_PER_GB)
    memory    no memory expansion

A run is judged by its `sys[i] finished` lines, not its exit status: ASTRA-sim 2.x exits 134
after printing every result in about half the runs that use communicator groups (an invalid free
in its teardown), and can exit 0 with no rank finished. Its times are in cycles of 1 ns.
"""

from __future__ import annotations

import bisect
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from modtrans.simulate.fusion import fused_set
from modtrans.simulate.network import Network, execute, write_configurations
from modtrans.simulate.network import binary as _binary

ENVIRONMENT = "MODTRANS_ASTRA_SIM"
BIBYTES_PER_GB = 2**30 / 1e9
"""ASTRA-sim 2.x's analytical network reads a bandwidth in GB/s as 2^30 bytes a second
(extern/network_backend/analytical/common/NetworkFunction.cpp, bw_GBps_to_Bpns: "1 GB is 2^30
B"); the presets', like nccl-tests', are 10^9: written divided by this, the bytes move at the
measured rate (a 300 GB/s link in the file moved 322 GB/s)."""
LOCAL_MEM_BW_GBPS = 1_000_000_000
"""The system file's `local-mem-bw` (GB/s; Sys::Sys reads it x 10^9 B/s): the NPU's own memory,
which times nothing in replay mode but a reducing ring step's pass over its message
(PacketBundle::call): a second per 10^18 bytes, so 3 ns a step per whole GB (estimate/collectives.py)."""
_FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles")
_STAT = re.compile(r"sys\[(\d+)\], (Wall time|Comm time|GPU time|Total compute-communication overlap): (\d+)")


def _written(net: Network) -> tuple[list[str], list[str]]:
    """The network file's bandwidths (GB/s as ASTRA-sim reads them, BIBYTES_PER_GB) and latencies
    (ns), as written."""
    return [f"{b / BIBYTES_PER_GB:g}" for b in net.bandwidth], [f"{x:g}" for x in net.latency]


def as_read(net: Network) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """What ASTRA-sim 2.x reads of `net`'s network file: per dimension bytes per ns and the
    latency in ns (modtrans.estimate times its collectives with these, to the nanosecond)."""
    bandwidth, latency = _written(net)
    return tuple(float(b) * 2**30 / 1e9 for b in bandwidth), tuple(float(x) for x in latency)


@dataclass
class RankResult:
    rank: int
    wall: int  # ns: the rank's iteration
    exposed: int  # ns of communication nothing overlapped
    gpu: int | None = None  # ns of compute
    comm: int | None = None  # ns of communication, overlapped or not
    overlap: int | None = None


@dataclass
class Result:
    ranks: dict[int, RankResult] = field(default_factory=dict)
    expected: int = 0  # the trace set's NPUs

    @property
    def finished(self) -> bool:
        return self.expected > 0 and sorted(self.ranks) == list(range(self.expected))

    @property
    def iteration(self) -> int:
        return max((r.wall for r in self.ranks.values()), default=0)


def parse(log: str, expected: int) -> Result:
    """The per-rank results ASTRA-sim 2.x printed (its `sys[i] finished` and statistics lines)."""
    result = Result(expected=expected)
    for rank, wall, exposed in _FINISHED.findall(log):
        result.ranks[int(rank)] = RankResult(int(rank), int(wall), int(exposed))
    for rank, name, value in _STAT.findall(log):
        r = result.ranks.get(int(rank))
        if r is None:
            continue
        number = int(value)
        if name == "GPU time":
            r.gpu = number
        elif name == "Comm time":
            r.comm = number
        elif name == "Wall time":
            r.wall = number
        else:
            r.overlap = number
    return result


def configurations(net: Network) -> Mapping[str, str]:
    """The system, network and memory files ASTRA-sim 2.x reads, as text."""
    ring = "[" + ", ".join('"ring"' for _ in net.dims) + "]"
    system = (
        "{\n"
        '  "scheduling-policy": "LIFO",\n  "endpoint-delay": 10,\n'
        '  "active-chunks-per-dimension": 1,\n  "preferred-dataset-splits": 1,\n'
        f'  "all-reduce-implementation": {ring},\n  "all-gather-implementation": {ring},\n'
        f'  "reduce-scatter-implementation": {ring},\n  "all-to-all-implementation": {ring},\n'
        '  "collective-optimization": "baseline",\n'
        f'  "local-mem-bw": {LOCAL_MEM_BW_GBPS},\n'
        '  "boost-mode": 0,\n  "roofline-enabled": 0\n}\n'
    )
    topology = ", ".join("Switch" for _ in net.dims)
    counts = ", ".join(str(d) for d in net.dims)
    bandwidth, latency = (", ".join(values) for values in _written(net))
    text = (
        f"topology: [ {topology} ]\nnpus_count: [ {counts} ]\n"
        f"bandwidth: [ {bandwidth} ]\nlatency: [ {latency} ]\n"
    )
    return {
        "system.json": system,
        "network.yml": text,
        "memory.json": '{"memory-type": "NO_MEMORY_EXPANSION"}\n',
    }


@dataclass(frozen=True)
class Planned:
    """What the traces say: per rank its stage, model FLOPs (chakra/summary.py, node_flops) and
    compute nanoseconds (the sum of its compute nodes' duration_micros, what replay mode runs)."""

    stage: Mapping[int, int | None]
    flops: Mapping[int, int]
    compute_ns: Mapping[int, int]

    @classmethod
    def from_read(cls, read: Mapping[int, tuple[int | None, int, int]], npus: int) -> Planned:
        """From the ranks read (rank -> (stage, FLOPs, compute us)): a stage's ranks run one
        program, so a rank not read takes the numbers of the nearest rank read below it (its
        stage's first: the mesh puts a stage's ranks together)."""
        known = sorted(read)
        stage, flops, compute = {}, {}, {}
        for rank in range(npus if known else 0):
            first = known[max(bisect.bisect_right(known, rank) - 1, 0)]
            s, f, us = read[first]
            stage[rank] = s
            flops[rank], compute[rank] = f, us * 1000
        return cls(stage, flops, compute)


@dataclass(frozen=True)
class Row:
    """One line of the report: a rank, or a stage as its slowest rank shows it."""

    label: str
    ranks: int
    wall: int
    gpu: int | None
    comm: int | None
    exposed: int
    tflops: float
    mfu: float | None


def rows(result: Result, planned: Planned, peak: float | None, *, by_stage: bool) -> list[Row]:
    """Per rank, or per stage (its slowest rank: the one the iteration waits for)."""
    groups: dict[str, list[RankResult]] = {}
    for rank, r in sorted(result.ranks.items()):
        stage = planned.stage.get(rank)
        key = f"stage {stage}" if by_stage and stage is not None else f"rank {rank}"
        groups.setdefault(key, []).append(r)
    out = []
    for label, members in groups.items():
        r = max(members, key=lambda x: x.wall)
        rate = planned.flops.get(r.rank, 0) / r.wall / 1e3 if r.wall else 0.0  # FLOP/ns -> TFLOP/s
        mfu = rate * 1e12 / peak if peak else None  # unrounded: the writer rounds once (cli/simulate.py)
        out.append(Row(label, len(members), r.wall, r.gpu, r.comm, r.exposed, rate, mfu))
    return out


def achieved(result: Result, planned: Planned) -> float:
    """TFLOP/s per GPU over the iteration: every rank's model FLOPs (no recomputed forward's:
    Step.modelled) / (iteration x ranks), the figure Megatron-LM reports (training.py's
    num_floating_point_operations over the iteration's time)."""
    if not result.iteration or not planned.flops:
        return 0.0
    return sum(planned.flops.values()) / result.iteration / len(planned.flops) / 1e3


REPLAY_TOLERANCE_NS = 1000
"""ASTRA-sim 2.x in replay mode runs each compute node for its duration_micros: a rank's GPU time
is the sum of them (replay_ns), to the microsecond the traces are written in."""


def replay_ns(micros: int) -> int:
    """The ns ASTRA-sim 2.x's replay mode runs a compute node of `micros` us for, and adds to the
    rank's GPU time: micros x 1000, and 1 for 0 (astra-sim/workload/Workload.cc at 518bd51,
    Workload::issue_replay: `uint64_t runtime = 1ul`, replaced only where the node's runtime is not
    0). Measured 2026-12-07: Llama-3 8B under torchtitan at --dp 8, whose 65 norms' weight-gradient
    nodes rounded to 0 us, ran 65 ns over the sum of its durations; since FSDP2's copies joined
    those nodes (strategy/llm/fsdp.py), under llm-foundry (FSDP1) at --dp 8, the same 65 ns."""
    return micros * 1000 if micros else 1


def replay_gaps(result: Result, planned: Planned) -> list[tuple[int, int, int]]:
    """Ranks whose GPU time is not the traces' compute: (rank, simulated ns, planned ns)."""
    return [
        (rank, r.gpu, planned.compute_ns[rank])
        for rank, r in sorted(result.ranks.items())
        if r.gpu is not None
        and rank in planned.compute_ns
        and abs(r.gpu - planned.compute_ns[rank]) > REPLAY_TOLERANCE_NS
    ]


def binary(given: str | None) -> Path:
    return _binary(given, ENVIRONMENT, "--astra-sim", "ASTRA-sim 2.x")


def run(
    executable: Path,
    prefix: str,
    npus: int,
    net: Network,
    *,
    timeout: float | None = None,
    fuse: bool = True,
) -> tuple[Result, str]:
    """Run the simulator on the trace set `prefix` (PREFIX.<rank>.et, PREFIX.comm_groups.json);
    `fuse`: on a copy with each chain of computes one node (fusion.py: the same simulated time).
    `timeout` None: as long as it takes (GPT 530B's 280 ranks run for more than an hour on two
    shared cores)."""
    groups = Path(f"{prefix}.comm_groups.json")
    with tempfile.TemporaryDirectory(prefix="modtrans-simulate-") as folder:
        files = write_configurations(folder, configurations(net))
        workload = fused_set(prefix, npus, folder).prefix if fuse else prefix
        command = [
            str(executable),
            f"--workload-configuration={workload}",
            f"--system-configuration={files['system.json']}",
            f"--network-configuration={files['network.yml']}",
            f"--remote-memory-configuration={files['memory.json']}",
            f"--logging-folder={folder}",
        ]
        if groups.is_file():
            command.append(f"--comm-group-configuration={groups}")
        log = execute(command, "ASTRA-sim", timeout)
    return parse(log, npus), log
