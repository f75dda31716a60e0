"""Build fixtures/profiler/gpt2-tiny-step.json.gz: a PyTorch profiler trace of one training step of
a small GPT-2 (transformers' GPT2LMHeadModel: 2 blocks, n_embd 64, 4 heads, 32 positions, a
vocabulary of 128; batch 2 x 32 tokens; AdamW), on the CPU, with module spans (with_modules) as
`--per-layer-times` reads them (modtrans/cost/profiler.py). The format is the one a GPU run writes,
less its kernel and runtime events; the configuration is fixtures/profiler/gpt2-tiny.json.

Run in an environment of its own (torch 2.13.0+cpu, transformers 5.24.0 were used):
    pip install torch transformers && python tools/build_profiler_fixture.py
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import GPT2Config, GPT2LMHeadModel

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "profiler"
CONFIG = {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32, "vocab_size": 128}


def main() -> None:
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**{k: v for k, v in CONFIG.items() if k != "model_type"}))
    optimizer = torch.optim.AdamW(model.parameters())
    ids = torch.randint(0, CONFIG["vocab_size"], (2, CONFIG["n_positions"]))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    step()  # warm up: the profiled step is a steady one
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, with_modules=True) as recorded:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "step.json"
        recorded.export_chrome_trace(str(trace))
        data = trace.read_bytes()
    (HERE / "gpt2-tiny-step.json.gz").write_bytes(gzip.compress(data, mtime=0))
    (HERE / "gpt2-tiny.json").write_text(json.dumps({**CONFIG, "torch_dtype": "float32"}) + "\n")


if __name__ == "__main__":
    main()
