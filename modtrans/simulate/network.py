"""What every simulator run shares: the network presets, the binary the user gives, the error.

The presets (per GPU, one direction):

    switch:N:GBPS   one switch of N NPUs
    dgx-a100        8 GPUs per node on NVSwitch, 300 GB/s (NVIDIA DGX A100 datasheet: 600 GB/s
                    bidirectional NVLink per GPU), nodes on 25 GB/s (8 HDR InfiniBand 200 Gb/s links
                    per 8 GPUs)
    hgx-h100        8 per node, 450 GB/s (NVLink 4: 900 GB/s bidirectional), nodes on 50 GB/s (one
                    400 Gb/s NDR link per GPU)

Each simulator module writes them in its own configuration format (astra2.py, astra1.py,
simai.py). ModTrans never vendors or builds a simulator: the user gives the binary.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class SimulateError(ValueError):
    """Something that stops a simulation or its reading, in one line."""


@dataclass(frozen=True)
class Network:
    dims: tuple[int, ...]  # NPUs per dimension, the product the workload's NPUs
    bandwidth: tuple[float, ...]  # GB/s per dimension
    latency: tuple[float, ...]  # ns


PRESETS = {"dgx-a100": (8, 300.0, 25.0), "hgx-h100": (8, 450.0, 50.0)}


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
    per_node, inside, between = PRESETS[preset]
    if npus <= per_node:
        return Network((npus,), (inside,), (1.0,))
    if npus % per_node:
        raise SimulateError(f"--network {preset}: {npus} NPUs are not whole nodes of {per_node}")
    return Network((per_node, npus // per_node), (inside, between), (1.0, 1000.0))


def binary(given: str | None, environment: str, option: str, name: str) -> Path:
    """The simulator's executable: the option's value, else the environment variable's."""
    path = given or os.environ.get(environment)
    if not path:
        raise SimulateError(f"give the {name} binary: {option} PATH or {environment}")
    found = Path(path)
    if not found.is_file() or not os.access(found, os.X_OK):
        raise SimulateError(f"{option} {path}: not an executable file")
    return found


def execute(command: list[str], name: str, timeout: float, cwd: Path | None = None) -> str:
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
