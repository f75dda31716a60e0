"""A big set's programs encoded in worker processes (chakra/ahead.py): the same bytes as the
encoder makes alone, each program made once, a worker's failure raised in the writer, the
workers gone once the set is made.

Real configuration: GPT-2's published config.json at TP 4 x PP 12 x DP 2 (96 ranks, above
ahead.RANKS and outputs.SELF_CHECK: the sampled self-check asks for programs out of turn)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import modtrans
from modtrans import chakra
from modtrans.chakra import ahead
from modtrans.strategy.program import StageProgram

GPT2 = Path(__file__).parent.parent / "fixtures" / "configs" / "gpt2.json"
LAYOUT = {"tp": 4, "pp": 12, "dp": 2, "global_batch": 24, "micro_batch": 1, "seq_len": 128}

forks = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers are forked on Linux only")


def _set(folder: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> dict[str, bytes]:
    monkeypatch.setattr(ahead, "cores", lambda: workers)
    folder.mkdir()
    result = modtrans.translate(GPT2, format="chakra-et", output=folder / "t", **LAYOUT)
    assert result.plan is not None
    assert result.plan.npus > ahead.RANKS
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@forks
def test_workers_write_the_bytes_one_process_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone = _set(tmp_path / "alone", monkeypatch, 1)
    pooled = _set(tmp_path / "pooled", monkeypatch, 2)
    assert len(alone) == 96 + 2  # the traces, the group file, the set's .meta.json
    assert pooled == alone
    assert not multiprocessing.active_children()  # the workers stopped and reaped


@forks
def test_each_program_is_built_once_by_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds in any process, counted in a file each appends to (a worker's memory is its own)."""
    log = tmp_path / "built"
    build = StageProgram.build

    def counted(self: StageProgram) -> Any:
        with open(log, "a") as out:
            out.write(f"{self.stage} {int(self.outline)} {os.getpid()}\n")
        return build(self)

    monkeypatch.setattr(StageProgram, "build", counted)
    _set(tmp_path / "t", monkeypatch, 2)
    lines = [line.split() for line in log.read_text().splitlines()]
    whole = sorted(int(stage) for stage, outline, _ in lines if outline == "0")
    assert whole == list(range(12))  # the sample's four too: a template made once serves both
    workers = {int(pid) for _, outline, pid in lines if outline == "0"}
    assert workers
    assert os.getpid() not in workers


def _fails(item: int) -> int:
    if item == 3:
        raise ValueError("item 3")
    return item * item


@forks
def test_a_workers_failure_is_raised_where_its_item_is_asked_for() -> None:
    made = ahead.start(_fails, range(6), workers=2, window=2)
    assert made is not None
    assert [made.get(i) for i in (5, 0, 1, 2)] == [25, 0, 1, 4]  # out of turn, then in order
    with pytest.raises(ValueError, match="item 3"):
        made.get(3)
    assert made.pool is None  # closed on the failure
    assert not multiprocessing.active_children()


@forks
def test_the_workers_stop_once_every_item_is_handed_over() -> None:
    made = ahead.start(_fails, [0, 1, 2], workers=2, window=4)
    assert made is not None
    assert [made.get(i) for i in (0, 1, 2)] == [0, 1, 4]
    assert made.pool is None
    with pytest.raises(KeyError):
        made.get(1)


def test_one_core_or_one_item_makes_no_workers() -> None:
    assert ahead.start(_fails, range(6), workers=1, window=2) is None
    assert ahead.start(_fails, [0], workers=2, window=2) is None


@forks
def test_a_trace_asked_for_again_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A program's last rank asked for twice: the workers made it once; this process makes it again."""
    monkeypatch.setattr(ahead, "cores", lambda: 2)
    model = modtrans.translate(GPT2, format="chakra-et", output=tmp_path / "t", **LAYOUT)
    assert model.plan is not None
    made = chakra.files(model.plan, tmp_path / "u", tick_ns=1.0, lazy=True)
    last = made[model.plan.npus - 1][1]
    first = b"".join(last())
    assert b"".join(last()) == first
    monkeypatch.setattr(ahead, "cores", lambda: 1)
    alone = chakra.files(model.plan, tmp_path / "u", tick_ns=1.0, lazy=True)[model.plan.npus - 1][1]
    assert first == b"".join(alone())
    del made, last
    gc.collect()
    assert not multiprocessing.active_children()  # the dropped encoder's workers stopped
