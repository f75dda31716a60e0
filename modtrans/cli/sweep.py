"""`modtrans sweep`: the option table's sweep options (modtrans/table.py: SWEEP) given to the
library's sweep (modtrans/sweep/), what it found said: how many layouts each rule and the memory
dropped, the best ten, the files written."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

import typer

from modtrans import report, table
from modtrans.cli.common import Command, Model, Quiet, _refused, commands
from modtrans.cli.options import command, given
from modtrans.outputs import said
from modtrans.request import UsageError

SHOWN = 10


def sweep(ctx: typer.Context, model: Model, quiet: Quiet = False, **values: Any) -> None:
    """Find the fastest layouts of a model on a cluster.

    Every layout Megatron-LM accepts on --gpus GPUs within the search space, those that do not
    fit the device's memory dropped, the rest estimated (the fast tier, `modtrans.estimate`), the
    best simulated on ASTRA-sim 2.x (--simulate top:K), ranked. Results are kept (--cache): a
    sweep run again, or stopped and run again, does only what is left. Exit 0 with a table, 1
    when no layout fits or a worker process was lost (what finished is written), 2 for unusable
    options.

    \b
    Examples:
      modtrans sweep llama-3-8b --gpus 16 --global-batch 64 --tp 2,4 --pp 1:2 --cp 1 -o llama8b
      modtrans sweep llama-3-8b --gpus 8,16 --global-batch 64 --tp 2 --cp 1 --against gpus -o by-gpus
    """
    from modtrans.sweep.engines import WorkerError
    from modtrans.sweep.request import run_request
    from modtrans.sweep.rows import agreement

    gc.enable()  # cli.run turns the collector off for a command; a sweep's hours of plans leave cycles
    options = given(ctx, values, table.SWEEP)
    options = {k: v for k, v in options.items() if v is not None and v != ()}
    try:
        with report.status(f"sweeping {model}", quiet=quiet):
            outcome, rows = run_request(model, options)
    except UsageError as error:
        raise _refused(error) from None
    except KeyboardInterrupt:
        output = options.get("output")
        if output is not None:
            typer.echo(f"modtrans: stopped; the table of what finished is in {output}.csv", err=True)
        raise
    except WorkerError as error:  # what finished is written and cached: run again to finish
        output = options.get("output")
        where = f"; the table of what finished is in {output}.csv" if output is not None else ""
        typer.echo(f"modtrans: {error}{where}; the same sweep run again does what is left", err=True)
        raise typer.Exit(1) from None
    _say(outcome.summary(), rows, str(model))
    agreed = agreement(rows)
    if agreed is not None:
        typer.echo(
            f"the estimate against ASTRA-sim 2.x on the {agreed['simulated']} simulated: largest error "
            f"{agreed['largest_error']:.1%}, Kendall's tau "
            + (f"{agreed['kendall_tau']:.2f}" if agreed["kendall_tau"] is not None else "- (every pair tied)")
        )
    if outcome.written and not quiet:
        typer.echo(said(outcome.written), err=True)
    raise typer.Exit(0 if rows else 1)


def _say(summary: dict[str, Any], rows: Sequence[Any], model: str) -> None:
    for line in summary["warnings"]:  # the model's, as translate says them
        typer.echo(f"{model}: {line}", err=True)
    refused = summary["refused_by_rule"]
    over = summary["over_memory"]
    typer.echo(
        f"{summary['enumerated']:,} layouts: {sum(refused.values()):,} refused by a rule, "
        f"{sum(over.values()):,} over the device's memory, {summary['fit']:,} fit; "
        f"{summary['estimated']:,} estimated ({summary['from_cache']:,} more from the cache), "
        f"{summary['simulated']:,} simulated"
        + (
            f", {summary['not_simulated']:,} not simulated (each row says why)"
            if summary["not_simulated"]
            else ""
        )
    )
    for why, count in [*refused.items(), *over.items()][:6]:
        typer.echo(f"  {count:>7,}  {why[:120]}")
    if not rows:
        typer.echo("no layout fits: more GPUs, a smaller micro-batch or more recomputation")
        return
    typer.echo(f"{'#':>3} {'layout':<40} {'GiB':>6} {'estimate s':>11} {'simulated s':>12} {'tokens/s':>11} "
               f"{'TFLOP/s':>8} {'MFU':>6}")  # fmt: skip
    for r in rows[:SHOWN]:
        simulated = f"{r.simulated_s:.3f}" if r.simulated_s is not None else "-"
        estimate = f"{r.estimate_s:.3f}" if r.estimate_s is not None else "-"
        mfu = f"{r.mfu:.1%}" if r.mfu is not None else "-"
        rate = f"{r.tokens_per_s:,.0f}" if r.tokens_per_s else "-"
        tflops = f"{r.tflops_per_gpu:.0f}" if r.tflops_per_gpu else "-"
        typer.echo(
            f"{r.rank:>3} {r.label:<40} {r.memory_gib:>6.1f} {estimate:>11} {simulated:>12} {rate:>11} "
            f"{tflops:>8} {mfu:>6}"
        )


commands.command(cls=Command)(command(sweep, table.SWEEP))
