"""`modtrans inspect MODEL` with a layout option prints one rank's memory per pipeline stage: what
the translation computes (the same numbers a translation's .meta.json holds), and on one rank
Megatron-LM's own count for the real Llama-3-8B configuration."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_memory_fsdp_pool import BLOCK
from tests.test_memory_fsdp_pool import ROOT as GATHERED_ROOT

ROOT = Path(__file__).resolve().parents[1]


def _modtrans(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    line = [sys.executable, "-m", "modtrans", *args]
    return subprocess.run(line, capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_one_rank_holds_megatrons_18_bytes_per_parameter_of_llama_3_8b(tmp_path: Path) -> None:
    """Llama-3-8B has 8,030,261,248 parameters (meta-llama/Meta-Llama-3-8B's safetensors index
    total_size 16,060,522,496 B at 2 B each); Megatron-LM's theoretical_memory_usage.py counts
    num_bytes_per_parameter = 18 (bf16 weight, fp32 main gradient, fp32 master and two Adam moments)
    without the distributed optimizer."""
    done = _modtrans("inspect", "llama-3-8b", "--tp", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\s+0\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", done.stdout, re.M)
    assert len(rows) == 1, done.stdout
    parameters = int(rows[0][0].replace(",", ""))
    assert parameters == 8_030_261_248
    gib = sum(float(v) for v in rows[0][1:]) * 2**30
    assert abs(gib - 18 * parameters) < 0.02 * 2**30 * 3  # three parts, each rounded to 0.01 GiB


def test_the_memory_is_what_the_translation_writes_in_its_metadata(tmp_path: Path) -> None:
    layout = ("--tp", "2", "--pp", "2", "--dp", "2", "--recompute", "selective")
    shown = _modtrans("inspect", "llama-3-8b", *layout, "--format", "json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    written = _modtrans(
        "translate", "llama-3-8b", *layout, "--format", "chakra-et", "-o", "out/", cwd=tmp_path
    )
    assert written.returncode == 0, written.stderr
    meta = json.loads(next((tmp_path / "out").glob("*meta.json")).read_text())
    stages = json.loads(shown.stdout)
    assert len(stages) == 2
    assert stages == meta["parallel"]["llm"]["memory"]


def test_torchtitans_reserve_is_shown_beside_the_peak(tmp_path: Path) -> None:
    """torchtitan's Llama 3 8B (its benchmark's local batch 2, sequence 8,192): the caching
    allocator keeps the bf16 logits `del pred` frees, 2 B of each of 2 x 8,192 x 128,256 logits
    (the vocabulary of meta-llama/Meta-Llama-3-8B's config.json), and FSDP2's all-gather stream
    keeps the root's and the first block's flat outputs (tests/test_memory_fsdp_pool.py), beside
    the tensors' peak; a Megatron layout, which frees nothing before its loss's peak and gathers
    nothing, has no such column."""
    layout = ("--framework", "torchtitan", "--zero", "3", "--dp", "8", "--seq-len", "8192")
    done = _modtrans("inspect", "llama-3-8b", *layout, "--micro-batch", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "reserved GiB" in done.stdout
    row = re.findall(r"^\s+0\s+[\d,]+(?:\s+[\d.]+){4}\s+([\d.]+)\s+([\d.]+)$", done.stdout, re.M)
    total, reserved = (float(v) for v in row[0])
    pool = GATHERED_ROOT + BLOCK  # Llama 3 8B's root and one block in bf16 (test_memory_fsdp_pool.py)
    assert reserved - total == pytest.approx((2 * 2 * 8192 * 128256 + pool) / 2**30, abs=0.011)
    megatron = _modtrans("inspect", "llama-3-8b", "--tp", "2", cwd=tmp_path)
    assert megatron.returncode == 0, megatron.stderr
    assert "reserved" not in megatron.stdout


def test_a_layout_the_model_cannot_take_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    done = _modtrans("inspect", "llama-3-8b", "--tp", "3", cwd=tmp_path)
    assert done.returncode in (1, 2)
    assert "Traceback" not in done.stderr
    assert "--tp 3" in done.stderr
    assert done.stdout == ""


def test_a_memory_option_without_a_layout_is_a_usage_error(tmp_path: Path) -> None:
    """--device or --seq-len alone would be ignored by the layer listing: said, exit 2."""
    done = _modtrans("inspect", "resnet50", "--device", "h100", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("modtrans: --device:"), done.stderr
    assert done.stderr.count("\n") == 1
