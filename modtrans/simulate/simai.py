"""Run SimAI's analytical simulator on a SimAI workload text file and read its results back.

The binary is the user's (`--simai PATH` or MODTRANS_SIMAI): aliyun/SimAI built with
`./scripts/build.sh -c analytical` (bin/SimAI_analytical). It is configured on its command line
(aliyun/SimAI README, "SimAI-Analytical"): `-w` the workload, `-g` the GPUs, `-g_p_s` GPUs per
server, `-nv` the NVLink and `-nic` the NIC bus bandwidth (GB/s), `-n_p_s` NICs per server, `-r` a
prefix for its results. A preset (network.py) gives: one server of the switch's NPUs, or servers of
8 with the preset's NVLink and per-GPU network bandwidth and a NIC per GPU.

SimAI reads `astra-sim-alibabacloud/inputs/ratio/*.csv` (its bandwidth ratio tables) relative to
its working folder, and writes `results/<prefix>EndToEnd.csv` there: the run happens in a
temporary folder with the tables of the checkout the binary sits in. A run is judged by its `all
passes finished` line; its totals are the summary row of EndToEnd.csv (us), the per-layer rows
those of ASTRA-sim 1.0 (endtoend.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from modtrans.simulate.endtoend import TextResult, result
from modtrans.simulate.network import Network, SimulateError, execute
from modtrans.simulate.network import binary as _binary

ENVIRONMENT = "MODTRANS_SIMAI"
TOTALS = ("Total time", "total comp", "total exposed comm")  # its summary row's
RATIOS = Path("astra-sim-alibabacloud/inputs/ratio")
CANNOT_RUN = frozenset({"D314"})  # the warnings it cannot run a file with: a keyword not a transformer's


def binary(given: str | None) -> Path:
    return _binary(given, ENVIRONMENT, "--simai", "SimAI analytical")


def ratios(executable: Path) -> Path:
    """The ratio tables of the SimAI checkout `executable` sits in (its nearest parent with them)."""
    for parent in executable.resolve().parents:
        if (parent / RATIOS).is_dir():
            return parent / RATIOS
    raise SimulateError(
        f"--simai {executable}: SimAI reads {RATIOS}/*.csv from its working folder, and no folder "
        "above the binary has them: give the binary inside its SimAI checkout"
    )


def arguments(net: Network, npus: int) -> list[str]:
    per_server = net.dims[0]
    nic = net.line_rate[1] if len(net.line_rate) > 1 else net.line_rate[0]
    return [
        "-g", str(npus), "-g_p_s", str(per_server), "-nv", f"{net.line_rate[0]:g}",
        "-nic", f"{nic:g}", "-n_p_s", str(per_server),
    ]  # fmt: skip


def parse(log: str | None, end_to_end: str) -> TextResult:
    """The run's stdout and EndToEnd.csv: totals from the summary row (`total comp`, `total exposed
    comm`, `Total time`, each `value (share)`), then the layer rows."""
    return result("SimAI analytical", log, end_to_end, TOTALS)


def run(
    executable: Path, workload: Path, npus: int, net: Network, *, timeout: float = 3600
) -> tuple[TextResult, str]:
    tables = ratios(executable)
    with tempfile.TemporaryDirectory(prefix="modtrans-simai-") as folder:
        here = Path(folder)
        (here / RATIOS).parent.mkdir(parents=True)
        (here / RATIOS).symlink_to(tables, target_is_directory=True)
        (here / "results").mkdir()
        command = [str(executable), "-w", str(workload.resolve()), *arguments(net, npus), "-r", "modtrans-"]
        log = execute(command, "SimAI", timeout, here)
        csv_path = here / "results" / "modtrans-EndToEnd.csv"
        end_to_end = csv_path.read_text(encoding="utf-8", errors="replace") if csv_path.is_file() else ""
    return parse(log, end_to_end), log
