"""Big pipelines to Chakra traces, whole process, against a 64-rank dense model of the same run.

Run by hand: `python bench/bench_bigpipe.py [--quick]`. Each translation a fresh process, wall time
and peak RSS (the child's rusage), in a temporary folder:

    GPT-3 530B at TP 8 x PP 35, interleaved with 3 virtual stages (one block a chunk), --sp,
        --recompute selective, micro-batch 1, global batch 280: 280 ranks, 280 micro-batches
    GPT-3 1T at TP 8 x PP 64, interleaved with 2 virtual stages (one block a chunk; the virtual
        stages are our choice), the same options, global batch 512: 512 ranks, 512 micro-batches

and, as the baseline measured in the same run, Llama-3-70B translated at TP 2 x PP 4 x DP 8 (64
ranks, as bench_moe.py). `--quick`: the two pipelines at 1/8 of their micro-batches. Issue 35's
goal, on 2 cores: each <= 60 s and <= 1 GB. Before (main at e395553): 530B took 417 s and 3.3 GB;
its 35-micro-batch run 49 s wall (20 s of CPU) and 677 MB.

The models are Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", arXiv 2205.05198), Table 3: 530B 105 layers, hidden 20480, 128 heads; 1T 128 layers,
hidden 25600, 160 heads; sequence 2048, tensor parallel 8, pipeline 35 and 64, global batch 280
and 512, micro-batch 1. Written as GPT-2-architecture configurations as bench_megatron.py writes
them (Megatron-LM's GPT), vocabulary 51,200, fp16.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from children import run  # bench/children.py: the script's own folder is on sys.path
from configs import megatron_gpt  # bench/configs.py

GPT3 = {  # name: (layers, hidden, heads, pipeline ranks, virtual stages)
    "gpt3-530b": (105, 20480, 128, 35, 3),
    "gpt3-1t": (128, 25600, 160, 64, 2),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/8 of the micro-batches")
    quick = parser.parse_args().quick
    modtrans = [sys.executable, "-m", "modtrans"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        layout = ["--tp", "2", "--pp", "4", "--dp", "8", "--format", "chakra-et"]
        dense = run([*modtrans, "translate", "llama-3-70b", *layout, "-o", str(folder / "l")])
        for name, (layers, hidden, heads, pp, vpp) in GPT3.items():
            config = folder / f"{name}.json"
            config.write_text(json.dumps(megatron_gpt(layers, hidden, heads, dropout=None)))
            batches = pp if quick else 8 * pp  # Table 3: global batch 280 and 512, micro-batch 1
            args = [
                *modtrans, "translate", str(config), "--tp", "8", "--pp", str(pp), "--vpp", str(vpp),
                "--schedule", "interleaved", "--global-batch", str(batches),
                "--micro-batch", "1", "--sp", "--recompute", "selective", "--seq-len", "2048",
                "--format", "chakra-et", "-q", "-o", str(folder / name / "p"),
            ]  # fmt: skip
            (folder / name).mkdir()
            measured = run(args)
            size = sum(p.stat().st_size for p in (folder / name).iterdir())
            rows.append((f"{name}, {8 * pp} ranks, {batches} micro-batches", measured, size))
            for path in (folder / name).iterdir():  # the next model's traces need the disk
                path.unlink()
    print(f"baseline: llama-3-70b, 64 ranks, translate:  {dense[0]:6.2f} s, {dense[1]:6.0f} MB peak")
    for label, (seconds, rss), size in rows:
        print(
            f"{label:<42} {seconds:6.2f} s, {rss:6.0f} MB, {seconds / dense[0]:5.2f}x the baseline, "
            f"traces {size / 1e9:.2f} GB (goal <= 60 s, <= 1,000 MB)"
        )


if __name__ == "__main__":
    main()
