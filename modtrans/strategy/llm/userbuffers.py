"""Megatron-Core's --tp-comm-overlap: Transformer Engine's userbuffers run a transformer block's
sequence-parallel all-gathers and reduce-scatters inside the GEMMs they feed, so on the GPU they
are the GEMM's own time, not NCCL collectives: each such GEMM and its collective become one
compute node (and leave ASTRA-sim's one communication lane per rank).

What runs (NVIDIA/Megatron-LM core_r0.8.0, baf94af): megatron/training/arguments.py validate_args
asserts sequence parallelism; initialize.py _initialize_tp_communicators calls TE's initialize_ub
with no configuration (no --tp-comm-overlap-cfg); megatron/core/model_parallel_config.py leaves
tp_comm_overlap_ag, tp_comm_overlap_rs, tp_comm_bulk_wgrad and tp_comm_bulk_dgrad on and
tp_comm_overlap_rs_dgrad off; core/transformer/custom_layers/transformer_engine.py hands them to
TE's LayerNormColumnParallelLinear (linear_qkv, linear_fc1) and RowParallelLinear (linear_proj,
linear_fc2). The language model's output layer is Megatron's own ColumnParallelLinear: its
collectives stay NCCL's, as do the embedding's and everything outside the blocks.
NVIDIA/TransformerEngine v1.9 (e79d915), transformer_engine/pytorch/module/base.py, initialize_ub,
get_default_config: per GEMM its method, `num_sm` 1 for ring_exchange (copies on the copy engine,
use_ce) and 16 for the others, num_splits 4 for pipeline and T for the rest, set_sm_margin off:

    column (qkv, fc1)  fprop ring_exchange all-gather of the input        -> FWD
                       dgrad bulk all-gather of the input (for wgrad)     -> INPUT_GRAD
                       wgrad bulk reduce-scatter of the input's gradient  -> WEIGHT_GRAD
    row (proj, fc2)    fprop pipeline reduce-scatter of the output        -> FWD
                       dgrad ring_exchange all-gather of the output grad  -> INPUT_GRAD

Times, from transformer_engine/pytorch/csrc/comm_gemm_overlap.h at v1.9:
    ring_exchange  UbufP2PCommOverlap::split_overlap_ag: T GEMMs of M / T rows, each but the last
                   beside the send of one chunk to the next rank:      (T - 1) max(g, x) + g
    pipeline       UbufCommOverlap::split_overlap_rs: 4 GEMMs of M / 4 rows, each chunk's
                   reduce-scatter beside the next chunk's GEMM:        g + 3 b(g, r) + r
    bulk           UbufCommOverlap::bulk_overlap: the whole collective on its SMs beside the
                   GEMM:                                               b(G, c)
each at least the GEMM alone (its chunks do its whole work, one after another).
g and G from the cost model's GEMMs (cost/gpu.py) on every SM. b(g, c), a GEMM beside a
communication kernel of c (_beside): set_sm_margin off launches cuBLAS on every SM, but the 16 the
userbuffers kernel holds are not free while it runs: the GEMM runs on the rest (Gpu.spared) for
c, on all after it; c where the kernel outlasts it. ring_exchange's GEMMs run on all (its sends
go by copy engine). x is one chunk's send to the next rank, r and c one exchange of the buffer with every peer
(exchange_ns: userbuffers' collectives are one-shot, not NCCL's ring), each at the bandwidth and
hop latency of the device's node preset, as ASTRA-sim charges a send there (estimate/collectives.py
Fabric.link_ns; simulate/network.py PRESETS): userbuffers run inside one node (CUDA IPC or
multicast), so T is at most the node's GPUs.
A column-parallel GEMM whose input other projections share (separate Q, K, V; gate and up) is the
GEMM of all of them in Megatron (one linear_qkv, one linear_fc1): the fused time takes theirs too,
and each keeps its own compute node.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from modtrans.cost import CostModel, PhaseTimes
from modtrans.ir.document import Layer as IRLayer
from modtrans.plan.model import Place, Step
from modtrans.strategy.draft import Comm
from modtrans.strategy.llm.options import LayoutError
from modtrans.strategy.roles import LayerRole
from modtrans.strategy.share import resize

if TYPE_CHECKING:  # the network's modules load only when the flag is given (tests/test_startup.py)
    from modtrans.estimate.collectives import Fabric

RING, PIPELINE, BULK = "ring_exchange", "pipeline", "bulk"
NUM_SM = {RING: 1, PIPELINE: 16, BULK: 16}  # initialize_ub, get_default_config
PIPELINE_SPLITS = 4  # the same: num_splits 4 for pipeline

# (role, place of the NCCL collective it replaces) -> (the step whose GEMM runs it, method)
METHODS: dict[tuple[LayerRole, Place], tuple[Step, str]] = {
    (LayerRole.COLUMN, Place.BEFORE_FWD): (Step.FWD, RING),  # qkv_fprop, fc1_fprop
    (LayerRole.COLUMN, Place.BEFORE_BWD): (Step.INPUT_GRAD, BULK),  # qkv_dgrad, fc1_dgrad
    (LayerRole.COLUMN, Place.AFTER_IG): (Step.WEIGHT_GRAD, BULK),  # qkv_wgrad, fc1_wgrad
    (LayerRole.ROW, Place.AFTER_FWD): (Step.FWD, PIPELINE),  # proj_fprop, fc2_fprop
    (LayerRole.ROW, Place.BEFORE_BWD): (Step.INPUT_GRAD, RING),  # proj_dgrad, fc2_dgrad
}

# the node each device's built-in profile sits in (its NVLink): DGX A100, HGX H100 (H200 on the
# same NVLink 4 baseboard)
NODES = {"a100": "dgx-a100", "h100": "hgx-h100", "h100-hbm2e": "hgx-h100", "h200": "hgx-h100"}


@dataclass(frozen=True)
class Fused:
    """A collective userbuffers run inside the GEMM of `step`, by `method`."""

    step: Step
    method: str
    comm: Comm
    peers: tuple[str, ...] = ()  # the units whose GEMMs share the input (Megatron's one GEMM)


def overlapped(role: LayerRole, place: Place, block: int | None) -> tuple[Step, str] | None:
    """Where and how userbuffers run a block's collective at `place` (None: NCCL runs it)."""
    return None if block is None else METHODS.get((role, place))


