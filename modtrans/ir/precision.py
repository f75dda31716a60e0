"""The training precision: the floating dtype a run computes in, set on the IR once after extraction.

    ir = precision.cast(ir, "bf16")   # every floating parameter and activation in bfloat16

What the frameworks call mixed precision: Megatron-LM's --bf16 / --fp16 (its model's parameters
and activations in that dtype: megatron/training/arguments.py, params_dtype), DeepSpeed's "bf16" /
"fp16" sections, FSDP's MixedPrecision(param_dtype=...), torchtitan's mixed_precision_param,
Lightning's Trainer(precision="bf16-mixed"). The GEMMs, the activations kept for the backward and
the bytes every collective moves follow the dtype the IR carries; the fp32 master weights and
Adam states stay the memory model's (strategy/llm/memory.py: a 16-bit parameter's fp32 master
copy and moments, Megatron's 18 bytes a parameter), which reads the parameters' dtype from here.

Only floating tensors change: token ids, positions, masks and a quantized model's integer
weights keep theirs (dtypes.py: `floating`). Without a precision the IR keeps the model's own
dtype (a configuration's torch_dtype, float32 where it states none; an ONNX file's initializers').
"""

from __future__ import annotations

from dataclasses import replace
from math import prod

from modtrans import dtypes
from modtrans.ir.document import Activation, Layer, ModelIR, Param

FP8 = "fp8"
PRECISIONS: dict[str, str] = {"fp32": "float", "fp16": "float16", "bf16": "bfloat16", FP8: "bfloat16"}
"""--precision's values -> the IR's dtype name (ONNX's spelling, dtypes.py). fp8 is bf16 training
with Transformer Engine's FP8 linears (Megatron-LM's --bf16 --fp8-format hybrid, NeMo's fp8
'hybrid'): the parameters and every activation bf16 in the IR, the linears' GEMMs in FP8 and the
casts around them the cost model's (cost/fp8.py), what those linears save the memory model's
(strategy/llm/fp8.py)."""


def dtype_of(precision: str) -> str:
    """The IR dtype of `precision` (fp32, fp16, bf16, fp8's bf16); a ValueError for another name."""
    try:
        return PRECISIONS[precision]
    except KeyError:
        raise ValueError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}") from None


def _floating(dtype: str) -> bool:
    known = dtypes.BY_NAME.get(dtype)
    return known is not None and known.floating


def _bytes(elements: int, dtype: str) -> int:
    return -(-elements * dtypes.BY_NAME[dtype].bits // 8)


def _param(p: Param, dtype: str) -> Param:
    if not _floating(p.dtype) or p.dtype == dtype:
        return p
    return replace(p, dtype=dtype, bytes=_bytes(p.elements, dtype))


def _activation(a: Activation, dtype: str) -> Activation:
    if not _floating(a.dtype) or a.dtype == dtype:
        return a
    if a.bytes is None or a.shape is None or not all(isinstance(d, int) for d in a.shape):
        return replace(a, dtype=dtype, bytes=None if a.bytes is None else _rescaled(a, dtype))
    return replace(a, dtype=dtype, bytes=_bytes(prod(a.shape), dtype))  # type: ignore[arg-type]


def _rescaled(a: Activation, dtype: str) -> int:
    """Bytes of an activation whose shape is not all known but whose size is: by the widths."""
    assert a.bytes is not None
    return -(-a.bytes * dtypes.BY_NAME[dtype].bits // dtypes.BY_NAME[a.dtype].bits)


def _layer(x: Layer, dtype: str) -> Layer:
    params = tuple(_param(p, dtype) for p in x.params)
    inputs = tuple(_activation(a, dtype) for a in x.inputs)
    outputs = tuple(_activation(a, dtype) for a in x.outputs)
    if params == x.params and inputs == x.inputs and outputs == x.outputs:
        return x
    return replace(x, params=params, inputs=inputs, outputs=outputs)


def cast(ir: ModelIR, precision: str | None) -> ModelIR:
    """`ir` with every floating parameter and activation in `precision`'s dtype (None: `ir`
    itself, the model's own dtypes)."""
    if precision is None:
        return ir
    dtype = dtype_of(precision)
    layers = tuple(_layer(x, dtype) for x in ir.layers)
    if all(a is b for a, b in zip(layers, ir.layers, strict=True)):
        return ir
    return ModelIR(ir.provenance, layers)
