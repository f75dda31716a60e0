"""A sweep's row against `modtrans translate` of the same options: the fast tier's iteration the
exact tier's (the translated plan walked, which the project holds equal to ASTRA-sim 2.x) within
tests/test_estimate.py's 0.3 %, the memory of every stage the plan's to the row's 1 MiB, and the
TFLOP/s per GPU within 2 %, on built-in models across the layout options a sweep varies (PP with
V, EP, CP, SP, ZeRO 0-3, HSDP, each recomputation, M > 1, --tp-comm-overlap). The options given
to translate are read off the row here, by the table's column names, not by the sweep's own
mapping (finalists.translation_options)."""

from __future__ import annotations

from typing import Any

import pytest

import modtrans
from modtrans import estimate
from modtrans.api import run
from modtrans.request import prepare, request_of
from modtrans.sweep.rows import Row

NETWORK = "hgx-h100"
# (model, the options every layout shares, the search space narrowed to a few layouts)
SWEEPS: list[Any] = [
    # PP with interleaving, SP, selective and full recomputation, ZeRO-1 and 0, M 1 and 2
    ("llama-3-8b", {"gpus": 16, "global_batch": 32},
     {"tp": "2", "pp": "2", "cp": "1", "vpp": "1,2", "micro_batch": "1,2", "recompute": "selective,full"}),
    # CP beside TP, M > 1
    ("llama-3-8b", {"gpus": 16, "global_batch": 32},
     {"tp": "2", "pp": "1", "cp": "2", "micro_batch": "2", "recompute": "none,full"}),
    # EP carved from the data ranks, interleaved stages
    ("mixtral-8x7b", {"gpus": 32, "global_batch": 64},
     {"tp": "1", "pp": "2", "cp": "1", "ep": "4,8", "vpp": "1,16", "micro_batch": "1", "recompute": "none"}),
    ("deepseek-moe-16b", {"gpus": 16, "global_batch": 32},
     {"tp": "2", "pp": "1", "cp": "1", "ep": "2,4", "micro_batch": "2", "recompute": "selective"}),
    # FSDP's ZeRO-2 and 3, HSDP's replicas
    ("llama-3-8b", {"gpus": 16, "global_batch": 32, "framework": "fsdp"},
     {"tp": "1", "pp": "1", "cp": "1", "dp_replicate": "1,2", "micro_batch": "1", "recompute": "full"}),
    # DeepSpeed's stages 0-3
    ("gpt2", {"gpus": 8, "global_batch": 16, "framework": "deepspeed"},
     {"tp": "1", "pp": "1", "cp": "1", "micro_batch": "2", "recompute": "none"}),
    # Transformer Engine's userbuffers, interleaved
    ("llama-3-70b", {"gpus": 64, "global_batch": 128},
     {"tp": "4", "pp": "4", "cp": "1", "vpp": "10", "micro_batch": "2", "recompute": "selective",
      "distributed_optimizer": "on", "tp_comm_overlap": "on"}),
    # Known: the fast tier 0.94 % over the exact tier (2.657212 s against 2.632486 s; ASTRA-sim
    # 2.x: 2.632486 s) with SP, selective recomputation and stages across nodes, 32 micro-batches
    # (none, or no SP, or 8 GPUs: equal to 0.001 %); the stages' compute and the last stage's wall
    # agree, the first stages' bubbles do not. Left for whoever owns estimate/pipeline.py.
    pytest.param(
        "llama-3-8b", {"gpus": 16, "global_batch": 64},
        {"tp": "2", "pp": "4", "cp": "1", "vpp": "1", "micro_batch": "1", "recompute": "selective",
         "distributed_optimizer": "off"},
        marks=pytest.mark.xfail(strict=True, reason="fast tier 0.94 % over the exact tier"),
    ),
    # DeepSpeed's and FSDP's data-parallel reductions under SP (Place.TAIL, issued after every
    # step): the fast tier ran them inside the last backward, each unit's as one, holding the lane
    # its blocking collectives wait for: 1.6 % over at T 4, D 2 (23.423 against 23.054 ms), FSDP
    # 0.57 % over at T 2, D 4
    ("gpt2", {"gpus": 8, "global_batch": 16, "framework": "deepspeed"},
     {"tp": "4", "pp": "1", "cp": "1", "micro_batch": "1,8", "recompute": "none,selective"}),
    ("gpt2", {"gpus": 8, "global_batch": 16, "framework": "fsdp"},
     {"tp": "2", "pp": "1", "cp": "1", "micro_batch": "4", "recompute": "none"}),
]  # fmt: skip
ROW_OPTIONS = ("tp", "pp", "cp", "ep", "dp_replicate", "schedule", "micro_batch", "recompute", "zero", "sp")


def _exact(model: str, shared: dict[str, Any], row: Row) -> tuple[estimate.Estimate, list[int]]:
    """The row's layout translated (the exact tier) from the row's own columns, and its plan's
    memory per stage in bytes."""
    options = {**shared, "npus": row.gpus, "global_batch": shared["global_batch"]}
    options |= {name: getattr(row, name) for name in ROW_OPTIONS}
    options |= {"tp_comm_overlap": row.tp_comm_overlap, "vpp": row.vpp if row.vpp > 1 else None}
    prepared = prepare(request_of(model, {**options, "format": "chakra-et", "output": "unused/"}))
    plan = run(prepared).plan
    assert plan is not None, options
    walked = estimate.plan(plan, network=NETWORK, tick_ns=prepared.options.cost.clock.tick_ns)
    return walked, [m.total for m in plan.memory]


@pytest.mark.parametrize(
    ("model", "given", "narrowed"), SWEEPS, ids=[f"sweep{i}" for i in range(len(SWEEPS))]
)
def test_a_sweeps_rows_are_what_translate_and_estimate_say(
    model: str, given: dict[str, Any], narrowed: dict[str, Any]
) -> None:
    rows = modtrans.sweep(model, network=NETWORK, no_cache=True, jobs=1, **given, **narrowed)
    assert rows
    shared = {k: v for k, v in given.items() if k != "gpus"}
    for row in rows:
        assert row.error is None, row
        exact, memory = _exact(model, shared, row)
        assert row.estimate_s == pytest.approx(exact.iteration_s, rel=0.003), row.label
        assert row.memory_per_stage_gib == [round(m / 2**30, 3) for m in memory], row.label
        assert row.tflops_per_gpu == pytest.approx(exact.tflops_per_gpu, rel=0.02), row.label
