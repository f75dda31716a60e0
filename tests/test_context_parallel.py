"""Context parallelism (--cp C, strategy/llm/context.py): every layer on s / C tokens, keys and
values gathered over the context group around each attention core, gradients over D x C ranks.
Checked on Llama-3-8B's published configuration (built-in), its numbers derived by hand."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans.chakra.read import read
from modtrans.chakra.summary import summarize

Run = Callable[..., Result]
BASE = (
    "translate", "llama-3-8b", "--tp", "2", "--pp", "2", "--dp", "2", "--seq-len", "1024",
    "--format", "chakra-et", "--time-unit", "us",
)  # fmt: skip


def _rank(run_cli: Run, tmp_path: Path, *more: str, rank: int = 0):  # type: ignore[no-untyped-def]
    tmp_path.mkdir(exist_ok=True)
    prefix = tmp_path / "t"
    done = run_cli(*BASE, *more, "-o", prefix)
    assert done.exit_code == 0, done.output
    path = tmp_path / f"t.{rank}.et"
    (totals,) = summarize([read(path.read_bytes(), str(path))])
    return totals, json.loads((tmp_path / "t.comm_groups.json").read_text())


def test_a_context_rank_computes_half_the_sequence(run_cli: Run, tmp_path: Path) -> None:
    """Each of C = 2 ranks runs every layer on half the tokens: half the FLOPs (attention too,
    balanced over the causal mask), half of every activation a tensor-parallel all-reduce or a
    pipeline send moves; the gradients' all-reduce moves the same bytes over D x C = 4 ranks."""
    whole, _ = _rank(run_cli, tmp_path / "a")
    split, groups = _rank(run_cli, tmp_path / "b", "--cp", "2")
    assert split.flops == pytest.approx(whole.flops / 2, rel=1e-3)
    tp_whole = whole.collectives[("ALL_REDUCE", next(g for t, g in whole.collectives if t == "ALL_REDUCE"))]
    assert whole.sends[1] == 2 * split.sends[1]
    # not the all-reduces of one fp32 number before the optimizer step (strategy/llm/clipping.py)
    reduce = {k: v for k, v in split.collectives.items() if k[0] == "ALL_REDUCE" and v[1] > v[0] * 4}
    by_size = sorted(reduce.items(), key=lambda kv: kv[1][1])
    (gradients_key, gradients), (_, tensor) = by_size[-1], by_size[0]
    assert gradients[0] == 1
    assert len(groups[gradients_key[1]]) == 4  # D x C
    assert gradients[1] == max(
        v[1] for k, v in whole.collectives.items() if k[0] == "ALL_REDUCE" and v[0] == 1
    )
    assert tensor[1] * 2 == min(tp_whole[1], max(v[1] for k, v in whole.collectives.items() if v[0] > 1))


def test_keys_and_values_are_gathered_around_each_attention_core(run_cli: Run, tmp_path: Path) -> None:
    """Llama-3-8B: 8 key/value heads of 128 (keys and values), bf16, 16 blocks a stage, 2
    micro-batches. Per block and micro-batch: an all-gather before the forward and again before
    the backward, a reduce-scatter of the gradients after it; each rank's part b x s/C x KV/T x
    (128 + 128) x 2 bytes = 1 x 512 x 4 x 256 x 2 = 1,048,576."""
    split, groups = _rank(run_cli, tmp_path, "--cp", "2")
    gathers = {k: v for k, v in split.collectives.items() if k[0] == "ALL_GATHER"}
    scatters = {k: v for k, v in split.collectives.items() if k[0] == "REDUCE_SCATTER"}
    (gather,), (scatter,) = gathers.values(), scatters.values()
    assert gather[0] == 16 * 2 * 2
    assert scatter[0] == 16 * 2
    assert gather[1] == gather[0] * 1_048_576
    (group,) = {k[1] for k in gathers}
    assert groups[group] == [0, 2]  # the context axis: after the tensor axis (Megatron's tp-cp-...)


def test_memory_holds_half_the_activations(run_cli: Run, tmp_path: Path) -> None:
    def activations(folder: Path, *more: str) -> list[int]:
        done = run_cli(*BASE, *more, "-o", folder / "t")
        assert done.exit_code == 0
        meta = json.loads((folder / "t.et-meta.json").read_text())
        return [s["activations_bytes"] for s in meta["parallel"]["llm"]["memory"]]

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    whole, split = activations(tmp_path / "a"), activations(tmp_path / "b", "--cp", "2")
    assert split == [pytest.approx(a / 2, abs=1) for a in whole]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("llama-3-8b", "--cp", "3", "--seq-len", "1024"), "2 x 3 equal chunks"),
        (("mixtral-8x7b", "--cp", "2", "--ep", "2", "--dp", "2", "--seq-len", "256"), "experts"),
        (
            ("llama-3-8b", "--cp", "2", "--framework", "deepspeed", "--seq-len", "256"),
            "no context parallelism",
        ),
    ],
)
def test_what_context_parallelism_is_not_modelled_with_is_one_line(
    run_cli: Run, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    done = run_cli("translate", *args, "--format", "chakra-et", "-o", tmp_path / "t")
    assert done.exit_code == 2, done.output
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("dialect", ["simai", "astra-sim"])
def test_text_workloads_refuse_context_parallelism(run_cli: Run, tmp_path: Path, dialect: str) -> None:
    """Neither SimAI's columns nor ASTRA-sim 1.0's keywords have a context-parallel group: D310,
    nothing written (the traces carry it)."""
    out = tmp_path / "w.txt"
    done = run_cli(
        "translate", "llama-3-8b", "--cp", "2", "--dp", "2", "--seq-len", "256", "-d", dialect, "-o", out
    )
    assert done.exit_code == 1
    assert "D310" in done.stderr
    assert "context" in done.stderr
    assert not out.exists()
