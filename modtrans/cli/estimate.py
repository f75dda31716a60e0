"""modtrans estimate: a trace set's iteration as ASTRA-sim 2.x's analytical backend would time it,
without running it: per pipeline stage the wall, compute, communication, exposed communication and
bubble, then tokens/s, TFLOP/s per GPU and MFU (modtrans/estimate/)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from modtrans.cli.common import Command, commands


@commands.command(cls=Command)
def estimate(
    prefix: Annotated[
        str, typer.Argument(help="A trace set translate wrote (PREFIX.<rank>.et, PREFIX.et-meta.json).")
    ],
    network: Annotated[
        str,
        typer.Option(
            help="switch:NPUS:GBPS, dgx-a100, selene, hgx-h100 or jean-zay-a100 (nodes of 8 GPUs), as "
            "simulate takes."
        ),
    ] = "dgx-a100",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
) -> None:
    """Estimate a trace set's iteration time without the simulator.

    What `modtrans simulate` would report on the same network, from the traces: each collective
    by the analytical backend's ring formulas, the ranks' operations issued as its workload layer
    issues them. Exit 0, or 2 for unusable input.

    \b
    Examples:
      modtrans translate gpt2 --tp 2 --pp 2 --dp 2 --global-batch 8 --format chakra-et -o traces/
      modtrans estimate traces/gpt2
      modtrans estimate traces/gpt2 --network hgx-h100 --format json
    """
    from modtrans.estimate import EstimateError, trace_set
    from modtrans.estimate.result import document, lines

    if fmt not in ("table", "json"):
        _stop(f"--format {fmt}: table or json")
    try:
        found = trace_set(prefix, network=network)
    except EstimateError as error:
        _stop(str(error))
    if fmt == "json":
        sys.stdout.write(json.dumps(document(found), indent=1) + "\n")
        return
    for line in lines(found):
        typer.echo(line)


def _stop(message: str) -> typer.Exit:
    typer.echo(f"modtrans: {message}", err=True)
    raise typer.Exit(2)
