"""A collective's and a send's time on ASTRA-sim 2.x's analytical congestion-unaware backend, on
the network modtrans configures it with (simulate/astra2.py: ring per dimension, one chunk, the
"baseline" collective optimization). All sources are astra-sim/astra-sim 518bd51.

A send from `src` to `dst` goes over the first dimension where their addresses differ (dimension
0 the fastest: MultiDimTopology::translate_address, get_dim_to_transfer) and takes

    hops x latency + bytes / bandwidth,   truncated to whole ns            (BasicTopology::
                                                                            compute_communication_delay)

with 2 hops on a Switch (Switch::compute_hops_count) and the bandwidth in GB/s read as 2^30 B per
10^9 ns (NetworkFunction.cpp, bw_GBps_to_Bpns).

A collective over a communicator group of fewer than every NPU runs one ring over the group's
ranks in rank order (CommunicatorGroup::get_collective_plan: a RingTopology of involved_NPUs, one
dimension); over every NPU (no pg_name) one ring phase per network dimension of more than one NPU,
in dimension order (reversed for an all-gather), each phase of the collective's own type, each
phase's size the previous one's final size (Sys::generate_collective, the baseline branch). A ring
of n runs its steps one after another, each a send of `msg` bytes to the next rank (Ring.cc,
Ring::Ring):

    all-reduce      2 (n - 1) steps of size / n
    reduce-scatter  n - 1 steps of size / n          (final size size / n)
    all-gather      n - 1 steps of size              (size is one rank's part; final n x size)
    all-to-all      n (n - 1) / 2 steps of size / n  (InjectionPolicy Normal)

A step waits for the slowest send of the ring (each rank sends its next message once it has
received the previous one), plus the system layer's hand-offs between the NPU and the memory
(MemBus::send_from_NPU_to_MA / send_from_MA_to_NPU: 10 cycles each, `endpoint-delay` 10) that
STEP_NS carries; PHASE_NS is a ring phase's cost outside its steps. Measured on the binary: 40
collectives (4 types, 1 MiB and 100 MiB, groups in one node, across nodes, and of every NPU on
dgx-a100) each take the formula's time to the nanosecond once PHASE_NS is 10
(tests/test_estimate.py).

A reducing step (every step of a reduce-scatter, the first n - 1 of an all-reduce: Ring::
insert_packet's `processed`) first passes its message through the NPU's memory, a write and two
reads, each truncated to whole ns at the system file's local-mem-bw (PacketBundle::call):
3 int(msg / 10^9) ns with the 10^9 GB/s modtrans writes, nothing under 1 GB a step. Measured on the
binary (2026-12-07): an all-reduce of 16,061,054,976 B over 4 ranks of a switch of 8 (3 steps of
4,015,263,744 B) 36 ns over the formula without it, a reduce-scatter of 16 GB over 4 36 ns, of
32 GB over every NPU of dgx-a100's 16 90 ns (7 steps of 4 GB, then 1 of 2 GB), an all-reduce of
8 GB over {0, 8} 12 ns; all-gathers and all-to-alls of the same sizes none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from modtrans.comm import CommType
from modtrans.estimate.walk import EstimateError
from modtrans.simulate import astra2
from modtrans.simulate.network import Network, SimulateError, network

HOPS = 2
"""A Switch's hops between any two NPUs (Switch::compute_hops_count)."""

STEP_NS = 10
"""Per ring step, besides its send: the packet bundle's hand-off (MemBus, 10 cycles)."""

PHASE_NS = 10
"""Per ring phase, besides its steps (measured: the module's docstring)."""

MEMORY_PASSES = 3
"""A reducing step's passes over its message in the NPU's memory: a write and two reads
(PacketBundle::call)."""

_BASE = {
    CommType.ALLREDUCE: CommType.ALLREDUCE,
    CommType.ALLREDUCE_EP: CommType.ALLREDUCE,
    CommType.ALLREDUCE_DP_EP: CommType.ALLREDUCE,
    CommType.ALLGATHER: CommType.ALLGATHER,
    CommType.ALLGATHER_EP: CommType.ALLGATHER,
    CommType.ALLGATHER_DP_EP: CommType.ALLGATHER,
    CommType.REDUCESCATTER: CommType.REDUCESCATTER,
    CommType.REDUCESCATTER_EP: CommType.REDUCESCATTER,
    CommType.REDUCESCATTER_DP_EP: CommType.REDUCESCATTER,
    CommType.ALLTOALL: CommType.ALLTOALL,
    CommType.ALLTOALL_EP: CommType.ALLTOALL,
    CommType.ALLTOALL_DP_EP: CommType.ALLTOALL,
}


