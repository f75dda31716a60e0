"""The recurrent and state-space families' reads through transformers (modtrans/hf/, the extra
`hf`), each as a ratio against transformers' own build of the same configuration on the meta
device, measured in the same run on the same machine (issue 36):

    modtrans translate <default config.json> --seq-len SEQUENCE    (a fresh process, no cache)
    python -c "build <default config> on meta with transformers"   (a fresh process: the baseline)

Run by hand, with the extra installed:

    python bench/bench_hf_read.py [SEQUENCE ...] [--only mamba,zamba]    # default 2048 8192

Each family's default configuration (transformers' AutoConfig.for_model) is written to a file and
read as a user reads it. Mamba and Jamba are hand-written families (llm/config.py's FAMILIES:
`modtrans translate` reads them without torch): their reads through transformers are timed as
`modtrans.hf.extract` in a fresh process.
Prints wall seconds and the ratio to the family's baseline; each command runs once (nice'd
shared machines: run it when the load is low, and compare ratios, not seconds).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PY = sys.executable
FAMILIES = (
    "mamba",
    "falcon_mamba",
    "mamba2",
    "jamba",
    "zamba",
    "zamba2",
    "falcon_h1",
    "recurrent_gemma",
    "rwkv",
    "xlstm",
)

BUILD = """
import sys, torch, transformers
config = transformers.AutoConfig.for_model(sys.argv[1])
with torch.device("meta"):
    transformers.AutoModelForCausalLM.from_config(config)
"""

EXTRACT = """
import sys
from pathlib import Path
from modtrans import hf
data = Path(sys.argv[1]).read_bytes()
import json
ir, found = hf.extract(json.loads(data), data, name=sys.argv[1], batch=1, sequence=int(sys.argv[2]))
assert ir is not None, found
"""


def timed(args: list[str], env: dict[str, str]) -> float | str:
    """Wall seconds of one fresh process, or its last line of error."""
    start = time.perf_counter()
    done = subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        return (done.stderr.strip().splitlines() or ["exit " + str(done.returncode)])[-1][:100]
    return time.perf_counter() - start


def main() -> None:
    import transformers

    from modtrans.llm.config import FAMILIES as HAND_WRITTEN

    argv = sys.argv[1:]
    only: set[str] = set()
    if "--only" in argv:
        at = argv.index("--only")
        only = set(argv[at + 1].split(","))
        del argv[at : at + 2]
    sequences = [int(x) for x in argv] or [2048, 8192]
    families = [f for f in FAMILIES if not only or f in only]
    print(f"transformers {transformers.__version__}, load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "MODTRANS_CACHE": str(Path(folder) / "cache")}
        for family in families:
            config = Path(folder) / f"{family}.json"
            config.write_text(
                json.dumps(transformers.AutoConfig.for_model(family).to_dict()), encoding="utf-8"
            )
            base = timed([PY, "-c", BUILD, family], env)
            for sequence in sequences:
                env["MODTRANS_CACHE"] = str(Path(folder) / f"cache-{family}-{sequence}")  # no cache hit
                if family in HAND_WRITTEN:
                    args = [PY, "-c", EXTRACT, str(config), str(sequence)]
                else:
                    out = str(Path(folder) / "out.txt")
                    args = [
                        PY,
                        "-m",
                        "modtrans",
                        "translate",
                        str(config),
                        "--seq-len",
                        str(sequence),
                        "-o",
                        out,
                    ]
                took = timed(args, env)
                if isinstance(base, str) or isinstance(took, str):
                    print(f"{family:16s} {sequence:6d}  failed: {took if isinstance(took, str) else base}")
                    continue
                print(
                    f"{family:16s} {sequence:6d}  read {took:7.2f} s  transformers' build {base:5.2f} s"
                    f"  ratio {took / base:6.1f}x",
                    flush=True,
                )


if __name__ == "__main__":
    main()
