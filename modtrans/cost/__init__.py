"""Compute-time models: an IR layer -> simulator ticks for its forward, input-gradient and
weight-gradient work and its update, with the unit and the model's parameters recorded.

Models (`modtrans cost list`, `--compute NAME` on translate):

  astra-sim-reference  weight-stationary 256x256 systolic array that reproduces ASTRA-sim's
                       reference ResNet-50 (systolic.py)
  scalesim-v3          exact closed forms of SCALE-Sim v3.0.0's compute cycles, WS / IS / OS,
                       any array, or a SCALE-Sim .cfg file (systolic.py)
  roofline             max(FLOPs / peak, bytes / bandwidth) on a device profile (roofline.py)
  gpu                  GPU kernels as measured: tile and wave quantization, FlashAttention,
                       streaming bandwidth, a launch floor (gpu.py; the default)
  scalesim             the real SCALE-Sim, per layer, cached (scalesim.py; optional extra)

What they share is base.py (names, the Clock, the CostModel protocol, the registry, a layer's
result elements); gemm.py states a layer's phases as GEMMs, attention.py a device's measured
attention kernel, loss.py the loss's kernels over a head's logits, norms.py an RMSNorm run op by
op, eager.py rotary embeddings and SwiGLU op by op, fp8.py which linears Transformer Engine
runs in FP8 under --precision fp8 and its casts' bytes; measured.py projects measured times
(`--per-layer-times`), which profiler.py reads from a PyTorch profiler trace.

Units: a model counts cycles (systolic arrays) or seconds (roofline); a Clock turns either into
integer ticks. ASTRA-sim 1.0 and SimAI read ticks as nanoseconds (1 tick = 1 cycle at 1 GHz).
"""

from __future__ import annotations

import importlib

from modtrans.cost.base import (
    OWN_ATTENTION,
    REGISTRY,
    Clock,
    CostError,
    CostModel,
    Entry,
    Model,
    PhaseTimes,
    Settings,
    Unit,
    register,
)

__all__ = [
    "OWN_ATTENTION",
    "REGISTRY",
    "Clock",
    "CostError",
    "CostModel",
    "Entry",
    "Model",
    "PhaseTimes",
    "Settings",
    "Unit",
    "get",
    "models",
    "register",
]

DEFAULT_SETTINGS = Settings()  # frozen: one shared default


_MODULE = {
    Model.GPU: "gpu",
    Model.ROOFLINE: "roofline",
    Model.ASTRA_SIM_REFERENCE: "systolic",
    Model.SCALESIM_V3: "systolic",
    Model.SCALESIM: "scalesim",
}
"""The module that registers each model: `get` imports that one alone (scalesim's, with tempfile
and csv, 10-20 ms that a translation by the gpu model spares). A test holds it to the registry."""


def _load(name: Model | None = None) -> None:
    """Import the module registering `name`, or (None) every model's, each registering itself."""
    for model in (name,) if name is not None else tuple(Model):
        importlib.import_module(f"modtrans.cost.{_MODULE[model]}")


def models() -> list[Entry]:
    _load()
    return [REGISTRY[name] for name in sorted(REGISTRY)]


def get(name: str, settings: Settings = DEFAULT_SETTINGS) -> CostModel:
    if name in set(Model):
        _load(Model(name))
    entry = REGISTRY.get(Model(name)) if name in set(Model) else None
    if entry is None:
        raise CostError(f"unknown compute model {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return entry.make(settings)
