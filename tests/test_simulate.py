"""modtrans simulate: ASTRA-sim 2.x's results read back (a recorded run: fixtures/astra-sim), the
configurations written for it, and, where a binary is given (MODTRANS_ASTRA_SIM), a real run."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans import simulate

Run = Callable[..., Result]
LOG = Path(__file__).resolve().parents[1] / "fixtures" / "astra-sim" / "gpt2-tp4-dp2.log"
PIPELINE_LOG = LOG.with_name("gpt2-tp2-pp2-dp2.log")
PIPELINE = ("translate", "gpt2", "--tp", "2", "--pp", "2", "--dp", "2", "--global-batch", "8")
MADE_WITH = ("translate", "gpt2", "--tp", "4", "--dp", "2", "--time-unit", "us", "--format", "chakra-et")


def _traces(run_cli: Run, tmp_path: Path) -> Path:
    prefix = tmp_path / "t"
    assert run_cli(*MADE_WITH, "-o", prefix).exit_code == 0
    return prefix


def test_a_recorded_run_is_read_back_as_the_simulator_printed_it(run_cli: Run, tmp_path: Path) -> None:
    """Every rank's wall, GPU, communication and exposed time, as its `sys[i]` lines say (read
    here with a pattern of the test's own), and the iteration as the slowest rank's wall time."""
    prefix = _traces(run_cli, tmp_path)
    done = run_cli("simulate", prefix, "--from-log", LOG, "--format", "json", "--ranks")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    text = LOG.read_text()
    for row in shown["rows"]:
        r = int(row["label"].removeprefix("rank "))
        said = dict(re.findall(rf"sys\[{r}\], (Wall time|Comm time|GPU time): (\d+)", text))
        assert (row["wall"], row["comm"], row["gpu"]) == tuple(
            int(said[k]) for k in ("Wall time", "Comm time", "GPU time")
        )
        exposed = re.search(rf"sys\[{r}\] finished, \d+ cycles, exposed communication (\d+) cycles", text)
        assert exposed is not None
        assert row["exposed"] == int(exposed.group(1))
    assert len(shown["rows"]) == 8
    assert shown["finished"] is True
    assert shown["iteration_ns"] == max(row["wall"] for row in shown["rows"])
    table = run_cli("simulate", prefix, "--from-log", LOG)
    assert "iteration: " in table.stdout


def test_a_stages_tflops_is_the_iterations_to_the_digit(run_cli: Run, tmp_path: Path) -> None:
    """One stage whose ranks run the same FLOPs, its slowest the iteration: its row's TFLOP/s and
    MFU are the iteration line's, printed alike. The recorded run with every rank's wall set so
    that the rate, the traces' model FLOPs of a rank (chakra.summary, read off the files) over the
    wall, is 2.746 TFLOP/s: 2.7 in both. Before, the row kept round(2.746, 2) = 2.75 and the table
    printed 2.8 beside the iteration line's 2.7 (its MFU rounded to 4 places the same way)."""
    from modtrans.chakra.read import read
    from modtrans.chakra.summary import summarize

    prefix = _traces(run_cli, tmp_path)
    flops = {
        r.model_flops for r in summarize([read(p.read_bytes(), str(p)) for p in tmp_path.glob("t.*.et")])
    }
    assert len(flops) == 1  # T 4 x D 2: every rank the same share
    wall = round(flops.pop() / 2.746e3)  # FLOP / ns / 1e3 = TFLOP/s
    log = re.sub(r"Wall time: \d+", f"Wall time: {wall}", LOG.read_text())
    log = re.sub(r"finished, \d+ cycles", f"finished, {wall} cycles", log)
    doctored = tmp_path / "run.log"
    doctored.write_text(log)
    table = run_cli("simulate", prefix, "--from-log", doctored)
    assert table.exit_code == 0, table.output
    row = next(line for line in table.stdout.splitlines() if line.strip().startswith("stage 0"))
    said = re.search(r"; ([0-9.]+) TFLOP/s per GPU, MFU ([0-9.]+%)", table.stdout)
    assert said is not None
    assert row.split()[-2:] == ["2.7", said.group(2)]
    assert said.group(1) == "2.7"
    shown = json.loads(run_cli("simulate", prefix, "--from-log", doctored, "-f", "json").stdout)
    assert (shown["rows"][0]["tflops"], shown["rows"][0]["mfu"]) == (shown["tflops_per_gpu"], shown["mfu"])