def sized(net: str | Network, npus: int) -> Network:
    """A network preset (simulate/network.py) sized to `npus`, or the Network given."""
    if isinstance(net, Network):
        return net
    try:
        return network(net, npus)
    except SimulateError as error:
        raise EstimateError(str(error)) from None


@dataclass(frozen=True)
class Fabric:
    """A network as the backend sees it: per dimension its NPUs, bytes per ns and latency."""

    dims: tuple[int, ...]
    rate: tuple[float, ...]  # bytes per ns
    latency: tuple[float, ...]  # ns per hop
    rings: dict[tuple[int, ...], frozenset[int]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, net: Network) -> Fabric:
        """The network's fabric (one per network: its rings are kept)."""
        found = _FABRICS.get(net)
        if found is None:
            found = _FABRICS[net] = cls(net.dims, *astra2.as_read(net))
        return found

    @property
    def npus(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    def dimension(self, src: int, dst: int) -> int:
        """The first dimension where the two ranks' addresses differ (dimension 0 the fastest)."""
        for d, size in enumerate(self.dims):
            if src % size != dst % size:
                return d
            src, dst = src // size, dst // size
        raise ValueError(f"ranks {src} and {dst} are the same NPU")

    def link_ns(self, dim: int, size: float) -> int:
        """One send of `size` bytes over dimension `dim` (compute_communication_delay)."""
        return int(HOPS * self.latency[dim] + size / self.rate[dim])

    def send_ns(self, src: int, dst: int, size: int) -> int:
        """A point-to-point send's time: src to dst, `size` bytes."""
        return self.link_ns(self.dimension(src, dst), size)

    def collective_ns(self, comm: CommType, size: int, ranks: Sequence[int]) -> int:
        """The time of a collective of `size` bytes (the trace's comm_size) over `ranks`."""
        kind = _BASE.get(comm)
        n = len(ranks)
        if kind is None or n < 2 or size <= 0:
            return 0
        if n == self.npus:
            return self._hierarchical(kind, size)
        key = tuple(ranks)
        dims = self.rings.get(key)
        if dims is None:  # the dimensions the ring's links cross, made once per group
            ring = sorted(ranks)
            dims = frozenset(self.dimension(a, b) for a, b in zip(ring, [*ring[1:], ring[0]], strict=True))
            self.rings[key] = dims
        steps, msg, _ = _ring(kind, size, n)
        step = max(self.link_ns(d, msg) for d in dims)
        return PHASE_NS + steps * (step + STEP_NS) + _reducing(kind, n) * _memory_ns(msg)

    def _hierarchical(self, kind: CommType, size: int) -> int:
        """Every NPU: one ring phase per dimension of more than one NPU (Sys::generate_collective)."""
        order = list(range(len(self.dims)))
        if kind is CommType.ALLGATHER:
            order.reverse()
        total, remain = 0, float(size)
        for d in order:
            n = self.dims[d]
            if n < 2:
                continue
            steps, msg, remain = _ring(kind, remain, n)
            total += (
                PHASE_NS + steps * (self.link_ns(d, msg) + STEP_NS) + _reducing(kind, n) * _memory_ns(msg)
            )
        return int(total)


_FABRICS: dict[Network, Fabric] = {}


def _ring(kind: CommType, size: float, n: int) -> tuple[int, float, float]:
    """A ring of n's steps, each step's message and the phase's final size (Ring::Ring; its
    sizes are integers: uint64 divisions)."""
    size = int(size)
    if kind is CommType.ALLREDUCE:
        return 2 * (n - 1), size // n, size
    if kind is CommType.REDUCESCATTER:
        return n - 1, size // n, size // n
    if kind is CommType.ALLGATHER:
        return n - 1, size, size * n
    return n * (n - 1) // 2, size // n, size  # all-to-all


def _reducing(kind: CommType, n: int) -> int:
    """A ring of n's reducing steps (Ring::insert_packet: `processed` on each step of a
    reduce-scatter, and of an all-reduce's first round, while `toggle` is set)."""
    return n - 1 if kind in (CommType.ALLREDUCE, CommType.REDUCESCATTER) else 0


def _memory_ns(msg: float) -> int:
    """One reducing step's passes over its message at local-mem-bw (PacketBundle::call: each pass
    static_cast<uint64_t>(size / local_mem_bw x 10^9), local_mem_bw in B/s)."""
    return MEMORY_PASSES * int(float(msg) / (astra2.LOCAL_MEM_BW_GBPS * 1e9) * 1e9)
