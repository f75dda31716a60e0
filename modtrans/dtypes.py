"""Element types: the one table of what each ONNX dtype is (width, floating, gradient, role).

Generic: no onnx import (the codes are TensorProto.DataType's, fixed by the ONNX standard) and no
domain module. The IR names a dtype as ONNX does, lower case (`float`, `float8e4m3fn`, `int8`);
extraction reads codes from the protobuf. Every question about a dtype is answered here:

  width         bits per element (sub-byte types are packed: int4 is two per byte)
  floating      a real floating-point type, float8 and float4 included
  gradient      whether back-propagation computes a gradient for a tensor of this type
  index         int32/int64/uint32/uint64/bool: shapes, indices and masks, never weights
  quantized     the integers quantized models store weights in (int8, uint8, int16, uint16, int4, uint4)

Which types carry a gradient: the floating and complex ones. Integer and quantized tensors carry
none: they are not differentiable (PyTorch refuses `requires_grad` on them: "Only Tensors of
floating point and complex dtype can require gradients"; a quantized model's int8 activations sit
between QuantizeLinear and DequantizeLinear, whose gradient, when trained at all, is the
straight-through estimator's on the float side). float8 activations do carry one: FP8 training
casts activations to E4M3 for the GEMMs and back-propagates through them, with E5M2 gradients
(Micikevicius et al., "FP8 Formats for Deep Learning", 2022, arXiv:2209.05433, section 3; NVIDIA
Transformer Engine's fp8_autocast), and torch.float8_e4m3fn.is_floating_point is True. A tensor
whose type is not known ("unknown", or a code newer than this table) is taken to carry one, as a
training graph's activations almost always do.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DType:
    code: int  # onnx.TensorProto.DataType
    name: str  # the IR's spelling: the enum name, lower case
    bits: int  # per element; 0 for string (no fixed width)
    floating: bool = False
    complex: bool = False
    index: bool = False
    quantized: bool = False

    @property
    def bytes(self) -> int:
        """Bytes per element, at least 1 (a packed 4-bit value still needs a byte alone)."""
        return max(1, -(-self.bits // 8))

    @property
    def gradient(self) -> bool:
        return self.floating or self.complex


_F, _Q, _I = {"floating": True}, {"quantized": True}, {"index": True}
TABLE: tuple[DType, ...] = (
    DType(1, "float", 32, **_F),
    DType(2, "uint8", 8, **_Q),
    DType(3, "int8", 8, **_Q),
    DType(4, "uint16", 16, **_Q),
    DType(5, "int16", 16, **_Q),
    DType(6, "int32", 32, **_I),
    DType(7, "int64", 64, **_I),
    DType(8, "string", 0),
    DType(9, "bool", 8, **_I),
    DType(10, "float16", 16, **_F),
    DType(11, "double", 64, **_F),
    DType(12, "uint32", 32, **_I),
    DType(13, "uint64", 64, **_I),
    DType(14, "complex64", 64, complex=True),
    DType(15, "complex128", 128, complex=True),
    DType(16, "bfloat16", 16, **_F),
    DType(17, "float8e4m3fn", 8, **_F),
    DType(18, "float8e4m3fnuz", 8, **_F),
    DType(19, "float8e5m2", 8, **_F),
    DType(20, "float8e5m2fnuz", 8, **_F),
    DType(21, "uint4", 4, **_Q),
    DType(22, "int4", 4, **_Q),
    DType(23, "float4e2m1", 4, **_F),
    DType(24, "float8e8m0", 8, **_F),
    DType(25, "uint2", 2),
    DType(26, "int2", 2),
    DType(27, "float6e2m3", 6, **_F),
    DType(28, "float6e3m2", 6, **_F),
)
BY_CODE = {t.code: t for t in TABLE}
BY_NAME = {t.name: t for t in TABLE}

DEFAULT_BITS = 32
"""The width taken for a type this table does not know (a float32, the usual activation)."""

FLOATING = frozenset(t.code for t in TABLE if t.floating)
QUANTIZED = frozenset(t.code for t in TABLE if t.quantized)
NO_GRADIENT = frozenset(t.name for t in TABLE if not t.gradient)
"""The IR dtypes no gradient is computed for: integer, quantized, bool, string."""
INDEX = frozenset(t.code for t in TABLE if t.index)
"""ONNX int32, int64, bool, uint32, uint64: indices, shapes and masks, never weights (int8 ones are)."""


def bits(code: int) -> int:
    """Bits per element of ONNX type `code` (DEFAULT_BITS when unknown)."""
    known = BY_CODE.get(code)
    return DEFAULT_BITS if known is None else known.bits


def size_bytes(elements: int, code: int) -> int:
    """Bytes of `elements` values of ONNX type `code`, sub-byte types packed (int4: two per byte)."""
    return -(-elements * bits(code) // 8)


def width(name: str) -> int:
    """Bytes per element of the IR dtype `name` (4, a float32's, when unknown)."""
    known = BY_NAME.get(name)
    return DEFAULT_BITS // 8 if known is None else known.bytes


def name(code: int) -> str:
    """The IR's name of ONNX type `code` (`type<code>` for a code newer than this table)."""
    known = BY_CODE.get(code)
    return f"type{code}" if known is None else known.name


def carries_gradient(dtype: str) -> bool:
    """Whether back-propagation computes a gradient for a tensor of IR dtype `dtype` (see the
    module's docstring): floating and complex types yes, integer and quantized types no, an
    unknown type yes."""
    return dtype not in NO_GRADIENT
