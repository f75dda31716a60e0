"""Measured compute times in (`--per-layer-times FILE`), projected onto any layout.

Three formats, told apart by their content:

  CSV          `layer,phase,time_ns` rows (a header line is optional): an IR layer's name (or a
               shell pattern: `transformer.h.*.mlp.c_fc`), a phase (fwd, ig, wg, update) and the
               nanoseconds one GPU measured for that layer whole
  AIOB         AICB's computation profile (aliyun/aicb workload/aiob_inputs/Example.txt, read by
               utils.extract_averages): `SECTION:` lines, each followed by `time_gpu_avg: T`
               microseconds of one forward of one block's operation: Emb, layernorm, atten_qkv,
               atten_flash, atten_linear, layernorm2, mlp_linear_1, mlp_gelu, mlp_linear_2,
               layernorm_post, logit_time (param_time, the optimizer, is not a layer's)

  PyTorch      a profiler trace of a training step (Chrome/Kineto JSON from torch.profiler with
               with_modules=True): modules mapped to the IR's layers, forward and backward
               kernels timed (profiler.py)

An AIOB section covers the IR layers of its role in every block (atten_qkv: the query, key and
value projections, or GPT's fused c_attn), found from the IR's block parts: a section's time is
split among its layers in proportion to the cost model's times for them. AIOB measures forwards
only; a layer's backward is its measured forward times the cost model's backward-to-forward ratio
for that layer (AICB charges the forward's time again).

Projection: a measured time is for the layer whole on one GPU. Where a rank computes a share (a
tensor-parallel shard, a sequence-parallel part), it is charged the measured time x the cost
model's time for the share / the cost model's time for the whole: the model says how the shard
scales, the measurement what the whole costs. Phases and layers nobody measured keep the model's
times.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modtrans.cost import profiler
from modtrans.cost.base import Clock, CostError, CostModel, PhaseTimes
from modtrans.ir.document import Kind, Layer, ModelIR, Part

PHASES = ("fwd", "ig", "wg", "update")
_SECTION = re.compile(r"^(\w+):\s*$")
_AVERAGE = re.compile(r"^\s*time_gpu_avg:\s*([0-9.]+)\s*$")

Table = dict[str, dict[str, float]]
"""IR layer name -> phase -> seconds measured for the layer whole."""


def parse(text: str, ir: ModelIR, model: CostModel) -> tuple[Table, list[str]]:
    """The measured seconds per layer and phase, and warnings (names that match no layer)."""
    if profiler.looks_like(text):
        return profiler.parse(text, ir, model)
    if any(_SECTION.match(line) for line in text.splitlines()[:40]) and "time_gpu_avg" in text:
        return _aiob(text, ir, model)
    return _csv(text, ir)


def _csv(text: str, ir: ModelIR) -> tuple[Table, list[str]]:
    table: Table = {}
    warnings = []
    names = [x.name for x in ir.layers]
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        cells = [c.strip() for c in row]
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        if number == 1 and cells[:2] == ["layer", "phase"]:
            continue
        if len(cells) != 3 or cells[1] not in PHASES:
            raise CostError(
                f"line {number}: expected `layer,phase,time_ns` with a phase of {', '.join(PHASES)}"
            )
        try:
            ns = float(cells[2])
        except ValueError:
            raise CostError(f"line {number}: {cells[2]!r} is not a time in nanoseconds") from None
        if not 0 <= ns < 1e15:
            raise CostError(f"line {number}: {cells[2]} ns is not a layer's time")
        matched = [n for n in names if n == cells[0] or fnmatch.fnmatchcase(n, cells[0])]
        if not matched:
            warnings.append(f"line {number}: {cells[0]!r} names no layer of the model")
        for name in matched:
            table.setdefault(name, {})[cells[1]] = ns * 1e-9
    return table, warnings


def _aiob(text: str, ir: ModelIR, model: CostModel) -> tuple[Table, list[str]]:
    measured: dict[str, float] = {}
    section = None
    for line in text.splitlines():
        header = _SECTION.match(line)
        if header:
            section = header.group(1)
            continue
        average = _AVERAGE.match(line)
        if average and section is not None:
            measured[section] = float(average.group(1)) * 1e-6
    roles = roles_of(ir)
    table: Table = {}
    warnings = []
    for section, seconds in measured.items():
        groups = roles.get(section)
        if section == "param_time":
            continue
        if not groups:
            warnings.append(f"AIOB section {section!r} has no layer of its role in the model")
            continue
        for layers in groups:
            _split(table, layers, seconds, model)
    return table, warnings


def _split(table: Table, layers: Sequence[Layer], seconds: float, model: CostModel) -> None:
    """One measured forward over `layers` in proportion to the model's forwards; their backward
    phases by each layer's own model ratio to its forward."""
    modelled = [model.times(x) for x in layers]
    total = sum(t.forward for t in modelled)
    for layer, t in zip(layers, modelled, strict=True):
        forward = seconds * (t.forward / total if total else 1 / len(layers))
        entry = table.setdefault(layer.name, {})
        entry["fwd"] = forward
        if t.forward:
            entry["ig"] = forward * t.input_grad / t.forward
            entry["wg"] = forward * t.weight_grad / t.forward


