"""Extraction on real PyTorch exports (fixtures/onnx, made by tools/build_onnx_fixtures.py).

The expected parameter counts are PyTorch's own (`sum(p.numel() for p in model.parameters())`,
recorded in fixtures/onnx/MANIFEST.json when the files were exported), and both of PyTorch's ONNX
exporters must agree on the work of every GEMM-like layer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans import api
from modtrans.extraction import extract
from modtrans.ir.document import Kind, ModelIR
from tests.conftest import ROOT

FOLDER = ROOT / "fixtures" / "onnx"
MANIFEST = json.loads((FOLDER / "MANIFEST.json").read_text())["files"]
SIZES = {"batch": 2, "sequence": 32}


def _size(axis: int, dim: int | str) -> int:
    """A symbolic dim's test size: by its name, else 2 for the first (exporters name batches
    `unk__N`, `DynamicDimension.0`, `B`) and 32 for any other."""
    if isinstance(dim, int):
        return dim
    return SIZES.get(dim, 2 if axis == 0 else 32)


def _dims(name: str) -> dict[str, tuple[int, ...]]:
    """The test sizes of the file's inputs, by the dims MANIFEST.json records."""
    return {k: tuple(_size(i, d) for i, d in enumerate(v)) for k, v in MANIFEST[name]["inputs"].items()}


def _load(name: str) -> ModelIR:
    ir, found = extract(FOLDER / name, input_shapes=_dims(name))
    assert ir is not None, found
    expected = set(MANIFEST[name].get("expected_diagnostics", ()))  # what the manifest says the file gives
    assert [d for d in found if d.code not in expected] == [], found
    return ir


def _gemm_macs(ir: ModelIR) -> int:
    return sum(
        x.gemm.m * x.gemm.k * x.gemm.n * x.gemm.groups
        for x in ir.layers
        if x.gemm is not None and x.kind in (Kind.CONV, Kind.LINEAR, Kind.MATMUL, Kind.RNN)
    )


@pytest.mark.parametrize(
    "name",
    [
        "resnet18_legacy.onnx",
        "gpt2_tiny_legacy.onnx",
        "gpt2_tiny_dynamo.onnx",
        "lstm_legacy.onnx",
        "mobilenet_v3_small_fp16_legacy.onnx",
        "llama_tiny_dynamo.onnx",
        "buffers_dynamo.onnx",
    ],
)
def test_trainable_parameters_equal_pytorchs_count(name: str) -> None:
    assert _load(name).totals.trainable_params == MANIFEST[name]["torch_parameters"]


@pytest.mark.parametrize("name", ["llama_tiny_dynamo.onnx", "buffers_dynamo.onnx"])
def test_a_buffer_the_dynamo_export_marks_is_held_untrained(name: str) -> None:
    """torch.export's BUFFER and CONSTANT_TENSOR initializers (RoPE's inv_freq; a registered buffer,
    persistent or not; a tensor attribute) are model state: in the IR's parameters with their
    bytes, never trained, so no gradient, all-reduce or optimizer state is made for them."""
    ir = _load(name)
    entry = MANIFEST[name]
    held = {p.name: p for x in ir.layers for p in x.params if p.counted and not p.trainable}
    stored = {**entry["torch_buffer_elements"], **entry.get("torch_constant_elements", {})}
    marked = {n for kind in ("BUFFER", "CONSTANT_TENSOR") for n in entry["export_kinds"].get(kind, ())}
    assert held
    assert set(held) == marked
    assert marked <= set(stored)
    assert ir.totals.params == entry["torch_parameters"] + sum(p.elements for p in held.values())
    assert ir.totals.param_bytes == ir.totals.trainable_bytes + sum(p.bytes for p in held.values())
    reduced = api.workload(FOLDER / name, input_shape=_dims(name))
    fp32 = 4  # torch's default dtype, the model's: one gradient of 4 bytes a parameter
    assert sum(x.weight_grad.comm_size for x in reduced.layers) == fp32 * entry["torch_parameters"]


def test_the_dynamo_export_s_rotary_products_keep_no_operand_for_inv_freq() -> None:
    """Held as a trained parameter (the TorchScript export), inv_freq makes each rotary product
    keep its other operand for a weight gradient: q, rotate_half(q), k, rotate_half(k), b s hd
    fp32 elements each per head, per layer (tests/test_saved_torch.py's Llama, its `rotary` term:
    what autograd does not keep). Marked a buffer (the dynamo export), it makes none: the same
    activations less that term. The model: tools/build_buffer_fixture.py's (2 layers, 2 heads and
    2 key/value heads of 32 / 2 = 16)."""
    b, s = SIZES["batch"], SIZES["sequence"]
    layers, heads, kv, hd = 2, 2, 2, 16
    rotary = layers * 2 * 4 * b * s * hd * (heads + kv)
    legacy, dynamo = (_activations(f"llama_tiny_{kind}.onnx") for kind in ("legacy", "dynamo"))
    assert dynamo == legacy - rotary


