"""modtrans simulate on workload text files: ASTRA-sim 1.0 (simulate/astra1.py) and SimAI's
analytical simulator (simulate/simai.py). Recorded runs (fixtures/astra-sim-1, fixtures/simai) are
read back and checked against the CSV cells read here; where a binary is given (MODTRANS_ASTRA_SIM_1,
MODTRANS_SIMAI), a real run."""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans.simulate import astra1, network
from tests.test_astra_sim_1_reads import astra_sim_1_charges, reruns

Run = Callable[..., Result]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ASTRA1 = FIXTURES / "astra-sim-1" / "gpt2-hybrid-transformer"
SIMAI = FIXTURES / "simai" / "gpt2-tp2-dp4"


def _shown(run_cli: Run, base: Path, *more: str) -> dict[str, object]:
    done = run_cli(
        "simulate", f"{base}.txt", "--from-log", f"{base}.EndToEnd.csv", "--network", "switch:8:300",
        "--npus", "8", "--format", "json", *more,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    shown: dict[str, object] = json.loads(done.stdout)
    return shown


def test_a_recorded_astra_sim_1_run_is_read_back_as_it_wrote_it(run_cli: Run) -> None:
    """Its EndToEnd.csv's first layer row carries the totals (us); every layer of our file has its
    row, in order, and the iteration is the `all passes finished` time of its log (ns)."""
    shown = _shown(run_cli, ASTRA1)
    rows = list(csv.reader(ASTRA1.with_suffix(".EndToEnd.csv").read_text().splitlines()))
    header = rows[0]
    first = rows[1]
    assert shown["simulator"] == "ASTRA-sim 1.0"
    assert shown["finished"] is True
    for key, column in (("total_us", "workload finished at"), ("compute_us", "total comp")):
        assert shown[key] == float(first[header.index(column)])
    assert shown["exposed_us"] == float(first[header.index("total exposed comm")])
    names = [line.split()[0] for line in ASTRA1.with_suffix(".txt").read_text().splitlines()[2:]]
    assert [layer["name"] for layer in shown["layers"]] == names  # type: ignore[attr-defined]
    finished = re.search(r"all passes finished at time: (\d+)", ASTRA1.with_suffix(".log").read_text())
    assert finished is not None
    assert abs(float(shown["total_us"]) * 1000 - int(finished.group(1))) < 1  # type: ignore[arg-type]


def test_a_recorded_simai_run_is_read_back_as_it_wrote_it(run_cli: Run) -> None:
    """SimAI's summary row: `total comp`, `total exposed comm` and `Total time`, each `value
    (share)` in us; the total is the compute plus the exposed communication."""
    shown = _shown(run_cli, SIMAI)
    text = SIMAI.with_suffix(".EndToEnd.csv").read_text().splitlines()
    values = [cell.strip().split(" ")[0] for cell in text[1].split(",")]
    assert shown["simulator"] == "SimAI analytical"
    assert (shown["compute_us"], shown["exposed_us"], shown["total_us"]) == tuple(
        float(v) for v in values[-3:]
    )
    assert shown["total_us"] == float(values[-3]) + float(values[-2])
    names = [line.split()[0] for line in SIMAI.with_suffix(".txt").read_text().splitlines()[2:]]
    assert [layer["name"] for layer in shown["layers"]] == names  # type: ignore[attr-defined]


def test_a_file_the_simulator_would_abort_on_is_refused_before_it_runs(run_cli: Run, tmp_path: Path) -> None:
    """D313 (ASTRA-sim 1.0 aborts on an update time of 0 after a collective): exit 1, one line."""
    bad = tmp_path / "w.txt"
    bad.write_text((FIXTURES / "workloads" / "invalid" / "update_zero_after_a_collective.txt").read_text())
    done = run_cli("simulate", bad, "--npus", "8", "--network", "switch:8:300", "--astra-sim-1", "/bin/true")
    assert done.exit_code == 1
    assert "D313" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("header", "code"),
    [
        ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2", "V240"),
        ("DATA model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8", "D314"),
    ],
    ids=["astra-sim-1-fwd-in-bckwd-without-lists", "simai-data"],
)
def test_a_file_the_simulator_cannot_run_is_refused_before_it_runs(
    run_cli: Run, tmp_path: Path, header: str, code: str
) -> None:
    """A warning in validate (an older simulator may read the file), but the simulator run cannot:
    ASTRA-sim 1.0 reads the layer count in place of FWD_IN_BCKWD's missing lists and no pass
    finishes; SimAI aborts (SIGFPE) on a keyword other than a transformer's. Exit 1, one line."""
    bad = tmp_path / "w.txt"
    bad.write_text(f"{header}\n1\nl\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLREDUCE\t8\t1\n")
    done = run_cli(
        "simulate", bad, "--npus", "8", "--network", "switch:8:300", "--astra-sim-1", "/bin/true",
        "--simai", "/bin/true",
    )  # fmt: skip
    assert done.exit_code == 1
    assert code in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_collective_astra_sim_1_would_wrap_is_refused_before_it_runs(run_cli: Run, tmp_path: Path) -> None:
    """D315 (tests/test_checks.py has the measurements): ASTRA-sim 1.0 would abort on the size, or
    run it as no communication at all. Exit 1, one line, the simulator not run (/bin/true)."""
    bad = tmp_path / "w.txt"
    bad.write_text("DATA\n1\nl\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLREDUCE\t4294967296\t1\n")
    done = run_cli("simulate", bad, "--npus", "8", "--network", "switch:8:300", "--astra-sim-1", "/bin/true")
    assert done.exit_code == 1
    assert "D315" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_two_level_cluster_is_two_switch_dimensions_for_astra_sim_1() -> None:
    files = astra1.configurations(network("dgx-a100", 16))
    topology = json.loads(files["network.json"])
    assert topology["units-count"] == [8, 2]
    assert topology["link-bandwidth"] == [227.0, 24.0]  # what NCCL achieves (network.py)
    assert topology["topologies-per-dim"] == ["Switch", "Switch"]
    assert "all-reduce-implementation: ring_ring\n" in files["system.txt"]


