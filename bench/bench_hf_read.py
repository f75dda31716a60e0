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

Latest (2 shared cores; before: b02debe at load 2.3-6, after: hf/scans.py at load 2.5-3.3; wall s
and the ratio to transformers' build in the same run):

                        2,048 tokens                    8,192 tokens
                        before          after           before          after
    Mamba               74.0   9.2x     4.6  0.7x       298    86x      5.0  0.8x
    FalconMamba        208    25x       4.2  0.7x        -              3.4  0.6x
    Jamba               95.7   4.4x     4.3  0.8x        -              4.5  0.8x
    Zamba              630    38x       3.9  0.9x        -              4.1  0.9x
    RecurrentGemma      51.1   3.7x     4.9  1.2x       29.5   5.7x     3.4  0.8x
    RWKV               181     5.5x     4.4  0.8x        -              3.3  0.6x
    xLSTM               10.4   2.8x     6.8  1.6x        -              7.4  1.7x
    Mamba2              14.1   1.6x     7.6  1.6x        -              5.4  1.1x
    Zamba2              20.8   1.3x     4.1  1.0x        -              8.0  1.9x
    Falcon-H1           14.8   1.2x     6.9  1.4x        -              6.8  1.4x
    Qwen3-Next           9.2   1.5x     3.5  1.0x       16.8   2.7x     4.6  1.3x
    OLMo hybrid          6.4   1.1x     3.2  0.9x       10.5   1.8x     3.2  0.9x
    Kimi Linear          5.5   1.5x     4.2  1.1x       10.0   2.8x     4.9  1.3x
    MiniMax              3.4   0.9x     3.5  0.8x        3.9   1.0x     4.2  1.0x

Before at 8,192 tokens is measured where it takes minutes at most: a token loop's time grows with
the tokens (Zamba's would be about 40 minutes). Mamba2, Zamba2 and Falcon-H1 run Mamba-2's chunked
scan, MiniMax its lightning attention's 256-token blocks, no token loop: unchanged. The gated delta
nets (Qwen3-Next, OLMo hybrid, Kimi Linear) loop over 64-token chunks (hf/deltas.py), measured at
load 3.8-5.1. transformers' build here is 3.5-6 s (its import about half).
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
    "qwen3_next",
    "olmo_hybrid",
    "kimi_linear",
    "minimax",
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
