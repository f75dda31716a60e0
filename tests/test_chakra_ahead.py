"""A big set's programs checked and written by worker processes (chakra/ahead.py): the same bytes
as one process writes, each program made once and only in a worker, a worker's failure (its
exception, its death, a write the kernel refuses) raised in this process with nothing left
behind, the workers gone once the set is written or dropped.

Real configuration: GPT-2's published config.json at TP 4 x PP 12 x DP 2 (96 ranks, above
ahead.RANKS and outputs.SELF_CHECK: the sampled self-check runs in the workers)."""

from __future__ import annotations

import gc
import multiprocessing
import os
import resource
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
    assert whole == list(range(12))  # the sample's four too: a template made for the check is written
    workers = {int(pid) for _, outline, pid in lines if outline == "0"}
    assert workers
    assert os.getpid() not in workers


def _square(item: int) -> int:
    if item == 3:
        raise ValueError("item 3")
    if item == 4:
        os._exit(1)  # a worker killed (out of memory, say)
    return item * item


@forks
def test_each_worker_answers_in_the_order_asked() -> None:
    workers = ahead.start(_square, 2)
    assert workers is not None
    for item in (5, 0, 1):
        workers.send(item % 2, item)
    assert [workers.receive(1), workers.receive(0), workers.receive(1)] == [25, 0, 1]
    workers.close()
    assert not multiprocessing.active_children()


@forks
def test_a_workers_exception_is_raised_where_its_answer_is_received() -> None:
    workers = ahead.start(_square, 2)
    assert workers is not None
    workers.send(0, 2)
    workers.send(1, 3)
    assert workers.receive(0) == 4
    with pytest.raises(ValueError, match="item 3"):
        workers.receive(1)
    assert not workers.processes  # closed on the failure
    assert not multiprocessing.active_children()


@forks
def test_a_worker_that_dies_is_an_os_error() -> None:
    workers = ahead.start(_square, 2)
    assert workers is not None
    workers.send(0, 4)
    with pytest.raises(OSError, match="stopped"):
        workers.receive(0)
    assert not multiprocessing.active_children()


def test_one_core_makes_no_workers() -> None:
    assert ahead.start(_square, 1) is None


@forks
def test_a_write_the_kernel_refuses_in_a_worker_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file-size limit (RLIMIT_FSIZE, inherited by the workers; Python ignores SIGXFSZ, so a
    write past it fails with EFBIG) below a trace's size: the translation fails with F003 naming
    the write, and no trace, and no temporary, is left in the folder."""
    monkeypatch.setattr(ahead, "cores", lambda: 2)
    folder = tmp_path / "t"
    folder.mkdir()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))
    try:
        with pytest.raises(modtrans.DiagnosticError) as failed:
            modtrans.translate(GPT2, format="chakra-et", output=folder / "t", **LAYOUT)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert [d.code for d in failed.value.diagnostics] == ["F003"]
    assert "too large" in failed.value.diagnostics[0].message
    assert list(folder.iterdir()) == []
    assert not multiprocessing.active_children()


@forks
def test_a_set_dropped_before_it_is_written_stops_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked (the workers started, each holding its sampled programs), never written: dropping
    the set stops them."""
    monkeypatch.setattr(ahead, "cores", lambda: 2)
    model = modtrans.translate(GPT2, format="chakra-et", output=tmp_path / "t", **LAYOUT)
    assert model.plan is not None
    made = chakra.files(model.plan, tmp_path / "u", tick_ns=1.0, lazy=True)
    assert chakra.checked(made[:-1], [0, model.plan.npus - 1]) == []
    assert len(multiprocessing.active_children()) == 2
    del made
    gc.collect()
    assert not multiprocessing.active_children()


def _none_in_a_daemon(_: int) -> bool:
    return ahead.start(_square, 2) is None


@forks
def test_a_daemonic_process_makes_no_workers() -> None:
    """multiprocessing refuses a daemon's children (a Pool's worker translating a big set)."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_none_in_a_daemon, [0]) == [True]


@forks
def test_workers_replacing_a_set_keep_each_files_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers make the temporaries: a trace they replace keeps the mode it had (0600 here),
    the others get 0666 less the umask, as the shell makes a file."""
    first = _set(tmp_path / "t", monkeypatch, 2)
    kept = tmp_path / "t" / "t.7.et"
    kept.chmod(0o600)
    monkeypatch.setattr(ahead, "cores", lambda: 2)
    modtrans.translate(GPT2, format="chakra-et", output=tmp_path / "t" / "t", **LAYOUT)
    assert {p.name: p.read_bytes() for p in sorted((tmp_path / "t").iterdir())} == first
    assert kept.stat().st_mode & 0o777 == 0o600
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "t" / "t.8.et").stat().st_mode & 0o777 == 0o666 & ~umask


@forks
def test_writing_a_big_set_counts_each_programs_ranks_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writing task's steps are the workers' answers: twelve programs of eight ranks, then
    the group file and the .meta.json, one step each; they add up to the task's total."""
    from modtrans import progress

    steps: list[tuple[object, int]] = []

    class Heard:
        def start(self, label: str, total: int | None) -> object:
            steps.append((label, total or 0))
            return label

        def step(self, handle: object, amount: int) -> None:
            steps.append((handle, amount))

        def stop(self, handle: object) -> None:
            pass

    with progress.listening(Heard()):
        _set(tmp_path / "t", monkeypatch, 2)
    writing = [amount for label, amount in steps if label == "writing"]
    assert writing[0] == 96 + 2  # the total
    assert sorted(writing[1:]) == [1, 1, *[8] * 12]
    assert sum(writing[1:]) == writing[0]
