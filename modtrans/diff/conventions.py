"""Why two workloads differ in kind, before any row is compared: the conventions each follows.

A translated model and a hand-made reference usually differ in convention, not in substance:
which layers exist (a layer per trainable tensor group, or per weight only), which compute model
made the times, how layers are named. `detect` reads a workload's conventions from its content;
`explain` says in a line each where two workloads part, with the option that compares like with
like. `contradictions` finds, given the GEMM shapes of the first side (a translated model), the
differing compute cells where the reference contradicts itself: it gives that GEMM shape other
values elsewhere, so no function of the shape (ours or any) matches the reference there. Pure: no
rich, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modtrans.diff import aicb
from modtrans.diff.compare import GROUPS, WorkloadDiff
from modtrans.workload.model import Layer, Phase, Workload
from modtrans.workload.vocabulary import COLUMNS

if TYPE_CHECKING:
    from modtrans.ir.document import ModelIR

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
    found += _aicb(first, reference, diff)
    layout = reference.layout
    if layout is not None and layout.declared_count != layout.layer_lines:
        found.append(
            Finding(
                f"the reference declares {layout.declared_count} layers but holds {layout.layer_lines} "
                "lines (V201): it is not one whole iteration, so its communication per iteration "
                "cannot match any translation's",
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


def _aicb(first: Workload, reference: Workload, diff: WorkloadDiff) -> list[Finding]:
    """Where the reference is AICB's: its granularity (what AICB writes differently from Megatron-LM,
    and leaves out, is named collective by collective below the traffic table: diff/aicb.py)."""
    if not aicb.is_aicb(reference):
        return []
    return [
        Finding(
            "the reference is AICB's: one line per role and block (attention_column_layer, mlp_row_layer, "
            "grad_norm ...) where these are one per module, so the layer rows pair different "
            "granularities; the communication per iteration below compares what a simulator moves, "
            "and names each of AICB's conventions",
            None,
        )
    ]


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


# --------------------------------------------------------------------- the reference's own contradictions

Gemms = tuple[tuple[int, int, int, int], ...]
"""The GEMMs one phase of a layer computes: (M, K, N, count) each, in that phase's permutation
(forward (M,K,N), input gradient (M,N,K), weight gradient (K,M,N) of the forward GEMM; gemm.py)."""

COMPUTE_FIELDS = GROUPS["compute"]  # fwd_compute, ig_compute, wg_compute


@dataclass(frozen=True, slots=True)
class Source:
    """One value the reference gives a GEMM shape: the first reference cell with it, and how many."""

    layer: str
    field: str
    value: int
    cells: int


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A differing compute cell whose GEMM shape the reference gives two or more values."""

    first: str  # the layer on the first side (as in the table)
    reference: str  # its partner in the reference
    field: str
    gemms: Gemms
    values: tuple[Source, ...]  # one per distinct value, in reference order


@dataclass(frozen=True, slots=True)
class Contradictions:
    cells: int  # differing compute cells whose GEMM shape is known
    found: tuple[Contradiction, ...]  # those where the reference contradicts itself


def gemm_shapes(ir: ModelIR) -> dict[str, dict[str, Gemms]]:
    """Layer name -> compute field -> the GEMMs of that phase (layers without a GEMM: absent)."""
    from modtrans.cost.gemm import phase_gemms

    out: dict[str, dict[str, Gemms]] = {}
    for layer in ir.layers:
        gemms = phase_gemms(layer)
        if gemms is None:
            continue
        phases = (gemms.forward, gemms.input_grad, gemms.weight_grad)
        out[layer.name] = {
            name: tuple((s.m, s.k, s.n, s.count) for s in phase)
            for name, phase in zip(COMPUTE_FIELDS, phases, strict=True)
            if phase
        }
    return out


def _compute(layer: Layer, name: str) -> int:
    phase: Phase = getattr(layer, _PHASE_OF[name])
    return phase.compute_time


_PHASE_OF = {c.diff: c.phase or "" for c in COLUMNS if c.diff in COMPUTE_FIELDS}


def contradictions(
    diff: WorkloadDiff, reference: Workload, shapes: Mapping[str, Mapping[str, Gemms]]
) -> Contradictions:
    """The differing compute cells whose GEMM shape (from `shapes`, the first side's, carried to
    each reference layer by the pairing) the reference gives two or more values in any phase."""
    # (first index, reference index, first name, reference name) of each pair with known shapes
    paired = sorted(
        (r.b, r.a, r.name_a, r.name_b or "")
        for r in diff.layers
        if r.a is not None and r.b is not None and r.name_a is not None and r.name_a in shapes
    )
    given: dict[Gemms, dict[int, list[tuple[str, str]]]] = {}  # shape -> value -> reference cells
    for b, _, name_a, _ in paired:  # in reference order
        layer = reference.layers[b]
        for name, shape in shapes[name_a].items():
            given.setdefault(shape, {}).setdefault(_compute(layer, name), []).append((layer.name, name))
    differing = {r.a: r.fields for r in diff.layers if r.a is not None and r.b is not None}
    cells, found = 0, []
    for _, a, name_a, name_b in sorted(paired, key=lambda p: p[1]):  # in the table's order
        for f in differing[a]:
            known = shapes[name_a].get(f.field)
            if known is None:
                continue
            cells += 1
            values = given[known]
            if len(values) > 1:
                sources = tuple(Source(*where[0], value, len(where)) for value, where in values.items())
                found.append(Contradiction(name_a, name_b, f.field, known, sources))
    return Contradictions(cells, tuple(found))


def shape_text(gemms: Gemms) -> str:
    """784x128x512; a repeated GEMM as 2 x 56x9x1; several joined by +."""
    return " + ".join(f"{f'{c} x ' if c > 1 else ''}{m}x{k}x{n}" for m, k, n, c in gemms)
