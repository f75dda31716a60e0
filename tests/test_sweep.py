"""`modtrans sweep` and `modtrans.sweep`: the layouts enumerated against Megatron-LM's own rules
(transcribed below from megatron/training/arguments.py, validate_args, and the attention and
transformer-block modules), the memory filter against Megatron's bytes per parameter, the table,
its cache and picture, the option table's rows, a stopped sweep's table, and (with a binary) the
finalists simulated on ASTRA-sim 2.x, on real built-in models."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

import modtrans
from modtrans import pipeline, rules, table
from modtrans.ir.document import ModelIR
from modtrans.plan.model import StageMemory
from modtrans.request import UsageError
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.footprint import Footprint
from modtrans.strategy.llm.options import Layout, LayoutError, Recompute
from modtrans.sweep import space, tasks
from modtrans.sweep.rows import Row, read_json

Run = Callable[..., Result]
ROOT = Path(__file__).resolve().parents[1]

# Llama-3-8B's config.json (the built-in): 32 layers, 32 query heads, 8 key/value heads
LAYERS, HEADS, GROUPS = 32, 32, 8
SMALL = ["--gpus", "16", "--global-batch", "64", "--seq-len", "2048", "--device", "h100"]


def _megatron_layouts(npus: int, batch: int, seq: int, micro_batches: tuple[int, ...]) -> int:
    """Megatron-LM's accepted (T, C, P, V, M) for Llama-3-8B: world size divisible by T x C x P
    (initialize_model_parallel), heads and query groups by T (attention.py: divide), layers by
    P and, interleaved, by P x V with P > 1 and the micro-batches a multiple of P (validate_args),
    the global batch by M x D (validate_args), the sequence by 2C (context parallelism's load
    balancing); x 3 recomputations x 2 distributed optimizer settings (SP is on where T > 1)."""
    count = 0
    for t in (d for d in range(1, npus + 1) if npus % d == 0 and HEADS % d == 0 and GROUPS % d == 0):
        for c in (d for d in range(1, npus // t + 1) if (npus // t) % d == 0 and seq % (2 * d) == 0):
            for p in (
                d for d in range(1, npus // (t * c) + 1) if (npus // (t * c)) % d == 0 and LAYERS % d == 0
            ):
                dp = npus // (t * c * p)
                for m in micro_batches:
                    if batch % (m * dp):
                        continue
                    ga = batch // (m * dp)
                    chunks = [1] + [
                        v for v in range(2, LAYERS + 1) if p > 1 and LAYERS % (p * v) == 0 and ga % p == 0
                    ]
                    count += len(chunks) * 3 * 2
    return count


def _footprint() -> Footprint:
    from modtrans.request import prepare, request_of

    options = prepare(request_of("llama-3-8b", {"seq_len": 2048})).options

    def ir_of(layout: Layout) -> ModelIR:
        ir, _ = pipeline.extract_checked(
            "llama-3-8b", input_shapes=options.input_shapes, vocabulary_multiple=layout.vocabulary_multiple
        )
        assert ir is not None
        return ir

    return Footprint(ir_of)


def test_every_layout_megatron_accepts_is_enumerated_and_no_other() -> None:
    found = space.enumerate_layouts(
        space.Space.of(micro_batch=(1, 2, 4)),
        npus=16,
        global_batch=64,
        model=space.Model(blocks=LAYERS),
        check=_footprint().check,
    )
    assert len(found.layouts) == _megatron_layouts(16, 64, 2048, (1, 2, 4))
    assert len({(x.tp, x.cp, x.pp, x.vpp, x.micro_batch, x.recompute, x.zero) for x in found.layouts}) == len(
        found.layouts
    )
    assert found.refused  # T = 16 and the rest, each counted under its rule
    assert any("key/value heads" in rule for rule in found.refused)


@pytest.mark.parametrize(
    ("spec", "values"), [("1,2,4,8", (1, 2, 4, 8)), ("1:4", (1, 2, 3, 4)), ("8:10,1,2", (1, 2, 8, 9, 10))]
)
def test_a_gridis_a_list_or_a_range(spec: str, values: tuple[int, ...]) -> None:
    assert rules.integers(spec, "--tp") == values


@pytest.mark.parametrize("spec", ["", "0", "4:2", "1,x", "1:"])
def test_a_bad_gridis_one_line_and_exit_2(spec: str, run_cli: Run) -> None:
    done = run_cli("sweep", "llama-3-8b", *SMALL, "--tp", spec)
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1
    assert "--tp" in done.output


def test_the_sweeps_options_are_the_tables_rows() -> None:
    """`modtrans sweep`'s options, `modtrans.sweep`'s keywords and table.SWEEP: one set."""
    import inspect

    import typer

    from modtrans.cli import app

    command = typer.main.get_command(app).commands["sweep"]  # type: ignore[attr-defined]
    rows = {row.name for row in table.SWEEP}
    assert {p.name for p in command.params} - {"model", "quiet", "help"} == rows
    assert set(inspect.signature(modtrans.sweep).parameters) - {"model", "frame"} == rows


def test_a_layout_over_memory_is_dropped_by_megatrons_bytes_per_parameter(tmp_path: Path) -> None:
    """Llama-3-8B (8,030,261,248 parameters, Meta's model card: 8B) on 16 H100s at T = P = 1:
    without the distributed optimizer 18 B a parameter (theoretical_memory_usage.py), 134.6 GiB,
    more than the 80 GiB; with it 6 + 12 / 16 B, 50.5 GiB, which fits."""
    rows = modtrans.sweep(
        "llama-3-8b", gpus=16, global_batch=64, seq_len=2048, device="h100", tp="1", pp="1", cp="1",
        micro_batch="1", recompute="full", no_cache=True, jobs=1,
    )  # fmt: skip
    assert [r.distributed_optimizer for r in rows] == [True]
    parameters = 8_030_261_248
    assert rows[0].memory_gib >= (6 + 12 / 16) * parameters / 2**30
    assert 18 * parameters / 2**30 > 80


@pytest.mark.parametrize(
    ("framework", "stages"),
    [("megatron", (0, 1)), ("deepspeed", (0, 1, 2, 3)), ("fsdp", (0, 2, 3)), ("nemo", (1,))],
)
def test_a_sweep_tries_every_zero_stage_its_framework_has(framework: str, stages: tuple[int, ...]) -> None:
    """The stages each framework runs: Megatron-LM's distributed optimizer on or off
    (--use-distributed-optimizer, ZeRO-1), DeepSpeed's zero_optimization.stage 0-3
    (deepspeed/runtime/zero/config.py), FSDP's ShardingStrategy NO_SHARD, SHARD_GRAD_OP and
    FULL_SHARD (torch/distributed/fsdp/api.py: ZeRO-0, 2, 3; no ZeRO-1), NeMo's
    distributed_fused_adam (ZeRO-1: its launcher's yamls all name it)."""
    found = space.enumerate_layouts(
        space.Space.of(tp=(1,), pp=(1,), cp=(1,), micro_batch=(1,), recompute=(Recompute.FULL,)),
        npus=8, global_batch=64, model=space.Model(blocks=LAYERS), framework=Framework(framework),
    )  # fmt: skip
    assert tuple(sorted(x.zero for x in found.layouts)) == stages
    assert not found.refused
    fsdp3 = modtrans.sweep(
        "llama-3-8b", gpus=8, global_batch=64, seq_len=2048, device="h100", framework="fsdp", tp="1", pp="1",
        cp="1", micro_batch="1", recompute="full", zero="3", no_cache=True, jobs=1,
    )  # fmt: skip
    assert [(r.zero, r.label.split()[-1]) for r in fsdp3] == [(3, "Z3")]


@pytest.mark.parametrize(
    ("framework", "context"),
    [
        ("megatron", True),
        ("nemo", True),
        ("megatron-2022", False),
        ("flash-attn", False),
        ("deepspeed", False),
        ("fsdp", False),
        ("torchtitan", False),
    ],
)
def test_a_sweep_tries_context_parallelism_only_where_its_framework_runs_it(
    framework: str, context: bool
) -> None:
    """--cp by default: Megatron-Core's --context-parallel-size (core_r0.8.0, megatron/training/
    arguments.py) and NeMo 24.07 over it (NeMo-Framework-Launcher 8325688, llama3_70b.yaml:
    context_parallel_size 2) run it; Megatron-LM of 2022 (fc7f4f0: no context parallelism in
    megatron/), flash-attention's 4a6eaa9f training scripts and the DeepSpeed and FSDP families (not
    modelled) do not, and their sweeps neither try it nor count its refusal. Before, a DeepSpeed
    sweep of 8 GPUs tried C = 2, 4 and 8, each refused under "context parallelism is Megatron-LM's",
    and megatron-2022's and flash-attn's ran it."""
    found = space.enumerate_layouts(
        space.Space.of(tp=(1,), pp=(1,), micro_batch=(1,), recompute=(Recompute.FULL,)),
        npus=8, global_batch=64, model=space.Model(blocks=LAYERS), framework=Framework(framework),
    )  # fmt: skip
    assert {x.cp for x in found.layouts} == ({1, 2, 4, 8} if context else {1})
    assert not any("context parallelism" in rule for rule in found.refused)
    if not context:
        with pytest.raises(LayoutError, match=f"--framework {framework} has no context parallelism"):
            Layout(npus=8, cp=2, framework=Framework(framework))


@pytest.mark.parametrize(
    ("framework", "label"),
    [("megatron", "DO"), ("megatron-2022", "DO"), ("deepspeed", "Z1"), ("nemo", "Z1"), ("flash-attn", "Z1")],
)
def test_a_zero_1_row_is_labelled_by_its_framework(framework: str, label: str) -> None:
    """ "DO" is Megatron-LM's --use-distributed-optimizer (megatron/training/arguments.py at
    core_r0.8.0; megatron/arguments.py at fc7f4f0, 2022); DeepSpeed's ZeRO stage 1
    (deepspeed/runtime/zero/config.py, zero_optimization.stage), NeMo's Apex DistributedFusedAdam
    and flash-attn's ZeroRedundancyOptimizer are none of it: Z1, as Z2 and Z3 are labelled. Before,
    every ZeRO-1 row read DO, a DeepSpeed sweep's too."""
    layout = Layout(npus=8, zero=1, global_batch=8, framework=Framework(framework))
    row = tasks.row_of(tasks.Setup("m", None, "hgx-h100", ()), layout, [StageMemory(0, 2**30, 0, 0, 0)])
    assert row.label.split()[-1] == label
    assert row.framework == framework
    assert [r.label for r in read_json(json.dumps({"rows": [row.__dict__]}))] == [row.label]


def test_zero_and_the_distributed_optimizer_together_are_one_line_and_exit_2(run_cli: Run) -> None:
    done = run_cli("sweep", "llama-3-8b", *SMALL, "--zero", "3", "--distributed-optimizer", "on")
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1
    assert "--zero" in done.output


def _table(prefix: Path) -> list[dict[str, str]]:
    with open(f"{prefix}.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_table_the_picture_and_the_cache(run_cli: Run, tmp_path: Path) -> None:
    args = ("sweep", "llama-3-8b", *SMALL, "--tp", "2,4", "--pp", "1:2", "--cp", "1", "--micro-batch", "1")
    done = run_cli(*args, "--cache", tmp_path / "cache", "-o", tmp_path / "a")
    assert done.exit_code == 0, done.output
    rows = _table(tmp_path / "a")
    document = json.loads((tmp_path / "a.json").read_text())
    assert len(rows) == len(document["rows"]) == document["fit"] > 0
    assert set(rows[0]) == set(Row.__dataclass_fields__)
    times = [float(r["estimate_s"]) for r in rows]
    assert times == sorted(times)
    assert [int(r["rank"]) for r in rows] == list(range(1, len(rows) + 1))
    for r in rows:  # the Pareto front, by brute force: no row with no more memory is faster
        beaten = any(
            float(o["memory_gib"]) <= float(r["memory_gib"])
            and float(o["tokens_per_s"]) > float(r["tokens_per_s"])
            for o in rows
        )
        assert (r["pareto"] == "True") is not beaten
        tokens = 64 * 2048
        assert float(r["tokens_per_s"]) == pytest.approx(tokens / float(r["estimate_s"]), rel=1e-5)
    picture = ElementTree.parse(tmp_path / "a.svg").getroot()
    circles = picture.findall(".//{http://www.w3.org/2000/svg}circle")
    assert len(circles) == len(rows) + 3  # a point a row, three in the legend
    run_cli(*args, "--cache", tmp_path / "cache", "-o", tmp_path / "b")
    assert json.loads((tmp_path / "b.json").read_text())["from_cache"] == len(rows)
    assert _table(tmp_path / "b") == rows


def test_the_api_returns_rows_or_a_dataframe() -> None:
    pandas = pytest.importorskip("pandas")
    options: dict[str, Any] = {
        "gpus": 8,
        "global_batch": 16,
        "seq_len": 1024,
        "device": "h100",
        "tp": (2,),
        "cp": "1",
    }
    rows = modtrans.sweep("llama-3-8b", micro_batch=1, no_cache=True, jobs=1, **options)
    frame = modtrans.sweep("llama-3-8b", micro_batch=1, no_cache=True, jobs=1, frame=True, **options)
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame["estimate_s"]) == [r.estimate_s for r in rows]
    with pytest.raises(UsageError):
        modtrans.sweep("llama-3-8b", gpus=8, no_cache=True)  # no global batch: nothing to compare
    with pytest.raises(TypeError):
        modtrans.sweep("llama-3-8b", gpus=8, global_batch=16, npus=8)


def test_a_stopped_sweep_leaves_a_consistent_table_and_resumes(tmp_path: Path) -> None:
    """SIGINT while estimating: the process dies of it, the table holds whole rows of what was
    estimated, and the next run takes those from the cache."""
    args = [sys.executable, "-m", "modtrans", "sweep", "llama-3-8b", *SMALL, "--jobs", "2"]
    args += ["--cache", str(tmp_path / "cache"), "-o", str(tmp_path / "t")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # SIGINT at its default in the child: a runner started in the background (`cmd &` in a script)
    # ignores it, the child inherits that, and modtrans keeps an ignored signal ignored (stopping.py)
    child = subprocess.Popen(
        args,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    database = tmp_path / "cache" / "sweep.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        try:  # read-only, never waiting on a lock: the probe must not hold the sweep up
            db = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=0)
            try:
                if db.execute("select count(*) from result").fetchone()[0] > 0:
                    break
            finally:
                db.close()
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    child.send_signal(signal.SIGINT)
    _, said = child.communicate(timeout=120)
    assert child.returncode in (-signal.SIGINT, 130), said.decode()
    assert (tmp_path / "t.json").exists(), said.decode()
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["stopped"] is True
    assert all(r["estimate_s"] is not None or r["error"] for r in document["rows"])
    assert _table(tmp_path / "t")[0].keys() == set(Row.__dataclass_fields__)
    with sqlite3.connect(database) as db:
        kept = db.execute("select count(*) from result").fetchone()[0]
    assert kept >= len(document["rows"]) > 0


def test_a_sweep_stopped_after_its_estimates_keeps_every_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C while the engine closes (its workers ending, after the last estimate): the table
    is written with every row, stopped, rather than lost (as a signal there once did)."""
    from modtrans.sweep import engines, request

    class Closing(engines.Inline):
        def close(self) -> None:
            raise KeyboardInterrupt

    options: dict[str, Any] = {"gpus": 8, "global_batch": 16, "seq_len": 2048, "device": "h100"}
    options |= {"tp": "2,4", "cp": "1", "no_cache": True, "jobs": 1}
    whole = modtrans.sweep("llama-3-8b", **options)
    monkeypatch.setattr(engines, "start", lambda *_: Closing())
    with pytest.raises(KeyboardInterrupt):
        request.run_request("llama-3-8b", {**options, "output": tmp_path / "t"})
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["stopped"] is True
    assert read_json((tmp_path / "t.json").read_text()) == whole
    assert len(whole) > 4


@pytest.mark.slow
def test_dask_gives_the_pools_table(tmp_path: Path) -> None:
    """The same sweep on a local Dask cluster of two workers and on the process pool."""
    pytest.importorskip("distributed")
    options: dict[str, Any] = {
        "gpus": 16,
        "global_batch": 64,
        "seq_len": 2048,
        "device": "h100",
        "tp": "2,4",
        "cp": "1",
    }
    pool = modtrans.sweep("llama-3-8b", no_cache=True, jobs=2, **options)
    dask = modtrans.sweep("llama-3-8b", no_cache=True, jobs=2, engine="dask", **options)
    assert pool == dask
    assert len(pool) > 10


@pytest.mark.skipif(not os.environ.get("MODTRANS_ASTRA_SIM"), reason="no ASTRA-sim 2.x binary given")
def test_the_finalists_are_simulated(run_cli: Run, tmp_path: Path) -> None:
    """--simulate top:2: the two best by the estimate run on ASTRA-sim 2.x, their rows' rates of
    the simulated iteration."""
    done = run_cli(
        "sweep", "llama-3-8b", *SMALL, "--tp", "2", "--pp", "1", "--cp", "1", "--micro-batch", "1,2",
        "--recompute", "selective", "--no-cache", "--simulate", "top:2", "-o", tmp_path / "s",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = _table(tmp_path / "s")
    simulated = [r for r in rows if r["finalist"] == "True"]
    assert len(simulated) == 2
    assert all(r["tier"] == "simulation" and float(r["simulated_s"]) > 0 for r in simulated)
    for r in simulated:
        assert float(r["tokens_per_s"]) == pytest.approx(64 * 2048 / float(r["simulated_s"]), rel=1e-5)


def test_the_agreement_is_kendalls_tau_and_the_largest_error() -> None:
    """Estimates 1, 2, 3 s against simulations 1, 3, 2 s: of the three pairs two are ordered alike
    and one not, tau = (2 - 1) / 3 (Kendall 1938; with no ties tau-b is tau-a); the errors against
    the simulation are 0, |2 / 3 - 1| and |3 / 2 - 1|, the largest 1/2."""
    from modtrans.sweep.rows import agreement

    def row(estimate: float, simulated: float | None) -> Row:
        fields = {"model": "m", "gpus": 8, "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "vpp": 1}
        fields |= {"dp_replicate": 1}
        fields |= {"schedule": "1f1b", "micro_batch": 1, "micro_batches": 1, "recompute": "none"}
        fields |= {
            "distributed_optimizer": True,
            "zero": 1,
            "sp": False,
            "tp_comm_overlap": False,
            "memory_gib": 1.0,
            "memory_per_stage_gib": [1.0],
        }
        return Row(**fields, estimate_s=estimate, simulated_s=simulated)  # type: ignore[arg-type]

    found = agreement([row(1, 1), row(2, 3), row(3, 2), row(4, None)])
    assert found == {
        "simulated": 3,
        "largest_error": pytest.approx(1 / 2),
        "kendall_tau": pytest.approx(1 / 3),
    }
    assert agreement([row(1, 1)]) is None
    # ties (Kendall 1945, tau-b): estimates 1, 1, 2 against 1, 2, 3: two pairs concordant, the
    # tied one neither, over sqrt(2 untied by the estimate x 3 by the simulation)
    assert agreement([row(1, 1), row(1, 2), row(2, 3)])["kendall_tau"] == pytest.approx(2 / 6**0.5)  # type: ignore[index]
    # GPT-2 under DeepSpeed on 8 H100s, its three finalists (ZeRO-2 and ZeRO-1 rows of one time,
    # 2026-12-07): the orders agree in every pair, which tau-a said as 0.67
    gpt2 = [(0.020038297, 0.020037929), (0.020038297, 0.020037929), (0.020160463, 0.020159932)]
    assert agreement([row(e, s) for e, s in gpt2])["kendall_tau"] == 1.0  # type: ignore[index]
    assert agreement([row(1, 1), row(1, 2)])["kendall_tau"] is None  # type: ignore[index]


def test_dask_without_its_extra_is_one_line_and_exit_2(run_cli: Run) -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("distributed is installed")
    done = run_cli("sweep", "llama-3-8b", *SMALL, "--tp", "2", "--engine", "dask", "--no-cache")
    assert done.exit_code == 2
    assert (
        done.output.strip()
        == "modtrans: --engine dask needs Dask's distributed: pip install 'modtrans[distributed]'"
    )


@pytest.mark.parametrize("output", ["missing/t", "folder/", ""])
def test_an_output_that_cannot_be_written_is_one_line_before_the_sweep(
    output: str, run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-o PREFIX's folder must be there (a typo is not made), and PREFIX names files, not a folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    done = run_cli("sweep", "llama-3-8b", *SMALL, "--tp", "2", "--no-cache", "-o", output)
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1
    assert done.output.startswith(f"modtrans: -o {output}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


def test_the_table_is_never_written_over_the_model(run_cli: Run, tmp_path: Path) -> None:
    """`sweep config.json -o config`: PREFIX.json would be the configuration itself. Refused in
    one line before the sweep, the file untouched, as translate refuses to write over an input
    (outputs.refuse_inputs); before, the table's JSON replaced the model's configuration."""
    config = tmp_path / "gpt2.json"
    config.write_bytes((Path(__file__).parents[1] / "fixtures" / "configs" / "gpt2.json").read_bytes())
    before = config.read_bytes()
    done = run_cli("sweep", config, *SMALL[:4], "--seq-len", "128", "--no-cache", "-o", tmp_path / "gpt2")
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1
    assert "refusing to overwrite the model's file" in done.output
    assert config.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpt2.json"]


@pytest.mark.parametrize(
    ("gpus", "said"), [("0", "--gpus '0'"), ("2000000", "at most 1,048,576"), ("1:100", "at most 64")]
)
def test_a_cluster_beyond_what_modtrans_plans_for_is_one_line(gpus: str, said: str, run_cli: Run) -> None:
    done = run_cli("sweep", "llama-3-8b", "--gpus", gpus, "--global-batch", "64", "--no-cache")
    assert done.exit_code == 2
    assert len(done.output.strip().splitlines()) == 1
    assert said in done.output


def test_a_reason_that_holds_only_for_now_is_tried_again_and_a_lasting_one_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, run_cli: Run
) -> None:
    """A finalist not simulated for want of free memory (the real check, asked for 10^12 nodes) is
    in the row and simulated again by the same sweep run again; one whose translation failed is
    kept: the second run does not try it. The summary counts it as a finalist not simulated."""
    from modtrans.sweep import finalists

    binary = tmp_path / "astra"
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    tried: list[object] = []
    answers: list[str | None] = [finalists._short(10**12), "not translated: no plan"]

    def finalist(task: object) -> str | None:
        tried.append(task)
        return answers[len(tried) - 1] if len(tried) <= len(answers) else "not translated: no plan"

    monkeypatch.setattr(finalists, "simulate_task", finalist)
    options: dict[str, Any] = {"gpus": 16, "global_batch": 64, "seq_len": 2048, "device": "h100"}
    options |= {"tp": "2", "pp": "1", "cp": "1", "micro_batch": "1", "recompute": "selective"}
    options |= {"jobs": 1, "simulate": "top:1", "astra_sim": str(binary), "cache": str(tmp_path / "cache")}
    first = [r for r in modtrans.sweep("llama-3-8b", **options) if r.finalist]
    assert isinstance(answers[0], finalists.Passing)
    assert [r.error for r in first] == [answers[0]]
    second = [r for r in modtrans.sweep("llama-3-8b", **options) if r.finalist]
    assert [r.error for r in second] == ["not translated: no plan"]
    third = [r for r in modtrans.sweep("llama-3-8b", **options) if r.finalist]
    assert [r.error for r in third] == ["not translated: no plan"]
    assert len(tried) == 2
    prefix = tmp_path / "t"
    argv = ["--gpus", "16", "--global-batch", "64", "--seq-len", "2048", "--device", "h100", "--tp", "2"]
    argv += ["--pp", "1", "--cp", "1", "--micro-batch", "1", "--recompute", "selective", "--jobs", "1"]
    argv += ["--simulate", "top:1", "--astra-sim", str(binary), "--cache", str(tmp_path / "cache")]
    done = run_cli("sweep", "llama-3-8b", *argv, "-o", prefix)
    assert done.exit_code == 0, done.output
    assert "0 simulated, 1 not simulated (each row says why)" in done.output
    summary = json.loads(prefix.with_suffix(".json").read_text())
    assert (summary["simulated"], summary["not_simulated"]) == (0, 1)


def test_a_sweeps_precision_is_the_file_stating_that_dtype(tmp_path: Path) -> None:
    """--precision reaches every layout a sweep estimates: Llama-2-7B's published float16 file swept
    at fp32 ranks and sizes its layouts as the same file stating float32 (ir/precision.py)."""
    import json

    source = Path(__file__).resolve().parent.parent / "fixtures" / "hf" / "llama-2-7b-hf.json"
    stated = tmp_path / source.name
    stated.write_text(json.dumps({**json.loads(source.read_text()), "torch_dtype": "float32"}))
    options: dict[str, Any] = {"gpus": 8, "global_batch": 16, "seq_len": 1024, "device": "h100"}
    grid: dict[str, Any] = {"tp": (2,), "pp": (2,), "cp": "1", "micro_batch": 1, "no_cache": True, "jobs": 1}

    def table(model: Path, **more: Any) -> list[tuple[Any, ...]]:
        rows = modtrans.sweep(str(model), **options, **grid, **more)
        return [(r.dp, r.vpp, r.schedule, r.recompute, r.sp, r.memory_gib, r.estimate_s) for r in rows]

    cast = table(source, precision="fp32")
    assert cast == table(stated)
    assert cast != table(source)  # its own float16: the H100's 16-bit GEMM rate, 2-byte weights


def test_an_hsdp_rows_label_names_its_replicas() -> None:
    """A sweep told --dp-replicate 2 labels its rows HSDP2 (hsdp.py's Degree.label), where the
    degree's token in capitals read DP_REPLICATE2."""
    rows = modtrans.sweep(
        "llama-3-8b", gpus=16, global_batch=64, seq_len=2048, device="h100", framework="torchtitan", tp="1",
        pp="1", cp="1", micro_batch="1", recompute="full", zero="3", dp_replicate="2", no_cache=True, jobs=1,
    )  # fmt: skip
    assert [r.label for r in rows] == ["TP1 PP1 DP16 HSDP2 M1 full Z3"]


@pytest.mark.skipif(sys.platform != "linux", reason="the platform's start methods: fork is Linux's default")
def test_the_pool_forks_only_before_torch_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker forked after torch started its intra-op threads can wait for ever on their locks:
    a BLOOM sweep (its configuration read through transformers) hung in its workers' first torch
    op. Without torch the workers are forked (they start with the model read); with it they come
    from a fresh server process."""
    from modtrans.sweep import engines

    def method(pool: engines.Pool) -> str:
        context = pool._pool._mp_context
        pool.close()
        assert context is not None
        return str(context.get_start_method())

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert method(engines.Pool(1)) == "fork"
    monkeypatch.setitem(sys.modules, "torch", object())
    assert method(engines.Pool(1)) == "forkserver"
