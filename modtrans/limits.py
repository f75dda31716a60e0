"""The largest values modtrans plans for. Each is far beyond any real system, and each bounds
something modtrans builds one of per unit (per rank, per micro-batch, per iteration), so that a
mistyped option (an extra digit, 1e23) is a one-line error, not a plan that never finishes, a
traceback, or a workload whose fields overflow.

Checked by the library (strategy, LLM layouts, extraction, the Chakra writer), so that every way
in gets them; the command line names them in its errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

NPUS = 1 << 20
"""NPUs in the simulated system (1,048,576). The largest systems simulated today have about 10^5;
the plan keeps a table of every rank, and a Chakra trace set has a file per rank."""

MICRO_BATCHES = 1 << 16
"""Micro-batches per iteration (gradient-accumulation steps, 65,536): an LLM schedule lists each
one, on every pipeline stage. Megatron-LM runs use at most a few thousand."""

PASSES = 1 << 12
"""Training iterations in one Chakra trace (4,096): each repeats every node of the rank's program."""

DIM = (1 << 31) - 1
"""A model input's dimension (--batch, --input-shape, an LLM's micro-batch): 2^31 - 1. Beyond it
no input fits an accelerator, and compute times would overflow the workload's 64-bit fields."""

BLOCKS = 10_000
"""Transformer blocks in one stack of a configuration (num_hidden_layers, T5's num_decoder_layers,
a vision tower's depth; 10,000): the deepest published models have about 130 (Llama 3.1 405B:
126). The IR has some fifteen layers a block, each costed and planned: 10^7 blocks (a mistyped
digit the dimension bound let through) took minutes and gigabytes before one line came out."""

EXPERTS = 1 << 16
"""Routed experts of one mixture-of-experts block (65,536): DeepSeek-V3 has 256; --per-expert
builds a layer per expert and projection."""

UNPACKED_BYTES = 4 << 30
"""A gzip-compressed input unpacked (a profiler trace, .json.gz: 4 GiB): a trace of one training
step is tens of MB; beyond this it is a bomb, not a measurement."""

DTYPE_BYTES = 16
"""Bytes per parameter element (--dtype-bytes): 16 holds fp64 with a complex part, or fp32
weights with Adam's two moments and a master copy."""


def input_error(batch: int | None, shapes: Mapping[str, Sequence[object]]) -> str | None:
    """The error for a --batch or --input-shape dimension above DIM, or None."""
    given: list[tuple[str, object]] = [("--batch", batch)] if batch is not None else []
    given += [(f"--input-shape {name}", d) for name, dims in shapes.items() for d in dims]
    for option, value in given:
        if isinstance(value, int):
            too_large = at_most(option, value, DIM, "elements in a dimension")
            if too_large:
                return too_large
    return None


def at_most(option: str, value: int, limit: int, what: str) -> str | None:
    """The error for `option value` above `limit` (None when it is not): one line, with the limit."""
    if value <= limit:
        return None
    return f"{option} {value:,} is more than modtrans plans for: at most {limit:,} {what}"
