"""The outputs a translation writes, each a module that registers itself (registry.py).

registry.py      Format, Output, register / get / formats / outputs: what the pipeline asks
text.py          the text format's writer and checker, shared by its dialects
workload_json.py workload JSON's writer
astra_sim.py     ASTRA-sim 1.0's text and JSON (--dialect astra-sim)
simai.py         SimAI's text and JSON (--dialect simai), its keyed header
chakra_text.py   Chakra's text dialect and JSON (--dialect chakra)
chakra_et.py     Chakra execution traces (--format chakra-et)

A new format is one module calling `register(Output(...))`, imported below.
"""

from modtrans.formats import astra_sim, chakra_et, chakra_text, simai  # noqa: F401  (each registers)
from modtrans.formats.registry import (
    Format,
    Output,
    UnknownOutput,
    formats,
    get,
    outputs,
    register,
    unregister,
)

__all__ = ["Format", "Output", "UnknownOutput", "formats", "get", "outputs", "register", "unregister"]
