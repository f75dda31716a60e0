"""--compile: torch.compile of each transformer block as torchtitan applies it (torchtitan 9dec370,
torchtitan/parallelisms/parallelize_llama.py, apply_compile: `torch.compile(transformer_block,
fullgraph=True)` for each of model.layers; train config `compile = true`), where it means something
(strategy/frameworks.py, compiles) and what it changes: the blocks' memory under torchtitan's 'op'
selective recomputation, as the partitioner saves it (tests/test_compile_saved.py runs torch's:
w2's output, which the backward never reads, is not saved; eager's checkpoint cache keeps it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans.api import run
from modtrans.plan.model import Plan
from modtrans.request import Request, prepare

# Llama-3-8B's config.json: hidden 4096, 32 blocks
H, BLOCKS, S, B = 4096, 32, 2048, 1


def _plan(compiled: bool, recompute: str = "selective") -> Plan:
    request = Request(
        model="llama-3-8b", npus=8, micro_batch=B, global_batch=8, seq_len=S, device="h100",
        framework="torchtitan", zero=3, recompute=recompute, compile=compiled,
    )  # fmt: skip
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result.plan


def test_a_compiled_block_keeps_one_hidden_state_fewer_under_the_op_policy() -> None:
    """Each block keeps w2's output (bf16, h a token) eagerly and not compiled; nothing else moves."""
    eager, compiled = (_plan(c).memory[0].activations for c in (False, True))
    assert eager - compiled == BLOCKS * 2 * S * B * H


def test_without_the_op_policy_the_blocks_keep_what_eager_keeps() -> None:
    """Full recomputation keeps each block's input alone, compiled or not (the partitioner hands the
    backward the input alone: tests/test_compile_saved.py)."""
    eager, compiled = (_plan(c, "full").memory[0].activations for c in (False, True))
    assert eager == compiled


@pytest.mark.parametrize("framework", ["megatron", "megatron-2022", "deepspeed", "llm-foundry"])
def test_the_command_line_refuses_it_where_it_means_nothing(
    run_cli: Any, tmp_path: Path, framework: str
) -> None:
    """Megatron-LM runs its own fused kernels; DeepSpeed's and llm-foundry's runs modelled here
    compile nothing: one line, exit 2."""
    zero = ["--zero", "3"] if framework == "llm-foundry" else []
    result: Result = run_cli(
        "translate", "llama-3-8b", "--dp", "2", "--compile", "--framework", framework, *zero,
        "--seq-len", "64", "-o", str(tmp_path / "x"),
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--compile" in result.output
    named = result.output.split("--framework ")[-1]
    assert all(name in named for name in ("torchtitan", "fsdp,", "fms-fsdp"))
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
