"""Roofline compute model: time = max(FLOPs / peak FLOP/s, bytes / memory bandwidth) per phase.

The default device is an NVIDIA A100 SXM4 80GB, numbers from NVIDIA's A100 datasheet
(nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf):
FP32 19.5 TFLOP/s, FP16/BF16 Tensor Core 312 TFLOP/s (dense), HBM2e 2,039 GB/s. Peak is chosen by
the layer's activation dtype. Ticks are nanoseconds (ASTRA-sim 1.0: 1 tick = 1 ns at 1 GHz).

Bytes per phase, from the IR's activation and parameter sizes:
  forward      read inputs and parameters, write outputs (an embedding reads only the rows it looks up)
  input-grad   read the output gradient and parameters, write the input gradient
  weight-grad  read the output gradient and inputs, write the parameter gradient (0 without parameters)
  update       an SGD step reads the parameter and its gradient and writes the parameter (3x bytes)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from modtrans.cost import PhaseTimes, register
from modtrans.ir.document import Activation, Kind, Layer


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    peak_flops: dict[str, float]  # activation dtype -> FLOP/s
    bandwidth: float  # bytes/s
    source: str


A100 = Device(
    name="a100-sxm4-80gb",
    peak_flops={"float": 19.5e12, "float16": 312e12, "bfloat16": 312e12, "double": 9.7e12},
    bandwidth=2039e9,
    source="NVIDIA A100 Tensor Core GPU datasheet (2021), SXM4 80GB column",
)
DEVICES = {A100.name: A100, "a100": A100}


def _bytes(items: tuple[Activation, ...]) -> int:
    return sum(a.bytes or 0 for a in items)


@dataclass(frozen=True)
class Roofline:
    device: Device = A100
    clock_ghz: float = 1.0  # ticks per nanosecond
    name: str = "roofline"

    def _ticks(self, flops: int, nbytes: int, dtype: str) -> int:
        peak = self.device.peak_flops.get(dtype, self.device.peak_flops["float"])
        seconds = max(flops / peak, nbytes / self.device.bandwidth)
        return math.ceil(seconds * 1e9 * self.clock_ghz)

    def times(self, layer: Layer) -> PhaseTimes:
        dtype = layer.outputs[0].dtype if layer.outputs else "float"
        params = sum(p.bytes for p in layer.params)
        trained = sum(p.bytes for p in layer.params if p.trainable)
        inputs, outputs = _bytes(layer.inputs), _bytes(layer.outputs)
        f = layer.flops
        if layer.kind is Kind.EMBEDDING:  # a lookup touches the rows it reads, not the whole table
            params = outputs
        return PhaseTimes(
            forward=self._ticks(f.forward, inputs + params + outputs, dtype),
            input_grad=self._ticks(f.input_grad, outputs + params + inputs, dtype),
            weight_grad=self._ticks(f.weight_grad, outputs + inputs + trained, dtype) if trained else 0,
            update=self._ticks(0, 3 * trained, dtype),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "device": self.device.name,
            "peak_flops": self.device.peak_flops,
            "bandwidth_bytes_per_s": self.device.bandwidth,
            "source": self.device.source,
            "clock_ghz": self.clock_ghz,
            "unit": "ns" if self.clock_ghz == 1.0 else f"cycles at {self.clock_ghz} GHz",
        }


@register("roofline")
def make(device: str = "a100", clock_ghz: float = 1.0) -> Roofline:
    try:
        return Roofline(DEVICES[device], clock_ghz)
    except KeyError:
        raise KeyError(f"unknown device {device!r}; known: {', '.join(sorted(DEVICES))}") from None
