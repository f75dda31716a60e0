"""What NCCL achieves on a system, from published nccl-tests runs, as the bandwidth and latency an
analytical network file takes.

ASTRA-sim's analytical backends run a ring all-reduce of S bytes on n NPUs behind a switch as
2 (n - 1) steps of S / n bytes, each costing two hops' latency (NPU, switch, NPU) and the bytes at
the link's bandwidth (astra-sim 518bd51, extern/network_backend/analytical/congestion_unaware/
basic-topology/BasicTopology.cpp, compute_communication_delay; Switch.cpp, compute_hops_count 2):

    t(S) = 4 (n - 1) latency + 2 (n - 1) / n x S / bandwidth

nccl-tests prints an all-reduce's bus bandwidth, busbw = 2 (n - 1) / n x S / t (nccl-tests
doc/PERFORMANCE.md), so a measured table gives t(S) at each size; `fit` returns the bandwidth and
the per-hop latency whose t(S) is closest to it in relative terms (least squares of t_model / t - 1,
linear in latency and 1 / bandwidth), over the sizes tensor-parallel and data-parallel collectives
of LLM training have (16 MiB and up: one micro-batch's b s h activation is 8-200 MiB). The latency
is then NCCL's per-step overhead (protocol, synchronisation, the bandwidth's ramp with size), not the
wire's: smaller messages are slower than it says (1 MiB: 30-50 %).

`rail_ring_seconds` is the check on the other side: what NCCL's own ring takes for a collective
over GPUs in several nodes, each GPU with its own NIC, from published per-link bus bandwidths
(bench/bench_dp_account.py sets it beside what the presets charge).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MIB, GIB = 2**20, 2**30
SMALLEST = 16 * MIB  # the fit's least size


@dataclass(frozen=True)
class Measured:
    """One system's published all-reduce bus bandwidth (GB/s) by message size (bytes)."""

    ranks: int
    busbw: Mapping[int, float]
    source: str


def _sizes(values: Sequence[float]) -> dict[int, float]:
    """nccl-tests' doubling sizes from 1 MiB (its labels round them: 33M is 2^25 B)."""
    return {MIB << i: v for i, v in enumerate(values)}


DGX_A100 = Measured(
    8,
    _sizes(
        (
            36.22,
            53.54,
            71.43,
            89.99,
            109.22,
            132.77,
            166.63,
            174.18,
            213.87,
            221.58,
            228.10,
            230.22,
            230.48,
            231.58,
        )
    ),
    "Azure/AI-benchmarking-guide 3bb66ca, Azure_Results/ND_A100_v4_results.md, 'NCCL Bandwidth': "
    "all_reduce_perf in place on one ND A100 v4 (8 A100-SXM4-80GB on NVSwitch, as a DGX A100), "
    "NCCL 2.18.5, 1 MiB to 8 GiB; the 8 GiB figure agrees with a DGX-class node's 232.54 GB/s "
    "in NVIDIA/nccl issue 1048",
)
HGX_H100 = Measured(
    8,
    _sizes(
        (
            43.70,
            81.93,
            128.73,
            172.13,
            234.45,
            295.53,
            361.78,
            400.61,
            423.38,
            438.46,
            466.35,
            472.36,
            475.54,
            478.87,
        )
    ),
    "Azure/AI-benchmarking-guide f350e7e, 'Azure Results/ND_H100_v5_results.md', 'NCCL Bandwidth': "
    "all_reduce_perf (NVLink SHARP) in place on one ND H100 v5 (8 H100 SXM on NVSwitch), NCCL 2.18.5, "
    "1 MiB to 8 GiB; NVIDIA/nccl-tests issue 212 (sjeaugey): a peak busbw of ~480 GB/s on 8 H100s",
)

JEAN_ZAY_TRIALS = (40.8056, 40.5624, 40.5455, 40.5032)
"""BigScience's all_reduce_bench on Jean Zay's A100 partition (bigscience-workshop/bigscience
358e3c8, 2022-01-28, experiments/bandwidth/all_reduce_bench-a100-n4.txt, run by its .slurm on
gpu_p5's A100 80GB nodes, 4 nodes x 8 GPUs, NCCL 2.10.3, "NET/IB : Using [0]hfi1_1:1/IB ...
[3]hfi1_3:1/IB": the node's four Omni-Path ports; "Connected all rings", 2 coll channels): one
fp32 all-reduce of 4.0 GB (all_reduce_bench.py: N x M = 500,000 x 2,000 elements) five times; the
bus bandwidth each of the 32 ranks printed ("busbw: ... Gbps", 2 (n - 1) / n x size / duration),
averaged over the ranks of each of the trials 2-5 (40.49 to 40.83 Gb/s; the first, 14.7 to 15.7,
a warm-up). experiments/bandwidth/README.md sums it up as "algo throughput: 15 to 42 Gbps"."""
JEAN_ZAY_A100 = Measured(
    32,
    {4_000_000_000: round(sum(JEAN_ZAY_TRIALS) / len(JEAN_ZAY_TRIALS) / 8, 3)},  # Gb/s -> GB/s
    "bigscience-workshop/bigscience 358e3c8, experiments/bandwidth/all_reduce_bench-a100-n4.txt: "
    "all_reduce_bench.py's 4 GB fp32 all-reduce on 4 Jean Zay A100 nodes (32 GPUs, Omni-Path), "
    "NCCL 2.10.3, trials 2-5",
)


