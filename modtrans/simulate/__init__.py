"""Simulator runs: a workload given to the simulator it is written for, run, and its results read
back (`modtrans simulate`). One module per simulator:

    astra2.py   ASTRA-sim 2.x on a Chakra trace set (per rank: wall, GPU, communication, exposed)
    astra1.py   ASTRA-sim 1.0's analytical backend on a workload text file (per layer, and totals)
    simai.py    SimAI's analytical simulator on a SimAI workload text file (per layer, and totals)
    fusion.py   the trace set ASTRA-sim 2.x is given: each chain of computes one node, the same time
    network.py  the network presets they share, the binary lookup, the error
    nccl.py     published nccl-tests runs, as the bandwidth and latency the presets give ASTRA-sim
    endtoend.py the per-layer results (EndToEnd.csv) ASTRA-sim 1.0 and SimAI write, read back
"""

from modtrans.simulate.astra2 import (
    ENVIRONMENT,
    Planned,
    RankResult,
    Result,
    Row,
    achieved,
    binary,
    configurations,
    parse,
    replay_gaps,
    rows,
    run,
)
from modtrans.simulate.network import PRESETS, Network, SimulateError, network

__all__ = [
    "ENVIRONMENT",
    "PRESETS",
    "Network",
    "Planned",
    "RankResult",
    "Result",
    "Row",
    "SimulateError",
    "achieved",
    "binary",
    "configurations",
    "network",
    "parse",
    "replay_gaps",
    "rows",
    "run",
]
