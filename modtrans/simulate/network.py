"""What every simulator run shares: the network presets, the binary the user gives, the error.

The presets, per GPU and direction: nodes of 8 GPUs on NVSwitch, and a second dimension of nodes
on InfiniBand when there are more than 8. ASTRA-sim's files get what NCCL achieves there (nccl.py:
the bandwidth and per-hop latency of the analytical ring closest to published nccl-tests runs), the
line rates stay for SimAI, which applies its own NCCL ratios to them:

    preset     NVLink line  achieved (latency)    InfiniBand line  achieved (latency)
    dgx-a100   300 GB/s     227 GB/s (5.6 us)     25 GB/s          24 GB/s (1 us)
    selene     the same: Selene's DGX A100 nodes, one HDR link per GPU (Korthikanti et al. 2022)
    hgx-h100   450 GB/s     466 GB/s (2.4 us)     50 GB/s          47 GB/s (1 us)
    jean-zay-a100  dgx-a100's NVLink                   6.25 GB/s        5.08 GB/s (1 us)
    switch:N:GBPS  one switch of N NPUs at GBPS, 1 ns, as given

Line rates: NVIDIA DGX A100 datasheet (600 GB/s bidirectional NVLink per GPU, 8 HDR 200 Gb/s
InfiniBand links per 8 GPUs); NVLink 4 (900 GB/s bidirectional), one 400 Gb/s NDR link per GPU.
Achieved on NVLink: nccl.DGX_A100 and nccl.HGX_H100 (H100's all-reduce runs NVLink SHARP, above
the ring's line rate). Achieved on InfiniBand, one NIC's NCCL bus bandwidth: 24 GB/s over HDR
(NVIDIA/nccl issue 1048: "when HCA=mlx5_0, reach the theoretical value (24GB/s)"), 46-48 GB/s over
NDR (NVIDIA/nccl-tests issue 290, AddyLaddy: "For NDR @ 400Gbps you should see 46-48GB/s per
NIC"); their latency is not fitted (no table): 1 us a hop, the value before. docs/simulate.md gives
the table for users who write their own network files.

jean-zay-a100 is IDRIS's Jean Zay A100 partition (gpu_p5) BigScience trained BLOOM on
(bigscience-workshop/bigscience, train/tr11-176B-ml/README.md, "Hardware": "8 GPUs per node Using
NVLink 4 inter-gpu connects, 4 OmniPath links", "Inter-node connect: Omni-Path Architecture
(OPA)"). Between nodes: the line is the node's four Omni-Path ports of 100 Gb/s
(experiments/bandwidth/README.md: OPA "is supposed to be 400Gbps max") over its 8 GPUs, 6.25 GB/s
a GPU; achieved, the bus bandwidth BigScience's all_reduce_bench measured there (nccl.JEAN_ZAY_A100:
a ring of 32 GPUs on 4 nodes, 5.08 GB/s), taken as each GPU's own rate, as the presets above take
one NIC's bus bandwidth; 1 us a hop. Inside a node: BigScience published no A100 measurement
(their single-node run is of V100s) and names no NVSwitch: dgx-a100's NVLink, an assumption.

Each simulator module writes them in its own configuration format (astra2.py, astra1.py,
simai.py). ModTrans never vendors or builds a simulator: the user gives the binary.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from modtrans.simulate import nccl


class SimulateError(ValueError):
    """Something that stops a simulation or its reading, in one line."""


@dataclass(frozen=True)
class Network:
    dims: tuple[int, ...]  # NPUs per dimension, the product the workload's NPUs
    bandwidth: tuple[float, ...]  # GB/s per dimension: what NCCL achieves (ASTRA-sim's files)
    latency: tuple[float, ...]  # ns per hop
    line: tuple[float, ...] = ()  # GB/s per dimension on the wire (SimAI's); () the bandwidth

    @property
    def line_rate(self) -> tuple[float, ...]:
        return self.line or self.bandwidth


@dataclass(frozen=True)
class Preset:
    """Nodes of `per_node` GPUs: (line, achieved GB/s, latency ns) inside a node and between nodes."""

    per_node: int
    inside: tuple[float, float, float]
    between: tuple[float, float, float]


def _nvlink(line: float, measured: nccl.Measured) -> tuple[float, float, float]:
    bandwidth, latency = nccl.fit(measured)
    return line, round(bandwidth, 1), round(latency)


_A100 = Preset(8, _nvlink(300.0, nccl.DGX_A100), (25.0, 24.0, 1000.0))
OMNI_PATH = 4 * 100 / 8 / 8  # GB/s a GPU: four 100 Gb/s Omni-Path ports for a node's 8 GPUs
PRESETS = {
    "dgx-a100": _A100,
    "selene": _A100,
    "hgx-h100": Preset(8, _nvlink(450.0, nccl.HGX_H100), (50.0, 47.0, 1000.0)),
    "jean-zay-a100": Preset(8, _A100.inside, (OMNI_PATH, nccl.JEAN_ZAY_A100.busbw[4_000_000_000], 1000.0)),
}


def network(preset: str, npus: int) -> Network:
    """The network a preset names, sized to `npus` (SimulateError when it cannot hold them)."""
    if preset.startswith("switch:"):
        parts = preset.split(":")
        try:
            size, gbps = int(parts[1]), float(parts[2])
        except (IndexError, ValueError):
            raise SimulateError(f"--network {preset}: switch:NPUS:GBPS, e.g. switch:8:300") from None
        if size != npus or not gbps > 0:
            raise SimulateError(
                f"--network {preset}: the workload has {npus} NPUs; a switch of {npus}, bandwidth > 0"
            )
        return Network((npus,), (gbps,), (1.0,))
    if preset not in PRESETS:
        raise SimulateError(f"--network {preset}: one of switch:NPUS:GBPS, {', '.join(PRESETS)}")
    p = PRESETS[preset]
    (line, inside, near), (wire, between, far) = p.inside, p.between
    if npus <= p.per_node:
        return Network((npus,), (inside,), (near,), (line,))
    if npus % p.per_node:
        raise SimulateError(f"--network {preset}: {npus} NPUs are not whole nodes of {p.per_node}")
    return Network((p.per_node, npus // p.per_node), (inside, between), (near, far), (line, wire))


def binary(given: str | None, environment: str, option: str, name: str) -> Path:
    """The simulator's executable: the option's value, else the environment variable's."""
    path = given or os.environ.get(environment)
    if not path:
        raise SimulateError(f"give the {name} binary: {option} PATH or {environment}")
    found = Path(path)
    if not found.is_file() or not os.access(found, os.X_OK):
        raise SimulateError(f"{option} {path}: not an executable file")
    return found


def execute(command: list[str], name: str, timeout: float | None, cwd: Path | None = None) -> str:
    """Run a simulator and return what it printed (standard output, then standard error); its exit
    status is not a verdict (each module judges a run by the lines it printed)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise SimulateError(f"{name} ran past {timeout:g} s") from None
    except OSError as error:
        raise SimulateError(f"cannot run {command[0]}: {error.strerror or error}") from None
    return done.stdout + done.stderr


def write_configurations(folder: str, texts: Mapping[str, str]) -> dict[str, Path]:
    """The configuration files a run reads, written into its temporary folder: name -> path."""
    files = {}
    for name, text in texts.items():
        files[name] = Path(folder) / name
        files[name].write_text(text, encoding="utf-8")
    return files
