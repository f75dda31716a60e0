"""Chakra's text dialect (mlcommons/chakra's text converter, the path into ASTRA-sim 2.x), and
its JSON: ASTRA-sim 1.0's projection and sizes (the converter feeds ASTRA-sim 2.x, which reads
an all-gather's one-rank part: plan/sizes.py), the dialect's own header and checks
(workload/write.py, workload/checks.py). Its compute times are microseconds: the converter copies
each into duration_micros, read as such by ASTRA-sim 2.x (reference/chakra-contract.md, Units;
astra-sim#207)."""

from __future__ import annotations

from modtrans.cost import Unit
from modtrans.formats import text, workload_json
from modtrans.formats.astra_sim import projected
from modtrans.formats.registry import Format, Output, Ticks, register
from modtrans.workload.model import Dialect

MICROSECONDS = Ticks(
    Unit.US,
    "Chakra's text converter copies them into duration_micros, which ASTRA-sim 2.x reads as microseconds",
    "leave --time-unit out (us, the Chakra dialect's) for ASTRA-sim 2.x",
)

TEXT = register(
    Output(
        Format.TEXT,
        Dialect.CHAKRA,
        "Chakra's text dialect",
        projected,
        text.render,
        ticks=MICROSECONDS,
        check=text.check,
    )
)
JSON = register(
    Output(
        Format.JSON,
        Dialect.CHAKRA,
        "Chakra's workload JSON",
        projected,
        workload_json.render,
        ticks=MICROSECONDS,
    )
)
