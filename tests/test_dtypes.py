"""dtypes.py, the one table of dtype facts (issue 23): it agrees with onnx, and every question
about gradients gets its answer from it (needs_input_grad once said no gradient for an int8 or
float8 input while the plan's tensors wrote a `grad:` tensor for it)."""

from __future__ import annotations

import onnx
import pytest

from modtrans import dtypes
from modtrans.ir.document import Activation, Kind, needs_input_grad
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.draft import LayerDraft, a_in
from modtrans.strategy.groups import Group
from modtrans.strategy.tensors import ios as _ios


def test_the_table_names_and_sizes_every_type_as_onnx_does() -> None:
    for name, code in onnx.TensorProto.DataType.items():
        if code == 0:
            continue  # UNDEFINED: the IR says "unknown"
        entry = dtypes.BY_CODE.get(code)
        assert entry is not None, f"{name} ({code}) is missing from dtypes.TABLE"
        assert entry.name == name.lower()
        if code != onnx.TensorProto.STRING:
            assert entry.bytes == onnx.helper.tensor_dtype_to_np_dtype(code).itemsize, name
    assert dtypes.size_bytes(3, onnx.TensorProto.INT4) == 2  # packed, two a byte
    assert dtypes.size_bytes(3, 999) == 12  # an unknown code: a float32's width
    assert dtypes.width("bfloat16") == 2
    assert dtypes.width("no such type") == 4


@pytest.mark.parametrize(
    ("dtype", "gradient"),
    [
        ("float", True),
        ("bfloat16", True),
        ("float8e4m3fn", True),  # FP8 training back-propagates through its E4M3 activations
        ("float8e5m2", True),
        ("complex64", True),
        ("unknown", True),  # not inferred: taken for the usual floating activation
        ("int8", False),  # quantized: not differentiable
        ("uint8", False),
        ("int4", False),
        ("int64", False),  # token ids
        ("bool", False),  # masks
    ],
)
def test_the_input_gradient_and_the_gradient_tensor_agree(dtype: str, gradient: bool) -> None:
    """A layer whose one input comes from another layer: needs_input_grad (its input-gradient
    time, MODEL's all-reduce bytes) and _ios (the `grad:` tensor it writes) give one answer,
    dtypes.carries_gradient's."""
    assert dtypes.carries_gradient(dtype) is gradient
    produced = Activation("x", (4, 8), dtype, 32 * max(1, dtypes.width(dtype)))
    first = IRLayer("first", "", "Relu", Kind.ELEMENTWISE, outputs=(produced,))
    second = IRLayer("second", "", "Relu", Kind.ELEMENTWISE, inputs=(produced,))
    assert needs_input_grad(second, frozenset()) is gradient
    assert (a_in(second, frozenset()) > 0) is gradient
    ios = _ios([LayerDraft(Group(first, (), 0)), LayerDraft(Group(second, (), 0))], frozenset())
    written = [t.name for t in ios[1].grads_out]
    assert (written == ["grad:x@second"]) is gradient, written
