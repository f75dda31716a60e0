"""The generic path's whole-process speed (modtrans/hf/, the extra `hf`), as ratios against
baselines measured in the same run on the same machine:

    extract of gpt-oss-120b's default configuration (116.8 B parameters), no cache
                                  <= 2x `python -c "import torch, transformers"` (issue 36)
    the same, its IR cached       ~ the hand-written path's extract of a configuration it reads
                                  (Gemma 2 9B, fixtures/configs), which imports no torch

Run by hand, with the extra installed: `python bench/bench_hf.py` (about a minute). Each command
is a fresh process, timed best of three after an untimed run; the uncached runs each get an
empty cache folder (MODTRANS_CACHE), the cached runs one the untimed run filled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def best(args: list[str], cache: str | None, runs: int = 3) -> float:
    """The best wall time (s) of `runs` fresh processes; `cache`: their MODTRANS_CACHE (None: a
    new empty folder for each run, the warm-up's included)."""

    def once() -> float:
        with tempfile.TemporaryDirectory() as empty:
            env = {**os.environ, "MODTRANS_CACHE": cache or empty}
            start = time.perf_counter()
            subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            return time.perf_counter() - start

    once()
    return min(once() for _ in range(runs))


def main() -> None:
    import transformers

    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "gpt-oss-120b-default.json"
        data = transformers.AutoConfig.for_model("gpt_oss").to_dict()
        config.write_text(json.dumps(data), encoding="utf-8")
        ir = Path(folder) / "ir.json"
        cache = str(Path(folder) / "cache")
        imports = best([PY, "-c", "import torch, transformers"], None)
        cold = best([PY, "-m", "modtrans", "extract", str(config), "-o", str(ir)], None)
        warm = best([PY, "-m", "modtrans", "extract", str(config), "-o", str(ir)], cache)
        written = ROOT / "fixtures" / "configs" / "gemma-2-9b.json"
        fast = best([PY, "-m", "modtrans", "extract", str(written), "-o", str(ir)], None)
    print(f"import torch, transformers          {imports:6.2f} s   (baseline)")
    print(
        f"extract gpt-oss-120b, no cache      {cold:6.2f} s   {cold / imports:5.2f}x the import (goal <= 2x)"
    )
    print(f"extract gpt-oss-120b, IR cached     {warm:6.2f} s   {warm / fast:5.2f}x the hand-written path's")
    print(f"extract Gemma 2 9B (hand-written)   {fast:6.2f} s   (baseline of the cached run)")


if __name__ == "__main__":
    main()
