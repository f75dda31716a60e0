"""ASTRA-sim 1.0's text (branch ASTRA-sim-1.0), and its JSON: one program for every NPU, one
micro-batch, each column's collective over the keyword's group. plan/text.py refuses the rest
(pipeline stages, micro-batches, transfers, a collective over another group: ZeRO-3's
parameter all-gathers), naming the output that can say it."""

from __future__ import annotations

from modtrans.formats import text, workload_json
from modtrans.formats.registry import Format, Output, register
from modtrans.plan import Plan, project
from modtrans.plan.sizes import Consumer
from modtrans.strategy import Parallelism
from modtrans.workload.model import Dialect, Workload


def projected(plan: Plan, parallel: Parallelism) -> Workload:
    """The workload file that says what `plan` says, sizes as ASTRA-sim reads them."""
    return project(plan, Consumer.ASTRA_SIM)


TEXT = register(
    Output(
        Format.TEXT,
        Dialect.ASTRA_SIM,
        "ASTRA-sim 1.0's workload text",
        projected,
        text.render,
        check=text.check,
    )
)
JSON = register(
    Output(
        Format.JSON,
        Dialect.ASTRA_SIM,
        "ASTRA-sim 1.0's workload JSON",
        projected,
        workload_json.render,
    )
)
