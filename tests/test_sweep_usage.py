"""`modtrans sweep` as a user types it: every option value the sweep cannot use is one line and
exit 2 before anything runs, never a table whose every row says the same error with exit 0; and
the values its help offers are taken, on real built-in models."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

import modtrans
from modtrans.request import UsageError
from modtrans.sweep.rows import read_json

Run = Callable[..., Result]
MODELS = ("llama-3-8b", "mixtral-8x7b", "gpt2")
ONE = ("--tp", "1", "--pp", "1", "--cp", "1", "--micro-batch", "1", "--recompute", "full", "--no-cache")


def _one_line_exit_2(done: Result, said: str) -> None:
    assert done.exit_code == 2, done.output
    assert len(done.output.strip().splitlines()) == 1, done.output
    assert said in done.output


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize(
    ("option", "said"),
    [
        # no such preset (simulate/network.py's: switch:NPUS:GBPS, dgx-a100, selene, hgx-h100, jean-zay-a100)
        (("--network", "foo"), "--network foo"),
        # a switch of 8 cannot hold the cluster's 16 GPUs (the second of --gpus 8,16)
        (("--network", "switch:8:300"), "--network switch:8:300"),
        # DeepSpeed's zero_optimization.stage is 0-3 (deepspeed/runtime/zero/config.py, ZeroStageEnum)
        (("--zero", "4"), "--zero '4'"),
        (("--zero", "1:5"), "--zero '1:5'"),
        # Megatron-LM's --use-distributed-optimizer: DeepSpeed's stages are zero_optimization's,
        # FSDP's its ShardingStrategy (torch/distributed/fsdp/api.py); the switch was passed over
        # and ZeRO-0 rows ranked where the user asked for the optimizer sharded
        (("--framework", "deepspeed", "--distributed-optimizer", "on"), "--distributed-optimizer"),
        (("--framework", "fsdp", "--distributed-optimizer", "on"), "--distributed-optimizer"),
    ],
)
def test_an_option_no_layout_can_use_is_one_line_and_exit_2(
    model: str, option: tuple[str, ...], said: str, run_cli: Run
) -> None:
    """Each of these left every row of the table without an estimate (its error column all the
    same line) and exited 0, or (--zero 4) counted every layout refused under a rule and exited
    1: the sweep ran, and said nothing useful."""
    done = run_cli("sweep", model, "--gpus", "8,16", "--global-batch", "64", *ONE, *option)
    _one_line_exit_2(done, said)


@pytest.mark.parametrize("model", ["llama-3-8b", "gpt2"])  # ZeRO-0 of Mixtral's 47B fits no 8 GPUs
def test_every_zero_stage_the_help_offers_is_taken(model: str) -> None:
    """--zero's help says 0-3: DeepSpeed's stages 0 (disabled), 1, 2, 3 (ZeroStageEnum); the list
    refused 0 (a degree's rule: positive values) whether typed 0:3, 0,3 or given to the API."""
    for given in ("0:3", "0,1,2,3", (0, 1, 2, 3)):
        rows = modtrans.sweep(
            model, gpus=8, global_batch=64, framework="deepspeed", tp="1", pp="1", cp="1", ep="1",
            micro_batch="1", recompute="full", zero=given, no_cache=True, jobs=1,
        )  # fmt: skip
        assert sorted(r.zero for r in rows) == [0, 1, 2, 3]


@pytest.mark.parametrize(("name", "given"), [("tp", (0,)), ("pp", (2, 0)), ("zero", (4,)), ("gpus", (-8,))])
def test_the_api_holds_a_grid_given_as_integers_to_the_commands_bounds(
    name: str, given: tuple[int, ...]
) -> None:
    """modtrans.sweep(tp=(0,)) went through unchecked (only the typed text 0 was refused)."""
    options: dict[str, Any] = {"gpus": 8, "global_batch": 64, "no_cache": True, "jobs": 1, name: given}
    with pytest.raises(UsageError, match=f"--{name}"):
        modtrans.sweep("llama-3-8b", **options)


def _dies_on_full_recomputation(task: tuple[Any, list[Any]]) -> list[Any]:
    """tasks.estimate_task, but a worker handed a layout with full recomputation is killed as
    the kernel's out-of-memory killer kills a process (SIGKILL: no cleanup, no exception)."""
    from modtrans.strategy.llm.options import Recompute
    from modtrans.sweep import tasks

    if any(layout.recompute is Recompute.FULL for layout in task[1]):
        os.kill(os.getpid(), signal.SIGKILL)
    return tasks.estimate_task(task)


@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b"])
def test_a_worker_killed_keeps_what_finished_and_the_sweep_resumes(
    model: str, run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool worker killed mid-sweep was a traceback (BrokenProcessPool), exit 1, and no table:
    what had finished was lost with --no-cache. Now: one line, exit 1, the table of the rows that
    finished (each with its estimate), and the same sweep run again takes those from the cache."""
    from modtrans.sweep import tasks

    args = ["sweep", model, "--gpus", "16", "--global-batch", "64", "--tp", "2", "--pp", "1,2", "--cp", "1"]
    args += ["--recompute", "none,full", "--jobs", "2", "--cache", str(tmp_path / "cache"), "-q"]
    with monkeypatch.context() as patched:
        patched.setattr(tasks, "estimate_task", _dies_on_full_recomputation)
        done = run_cli(*args, "-o", tmp_path / "t")
    assert done.exit_code == 1, done.output
    assert len(done.output.strip().splitlines()) == 1, done.output
    assert "worker process ended abruptly" in done.output
    assert f"{tmp_path / 't'}.csv" in done.output
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["stopped"] is True
    assert "worker" in document["failed"]
    kept = read_json((tmp_path / "t.json").read_text())
    assert all(r.recompute == "none" and r.estimate_s is not None for r in kept)
    again = run_cli(*args, "-o", tmp_path / "again")
    assert again.exit_code == 0, again.output
    whole = json.loads((tmp_path / "again.json").read_text())
    assert whole["from_cache"] >= len(kept)
    assert {r["recompute"] for r in whole["rows"]} == {"none", "full"}


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_a_cache_that_cannot_keep_results_is_one_line_before_the_sweep(
    where: str, run_cli: Run, tmp_path: Path
) -> None:
    """--cache naming a file (or a folder under one) was a FileExistsError or NotADirectoryError
    traceback, after the layouts were enumerated."""
    (tmp_path / "file").write_text("not a folder\n")
    args = ["sweep", "llama-3-8b", "--gpus", "16", "--global-batch", "64", *ONE[:-1]]
    done = run_cli(*args, "--cache", tmp_path / where, "-o", tmp_path / "t")
    _one_line_exit_2(done, f"--cache {tmp_path / where}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
