"""Roofline compute model: time = max(FLOPs / peak, bytes / bandwidth) per phase, on a device.

Device profiles (devices.json beside this file; each number cites its datasheet) are chosen with
`--device a100|h100|v100|tpu-v4`, or `--device FILE.json` for your own profile (validated by
schemas/device.schema.json). The peak is the one for the layer's activation dtype (`default` when
the profile lists none for it). Bytes per phase are those of cost/gemm.py's `traffic`; the update is
an SGD step's traffic. The first layer's input gradient is not computed (training does not need it).
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from modtrans.cost.base import Clock, CostError, Model, PhaseTimes, Settings, register
from modtrans.cost.gemm import traffic, update_bytes
from modtrans.fileio import utf8
from modtrans.ir.document import Layer

SCHEMA = "device"
_BUILTIN = Path(__file__).resolve().parent / "devices.json"


@dataclass(frozen=True)
class Device:
    key: str
    name: str
    peak_flops: dict[str, float]
    bandwidth: float
    sources: dict[str, str]
    kernels: dict[str, Any] | None = None  # the GPU kernel model's calibration (gpu.py)

    def peak(self, dtype: str) -> float:
        return self.peak_flops.get(dtype) or self.peak_flops.get("default") or self.peak_flops["float"]

    def describe(self) -> dict[str, Any]:
        """The device's entries in a cost model's description (describe()), in their order there."""
        bandwidth = self.bandwidth
        return {"device": self.name, "peak_flops": self.peak_flops, "memory_bandwidth_bytes_per_s": bandwidth}


@functools.cache
def builtin_devices() -> dict[str, Device]:
    data: dict[str, Any] = json.loads(_BUILTIN.read_text(encoding="utf-8"))
    return {key: _device(key, value) for key, value in data.items()}


def _device(key: str, data: dict[str, Any]) -> Device:
    return Device(
        key,
        data["name"],
        dict(data["peak_flops"]),
        float(data["memory_bandwidth"]),
        dict(data["sources"]),
        data.get("kernels"),
    )


def device(spec: str) -> Device:
    """A built-in profile by name, or a JSON profile file (checked against its schema)."""
    found = builtin_devices().get(spec.lower())
    if found is not None:
        return found
    from modtrans import jsonsource, schema  # a profile file's reader: a built-in needs neither

    path = Path(spec)
    if not path.is_file():
        raise CostError(
            f"unknown device {spec!r}: not a built-in ({', '.join(builtin_devices())}) nor a file"
        )
    try:
        text, reason = utf8(path.read_bytes())
        if text is None:
            raise CostError(f"cannot read the device profile {spec}: {reason}")
        data = jsonsource.loads(text)
    except OSError as error:
        raise CostError(f"cannot read the device profile {spec}: {error.strerror or error}") from None
    except jsonsource.JSONSyntaxError as error:
        raise CostError(f"cannot read the device profile {spec}: {error}") from None
    problems = schema.check(data, SCHEMA, path=spec, code="S404")
    if problems:
        raise CostError("; ".join(f"{spec}: {d.message}" for d in problems))
    numbers = {f"peak_flops.{k}": v for k, v in data["peak_flops"].items()}
    numbers["memory_bandwidth"] = data["memory_bandwidth"]
    for key, value in numbers.items():
        if not math.isfinite(value) or not 1 <= value <= 1e30:
            raise CostError(f"{spec}: {key} is {value}: a rate per second between 1 and 1e30")
    if "float" not in data["peak_flops"] and "default" not in data["peak_flops"]:
        raise CostError(f"{spec}: peak_flops needs a `float` or a `default` entry")
    return _device(path.stem, data)


@dataclass(frozen=True)
class Roofline:
    SHAPE_ONLY: ClassVar[bool] = True  # base.by_shape: times read no name

    device: Device
    clock: Clock
    name: str = "roofline"
    first_input_grad: bool = False

    def _ticks(self, flops: int, nbytes: int, dtype: str) -> int:
        return self.clock.from_seconds(max(flops / self.device.peak(dtype), self.memory_seconds(nbytes)))

    def memory_seconds(self, nbytes: int) -> float:
        """A memory-bound kernel's time: its bytes at the device's bandwidth (base.memory_ticks)."""
        return nbytes / self.device.bandwidth

    def times(self, layer: Layer) -> PhaseTimes:
        dtype = layer.outputs[0].dtype if layer.outputs else "float"
        fwd_b, ig_b, wg_b = traffic(layer)
        f = layer.flops
        return PhaseTimes(
            forward=self._ticks(f.forward, fwd_b, dtype),
            input_grad=self._ticks(f.input_grad, ig_b, dtype),
            weight_grad=self._ticks(f.weight_grad, wg_b, dtype) if wg_b else 0,
            update=self._ticks(0, update_bytes(layer), dtype),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.name,
            **self.device.describe(),
            "sources": self.device.sources,
            "first_layer_input_grad": "0 (not needed in training)",
            **self.clock.describe(),
        }


@register(
    Model.ROOFLINE,
    "max(FLOPs / peak, bytes / bandwidth) on a device profile (a100, h100, h100-hbm2e, h200, b200, mi300x, "
    "v100, tpu-v4, FILE.json)",
)
def make(settings: Settings) -> Roofline:
    return Roofline(device(settings.device or "a100"), settings.clock)
