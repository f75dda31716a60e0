"""Meta kernels' outputs remembered (modtrans/hf/kernels.py): an op run again on operands alike
(the next block's, a step of a loop hf/scans.py leaves) takes its outputs' metadata from the first
run's meta kernel. The recurrent families, read so and with every kernel run, give the same IR,
and their counts stay what transformers and FlopCounterMode say.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import built, classes, library  # noqa: E402
from modtrans.hf.kernels import Kernels  # noqa: E402
from modtrans.hf.values import META  # noqa: E402
from tests.hfcheck import agrees  # noqa: E402

pytestmark = pytest.mark.hf

aten = torch.ops.aten

SCANS = {
    "mamba": {"num_hidden_layers": 2},
    "falcon_mamba": {"num_hidden_layers": 2},
    "zamba": {"num_hidden_layers": 4},
    "jamba": {"num_hidden_layers": 2, "attn_layer_period": 2, "expert_layer_period": 2},
    "recurrent_gemma": {"num_hidden_layers": 3},
}


def read(model_type: str, sequence: int, remember: bool) -> tuple[Any, dict[str, Any], Any, Kernels]:
    config = classes.default_config(model_type)
    for key, value in SCANS[model_type].items():
        setattr(config, key, value)
    model = library.build(config)
    kernels = Kernels()
    if not remember:
        kernels.pure = _NeverPure()
    with pytest.MonkeyPatch.context() as patch:  # the recording's Kernels: this one
        patch.setattr(library, "Kernels", lambda: kernels)
        read = built.read(model, 1, sequence)
    return model, read.given, read.ir, kernels


class _NeverPure(dict):  # type: ignore[type-arg]
    def get(self, key: Any, default: Any = None) -> bool:
        return False


QUICK = ("mamba", "recurrent_gemma")  # the rest under -m slow: a Mamba hybrid's read twice is ~20 s


@pytest.mark.parametrize(
    "model_type", [m if m in QUICK else pytest.param(m, marks=pytest.mark.slow) for m in sorted(SCANS)]
)
def test_a_scan_s_steps_take_the_first_step_s_outputs_and_keep_every_count(model_type: str) -> None:
    model, given, fast, kernels = read(model_type, 64, remember=True)
    _, _, slow, ran_all = read(model_type, 64, remember=False)
    assert ran_all.reused == 0
    assert kernels.reused > kernels.ran  # the blocks after the first: most of the forward's kernels
    assert fast.layers == slow.layers  # every layer, its shapes, FLOPs and bytes, each kernel run alone
    agrees(model, given, fast)  # transformers' and FlopCounterMode's


def _ops() -> list[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    a = torch.empty(4, 3, 8, device=META)
    t = a.transpose(0, 2)  # not contiguous: outputs follow its strides
    h = torch.empty(8, 3, 4, dtype=torch.float16, device=META)
    return [
        (aten.mul.Tensor, (a, a[:, :1, :]), {}),  # broadcast
        (aten.add.Tensor, (t, h), {"alpha": 2}),  # strides and type promotion
        (aten.add.Tensor, (t, 1.5), {}),
        (aten.bmm.default, (a, a.transpose(1, 2)), {}),
        (aten.native_layer_norm.default, (a, [8], None, None, 1e-5), {}),  # a tuple of outputs
        (aten.sum.dim_IntList, (t, [0], True), {}),
        (aten._to_copy.default, (t,), {"dtype": torch.bfloat16}),
        (aten.exp.default, (t,), {}),
    ]


def _outs(out: Any) -> tuple[Any, ...]:
    return out if isinstance(out, tuple) else (out,)


def test_a_remembered_output_is_the_meta_kernel_s() -> None:
    kernels = Kernels()
    for func, args, kwargs in _ops() + _ops():  # the second pass from what the first remembered
        made, real = kernels(func, args, kwargs), func(*args, **kwargs)
        for m, r in zip(_outs(made), _outs(real), strict=True):
            assert (m.shape, m.stride(), m.dtype, m.device) == (r.shape, r.stride(), r.dtype, r.device)
    assert kernels.reused == len(_ops())


def test_an_op_that_writes_or_aliases_its_operand_runs_its_kernel() -> None:
    kernels = Kernels()
    a = torch.empty(4, 8, device=META)
    for _ in range(2):
        assert kernels(aten.add_.Tensor, (a, a), {}) is a
        view = kernels(aten.view.default, (a, [8, 4]), {})
        assert view._base is a
    assert kernels.reused == 0