@pytest.mark.skipif(not os.environ.get("MODTRANS_ASTRA_SIM_1"), reason="no ASTRA-sim 1.0 binary given")
@pytest.mark.parametrize(
    "layout",
    [
        ("-p", "HYBRID_TRANSFORMER", "--model-parallel-group", "4"),
        ("--tp", "2", "--sp"),
        ("--tp", "2", "--recompute", "full"),
    ],
)
def test_a_real_astra_sim_1_run_finishes(run_cli: Run, tmp_path: Path, layout: tuple[str, ...]) -> None:
    """And computes what the transcription of its loops says (tests/test_astra_sim_1_reads.py):
    every compute column, FWD_IN_BCKWD's reruns of the blocks' forwards, the optimizer step."""
    out = tmp_path / "w.txt"
    args = (
        ("translate", "gpt2", *layout, "-o", out)
        if layout[0] == "-p"
        else ("translate", "gpt2", *layout, "--dp", "4", "-o", out)
    )
    assert run_cli(*args, *(("--npus", "8") if layout[0] == "-p" else ())).exit_code == 0
    done = run_cli("simulate", out, "--network", "switch:8:300", "--format", "json")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert shown["finished"] is True
    assert shown["total_us"] >= shown["compute_us"] > 0
    assert abs(shown["compute_us"] - astra_sim_1_charges(out.read_text()).compute / 1e3) <= 1


@pytest.mark.skipif(not os.environ.get("MODTRANS_SIMAI"), reason="no SimAI binary given")
def test_a_real_simai_run_finishes(run_cli: Run, tmp_path: Path) -> None:
    """And computes what the traces of the same layout do, the optimizer step included."""
    out, traces_us = _simai_and_traces(run_cli, tmp_path, "gpt2", "--tp", "2", "--dp", "4")
    done = run_cli("simulate", out, "--network", "switch:8:300", "--format", "json")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert shown["finished"] is True
    assert abs(shown["total_us"] - shown["compute_us"] - shown["exposed_us"]) <= 1
    assert abs(shown["compute_us"] - traces_us) <= 1


def _simai_and_traces(run_cli: Run, at: Path, *layout: str) -> tuple[Path, float]:
    """A layout's SimAI text, and its Chakra traces' first-stage compute (us) by the estimate."""
    text, traces = at / "s.txt", at / "et"
    traces.mkdir()
    assert run_cli("translate", *layout, "-d", "simai", "-o", text).exit_code == 0
    assert run_cli("translate", *layout, "--format", "chakra-et", "-o", traces / "x").exit_code == 0
    done = run_cli("estimate", traces / "x", "--format", "json")
    assert done.exit_code == 0, done.output
    return text, float(json.loads(done.stdout)["stages"][0]["compute_s"]) * 1e6


@pytest.mark.parametrize(
    "layout",
    [
        ("gpt2", "--tp", "2", "--dp", "4"),
        ("gpt2", "--tp", "2", "--pp", "2", "--dp", "2", "--global-batch", "8"),
        ("gpt2", "--tp", "2", "--dp", "4", "--recompute", "full"),
    ],
    ids=["tp-dp", "pipeline-ga4", "recompute"],
)
def test_simai_text_computes_the_optimizer_step_once(
    run_cli: Run, tmp_path: Path, layout: tuple[str, ...]
) -> None:
    """SimAI's analytical simulator never waits a line's update field (it issues no collective
    event: Layer::issue_*_comm return under ANALYTI; measured on SimAI 1.6 f5efb5a9, a second in
    every line's field changed no result), and sums the compute columns: the optimizer step is in
    them, once an iteration (not in every micro-batch copy), so the file computes what the traces
    of the same layout do (their UPDATE node; each trace node's time is whole microseconds). With
    full recomputation, the forwards its FWD_IN_BCKWD lists rerun too (SimAI reads each list's first
    index: one segment; the blocks alone, as the traces recompute them)."""
    text, traces_us = _simai_and_traces(run_cli, tmp_path, *layout)
    lines = text.read_text().splitlines()
    rows = [line.split() for line in lines[2:]]
    assert all(row[11] == "0" for row in rows)
    head = lines[0].split()

    def first(key: str) -> tuple[int, ...]:  # SimAI's reading: tokens[i + 2], the first index only
        i = head.index(key) if key in head else -1
        return (int(head[i + 2]),) if i >= 0 and int(head[i + 1]) > 0 else ()

    again = reruns(first("checkpoints:"), first("checkpoint_initiates:"), len(rows))
    file_us = sum(int(row[2]) + int(row[5]) + int(row[8]) for row in rows) / 1e3
    file_us += sum(int(rows[i][2]) for i in again) / 1e3
    assert abs(file_us - traces_us) <= 0.5 * len(rows)


def test_results_without_the_columns_read_are_one_line_not_zeros(run_cli: Run, tmp_path: Path) -> None:
    """A CSV that is not the simulator's (or a version naming its columns otherwise): exit 2, one
    line naming the column, where before every time read as 0."""
    renamed = tmp_path / "e.csv"
    text = ASTRA1.with_suffix(".EndToEnd.csv").read_text().replace("total comp", "compute total")
    renamed.write_text(text)
    done = run_cli(
        "simulate", f"{ASTRA1}.txt", "--from-log", renamed, "--npus", "8", "--network", "switch:8:300"
    )
    assert done.exit_code == 2
    assert "`total comp`" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
