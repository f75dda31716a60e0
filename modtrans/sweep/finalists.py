"""The finalists simulated: `--simulate top:K` (the K best by the estimate), `all` or `none`.
Each is translated as `modtrans translate --format chakra-et` translates it, its traces written
in a temporary folder with each chain of computes one node (chakra/fuse.py: the same simulated
time, some 40 % fewer nodes for the simulator to hold), and run on ASTRA-sim 2.x on the sweep's
network (modtrans/simulate/), one task per layout on the sweep's engine; kept by the digest of
the translation's inputs, the network and the simulator binary's content (cache.py)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from modtrans.strategy.llm.degrees import listed
from modtrans.strategy.llm.options import Layout
from modtrans.sweep import space

NODE_BYTES = 1280
"""ASTRA-sim 2.x's memory per trace node of the set it runs: FeederV3 indexes every node and holds
three dependency graphs of them (et_feeder.cpp, dependancy_solver.h); measured 1.20-1.25 KiB a
node (bench/bench_sweep_finalists.py: Llama-3-70B on 32 to 256 ranks, 0.26 to 2 million nodes)."""


class Passing(str):
    """A reason there is no simulation that holds only for now: the memory free on this machine,
    a run killed or cut short (ASTRA-sim 2.x can exit with no rank finished, its teardown bug).
    Shown in the row like any reason, never kept in the cache: the sweep run again tries it."""


class ChoiceError(ValueError):
    """A --simulate value that is none of top:K, all, none."""


def how_many(spec: str, total: int) -> int:
    """The finalists `spec` asks for, of `total` estimated layouts."""
    text = spec.strip().lower()
    if text == "none":
        return 0
    if text == "all":
        return total
    match = re.fullmatch(r"top:([0-9]{1,9})", text)
    if match is None or int(match.group(1)) < 1:
        raise ChoiceError(f"--simulate {spec}: top:K (K at least 1), all or none")
    return min(int(match.group(1)), total)


def translation_options(layout: Layout, training: dict[str, Any]) -> dict[str, Any]:
    """`modtrans translate`'s options for `layout` and the shared ones: the table's options of the
    layout (space.options_of, the one spelling of them) less what follows from the others and
    translate does not take (D: it follows from N, strategy/llm/degrees.py; the micro-batches;
    the distributed optimizer, which is ZeRO-1), with N, B and V as translate names them."""
    given = space.options_of(layout)
    for name in (*(d.token for d in listed() if d.data), *space.DERIVED):
        del given[name]
    return {
        **training,
        "npus": layout.npus,
        **given,
        "vpp": layout.vpp if layout.vpp > 1 else None,
        "global_batch": layout.batch,
    }


def simulate_task(task: tuple[str, str | None, str, dict[str, Any], str, Layout]) -> dict[str, Any] | str:
    """One finalist translated and simulated (in a worker): the exact tier's iteration (the
    translated plan walked: modtrans.estimate.plan) and ASTRA-sim 2.x's, in seconds, or the
    one-line reason there is none (a Passing one where another try may succeed)."""
    from modtrans import api, estimate, simulate
    from modtrans.chakra import ChakraError, fuse, write
    from modtrans.diagnostics import has_errors
    from modtrans.request import prepare, request_of

    model, device, network, training, binary, layout = task
    options = translation_options(layout, training)
    if device is not None:
        options["device"] = device
    with tempfile.TemporaryDirectory(prefix="modtrans-sweep-") as folder:
        prefix = str(Path(folder) / "trace")
        try:
            prepared = prepare(request_of(model, {**options, "format": "chakra-et", "output": prefix}))
            result = api.run(prepared)
            if result.plan is None or has_errors(result.diagnostics):
                first = next((d for d in result.diagnostics if d.severity == 1), None)
                return f"not translated: {first.message if first else 'no plan'}"
            tick = prepared.options.cost.clock.tick_ns
            fused = fuse.fused(result.plan, tick)
            short = _short(fuse.nodes(fused))
            if short:
                return short
            write(fused, Path(prefix), tick_ns=tick)
            net = simulate.network(network, layout.npus)
            exact = estimate.plan(result.plan, network=net, tick_ns=tick)
            ran, _ = simulate.run(Path(binary), prefix, layout.npus, net, timeout=3600, fuse=False)
        except simulate.SimulateError as error:  # the run itself: killed, timed out, crashed
            return Passing(_first_line(error))
        except (estimate.EstimateError, ChakraError, ValueError) as error:
            return _first_line(error)
    if not ran.finished:
        return Passing(f"ASTRA-sim finished {len(ran.ranks)} of {layout.npus} ranks")
    return {"exact_s": exact.iteration_s, "simulated_s": ran.iteration / 1e9}


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _short(nodes: int) -> Passing | None:
    """Why ASTRA-sim cannot hold a set of `nodes` nodes here (more than the memory available now,
    /proc/meminfo's MemAvailable), or None: a reason in the table instead of the run killed
    for memory."""
    try:
        with open("/proc/meminfo") as handle:
            found = re.search(r"^MemAvailable:\s+(\d+) kB", handle.read(), re.MULTILINE)
    except OSError:
        return None
    if found is None:
        return None
    available, needed = int(found.group(1)) * 1024, nodes * NODE_BYTES
    if needed <= available:
        return None
    return Passing(
        f"not simulated: ASTRA-sim would hold {nodes:,} trace nodes, some {needed / 2**30:.1f} GiB; "
        f"{available / 2**30:.1f} GiB available"
    )
