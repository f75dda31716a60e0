"""Chakra execution traces (mlcommons/chakra's protobuf, read by ASTRA-sim 2.x): one file per
NPU, written from the plan itself (chakra/write.py, outputs.trace_files), so every plan is
accepted and no workload is projected; the set is checked across ranks before it is written."""

from __future__ import annotations

from modtrans.formats.registry import Format, Output, register

TRACES = register(
    Output(Format.CHAKRA_ET, None, "one Chakra execution trace per NPU (ASTRA-sim 2.x)", traces=True)
)
