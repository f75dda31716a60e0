"""A recurrent model's token loop recorded as one pass over the sequence (modtrans/hf/scans.py):
the recording of every recurrent family transformers ships is the same at any sequence length, and
the one pass keeps each module's counts as transformers' own loop, recorded op by op, gives them.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import collections
import contextlib
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import built, classes, library, scans  # noqa: E402
from modtrans.ir.document import Kind, ModelIR  # noqa: E402
from tests.hfcheck import agrees  # noqa: E402

pytestmark = pytest.mark.hf

SMALL = {"num_hidden_layers": 2}
RECURRENT: dict[str, dict[str, Any]] = {
    # a token loop replaced (scans.FUNCTIONS, scans.METHODS)
    "mamba": SMALL,
    "falcon_mamba": SMALL,
    "jamba": {"num_hidden_layers": 2, "attn_layer_period": 2, "expert_layer_period": 2},
    "zamba": {"num_hidden_layers": 4},
    "recurrent_gemma": {"num_hidden_layers": 3},
    "rwkv": SMALL,
    "xlstm": {"num_blocks": 2, "num_hidden_layers": 2},
    "qwen3_next": {"num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"]},
    "olmo_hybrid": SMALL,
    "kimi_linear": SMALL,
    # chunked scans, no loop (Mamba-2's SSD in torch_forward), a short convolution (LFM2)
    "mamba2": SMALL,
    "bamba": SMALL,
    "falcon_h1": SMALL,
    "granitemoehybrid": SMALL,
    "lfm2": SMALL,
}
"""The recurrent and state-space types transformers 5 ships, each cut to a few layers."""

REPLACED = (
    "mamba",
    "falcon_mamba",
    "jamba",
    "zamba",
    "recurrent_gemma",
    "rwkv",
    "xlstm",
    "qwen3_next",
    "olmo_hybrid",
    "kimi_linear",
)
CHUNKS = {"xlstm": 64, "qwen3_next": 64, "olmo_hybrid": 64, "kimi_linear": 64}
"""A type whose scan loops over chunks of this many tokens (xLSTM's chunkwise kernel, a gated delta
net's; an xLSTM sequence not a multiple of it leaves a remainder its token loop runs, under 64
steps): its lengths are multiples of it."""
SLOW = {"zamba", "jamba"}  # a few seconds each read


def read(model_type: str, sequence: int, one_pass: bool = True) -> tuple[Any, dict[str, Any], built.Read]:
    config = classes.default_config(model_type)
    for key, value in RECURRENT[model_type].items():
        setattr(config, key, value)
    model = library.build(config)
    with pytest.MonkeyPatch.context() as patch:
        if not one_pass:  # transformers' own loops, recorded op by op
            patch.setattr(scans, "FUNCTIONS", {})
            patch.setattr(scans, "METHODS", {})
        read = built.read(model, 1, sequence)
    return model, read.given, read


def _params(types: Any) -> list[Any]:
    return [pytest.param(t, marks=pytest.mark.slow) if t in SLOW else t for t in types]


@pytest.mark.parametrize("model_type", _params(sorted(RECURRENT)))
def test_a_recurrent_model_records_the_same_ops_at_any_length(model_type: str) -> None:
    """A token loop left in the recording grows it with the sequence: ops and layers by the
    thousand at 2,048 tokens. Every recurrent type records the same ops at 16 and 40 tokens (or
    chunks)."""
    chunk = CHUNKS.get(model_type, 1)
    _, _, short = read(model_type, 16 * chunk)
    _, _, long = read(model_type, 40 * chunk)
    ops = [[(op.module, op.name) for op in x.recorded.ops] for x in (short, long)]
    assert ops[0] == ops[1]


def _by_module(ir: ModelIR) -> dict[tuple[str, str], tuple[int, int, int]]:
    """Per module and kind: the layers' forward, input-gradient and weight-gradient FLOPs (a
    scan's own layers, MIXER.selective_scan, its module's)."""
    sums: dict[tuple[str, str], list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    for x in ir.layers:
        kind = "gemm" if x.kind in (Kind.LINEAR, Kind.MATMUL, Kind.CONV) else x.kind.value
        total = sums[(x.node.removesuffix(".selective_scan"), kind)]
        total[0] += x.flops.forward
        total[1] += x.flops.input_grad
        total[2] += x.flops.weight_grad
    return {k: (a, b, c) for k, (a, b, c) in sums.items()}


@pytest.mark.parametrize("model_type", _params(REPLACED))
def test_the_one_pass_keeps_each_module_s_counts_as_transformers_loop_gives_them(model_type: str) -> None:
    """Each module's matrix-product and element-wise FLOPs (forward and both gradients) the loop's
    own, op by op; parameters and matrix products against transformers and FlopCounterMode
    (which counts the loop itself: library.count_forward does not replace it)."""
    length = 24 * CHUNKS.get(model_type, 1)
    model, given, fast = read(model_type, length)
    _, _, slow = read(model_type, length, one_pass=False)
    one, loop = fast.ir, slow.ir
    assert len(fast.recorded.ops) < len(slow.recorded.ops)  # the steps' ops recorded once
    assert len(one.layers) <= len(loop.layers)  # Mamba's: a matmul per step, folded to one
    ours, theirs = _by_module(one), _by_module(loop)
    assert ours.keys() == theirs.keys()
    for key, (forward, input_grad, weight_grad) in theirs.items():
        assert ours[key][:2] == (forward, input_grad), key
        # the loop's step 0 joins the discretisation's group, which reads A: its weight gradient
        # charged there; the scan's own group reads no parameter. At most one step's elements.
        assert 0 <= weight_grad - ours[key][2] <= forward // length, key
    assert one.layers[-1].outputs == loop.layers[-1].outputs
    agrees(model, given, one)


def test_a_scan_off_meta_runs_transformers_own_code() -> None:
    """On CPU tensors the one-pass form is not taken: the values are transformers' loop's."""
    from transformers.models.mamba import modeling_mamba

    original = modeling_mamba.mamba_selective_scan
    generator = torch.Generator().manual_seed(0)
    b, d, n, length = 1, 3, 2, 5
    u, dt, z = (torch.randn(b, d, length, generator=generator) for _ in range(3))
    a = -torch.rand(d, n, generator=generator)
    bb, cc = (torch.randn(b, n, length, generator=generator) for _ in range(2))
    expected = original(u, dt, a, bb, cc, D=torch.ones(d), z=z, delta_softplus=True)
    got = scans.mamba(original, lambda name: contextlib.nullcontext())(
        u, dt, a, bb, cc, D=torch.ones(d), z=z, delta_softplus=True
    )
    assert torch.equal(got, expected)


DELTAS = {
    "torch_chunk_gated_delta_rule": ("qwen3_next", "modeling_qwen3_next", False),
    "chunk_kimi_delta_attention": ("kimi_linear", "modeling_kimi_linear", True),
}
"""A delta rule scans.FUNCTIONS replaces -> the modeling module that defines it, and whether its
decay g is per channel (Kimi's [batch, L, heads, k]) or per head (a gated delta net's)."""


@pytest.mark.parametrize("name", sorted(DELTAS))
def test_a_delta_rule_off_meta_is_transformers_own_and_on_meta_has_its_shapes(name: str) -> None:
    """Off meta (CPU tensors, g and beta given by position and by name) the values are
    transformers' own; on meta the one pass returns what transformers' loop returns on CPU in
    shape and dtype, the final state included (a sequence not a multiple of the chunk)."""
    import importlib

    package, module, per_channel = DELTAS[name]
    original = getattr(importlib.import_module(f"transformers.models.{package}.{module}"), name)
    rule = scans.FUNCTIONS[name](original, lambda name: contextlib.nullcontext())
    generator = torch.Generator().manual_seed(0)
    b, length, heads, k, v = 1, 70, 2, 4, 3
    query, key = (torch.randn(b, length, heads, k, generator=generator) for _ in range(2))
    value = torch.randn(b, length, heads, v, generator=generator)
    g = -torch.rand(b, length, heads, *((k,) if per_channel else ()), generator=generator)
    beta = torch.rand(b, length, heads, generator=generator)
    flags = {"output_final_state": True, "use_qk_l2norm_in_kernel": True}
    out, state = original(query, key, value, g, beta, **flags)
    for got in (rule(query, key, value, g, beta, **flags), rule(query, key, value, g=g, beta=beta, **flags)):
        assert torch.equal(got[0], out)
        assert torch.equal(got[1], state)
    meta = [x.to("meta") for x in (query, key, value, g, beta)]
    one_out, one_state = rule(*meta, **flags)
    assert (one_out.shape, one_out.dtype) == (out.shape, out.dtype)
    assert (one_state.shape, one_state.dtype) == (state.shape, state.dtype)


def test_the_replaced_functions_are_restored() -> None:
    from transformers.models.mamba import modeling_mamba

    before = modeling_mamba.mamba_selective_scan
    model, _, _ = read("mamba", 8)
    with scans.one_pass(model) as replaced:
        assert replaced == 1
        assert modeling_mamba.mamba_selective_scan is not before
    assert modeling_mamba.mamba_selective_scan is before
