"""Chakra's text dialect (mlcommons/chakra's text converter, the path into ASTRA-sim 2.x), and
its JSON: ASTRA-sim 1.0's projection and sizes (the converter feeds ASTRA-sim 2.x, which reads
an all-gather's one-rank part: plan/sizes.py), the dialect's own header and checks
(workload/write.py, workload/checks.py)."""

from __future__ import annotations

from modtrans.formats import text, workload_json
from modtrans.formats.astra_sim import projected
from modtrans.formats.registry import Format, Output, register
from modtrans.workload.model import Dialect

TEXT = register(Output(Format.TEXT, Dialect.CHAKRA, "Chakra's text dialect", projected, text.render))
JSON = register(
    Output(Format.JSON, Dialect.CHAKRA, "Chakra's workload JSON", projected, workload_json.render)
)
