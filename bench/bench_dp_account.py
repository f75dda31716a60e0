"""Where an iteration's time goes, top-down, for bench_today's runs (issue 37): compute by step,
each kind of collective's count and bytes, the time the network preset gives it (what ASTRA-sim's
analytical backend charges: modtrans.estimate) beside the time NCCL's own ring takes from
published per-link bus bandwidths (simulate/nccl.py, rail_ring_seconds), how much of it the
iteration hides, the bound with nothing hidden, and (Megatron-Core at PP 1 with the distributed
optimizer and both overlaps) the least its schedule allows on any network (`floor`). A CHECK:
nothing here feeds the models.

Run by hand: `python bench/bench_dp_account.py [--only mcore-1.7b-h100,...] [--micro-batch N]`.

NCCL's side: NVLink at the ring's measured bus bandwidth (H100: 360 GB/s for all-gathers and
reduce-scatters, nccl.H100_RING; its all-reduce on NVLink SHARP, nccl.HGX_H100's 8 GiB figure;
A100: nccl.DGX_A100's 8 GiB figure), one NIC per GPU at its NCCL bus bandwidth (NDR 47 GB/s,
nccl.NDR_NIC; HDR 24 GB/s, NVIDIA/nccl issue 1048), a node's NICs shared by the group's ranks in it.

Latest (2026-12-06, branch mcoregap on main ef89c2b, the exact tier; rank 0's collectives):

    mcore-1.7b-h100  compute 0.325 s; 25 reduce-scatters 5.94 GB (fp32) 25.4 ms, NCCL 16.2 ms;
                     25 all-gathers 2.97 GB 13.2 ms, NCCL 8.1 ms; exposed 7.4 ms; nothing
                     hidden 0.364 s (-19.5 % of the published 0.452 s), at NCCL's 0.350 s (-22.6 %)
    mcore-7.1b-h100  compute 0.576 s; TP 2's 1,293 collectives 40.9 GB 50.5 ms, NCCL 57.0 ms, in
                     series; data-parallel 46 reduce-scatters 13.2 GB 38.1 ms, NCCL 68.9 ms, 46
                     all-gathers 6.6 GB 24.2 ms, NCCL 34.4 ms; exposed 78.3 ms; nothing hidden
                     0.689 s (-13.8 % of 0.800 s), at NCCL's 0.737 s (-7.9 %)
    foundry-7b-h100  compute 0.820 s; FSDP's 390 all-gathers 26.6 GB 63.0 ms, NCCL 64.8 ms; 195
                     reduce-scatters 26.6 GB (fp32) 56.5 ms, NCCL 64.7 ms; exposed 64.6 ms; nothing
                     hidden 0.940 s (-18.6 % of 1.155 s), at NCCL's 0.950 s (-17.7 %)

Every-rank data-parallel collectives (the 1.7B's) cost 1.6x NCCL's ring here: ASTRA-sim's rings
run one dimension after the other where NCCL's channels use NVLink and the NICs at once. A group
of some ranks (the 7.1B's, TP 2) runs one ring whose sends take the first dimension where two
ranks' addresses differ (MultiDimTopology::get_dim_to_transfer), NVLink even between nodes: 0.55x
NCCL's, mostly hidden. With every collective exposed at NCCL's rate the 1.7B stays 22.6 % and
foundry 17.7 % under the published time: what is missing is compute, not communication.

The floor (2026-12-07, branch mcore32 on main efc9c12): Megatron-Core core_r0.8.0 overlaps the
parameters' all-gathers with micro-batch 0's forward alone and the gradients' reduce-scatters with
the last micro-batch's backward alone (tests/test_megatron_dp.py transcribes both); each takes at
least its ring's bytes at the NICs' line rate (50 GB/s an NDR port), so an iteration takes at
least the compute and what of each window they outlast. At micro-batch 1 (bench_today's rows):

    mcore-32b-h100   compute 0.754 s (first forward 0.062 s, last backward 0.136 s); gathers
                     7.70 GB 0.151 s, reduce-scatters 15.39 GB 0.302 s at 50 GB/s: 1.008 s, +13.0 %
                     of the published 0.892 s (ours 1.062 s, +19.1 %: NCCL's 47 GB/s, the rings'
                     latency); at micro-batch 2 0.813 s (-8.9 %, ours 0.873 s), at 4 0.716 s
    mcore-16b-h100   0.742 s (-12.7 %), above ours (0.708 s): its group of two GPUs a node runs
                     ASTRA-sim's ring on NVLink between nodes (above), where NCCL's crosses two NICs
    mcore-1.7b-h100, mcore-7.1b-h100   the compute (0.333 and 0.603 s): the windows cover both

So with our compute the 32B's published time is under what Megatron-Core can reach at
micro-batch 1 on one 400 Gb/s NIC a GPU, whatever the network model; our compute would have to be
26 % above the run's (uniformly: 0.452 + 0.555 k = 0.892), where the rows at TP 1-4 put it 17-25 %
under theirs. What the run did differently is not published (a larger micro-batch would do it);
nothing in the 32B's charges is one Megatron-Core does not pay.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from collections import defaultdict
from pathlib import Path

import bench_today as today  # the runs, as bench_today defines them (bench/ is on sys.path)

from modtrans import estimate
from modtrans.comm import CommType
from modtrans.estimate.collectives import Fabric
from modtrans.plan.model import Collective, Compute, Plan, Purpose, Step
from modtrans.plan.sizes import Consumer, written
from modtrans.simulate import nccl
from modtrans.simulate.network import Network

# per preset: NVLink's ring bus bandwidth (all-reduce, the others), one NIC's, GB/s
REFERENCE = {
    "hgx-h100": ((nccl.HGX_H100.busbw[8 * nccl.GIB], nccl.H100_RING), nccl.NDR_NIC),
    "dgx-a100": ((nccl.DGX_A100.busbw[8 * nccl.GIB], nccl.DGX_A100.busbw[8 * nccl.GIB]), 24.0),
}
NAMES = {"ALLREDUCE": "all-reduce", "REDUCESCATTER": "reduce-scatter", "ALLGATHER": "all-gather"}


def account(run: today.Run, folder: Path) -> None:
    """Print the run's accounting (rank 0)."""
    plan = today.plan_of(run, folder)
    net = estimate.network(run.network, run.gpus)
    fabric = Fabric.of(net)
    found = estimate.plan(plan, network=net)
    (ar_link, ring_link), nic = REFERENCE[run.network]
    per_node = net.dims[0]
    steps: dict[str, float] = defaultdict(float)
    rows: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0])
    for op in plan.programs[0]:
        if isinstance(op, Compute):
            steps[op.step.value] += op.time * 1e-9
            continue
        if not isinstance(op, Collective) or plan.mesh.span(op.over) < 2:
            continue
        members = plan.group(0, op.over).ranks
        size = written(op.comm, op.bytes, len(members), Consumer.ASTRA_SIM)
        ours = fabric.collective_ns(op.comm, size, members)
        name = NAMES.get(op.comm.value)
        theirs = float("nan")
        if name is not None:
            local = sum(1 for m in members if m // per_node == 0)
            link = ar_link if op.comm is CommType.ALLREDUCE else ring_link
            theirs = nccl.rail_ring_seconds(name, op.bytes, len(members), local, link, nic)
        row = rows[(op.comm.value, op.step.value, "+".join(sorted(op.over)))]
        row[0] += 1
        row[1] += op.bytes
        row[2] += ours * 1e-9
        row[3] += theirs
    published = run.published_s()

    def off(seconds: float) -> str:
        return f"{seconds:.3f} s ({100 * (seconds / published - 1):+.1f} %)"

    print(f"{run.name}: published {published:.3f} s, ours {off(found.iteration_s)}")
    print(f"  network {net.dims} at {net.bandwidth} GB/s")
    by_step = ", ".join(f"{k} {v:.3f} s" for k, v in sorted(steps.items()))
    print(f"  compute {by_step}; {found.compute_s:.3f} s")
    head = ("collective", "step", "group", "count", "GB", "ours ms", "NCCL ms")
    print("  {:<15} {:<12} {:<22} {:>6} {:>8} {:>9} {:>9}".format(*head))
    total_ours = total_theirs = 0.0
    for (comm, step, over), (count, size, ours_s, theirs_s) in sorted(rows.items()):
        total_ours += ours_s
        total_theirs += theirs_s
        cells = (comm, step, over, int(count), size / 1e9, ours_s * 1e3, theirs_s * 1e3)
        print("  {:<15} {:<12} {:<22} {:>6} {:>8.3f} {:>9.1f} {:>9.1f}".format(*cells))
    print(f"  communication {total_ours * 1e3:.1f} ms (NCCL {total_theirs * 1e3:.1f} ms), "
          f"exposed {found.exposed_comm_s * 1e3:.1f} ms")  # fmt: skip
    print(f"  nothing hidden: {off(found.compute_s + total_ours)}; "
          f"at NCCL's rates {off(found.compute_s + total_theirs)}")  # fmt: skip
    bound = floor(run, plan, net)
    if bound is not None:
        print(f"  Megatron-Core's windows at the line rate: {off(bound)} (nothing can run faster)")


def _micro_batch(op: Compute) -> int | None:
    """The micro-batch whose activations or gradients a compute writes (`#mN`), if one."""
    for tensor in op.outputs:
        tail = tensor.name.rsplit("#m", 1)
        if len(tail) == 2 and tail[1].split(".")[0].isdigit():
            return int(tail[1].split(".")[0])
    return None


def floor(run: today.Run, plan: Plan, net: Network) -> float | None:
    """The shortest iteration Megatron-Core's data-parallel schedule allows at PP 1 with both
    overlaps, whatever the network model: rank 0's compute, plus what of the parameters'
    all-gathers micro-batch 0's forward cannot cover (each bucket's gather waits for the one
    before, the first dispatched by zero_grad: distrib_optimizer.py at core_r0.8.0, zero_grad,
    _finish_param_sync_helper) and what of the gradients' reduce-scatters the last micro-batch's
    backward cannot (no_sync for the others: schedules.py, forward_backward_no_pipelining), each
    at NCCL's ring over the NICs' line rate (nccl.rail_ring_seconds at the preset's line: 50 GB/s
    for an NDR 400 Gb/s NIC). None for other layouts."""
    layout = run.layout
    if layout.get("pp", 1) != 1 or not (layout.get("overlap_grad_reduce") and layout.get("zero")):
        return None
    ops = plan.programs[0]
    computes = [(op, _micro_batch(op)) for op in ops if isinstance(op, Compute)]
    final = max(m for _, m in computes if m is not None)
    first = sum(op.time for op, m in computes if op.step is Step.FWD and m == 0) * 1e-9
    last = sum(op.time for op, m in computes if op.step is not Step.FWD and m == final) * 1e-9
    collective = {CommType.ALLGATHER: 0.0, CommType.REDUCESCATTER: 0.0}
    for op in ops:
        if isinstance(op, Collective) and Purpose.DATA in op.over and op.comm in collective:
            members = plan.group(0, op.over).ranks
            local = sum(1 for m in members if m // net.dims[0] == 0)
            collective[op.comm] += nccl.rail_ring_seconds(
                NAMES[op.comm.value], op.bytes, len(members), local, net.line_rate[0], net.line_rate[-1]
            )
    gathers, scatters = collective[CommType.ALLGATHER], collective[CommType.REDUCESCATTER]
    compute = sum(op.time for op, _ in computes) * 1e-9
    return compute + max(0.0, gathers - first) + max(0.0, scatters - last)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mcore-1.7b-h100,mcore-7.1b-h100,foundry-7b-h100")
    parser.add_argument(
        "--micro-batch", type=int, default=0,
        help="the chosen runs at this micro-batch instead (bench_today.py's option of that name)",
    )  # fmt: skip
    args = parser.parse_args()
    runs = today.chosen(args.only)
    if args.micro_batch:
        runs = [dataclasses.replace(r, micro_batch=args.micro_batch) for r in runs]
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            account(run, Path(tmp))


if __name__ == "__main__":
    main()
