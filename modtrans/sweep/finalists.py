"""The finalists simulated: `--simulate top:K` (the K best by the estimate), `all` or `none`.
Each is translated to a Chakra trace set as `modtrans translate --format chakra-et` writes it,
in a temporary folder, and run on ASTRA-sim 2.x on the sweep's network (modtrans/simulate/),
one task per layout on the sweep's engine; kept by the digest of the translation's inputs, the
network and the simulator binary's content (cache.py)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from modtrans.strategy.llm.options import Layout


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
    """`modtrans translate`'s options (by the table's names) for `layout` and the shared ones."""
    return {
        **training,
        "npus": layout.npus,
        "tp": layout.tp,
        "pp": layout.pp,
        "cp": layout.cp,
        "ep": layout.ep,
        "vpp": layout.vpp if layout.vpp > 1 else None,
        "schedule": layout.schedule.value,
        "micro_batch": layout.micro_batch,
        "global_batch": layout.batch,
        "recompute": layout.recompute.value,
        "zero": layout.zero,
        "sp": layout.sp,
    }


def simulate_task(task: tuple[str, str | None, str, dict[str, Any], str, Layout]) -> dict[str, Any] | str:
    """One finalist translated and simulated (in a worker): its simulated iteration in seconds,
    or the one-line reason it has none."""
    from modtrans import simulate
    from modtrans.api import translate
    from modtrans.diagnostics import DiagnosticError

    model, device, network, training, binary, layout = task
    options = translation_options(layout, training)
    if device is not None:
        options["device"] = device
    with tempfile.TemporaryDirectory(prefix="modtrans-sweep-") as folder:
        prefix = str(Path(folder) / "trace")
        try:
            translate(model, format="chakra-et", output=prefix, **options)
            result, _ = simulate.run(
                Path(binary), prefix, layout.npus, simulate.network(network, layout.npus)
            )
        except (DiagnosticError, simulate.SimulateError, ValueError) as error:
            return str(error).splitlines()[0] if str(error) else type(error).__name__
    if not result.finished:
        return f"ASTRA-sim finished {len(result.ranks)} of {layout.npus} ranks"
    return {"simulated_s": result.iteration / 1e9}