def _said(text: str) -> dict[int, dict[str, int]]:
    """rank -> {"Wall time": ns, "GPU time": ns, ...} as the simulator's lines say."""
    out: dict[int, dict[str, int]] = {}
    for rank, name, value in re.findall(r"sys\[(\d+)\], ([A-Za-z ]+ time): (\d+)", text):
        out.setdefault(int(rank), {})[name] = int(value)
    return out


def test_a_pipeline_run_is_shown_per_stage_by_its_slowest_rank(run_cli: Run, tmp_path: Path) -> None:
    """Two stages of four ranks (ranks 0-3 the first: the mesh puts pipeline last): each row is
    its stage's slowest rank as the recorded run printed it; --ranks gives the 8 ranks."""
    prefix = tmp_path / "p"
    made = run_cli(*PIPELINE, "--time-unit", "us", "--format", "chakra-et", "-o", prefix)
    assert made.exit_code == 0, made.output
    said = _said(PIPELINE_LOG.read_text())
    done = run_cli("simulate", prefix, "--from-log", PIPELINE_LOG, "--format", "json")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert [(r["label"], r["ranks"]) for r in shown["rows"]] == [("stage 0", 4), ("stage 1", 4)]
    for row, ranks in zip(shown["rows"], (range(4), range(4, 8)), strict=True):
        slowest = max(ranks, key=lambda r: said[r]["Wall time"])
        assert (row["wall"], row["gpu"]) == (said[slowest]["Wall time"], said[slowest]["GPU time"])
    per_rank = json.loads(
        run_cli("simulate", prefix, "--from-log", PIPELINE_LOG, "-f", "json", "--ranks").stdout
    )
    assert [r["label"] for r in per_rank["rows"]] == [f"rank {r}" for r in range(8)]


def test_a_gpu_time_off_the_traces_by_more_than_a_microsecond_is_named() -> None:
    """Replay mode runs each node for its duration_micros: a rank's GPU time is their sum to 1 us.
    The plan here is the recorded run's own GPU times, one rank moved by 999 ns, one by 1,001."""
    said = _said(LOG.read_text())
    result = simulate.parse(LOG.read_text(), 8)
    compute = {r: v["GPU time"] for r, v in said.items()}
    compute[3] += 999
    compute[5] -= 1001
    planned = simulate.Planned(dict.fromkeys(range(8), 0), dict.fromkeys(range(8), 1), compute)
    assert simulate.replay_gaps(result, planned) == [(5, said[5]["GPU time"], compute[5])]


def test_a_run_where_a_rank_did_not_finish_is_a_finding(run_cli: Run, tmp_path: Path) -> None:
    """ASTRA-sim can exit 0 with ranks unfinished, and 134 with all finished: the finished lines
    decide. Two ranks' lines removed: exit 1, said in one line."""
    prefix = _traces(run_cli, tmp_path)
    partial = tmp_path / "partial.log"
    partial.write_text(
        "\n".join(line for line in LOG.read_text().splitlines() if not re.search(r"sys\[[67]\]", line))
    )
    done = run_cli("simulate", prefix, "--from-log", partial)
    assert done.exit_code == 1
    assert "6 of 8 ranks finished" in done.stderr


def test_a_log_of_more_ranks_than_the_trace_set_is_refused(run_cli: Run, tmp_path: Path) -> None:
    """Mixtral's recorded run has 16 ranks (sys[0] to sys[15]); read against GPT-2's 8 traces it
    printed '16 of 8 ranks finished' and a table of ranks the set does not have. Now refused in
    one line, exit 2, naming the highest rank the log has and the set's count."""
    prefix = _traces(run_cli, tmp_path)
    other = LOG.with_name("mixtral-tp1-pp2-ep4-vpp8.log")
    highest = max(int(r) for r in re.findall(r"sys\[(\d+)\] finished", other.read_text()))
    done = run_cli("simulate", prefix, "--from-log", other)
    assert done.exit_code == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1
    assert f"up to {highest}, this trace set has 8" in done.stderr


