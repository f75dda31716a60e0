"""The bytes an op-by-op RMSNorm's kernels move (devices.json's `eager_rmsnorm` forward and
backward, cost/norms.py), counted as torch runs them: every aten kernel the module's forward and
autograd's backward dispatch, its tensor operands read and its results written whole (views, which
move nothing, left out), under a TorchDispatchMode.

The module is Liger-Kernel's benchmark_rms_norm.py LlamaRMSNorm (linkedin/Liger-Kernel, the module
its `rms_norm,huggingface` rows measured: bf16 x, `nn.Parameter(torch.ones(hidden_size))`, an fp32
weight, so an fp32 output and incoming gradient), and torchtitan's (torchtitan/models/norms.py at
9dec370, RMSNorm: `_norm(x.float()).type_as(x) * self.weight`) with the bf16 weight FSDP2's
MixedPrecisionPolicy(param_dtype=bfloat16) hands it.

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

from modtrans.cost.gpu import kernels  # noqa: E402
from modtrans.cost.roofline import device  # noqa: E402

pytestmark = pytest.mark.hf

# the weight's bytes (1 / ROWS of an element's) and each row's statistics' (1 / HIDDEN) under the digit
ROWS = HIDDEN = 2048


def _bytes(t: Any) -> int:
    """A tensor's bytes as a kernel reads or writes them: an expanded one (the mean's gradient
    broadcast over each row) only its storage's."""
    return int(min(t.numel() * t.element_size(), t.untyped_storage().nbytes()))


class _Moved(TorchDispatchMode):  # type: ignore[misc]
    """The bytes each dispatched aten kernel reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.moved = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info is not None for r in func._schema.returns):  # a view moves nothing
            tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            self.moved += sum(_bytes(t) for t in tensors)
        return out


def _liger(x: Any, weight: Any) -> Any:
    hidden = x.to(torch.float32)
    variance = hidden.pow(2).mean(-1, keepdim=True)
    hidden = hidden * torch.rsqrt(variance + 1e-6)
    return weight * hidden.to(x.dtype)


def _torchtitan(x: Any, weight: Any) -> Any:
    normed = x.float()
    normed = normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + 1e-6)
    return normed.type_as(x) * weight


def _count(module: Any, weight_dtype: Any) -> tuple[float, float]:
    """Bytes an element of the forward and of the backward (both gradients)."""
    x = torch.randn(ROWS, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.nn.Parameter(torch.ones(HIDDEN, dtype=weight_dtype))
    with _Moved() as forward:
        y = module(x, weight)
    grad = torch.randn_like(y)
    with _Moved() as backward:
        y.backward(grad)
    return forward.moved / x.numel(), backward.moved / x.numel()


def test_the_profiles_count_the_bytes_the_measured_modules_kernels_move() -> None:
    """Liger's module, as measured: 38 bytes an element forward, 108 backward, each profile's."""
    forward, backward = _count(_liger, torch.float32)
    assert forward == pytest.approx(38, abs=0.05)
    assert backward == pytest.approx(108, abs=0.05)
    for key in ("a100", "h100", "h100-hbm2e"):
        profile = device(key).kernels
        assert profile is not None
        found = kernels(profile).eager_rmsnorm
        assert found is not None
        assert found.forward == pytest.approx(forward, abs=0.05)
        assert found.backward == pytest.approx(backward, abs=0.05)


def test_torchtitans_rmsnorm_with_fsdp2s_bf16_weight_moves_less() -> None:
    """torchtitan's, its weight bf16: 36 and 92 (the fp32 output and gradient the benchmark's
    weight makes are what the difference is), as cost/norms.py says and does not charge."""
    forward, backward = _count(_torchtitan, torch.bfloat16)
    assert forward == pytest.approx(36, abs=0.05)
    assert backward == pytest.approx(92, abs=0.05)
