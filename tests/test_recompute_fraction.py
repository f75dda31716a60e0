"""--recompute-fraction (strategy/llm/checkpoints.py): the blocks fms-fsdp's selective activation
checkpointing wraps, held to its own rule run here as written, and what a plan does with them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans.api import run
from modtrans.plan.model import Compute, Plan, Step
from modtrans.request import Request, prepare
from modtrans.strategy.llm.checkpoints import checkpointed
from tests.refusals import refused_in_one_line, text_formats_refuse

BLOCKS = 32  # Llama 3 8B's


def _ac_handler(p: float, blocks: int) -> list[bool]:
    """fms_fsdp/policies/ac_handler.py at ed74fd5, apply_fsdp_checkpointing's check_fn, as written
    (its closure over block_idx and cut_off), asked once per block in the model's order."""
    block_idx = 0
    cut_off = 1 / 2

    def selective_checkpointing() -> bool:
        nonlocal block_idx
        nonlocal cut_off
        block_idx += 1
        if block_idx * p >= cut_off:
            cut_off += 1
            return True
        return False

    return [selective_checkpointing() for _ in range(blocks)]


@pytest.mark.parametrize("p", [1 / 2, 1 / 3, 2 / 3, 1, 0.25, 0.1, 0.75, 0.9])
def test_the_blocks_are_those_ac_handler_wraps(p: float) -> None:
    wrapped = _ac_handler(p, 80)
    assert checkpointed(p, 80) == {i for i, w in enumerate(wrapped) if w}


def test_ac_handlers_own_examples() -> None:
    """Its docstring: p = 1/2 [ac, no-ac, ac, no-ac, ...], p = 1/3 [no-ac, ac, no-ac, no-ac, ac,
    no-ac, ...], p = 2/3 [ac, no-ac, ac, ac, no-ac, ac, ...]."""
    assert checkpointed(1 / 2, 4) == {0, 2}
    assert checkpointed(1 / 3, 6) == {1, 4}
    assert checkpointed(2 / 3, 6) == {0, 2, 3, 5}


def _plan(recompute: str, fraction: float | None = None) -> Plan:
    request = Request(
        model="llama-3-8b", npus=8, seq_len=256, framework="fms-fsdp", zero=3, recompute=recompute,
        recompute_fraction=fraction,
    )  # fmt: skip
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result.plan


def _rerun_blocks(plan: Plan) -> set[int]:
    """The blocks (model.layers.N in the layers' names) whose forward runs again."""
    names = {
        plan.layers[op.layer].name
        for op in plan.programs[0]
        if isinstance(op, Compute) and op.step is Step.RECOMPUTE
    }
    return {int(name.split(".")[2]) for name in names if name.startswith("model.layers.")}


def test_the_checkpointed_blocks_alone_run_their_forward_again_and_keep_their_input() -> None:
    """At p = 1/3 the plan reruns blocks 1, 4, 7, ... (ac_handler's) and holds their input alone;
    the others keep what a block keeps without recomputation: the activations are the full
    plan's for the 11 checkpointed blocks and the plain plan's for the other 21."""
    third, full, none = _plan("full", 1 / 3), _plan("full"), _plan("none")
    chosen = {i for i, w in enumerate(_ac_handler(1 / 3, BLOCKS)) if w}
    assert _rerun_blocks(third) == chosen
    assert _rerun_blocks(full) == set(range(BLOCKS))
    per_block = (none.memory[0].activations - full.memory[0].activations) / BLOCKS
    kept = third.memory[0].activations - full.memory[0].activations
    assert kept == pytest.approx(per_block * (BLOCKS - len(chosen)), rel=1e-9)


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        (["--recompute-fraction", "0.5"], "it needs --recompute full"),
        (["--recompute", "selective", "--recompute-fraction", "0.5"], "it needs --recompute full"),
        (["--recompute", "full", "--recompute-fraction", "1.5"], "1.5"),
    ],
)
def test_the_command_line_refuses_it_where_it_means_nothing(
    run_cli: Any, tmp_path: Path, options: list[str], rule: str
) -> None:
    result: Result = run_cli("translate", "llama-3-8b", "--npus", "8", *options, "-o", tmp_path / "x")
    refused_in_one_line(result, rule)


def test_traces_carry_it_and_the_text_formats_refuse_it(run_cli: Any, tmp_path: Path) -> None:
    """A Chakra set reruns the chosen blocks alone and its metadata says the fraction; an
    ASTRA-sim 1.0 or SimAI file, whose FWD_IN_BCKWD recomputes every layer alike, is refused (D310)."""
    options = ["--npus", "8", "--recompute", "full", "--recompute-fraction", "0.5", "--seq-len", "128"]
    prefix = tmp_path / "f"
    made: Result = run_cli("translate", "llama-3-8b", *options, "--format", "chakra-et", "-o", prefix)
    assert made.exit_code == 0, made.output
    checked: Result = run_cli("validate", prefix)
    assert checked.exit_code == 0, checked.output
    meta = json.loads(prefix.with_name("f.et-meta.json").read_text(encoding="utf-8"))
    assert meta["parallel"]["llm"]["recompute_fraction"] == 0.5
    text_formats_refuse(run_cli, options, tmp_path, "--recompute-fraction")