def test_a_log_of_other_traces_of_as_many_ranks_gives_no_mfu(run_cli: Run, tmp_path: Path) -> None:
    """Llama-3-8B's recorded run (8 ranks, fixtures/astra-sim/MANIFEST.md) read against GPT-2's 8
    traces: each rank's GPU time in the log (149 ms) is not the sum of its trace's compute nodes
    (GPT-2's, 8 ms), so the iteration is not these traces' and a TFLOP/s or MFU over it (GPT-2's
    FLOPs over Llama's time) means nothing: none is shown, the warning says why. The log's own
    times are still shown as it printed them."""
    prefix = _traces(run_cli, tmp_path)
    other = LOG.with_name("llama-3-8b-tp2-dp4-sp.log")
    said = _said(other.read_text())
    done = run_cli("simulate", prefix, "--from-log", other, "--format", "json", "--ranks")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert (shown["tflops_per_gpu"], shown["mfu"], shown["replay_exact"]) == (None, None, False)
    assert all(row["tflops"] is None and row["mfu"] is None for row in shown["rows"])
    assert [row["gpu"] for row in shown["rows"]] == [said[r]["GPU time"] for r in range(8)]
    assert "no TFLOP/s or MFU" in done.stderr
    table = run_cli("simulate", prefix, "--from-log", other)
    assert "MFU" not in table.stdout.splitlines()[-1]
    assert "%" not in table.stdout


def test_a_two_level_cluster_gets_an_implementation_per_dimension() -> None:
    """dgx-a100 for 16 NPUs: two nodes of 8 on NVSwitch at 300 GB/s, 25 GB/s between them (the
    line rates; ASTRA-sim's files get what NCCL achieves, test_nccl.py); the system configuration
    lists a ring per dimension (with one, ASTRA-sim 2.x ignores the second)."""
    net = simulate.network("dgx-a100", 16)
    assert (net.dims, net.line_rate) == ((8, 2), (300.0, 25.0))
    files = simulate.configurations(net)
    system = json.loads(files["system.json"])
    assert system["all-reduce-implementation"] == ["ring", "ring"]
    assert "npus_count: [ 8, 2 ]" in files["network.yml"]
    with pytest.raises(simulate.SimulateError, match="not whole nodes"):
        simulate.network("dgx-a100", 12)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--network", "torus"), "--network torus"),
        (("--astra-sim", "/nonexistent/astra"), "not an executable"),
    ],
)
def test_unusable_options_are_one_line(
    run_cli: Run, tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    prefix = _traces(run_cli, tmp_path)
    done = run_cli(
        "simulate", prefix, *args, "--astra-sim", os.environ.get("MODTRANS_ASTRA_SIM", "/bin/true")
    )
    if args[0] == "--astra-sim":
        done = run_cli("simulate", prefix, *args)
    assert done.exit_code == 2
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not os.environ.get("MODTRANS_ASTRA_SIM"), reason="no ASTRA-sim 2.x binary given")
@pytest.mark.parametrize(
    "layout",
    [MADE_WITH[:-4], PIPELINE, (*PIPELINE, "--schedule", "dualpipe"), (*PIPELINE, "--schedule", "dualpipev")],
    ids=["tp4-dp2", "tp2-pp2-dp2", "dualpipe", "dualpipev"],
)
def test_a_real_run_finishes_every_rank_and_replays_the_traces_exactly(
    run_cli: Run, tmp_path: Path, layout: tuple[str, ...]
) -> None:
    """Every rank finishes, and each rank's GPU time is its trace's compute to 1 us (issue 25)."""
    prefix = tmp_path / "r"
    assert run_cli(*layout, "--time-unit", "us", "--format", "chakra-et", "-o", prefix).exit_code == 0
    done = run_cli("simulate", prefix, "--network", "switch:8:300", "--format", "json")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert shown["finished"] is True
    assert shown["replay_exact"] is True
