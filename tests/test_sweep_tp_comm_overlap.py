"""`modtrans sweep --tp-comm-overlap on,off`: Megatron-Core's userbuffers (strategy/llm/userbuffers.py)
searched like the distributed optimizer. Each layout with sequence parallelism tried with and
without it, the others refused once under Megatron's rule (megatron/training/arguments.py at
core_r0.8.0, validate_args: "Tensor parallel communication/GEMM overlap can happen only when
sequence parallelism is enabled"); the fast tier's rows against the exact tier (the translated
plan walked, as `modtrans estimate` walks it); the flag carried to what the finalists translate
and to the cache's key; on real built-in Llama-3-8B."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans import estimate, pipeline
from modtrans.request import prepare, request_of
from modtrans.strategy.llm.options import Layout, Recompute, Schedule
from modtrans.sweep import space
from modtrans.sweep.finalists import translation_options
from modtrans.sweep.tasks import Setup, key_of

Run = Callable[..., Result]
# Llama-3-8B's config.json (the built-in): 32 layers; 16 H100s, 16 sequences of 2,048 tokens (1 to 8
# micro-batches a rank: each row's exact tier a plan of a few thousand operations)
CLUSTER = ["--gpus", "16", "--global-batch", "16", "--seq-len", "2048", "--device", "h100"]
SPACE = ["--pp", "1,2", "--vpp", "1", "--cp", "1", "--micro-batch", "1", "--recompute", "selective,full"]
SPACE += ["--distributed-optimizer", "on"]


def _rows(prefix: Path) -> list[dict[str, str]]:
    with open(f"{prefix}.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _exact(row: dict[str, str]) -> estimate.Estimate:
    """The exact tier of a row's layout: the plan `modtrans translate` of its columns builds
    (pipeline.translate_checked, as api.run calls it, without writing and checking its traces),
    walked."""
    options: dict[str, Any] = {"npus": 16, "global_batch": 16, "seq_len": 2048, "device": "h100"}
    options |= {name: int(row[name]) for name in ("tp", "pp", "cp", "micro_batch", "zero")}
    options |= {name: row[name] == "True" for name in ("sp", "tp_comm_overlap")}
    options |= {"recompute": row["recompute"], "schedule": row["schedule"]}
    prepared = prepare(request_of("llama-3-8b", {**options, "format": "chakra-et", "output": "unused/"}))
    plan = pipeline.translate_checked(prepared.request.model, prepared.options).plan
    assert plan is not None
    return estimate.plan(plan, network="hgx-h100")


def test_a_sweep_tries_the_flag_where_megatron_allows_it_and_the_fast_tier_holds(
    run_cli: Run, tmp_path: Path
) -> None:
    done = run_cli(
        "sweep", "llama-3-8b", *CLUSTER, *SPACE, "--tp", "1,2,4", "--tp-comm-overlap", "on,off",
        "--simulate", "none", "--no-cache", "--jobs", "1", "-o", tmp_path / "t",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = _rows(tmp_path / "t")
    summary = json.loads((tmp_path / "t.json").read_text())
    by_layout: dict[tuple[str, ...], dict[bool, dict[str, str]]] = {}
    for r in rows:
        key: tuple[str, ...] = (r["tp"], r["pp"], r["vpp"], r["micro_batch"], r["recompute"], r["zero"])
        by_layout.setdefault(key, {})[r["tp_comm_overlap"] == "True"] = r
    # (a) every T > 1 layout (SP on) both ways; T = 1 only without, once for each P and recomputation
    assert {k[0] for k, both in by_layout.items() if set(both) == {True, False}} == {"2", "4"}
    assert {k[0] for k, both in by_layout.items() if set(both) == {False}} == {"1"}
    refused = {rule: n for rule, n in summary["refused_by_rule"].items() if "--tp-comm-overlap" in rule}
    assert list(refused.values()) == [4]
    assert "needs --sp" in next(iter(refused))
    assert all(r["sp"] == "True" for r in rows if r["tp_comm_overlap"] == "True")
    assert len(rows) == 4 + 8 + 8  # T = 1 once, T = 2 and 4 twice, for each P and recomputation
    shown = [line.split() for line in done.output.splitlines() if " TP" in line and " M1 " in line]
    assert len(shown) == 10  # the best ten, labelled: TPO where the row has the flag
    assert [("TPO" in words) for words in shown] == [r["tp_comm_overlap"] == "True" for r in rows[:10]]
    for key, both in by_layout.items():
        if len(both) < 2:
            continue
        off, on = _exact(both[False]), _exact(both[True])
        # (b) what userbuffers do, whatever wins: the blocks' SP collectives leave the
        # communication lane (less exposed), and each fused GEMM still does all its work (TE's
        # comm_gemm_overlap.h: the chunks run one after another) so compute does not shrink
        assert on.exposed_comm_s < off.exposed_comm_s, key
        assert on.compute_s >= off.compute_s, key
        # (c) the fast tier within 5 % of the exact tier (issue 38), on and off
        for flag, exact in ((False, off), (True, on)):
            assert float(both[flag]["estimate_s"]) == pytest.approx(exact.iteration_s, rel=0.05), (key, flag)


def test_the_flag_is_off_unless_asked_and_refused_where_userbuffers_have_no_node() -> None:
    """Default: off only (issue 38's search space does not name it). `on` on a device with no
    NVLink node preset (userbuffers.NODES: B200 none) is refused under that rule, not estimated."""
    import modtrans

    common: dict[str, Any] = {"global_batch": 64, "seq_len": 2048, "tp": "2", "pp": "1", "cp": "1"}
    common |= {"micro_batch": "1", "recompute": "selective", "no_cache": True, "jobs": 1}
    plain = modtrans.sweep("llama-3-8b", gpus=16, device="h100", **common)
    assert plain
    assert not any(r.tp_comm_overlap for r in plain)
    b200 = modtrans.sweep("llama-3-8b", gpus=16, device="b200", tp_comm_overlap="on,off", **common)
    assert b200
    assert not any(r.tp_comm_overlap for r in b200)
    assert all(r.error is None for r in b200)


@pytest.mark.parametrize(
    "layout",
    [
        Layout(npus=16, tp=2, pp=2, sp=True, tp_comm_overlap=True, global_batch=64, zero=1),
        Layout(
            npus=16,
            tp=4,
            pp=2,
            vpp=4,
            schedule=Schedule.INTERLEAVED,
            sp=True,
            micro_batch=2,
            global_batch=64,
            recompute=Recompute.FULL,
        ),
        Layout(npus=16, tp=1, pp=1, global_batch=64, zero=1),
    ],
)
def test_what_a_finalist_translates_is_its_layout(layout: Layout) -> None:
    """A finalist's `translate` options (finalists.translation_options) read back as the very
    layout the sweep estimated, every field (the flag among them), and its cache key is its own."""
    options = translation_options(layout, {"seq_len": 2048, "device": "h100"})
    prepared = prepare(request_of("llama-3-8b", {**options, "format": "chakra-et", "output": "unused/"}))
    read = prepared.options.parallel.layout
    assert read is not None
    assert dataclasses.asdict(read) == dataclasses.asdict(layout)
    setup = Setup("llama-3-8b", "h100", "hgx-h100", (("seq_len", 2048),))
    if not layout.sp:
        return
    flipped = dataclasses.replace(layout, tp_comm_overlap=not layout.tp_comm_overlap)
    assert key_of(setup, layout, "estimate", None) != key_of(setup, flipped, "estimate", None)


def test_the_space_tries_the_flag_after_the_optimizer() -> None:
    """Enumeration alone: each SP layout once per value, a T = 1 layout's `on` refused by the rule."""
    found = space.enumerate_layouts(
        space.Space.of(tp=(1, 2), pp=(1,), cp=(1,), micro_batch=(1,), recompute=(Recompute.FULL,),
                       distributed_optimizer=(True,), tp_comm_overlap=(True, False)),
        npus=8, global_batch=64, model=space.Model(blocks=32),
    )  # fmt: skip
    assert sorted((x.tp, x.tp_comm_overlap) for x in found.layouts) == [(1, False), (2, False), (2, True)]
    assert sum(found.refused.values()) == 1


@pytest.mark.skipif(not os.environ.get("MODTRANS_ASTRA_SIM"), reason="no ASTRA-sim 2.x binary given")
def test_a_finalist_with_the_flag_is_simulated_with_it(run_cli: Run, tmp_path: Path) -> None:
    """The two rows of one layout, with and without userbuffers, simulated on ASTRA-sim 2.x: each
    finalist's exact tier equals its simulation (the fused nodes are compute: walked as run), and
    the two simulations differ (the flag reached the translation)."""
    done = run_cli(
        "sweep", "llama-3-8b", *CLUSTER, "--tp", "4", "--pp", "1", "--cp", "1", "--micro-batch", "1",
        "--recompute", "selective", "--distributed-optimizer", "on", "--tp-comm-overlap", "on,off",
        "--no-cache", "--simulate", "all", "-o", tmp_path / "s",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    rows = _rows(tmp_path / "s")
    assert sorted(r["tp_comm_overlap"] for r in rows) == ["False", "True"]
    for r in rows:
        assert float(r["exact_s"]) == pytest.approx(float(r["simulated_s"]), rel=1e-4)
        assert float(r["estimate_s"]) == pytest.approx(float(r["simulated_s"]), rel=0.05)
    assert rows[0]["simulated_s"] != rows[1]["simulated_s"]