def fit(measured: Measured, smallest: int = SMALLEST) -> tuple[float, float]:
    """(bandwidth in GB/s, per-hop latency in ns) of the ring model closest to the measurements
    of `smallest` bytes and up."""
    n = measured.ranks
    factor = 2 * (n - 1) / n
    rows = [
        (4 * (n - 1), factor * s, factor * s / (b * 1e9)) for s, b in measured.busbw.items() if s >= smallest
    ]
    # minimise sum ((hops * L + x / B) / t - 1)^2 over L and c = 1 / B: the 2x2 normal equations
    a11 = sum((h / t) ** 2 for h, _, t in rows)
    a12 = sum(h * x / t**2 for h, x, t in rows)
    a22 = sum((x / t) ** 2 for _, x, t in rows)
    b1 = sum(h / t for h, _, t in rows)
    b2 = sum(x / t for _, x, t in rows)
    det = a11 * a22 - a12 * a12
    latency = (b1 * a22 - b2 * a12) / det
    inverse = (a11 * b2 - a12 * b1) / det
    return 1 / inverse / 1e9, latency * 1e9


def predicted_busbw(bandwidth: float, latency: float, ranks: int, size: int) -> float:
    """The bus bandwidth (GB/s) the ring model gives an all-reduce of `size` bytes."""
    seconds = ring_seconds("all-reduce", size, ranks, bandwidth, latency)
    return 2 * (ranks - 1) / ranks * size / seconds / 1e9


def ring_seconds(collective: str, size: int, ranks: int, bandwidth: float, latency: float) -> float:
    """What the analytical ring charges a collective of `size` bytes (the whole buffer) on `ranks`
    NPUs behind one switch: an all-reduce 2 (n - 1) steps of size / n, a reduce-scatter or an
    all-gather n - 1, each step two hops' latency (ns) and the bytes at `bandwidth` (GB/s)."""
    steps = 2 * (ranks - 1) if collective == "all-reduce" else ranks - 1
    return steps * (2 * latency * 1e-9 + size / ranks / (bandwidth * 1e9))


NDR_NIC = 47.0
"""One NDR 400 Gb/s NIC's NCCL bus bandwidth, GB/s (NVIDIA/nccl-tests issue 290, AddyLaddy: "For
NDR @ 400Gbps you should see 46-48GB/s per NIC")."""

H100_RING = 360.0
"""8 H100s' all-gather and reduce-scatter bus bandwidth on NVLink, GB/s: NCCL's ring, not NVLink
SHARP (NVIDIA/nccl-tests issue 326, all_gather_perf to 16 GiB on 8 H100s saturating at 360 GB/s;
sjeaugey: "360 GB/s is exactly what we'd expect on H100")."""


def rail_ring_seconds(
    collective: str, size: int, ranks: int, per_node: int, nvlink: float, nic: float
) -> float:
    """NCCL's ring time for a collective of `size` bytes (the whole buffer) over `ranks` GPUs,
    `per_node` of them in each node, each with its own NIC of `nic` GB/s bus bandwidth.

    nccl-tests' bus bandwidth of a ring is that of its slowest link (doc/PERFORMANCE.md: an
    all-reduce moves 2 (n - 1) / n x size through every rank, a reduce-scatter or an all-gather
    (n - 1) / n x size). Each of NCCL's ring channels crosses every node boundary once, so what
    leaves a node is one rank's share and its `per_node` NICs carry it together: across nodes the
    bus bandwidth is the lesser of NVLink's and per_node x nic, within one node NVLink's."""
    factor = 2 * (ranks - 1) / ranks if collective == "all-reduce" else (ranks - 1) / ranks
    busbw = nvlink if per_node >= ranks else min(nvlink, per_node * nic)
    return factor * size / (busbw * 1e9)