def fabric(cost: CostModel, tp: int) -> Fabric:
    """The tensor group's node as ASTRA-sim runs it (LayoutError where the cost model has no SMs,
    the device no node preset, or T spans nodes)."""
    from modtrans.estimate.collectives import Fabric
    from modtrans.simulate.network import PRESETS, network

    device = getattr(cost, "device", None)
    kernels = getattr(cost, "kernels", None)
    key = getattr(device, "key", None)
    if kernels is None or not hasattr(cost, "spared"):
        raise LayoutError("--tp-comm-overlap: the GEMMs beside userbuffers' SMs need --compute gpu")
    if key not in NODES:
        raise LayoutError(
            f"--tp-comm-overlap: no NVLink node is known for --device {key} ({', '.join(NODES)})"
        )
    node = PRESETS[NODES[key]].per_node
    if tp > node:
        raise LayoutError(
            f"--tp-comm-overlap: userbuffers run inside one node of {node} GPUs; --tp {tp} spans nodes"
        )
    return Fabric.of(network(NODES[key], tp))


def _phase(times: PhaseTimes, step: Step) -> int:
    return {Step.FWD: times.forward, Step.INPUT_GRAD: times.input_grad}.get(step, times.weight_grad)


def _with(times: PhaseTimes, step: Step, ticks: int) -> PhaseTimes:
    field = {Step.FWD: "forward", Step.INPUT_GRAD: "input_grad"}.get(step, "weight_grad")
    return replace(times, **{field: ticks})


def exchange_ns(net: Fabric, size: int, tp: int) -> int:
    """A userbuffers all-gather or reduce-scatter of a `size`-byte buffer over the `tp` ranks of
    the first dimension of `net`: one exchange, each rank reading (or writing) its T - 1 peers'
    parts over NVLink after one flag handshake (userbuffers.cu at v1.9,
    userbuffers_fp16_sum_inplace_gpu_rr_rs_oop_stride: a flag per peer, then every peer's line
    read and summed; its all-gathers alike), at the link's bandwidth and hop latency
    (Fabric.link_ns: what ASTRA-sim charges one send)."""
    return net.link_ns(0, (tp - 1) * -(-size // tp))


def _beside(whole: int, spared: int, comm: int) -> int:
    """A GEMM of `whole` ticks on every SM beside a communication kernel of `comm` ticks that holds
    NUM_SM of them while it runs (initialize_ub's default set_sm_margin False: the GEMM is launched
    on every SM, the comm kernel's CTAs take theirs only until it ends): `spared`'s rate while the
    kernel runs, the whole rate after it; the kernel's time where it outlasts the GEMM."""
    if comm >= spared:
        return comm
    return comm + -(-whole * (spared - comm) // spared)


def fused_ticks(f: Fused, gemms: list[IRLayer], cost: CostModel, net: Fabric, tp: int) -> tuple[int, int]:
    """(the fused node's ticks, the GEMMs' own ticks alone) for `f` over the GEMM layers `gemms`
    (this rank's shards), the collective over `tp` ranks of `net`."""

    def gemm(c: CostModel, factor: Fraction) -> int:
        return sum(_phase(c.times(resize(layer, factor)), f.step) for layer in gemms)

    ticks = cost.clock.from_seconds
    alone = gemm(cost, Fraction(1))
    spared = cost.spared(NUM_SM[f.method])  # type: ignore[attr-defined]
    if f.method == RING:
        g = gemm(cost, Fraction(1, tp))
        x = ticks(1e-9 * net.send_ns(0, 1, -(-f.comm.bytes // tp)))
        fused = (tp - 1) * max(g, x) + g
    elif f.method == PIPELINE:
        g = gemm(cost, Fraction(1, PIPELINE_SPLITS))
        r = ticks(1e-9 * exchange_ns(net, -(-f.comm.bytes // PIPELINE_SPLITS), tp))
        beside = _beside(g, gemm(spared, Fraction(1, PIPELINE_SPLITS)), r)
        fused = g + (PIPELINE_SPLITS - 1) * beside + r
    else:
        fused = _beside(alone, gemm(spared, Fraction(1)), ticks(1e-9 * exchange_ns(net, f.comm.bytes, tp)))
    # never under the GEMM alone: the chunks do its work, one after another; the wave model splits
    # a chunk of less than a wave over K (cost/gpu.py, split-K), which would let T chunks of a
    # GEMM of a few ragged waves beat the GEMM itself
    return max(fused, alone), alone


def fuse(
    times: PhaseTimes,
    fused: list[Fused],
    gemms: dict[str, IRLayer],
    owner: IRLayer,
    cost: CostModel,
    net: Fabric,
    tp: int,
) -> PhaseTimes:
    """A unit's times with each of its userbuffers GEMMs replaced by the fused node's: the phase
    less the GEMMs alone (the unit's, and its peers' that keep their own nodes), plus the fused
    time. `gemms`: every unit's GEMM shard by name."""
    for f in fused:
        layers = [owner, *(gemms[p] for p in f.peers)]
        ticks, alone = fused_ticks(f, layers, cost, net, tp)
        times = _with(times, f.step, _phase(times, f.step) - alone + ticks)
    return times