def _activations(name: str) -> int:
    """The activations one rank holds, as a translation of the file on one rank reports them."""
    result = api.translate(FOLDER / name, input_shape=_dims(name))
    assert result.plan is not None
    (memory,) = result.plan.memory
    return memory.activations


def test_a_torchscript_export_marks_no_buffer_so_inv_freq_stays_counted() -> None:
    """The TorchScript exporter writes no export kinds: RoPE's inv_freq (head_dim / 2 = 8 elements,
    torch's buffer) is a Constant like any weight's, so it is counted trainable, as before."""
    entry = MANIFEST["llama_tiny_legacy.onnx"]
    (inv_freq,) = (n for n in entry["torch_buffer_elements"] if n.endswith("rotary_emb.inv_freq"))
    ir = _load("llama_tiny_legacy.onnx")
    assert ir.totals.trainable_params == entry["torch_parameters"] + entry["torch_buffer_elements"][inv_freq]


def test_folded_batchnorm_in_the_dynamo_export() -> None:
    # The dynamo exporter's optimizer folds each BatchNorm (gamma, beta: 2C parameters) into its
    # conv (weights rescaled, plus a C-element bias): C fewer parameters per BatchNorm. ResNet-18's
    # BatchNorm channels: 64 + 4x64 + (4x128 + 128) + (4x256 + 256) + (4x512 + 512) = 4,800.
    ir = _load("resnet18_dynamo.onnx")
    assert not [x for x in ir.layers if x.kind is Kind.NORM]
    assert ir.totals.trainable_params == MANIFEST["resnet18_dynamo.onnx"]["torch_parameters"] - 4_800


@pytest.mark.parametrize("model", ["resnet18", "gpt2_tiny"])
def test_both_exporters_give_the_same_gemm_work(model: str) -> None:
    legacy, dynamo = _load(f"{model}_legacy.onnx"), _load(f"{model}_dynamo.onnx")
    assert _gemm_macs(legacy) == _gemm_macs(dynamo) > 0


def test_resnet18_and_mobilenet_v3_work_match_torchvisions_published_ops() -> None:
    # torchvision docs, `_ops` (GMACs) at batch 1: resnet18 1.81, mobilenet_v3_small 0.06; batch 2 here.
    assert round(_gemm_macs(_load("resnet18_legacy.onnx")) / 2 / 1e9, 2) == 1.81
    conv_linear = [
        x for x in _load("mobilenet_v3_small_fp16_legacy.onnx").layers if x.kind in (Kind.CONV, Kind.LINEAR)
    ]
    macs = sum(x.gemm.m * x.gemm.k * x.gemm.n * x.gemm.groups for x in conv_linear if x.gemm)
    assert round(macs / 2 / 1e9, 2) == 0.06


def test_lstm_weights_packed_by_slice_and_concat_are_found() -> None:
    # PyTorch reorders the gates with Slice + Concat of each weight; the LSTM node sees computed
    # tensors. 2 layers x 2 directions; hidden 32: W 128x16 (layer 0) or 128x64, R 128x32, 2 biases.
    ir = _load("lstm_legacy.onnx")
    first, second = (x for x in ir.layers if x.kind is Kind.RNN)
    assert sorted(p.name for p in first.params) == sorted(
        f"lstm.{kind}_l0{suffix}"
        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        for suffix in ("", "_reverse")
    )
    assert sum(p.elements for p in first.params) == 2 * (128 * 16 + 128 * 32 + 2 * 128)
    assert sum(p.elements for p in second.params) == 2 * (128 * 64 + 128 * 32 + 2 * 128)
    # MACs = T*B*dirs*4H*(I+H): 32 x 2 x 2 x 128 x (16 + 32) for the first layer (sequence 32, batch 2)
    assert first.gemm is not None
    assert first.gemm.m * first.gemm.k * first.gemm.n * first.gemm.groups == 32 * 2 * 2 * 128 * 48


def test_fp16_tensors_are_sized_by_their_dtype() -> None:
    ir = _load("mobilenet_v3_small_fp16_legacy.onnx")
    params = [p for x in ir.layers for p in x.params]
    assert {p.dtype for p in params} == {"float16"}
    assert all(p.bytes == 2 * p.elements for p in params)
    assert ir.layers[0].outputs[0].dtype == "float16"


def test_the_export_files_carry_no_weights() -> None:
    for name in MANIFEST:
        ir = _load(name)
        assert Path(FOLDER / name).stat().st_size < 300_000
        assert ir.provenance.architecture_only
