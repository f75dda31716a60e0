"""The real SCALE-Sim, run in-process per GEMM, with a content-addressed cache (optional extra).

`pip install 'modtrans[scalesim]'` (scalesim 3.0.0 needs numpy < 2.4). Each distinct (M, K, N,
array, dataflow) runs once: its "Total Cycles" (without prefetch) are cached in
$MODTRANS_CACHE/scalesim/<sha256 of the key>.json, so repeated translations are instant. SCALE-Sim
prints a lot: its stdout and stderr are captured, never mixed with ours. Never used by default or
in CI; `scalesim-v3` gives the same numbers from closed forms without running anything.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import tempfile
import warnings
from pathlib import Path

from modtrans.cost.base import CostError, Model, Settings, register
from modtrans.cost.systolic import Systolic, scalesim_like
from modtrans.fileio import write_atomic
from modtrans.resources import cache_dir, install_hint


def available() -> bool:
    try:
        import scalesim  # noqa: F401
    except ImportError:
        return False
    return True


def _cache_dir() -> Path:
    return cache_dir() / "scalesim"


def run_gemm(
    m: int, k: int, n: int, rows: int, cols: int, dataflow: str, *, cache: Path | None = None
) -> int:
    """SCALE-Sim v3 "Total Cycles" of one GEMM (cached by content)."""
    key = json.dumps({"m": m, "k": k, "n": n, "rows": rows, "cols": cols, "dataflow": dataflow, "v": "3.0.0"})
    folder = cache or _cache_dir()
    entry = folder / f"{hashlib.sha256(key.encode()).hexdigest()}.json"
    if entry.is_file():
        return int(json.loads(entry.read_text())["cycles"])
    cycles = _simulate(m, k, n, rows, cols, dataflow)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(entry, json.dumps({"key": json.loads(key), "cycles": cycles}))
    return cycles


_CONFIG = """[general]
run_name = modtrans

[architecture_presets]
ArrayHeight : {rows}
ArrayWidth : {cols}
IfmapSramSzkB : 6144
FilterSramSzkB : 6144
OfmapSramSzkB : 2048
IfmapOffset : 0
FilterOffset : 10000000
OfmapOffset : 20000000
Bandwidth : 10
Dataflow : {dataflow}
MemoryBanks : 1
ReadRequestBuffer : 32
WriteRequestBuffer : 32

[layout]
IfmapCustomLayout : False
IfmapSRAMBankBandwidth : 10
IfmapSRAMBankNum : 10
IfmapSRAMBankPort : 2
FilterCustomLayout : False
FilterSRAMBankBandwidth : 10
FilterSRAMBankNum : 10
FilterSRAMBankPort : 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth : CALC
UseRamulatorTrace : False
"""


def _simulate(m: int, k: int, n: int, rows: int, cols: int, dataflow: str) -> int:
    try:
        from scalesim.scale_sim import scalesim as ScaleSim
    except ImportError:
        raise CostError(f"the scalesim model needs SCALE-Sim: {install_hint('scalesim')}") from None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cfg = folder / "modtrans.cfg"
        cfg.write_text(_CONFIG.format(rows=rows, cols=cols, dataflow=dataflow))
        topology = folder / "gemm.csv"
        topology.write_text(f"Layer, M, N, K,\nmodtrans, {m}, {n}, {k},\n")
        layout = folder / "layout.csv"
        layout.write_text(
            "Layer name, IFMAP SRAM Row, IFMAP SRAM Col, FILTER SRAM Row, FILTER SRAM Col,\n"
            "modtrans, 1, 1, 1, 1,\n"
        )
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SCALE-Sim's own NumPy deprecations are not ours to show
            sim = ScaleSim(
                save_disk_space=True,
                verbose=False,
                config=str(cfg),
                topology=str(topology),
                layout=str(layout),
                input_type_gemm=True,
            )
            sim.run_scale(top_path=str(folder))
        report = next(folder.rglob("COMPUTE_REPORT.csv"))
        with report.open() as handle:
            rows_ = [[c.strip() for c in row] for row in csv.reader(handle)]
        header, values = rows_[0], rows_[1]
        return int(float(values[header.index("Total Cycles")]))


@register(Model.SCALESIM, "the real SCALE-Sim v3 per GEMM, cached (optional extra modtrans[scalesim])")
def make(settings: Settings) -> Systolic:
    """The systolic model of systolic.py with each GEMM's cycles from a real SCALE-Sim run."""
    if not available():
        raise CostError(f"the scalesim model needs SCALE-Sim: {install_hint('scalesim')}")
    return scalesim_like(
        settings, "scalesim", run_gemm, "SCALE-Sim 3.0.0 Total Cycles (GEMM mode), run per GEMM and cached"
    )