_OUTSIDE = {Part.EMBEDDING: "Emb", Part.NORM: "layernorm_post", Part.HEAD: "logit_time"}


def roles_of(ir: ModelIR) -> dict[str, list[list[Layer]]]:
    """AIOB's sections -> per block (or once, outside the blocks) the IR layers they time."""
    found: dict[str, list[list[Layer]]] = {}
    blocks: dict[int, list[Layer]] = {}
    for x in ir.layers:
        b = x.block
        if b is None:
            continue
        if b.index is None:
            key = {Part.EMBEDDING: "Emb", Part.NORM: "layernorm_post", Part.HEAD: "logit_time"}.get(
                b.part or Part.MLP
            )
            if key is not None:
                found.setdefault(key, [[]])[0].append(x)
            continue
        blocks.setdefault(b.index, []).append(x)
    for members in blocks.values():
        for key, layers in _block_roles(members).items():
            if layers:
                found.setdefault(key, []).append(layers)
    return found


def _block_roles(members: Sequence[Layer]) -> dict[str, list[Layer]]:
    attention = [x for x in members if x.block is not None and x.block.part is Part.ATTENTION]
    core = [x for x in attention if x.kind in (Kind.MATMUL, Kind.REDUCE)]
    first_core = attention.index(core[0]) if core else len(attention)
    linears = [x for x in attention if x.kind is Kind.LINEAR]
    # the block's two norms: before its attention, and after its output projection (not a
    # per-head query or key norm between them: Qwen3's q_norm, k_norm)
    after = members.index(linears[-1]) if linears else len(members)
    first = members.index(linears[0]) if linears else len(members)
    norms = [x for i, x in enumerate(members) if x.kind is Kind.NORM and (i < first or i > after)]
    mlp = [x for x in members if x.block is not None and x.block.part is Part.MLP]
    mlp_linears = [x for x in mlp if x.kind is Kind.LINEAR]
    return {
        "layernorm": norms[:1],
        "layernorm2": norms[1:2],
        "atten_qkv": [x for x in linears if attention.index(x) < first_core],
        "atten_flash": core,
        "atten_linear": [x for x in linears if attention.index(x) > first_core],
        "mlp_linear_1": mlp_linears[:-1],
        "mlp_gelu": [x for x in mlp if x.kind is Kind.ELEMENTWISE and "residual" not in x.name],
        "mlp_linear_2": mlp_linears[-1:],
    }


@dataclass(frozen=True)
class Measured:
    """A cost model whose times, where measured, are the measurement projected onto the share."""

    base: CostModel
    whole: Mapping[str, Layer]
    table: Table

    @property
    def name(self) -> str:
        return f"{self.base.name} + measured"

    @property
    def first_input_grad(self) -> bool:
        return self.base.first_input_grad

    @property
    def clock(self) -> Clock:
        return self.base.clock

    def times(self, layer: Layer) -> PhaseTimes:
        share = self.base.times(layer)
        measured = self.table.get(layer.name)
        whole = self.whole.get(layer.name)
        if not measured or whole is None:
            return share
        full = self.base.times(whole)
        ticks = []
        for phase, modelled, of_whole in zip(
            PHASES,
            (share.forward, share.input_grad, share.weight_grad, share.update),
            (full.forward, full.input_grad, full.weight_grad, full.update),
            strict=True,
        ):
            seconds = measured.get(phase)
            if seconds is None:
                ticks.append(modelled)
                continue
            scale = modelled / of_whole if of_whole else 1.0
            ticks.append(self.base.clock.from_seconds(seconds * scale))
        return PhaseTimes(*ticks)

    def describe(self) -> dict[str, Any]:
        return {**self.base.describe(), "measured_layers": len(self.table)}
