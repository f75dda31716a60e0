"""Why two workloads differ in kind, before any row is compared: the conventions each follows.

A translated model and a hand-made reference usually differ in convention, not in substance:
which layers exist (a layer per trainable tensor group, or per weight only), which compute model
made the times, how layers are named. `detect` reads a workload's conventions from its content;
`explain` says in a line each where two workloads part, with the option that compares like with
like. Pure: no rich, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modtrans.diff.compare import WorkloadDiff
from modtrans.workload.model import Workload

_NORM = re.compile(r"(^|[._/])(bn|ln|norm|layernorm|batchnorm|layer_norm|ln_f)\d*($|[._/])", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Conventions:
    """What a workload's content says about how it was made."""

    layers: int
    norm_layers: int  # layers named like normalisation (bn1, ln_f, layernorm): a sign of
    # --params trainable, not their count (an index-named norm, `downsample.1`, is not seen)
    reference_compute: bool  # update = round(wg / 10) on every layer: ASTRA-sim's reference model

    @property
    def params(self) -> str:
        return "trainable" if self.norm_layers else "weights"


@dataclass(frozen=True, slots=True)
class Finding:
    """One convention the two workloads do not share, and the option that makes them agree."""

    what: str
    option: str | None  # "--params weights"; None when no option of ours decides it


def detect(workload: Workload) -> Conventions:
    norms = sum(bool(_NORM.search(layer.name)) for layer in workload.layers)
    timed = [layer for layer in workload.layers if layer.weight_grad.compute_time > 0]
    reference = bool(timed) and all(
        layer.update_time == int(layer.weight_grad.compute_time / 10 + 0.5) for layer in timed
    )
    return Conventions(len(workload.layers), norms, reference)


def explain(first: Workload, reference: Workload, diff: WorkloadDiff) -> list[Finding]:
    """The conventions `first` and `reference` do not share (empty when they follow the same)."""
    a, b = detect(first), detect(reference)
    found = []
    if a.layers != b.layers and bool(a.norm_layers) != bool(b.norm_layers):
        here, other = (a, b) if a.norm_layers else (b, a)
        side = "here" if here is a else "in the reference"
        # the layers --params trainable adds are those the other side lacks: counted, not guessed
        # from names (torchvision's shortcut norm is `downsample.1`, named like no norm)
        extra = here.layers - other.layers
        found.append(
            Finding(
                f"{a.layers} layers here, {b.layers} in the reference: {side} normalisation layers are "
                f"layers of their own{f' ({extra} more layers)' if extra > 0 else ''}, as with "
                "--params trainable; "
                f"the other side has weight layers only",
                f"--params {b.params}",
            )
        )
    if b.reference_compute and not a.reference_compute:
        found.append(
            Finding(
                "the reference's compute times come from ASTRA-sim's reference model (every update "
                "time is a tenth of the weight-gradient time); these come from another model",
                "--compute astra-sim-reference",
            )
        )
    elif a.reference_compute != b.reference_compute or _scale(diff) is not None:
        ratio = _scale(diff)
        if ratio is not None:
            found.append(
                Finding(
                    f"compute totals differ {ratio:.2g}x: another compute model, device or clock "
                    "made one of them",
                    None,
                )
            )
    if not diff.options.ignore_names and diff.counts.renamed and names_differ(first, reference):
        shared = _shared_names(first, reference)
        found.append(
            Finding(
                f"layer names follow different schemes ({shared} of {len(reference.layers)} "
                "reference names appear here)",
                "--ignore-names",
            )
        )
    return found


def names_differ(first: Workload, reference: Workload) -> bool:
    """Fewer than half of the reference's layer names appear in `first`."""
    return bool(reference.layers) and _shared_names(first, reference) < len(reference.layers) / 2


def _shared_names(first: Workload, reference: Workload) -> int:
    names = {layer.name for layer in first.layers}
    return sum(layer.name in names for layer in reference.layers)


def _scale(diff: WorkloadDiff) -> float | None:
    """The ratio of total compute, when it is far from 1 (over 2x either way)."""
    first = sum(t.compute_a for t in diff.totals)
    reference = sum(t.compute_b for t in diff.totals)
    if not first or not reference:
        return None
    ratio = first / reference
    return ratio if ratio > 2 or ratio < 0.5 else None
