"""A script beside the tests that starts torch.distributed on the CPU (fsdp_state.py,
hsdp_collectives.py), run in a process of its own on a Llama small enough for it, at a free port,
its findings read back from the JSON file it writes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

# a Llama small enough for CPU, its sizes even so that two ranks shard every tensor alike
LLAMA = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 256, "tie_word_embeddings": False,
    "max_position_embeddings": 64, "rms_norm_eps": 1e-5,
}  # fmt: skip


def free_port() -> int:
    """A port no one listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_script(name: str, out: Path) -> Any:
    """The script `name` (beside this file) run on LLAMA: what it wrote to `out`."""
    return _run([name, json.dumps(LLAMA), str(free_port()), str(out)], out)


def run_megatron(name: str, out: Path) -> Any:
    """A Megatron-Core script beside this file (megatron_saved.py, megatron_shards.py), which
    builds its own model: what it wrote to `out`."""
    return _run([name, str(out), str(free_port())], out)


def _run(args: list[str], out: Path) -> Any:
    script = Path(__file__).with_name(args[0])
    done = subprocess.run(
        [sys.executable, str(script), *args[1:]], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text(encoding="utf-8"))
