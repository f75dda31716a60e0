"""Run ASTRA-sim 1.0's analytical backend on a workload text file and read its results back.

The binary is the user's (`--astra-sim-1 PATH` or MODTRANS_ASTRA_SIM_1): astra-sim/astra-sim's
ASTRA-sim-1.0 branch, build/astra_analytical/build.sh, bin/AnalyticalAstra. ModTrans writes the
two configurations it reads, from a network preset (network.py):

    network   the analytical backend's Hierarchical topology: a Switch per dimension, its NPU
              count, one link of the preset's bandwidth (GB/s) and latency (ns); no HBM model
              (`hbm-scale` 0: the workload's compute times run as written)
    system    one implementation per dimension joined by `_` (ring for all-reduce, all-gather and
              reduce-scatter, direct for all-to-all), 1 active chunk, 1 split, LIFO, baseline

and runs it with one pass, one queue per dimension and every scale 1 (its command-line options,
astra-sim/system/AstraParamParser). A run is judged by the `all passes finished at time` line, not
the exit status; the results are its EndToEnd.csv (endtoend.py), in microseconds.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

from modtrans.simulate.endtoend import TextResult, result
from modtrans.simulate.network import Network, execute, write_configurations
from modtrans.simulate.network import binary as _binary

ENVIRONMENT = "MODTRANS_ASTRA_SIM_1"
TOTALS = ("workload finished at", "total comp", "total exposed comm")  # its first layer row's
# the warnings it cannot run a file with: a transformer header without its group or FWD_IN_BCKWD's
# lists, whose next token it reads in their place (Workload::initialize_workload), no pass finishing;
# a collective over 2^31 - 1 bytes, which its int wraps (D315: an abort, or no communication)
CANNOT_RUN = frozenset({"V240", "D315"})


def binary(given: str | None) -> Path:
    return _binary(given, ENVIRONMENT, "--astra-sim-1", "ASTRA-sim 1.0")


def configurations(net: Network) -> Mapping[str, str]:
    """The network JSON and system text ASTRA-sim 1.0's analytical backend reads."""
    d = len(net.dims)
    topology = {
        "topology-name": "Hierarchical",
        "dimensions-count": d,
        "topologies-per-dim": ["Switch"] * d,
        "dimension-type": ["N"] * d,
        "units-count": list(net.dims),
        "links-count": [1] * d,
        "link-latency": list(net.latency),
        "link-bandwidth": list(net.bandwidth),
        "nic-latency": [0] * d,
        "router-latency": [0] * d,
        "hbm-latency": [0] * d,
        "hbm-bandwidth": [1] * d,
        "hbm-scale": [0] * d,
    }
    ring, direct = "_".join(["ring"] * d), "_".join(["direct"] * d)
    system = (
        "scheduling-policy: LIFO\nendpoint-delay: 10\nactive-chunks-per-dimension: 1\n"
        "preferred-dataset-splits: 1\nboost-mode: 0\n"
        f"all-reduce-implementation: {ring}\nall-gather-implementation: {ring}\n"
        f"reduce-scatter-implementation: {ring}\nall-to-all-implementation: {direct}\n"
        "collective-optimization: baseline\n"
    )
    return {"network.json": json.dumps(topology, indent=1) + "\n", "system.txt": system}


def parse(log: str | None, end_to_end: str) -> TextResult:
    """The run's stdout and its EndToEnd.csv as one result (totals from the first layer row);
    without the stdout (a recorded EndToEnd.csv), finished when the totals are there."""
    return result("ASTRA-sim 1.0", log, end_to_end, TOTALS)


def run(executable: Path, workload: Path, net: Network, *, timeout: float = 3600) -> tuple[TextResult, str]:
    """Run the simulator on the workload file (its NPUs: the network's)."""
    with tempfile.TemporaryDirectory(prefix="modtrans-astra1-") as folder:
        files = write_configurations(folder, configurations(net))
        command = [
            str(executable),
            f"--network-configuration={files['network.json']}",
            f"--system-configuration={files['system.txt']}",
            f"--workload-configuration={workload.resolve()}",
            f"--path={folder}/",  # it joins file names to this as a string
            "--run-name=modtrans",
            "--num-passes=1",
            "--num-queues-per-dim=1",
            "--comm-scale=1",
            "--compute-scale=1",
            "--injection-scale=1",
            "--rendezvous-protocol=false",
            "--total-stat-rows=1",
            "--stat-row=0",
        ]
        log = execute(command, "ASTRA-sim 1.0", timeout)
        csv_path = Path(folder) / "EndToEnd.csv"
        end_to_end = csv_path.read_text(encoding="utf-8", errors="replace") if csv_path.is_file() else ""
    return parse(log, end_to_end), log
