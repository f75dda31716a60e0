"""Extraction cost against onnx.load on the same files, in the same run.

Run by hand: `python bench/bench_extract.py [--keep DIR]`. It generates two models in a temporary
folder (nothing is downloaded):

  vgg16-embedded   the built-in VGG16 graph with all 138 M fp32 weights embedded (553 MB)
  big-external     a 2.3 GB MLP whose weights live in a .data file beside it (external data)

and measures, each in a fresh subprocess (so peak RSS is that of the one operation):

  onnx.load                    the baseline (reads every weight byte)
  onnx.load, no external data  load_external_data=False (external model only)
  wire.strip_file              the structure-only read alone
  extract (no hash)            the whole extraction: read, checker, shape inference, IR
  extract (with SHA-256)       as above plus the file hash (which must read every byte)

Targets (issue 3): extraction >= 100x faster than onnx.load, <= 100 MB peak RSS for VGG16.

Latest figures: docs/performance.md (Large translations and trace sets).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PROBE = r"""
import json, sys, time
from pathlib import Path
import onnx
from modtrans.extraction import extract, wire
kind, path = sys.argv[1], Path(sys.argv[2])
start = time.perf_counter()
if kind == "onnx.load":
    onnx.load(str(path))
elif kind == "onnx.load-no-external":
    onnx.load(str(path), load_external_data=False)
elif kind == "strip":
    wire.strip_file(path)
else:
    ir, found = extract(path, batch=1, file_hash=(kind == "extract-hash"))
    assert ir is not None, found
elapsed = time.perf_counter() - start
status = Path("/proc/self/status").read_text()
peak = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
print(json.dumps({"seconds": elapsed, "rss_mb": peak / 1024}))
"""
"""Imports happen before the clock starts; peak RSS is VmHWM (reset by exec, unlike ru_maxrss)."""

_BASELINE_RSS = r"""
import json
from pathlib import Path
import onnx
from modtrans.extraction import extract
status = Path("/proc/self/status").read_text().splitlines()
peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps({"rss_mb": peak / 1024}))
"""


def vgg16_embedded(folder: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from modtrans import zoo

    entry = zoo.get("vgg16")
    assert entry is not None
    model = onnx.load(str(entry.path), load_external_data=False)
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            filled = numpy_helper.from_array(np.full(tuple(tensor.dims), 0.01, np.float32), tensor.name)
            model.graph.initializer[i].CopyFrom(filled)
    path = folder / "vgg16-embedded.onnx"
    onnx.save(model, str(path))
    return path


def big_external(folder: Path, layers: int = 36, width: int = 4096) -> Path:
    """An MLP of `layers` width x width fp32 MatMuls: 36 x 64 MiB = 2.3 GB of external data."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, current = [], [], "x"
    block = np.full((width, width), 0.001, np.float32)
    for i in range(layers):
        inits.append(numpy_helper.from_array(block, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [f"h{i}"], name=f"/mlp/fc{i}/MatMul"))
        current = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, ["batch", width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "big-external.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="big-external.data")
    return path


def measure(kind: str, path: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, kind, str(path)], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keep", type=Path, help="generate the models here and keep them")
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        vgg16_embedded(args.generate)
        big_external(args.generate)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        # generated in a child process, so this one stays small while it runs the probes
        subprocess.run([sys.executable, __file__, "--generate", str(folder)], check=True)
        models = [folder / "vgg16-embedded.onnx", folder / "big-external.onnx"]
        print(f"generated models in {time.perf_counter() - start:.1f} s")
        imports = json.loads(
            subprocess.run(
                [sys.executable, "-c", _BASELINE_RSS], check=True, capture_output=True, text=True
            ).stdout
        )
        print(f"interpreter with onnx and modtrans imported: {imports['rss_mb']:.0f} MB RSS")
        for path in models:
            size = path.stat().st_size + sum(p.stat().st_size for p in folder.glob(f"{path.stem}.data"))
            print(f"\n{path.name}: {size / 1e6:,.0f} MB")
            kinds = ["onnx.load"]
            if path.stem == "big-external":
                kinds.append("onnx.load-no-external")
            kinds += ["strip", "extract-nohash", "extract-hash"]
            baseline = None
            for kind in kinds:
                best = min((measure(kind, path) for _ in range(3)), key=lambda r: r["seconds"])
                baseline = baseline or best
                ratio = baseline["seconds"] / best["seconds"]
                print(
                    f"  {kind:<24} {best['seconds'] * 1000:9.1f} ms  {ratio:8.1f}x faster than onnx.load"
                    f"  peak RSS {best['rss_mb']:7.0f} MB"
                )


if __name__ == "__main__":
    main()
