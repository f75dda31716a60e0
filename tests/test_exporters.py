"""Extraction on the ONNX that exporters other than torch.onnx.export write, each file made by that
exporter (tools/build_*_fixture(s).py) and checked against that framework's own count, recorded in
fixtures/onnx/MANIFEST.json when the file was made: paddle2onnx (weights in Constant nodes, pads
computed from shapes), tf2onnx (NHWC, folded BatchNorm, Keras LSTMs, while loops), jax2onnx
(lax.scan as a Loop carrying its weights), TorchScript control flow (Loop and If), and
onnxruntime's transformer optimizer (com.microsoft fused attention, as optimum ships)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import Result

from modtrans.extraction import extract
from modtrans.ir.document import Kind, Layer, ModelIR
from tests.conftest import ROOT

FOLDER = ROOT / "fixtures" / "onnx"
MANIFEST = json.loads((FOLDER / "MANIFEST.json").read_text())["files"]
Run = Callable[..., Result]


def _ir(
    name: str, allowed: frozenset[str] = frozenset(), /, **shapes: tuple[int, ...]
) -> tuple[ModelIR, set[str]]:
    ir, found = extract(FOLDER / name, input_shapes=shapes)
    assert ir is not None, [str(d) for d in found]
    codes = {d.code for d in found}
    assert codes <= allowed, [str(d) for d in found]
    return ir, codes


def _layer(ir: ModelIR, op_type: str) -> Layer:
    return next(x for x in ir.layers if x.op_type == op_type)


def test_paddle2onnx_weights_in_constant_nodes_and_pads_computed_from_the_width() -> None:
    manifest = MANIFEST["paddle_ocr_tiny.onnx"]
    ir, _ = _ir("paddle_ocr_tiny.onnx", x=(2, 3, 8, 37))  # no X504 / X510: every shape resolves
    assert ir.totals.params == manifest["paddle_parameters"] == 20_125
    # BatchNorm's running mean and variance are Paddle's stop_gradient parameters
    assert ir.totals.trainable_params == manifest["paddle_trainable_parameters"] == 20_093
    # width 37 -> pool 18 -> ConvTranspose 36 -> padded to a multiple of 8: 40 steps for the LSTM
    assert _layer(ir, "Pad").outputs[0].shape == (2, 8, 1, 8, 40)
    lstm = _layer(ir, "LSTM")
    assert lstm.inputs[0].shape == (40, 2, 64)
    # ONNX LSTM: per direction and step, 4 gates of [hidden 24] from input 64 and hidden 24
    macs = 2 * 40 * 2 * 4 * 24 * (64 + 24)
    assert lstm.flops.forward == 2 * macs + 2 * 40 * 2 * 4 * 24  # + one bias add (Wb + Rb summed once)


def test_paddle2onnx_with_the_width_unknown_names_what_it_blocks() -> None:
    ir, found = extract(FOLDER / "paddle_ocr_tiny.onnx", batch=2)  # DynamicDimension.1 stays
    assert ir is not None
    unknown = [x for x in ir.layers if not x.flops_known]
    assert unknown[0].op_type == "Conv"  # the first layer: its input's width is the unknown dim
    assert any(
        d.code == "X510" and d.message.startswith("layer Conv.0 (Conv)") and "'x'" in d.message for d in found
    )
    assert ir.totals.params == MANIFEST["paddle_ocr_tiny.onnx"]["paddle_parameters"]  # shapes aside


def test_tf2onnx_cnn_counts_keras_parameters_less_the_folded_batchnorm() -> None:
    manifest = MANIFEST["tf2onnx_cnn.onnx"]
    ir, _ = _ir("tf2onnx_cnn.onnx", image=(2, 32, 32, 3))
    # tf2onnx folds BatchNormalization (gamma, beta, mean, variance: 4 x 16) into the conv before it
    assert ir.totals.params == manifest["keras_parameters"] - manifest["keras_batchnorm_parameters"] == 1_218
    convs = [x for x in ir.layers if x.kind is Kind.CONV]
    assert convs[0].inputs[0].shape == (2, 3, 32, 32)  # NHWC input, transposed to NCHW in front
    assert convs[0].flops.forward == 2 * (2 * 32 * 32) * 16 * 27 + 2 * 32 * 32 * 16  # MACs x 2 + bias
    assert convs[1].gemm is not None
    assert convs[1].gemm.groups == 16  # DepthwiseConv2D: group = channel
    assert _layer(ir, "ConvTranspose").outputs[0].shape == (2, 8, 64, 64)


def test_tf2onnx_lstm_has_keras_parameters_and_the_recurrent_bias_onnx_adds() -> None:
    manifest = MANIFEST["tf2onnx_lstm.onnx"]
    ir, _ = _ir("tf2onnx_lstm.onnx", frames=(2, 10, 16))
    # Keras's LSTM has one bias of 4 x 24; ONNX's B is [Wb, Rb] and tf2onnx writes Rb as zeros
    assert ir.totals.params == manifest["keras_parameters"] + 4 * 24 == 4_132
    assert _layer(ir, "LSTM").inputs[0].shape == (10, 2, 16)  # batch-first, transposed in front


def test_a_while_loop_on_a_counter_runs_as_often_as_its_condition_says() -> None:
    """tools/build_tf2onnx_fixtures.py: tf.while_loop(lambda t, h: t < steps, ...) from t = 0 by
    1, steps = tf.shape(frames)[1]: 10 iterations for 10 frames. Each reads frames[:, t, :], [2, 16]
    whatever t, and multiplies it by W: 2 x 2 x 16 x 16 FLOPs (ONNX MatMul) an iteration."""
    ir, _ = _ir("tf2onnx_while.onnx", frames=(2, 10, 16))  # no X504 / X510 / X514
    body = [x for x in ir.layers if x.name.startswith("while_loop/body/")]
    assert body
    assert {x.repeats for x in body} == {10}
    matmul = _layer(ir, "MatMul")
    assert matmul.inputs[0].shape == (2, 16)
    assert matmul.flops.forward == 10 * 2 * 2 * 16 * 16
    assert ir.totals.params == MANIFEST["tf2onnx_while.onnx"]["parameters"]  # W: a weight, not an input


def test_a_while_loop_whose_count_nobody_knows_is_costed_once_and_translate_says_so(
    run_cli: Run, tmp_path: Path
) -> None:
    """With the number of frames unknown (--batch alone), so is the loop's count: X514."""
    ir, found = extract(FOLDER / "tf2onnx_while.onnx", batch=2)
    assert ir is not None
    assert "X514" in {d.code for d in found}
    body = [x for x in ir.layers if x.name.startswith("while_loop/body/")]
    assert body
    assert all(not x.flops_known for x in body)
    path = str(FOLDER / "tf2onnx_while.onnx")
    refused = run_cli("translate", path, "--batch", "2", "-o", str(tmp_path / "w.txt"))
    assert refused.exit_code == 1
    assert "error X514 Loop" in refused.output
    assert "a while loop" in refused.output
    kept = run_cli("translate", path, "--batch", "2", "--allow-unknown", "-o", str(tmp_path / "w.txt"))
    assert kept.exit_code == 0, kept.output
    metadata = json.loads((tmp_path / "w.txt.meta.json").read_text())
    assert {x.name for x in body} <= set(metadata["unknown_flops"])


def test_jax_scan_carries_its_weights_and_runs_its_body_every_step() -> None:
    manifest = MANIFEST["jax_scan_classifier.onnx"]
    ir, _ = _ir("jax_scan_classifier.onnx", x=(2, 16, 16, 3))
    # the cell's kernel and bias reach the Loop body as carried values: weights, counted once
    assert ir.totals.params == manifest["jax_parameters"] == 2_309
    cell = next(x for x in ir.layers if "Loop" in x.name and x.op_type == "Gemm")
    steps = manifest["scan_steps"]
    assert cell.repeats == steps == 6
    assert cell.flops.forward == steps * (2 * 2 * 32 * 32 + 2 * 32)  # Linear(32, 32) on batch 2, + bias
    assert cell.gemm is not None
    assert cell.gemm.groups == steps
    head = next(
        x for x in ir.layers if x.op_type == "Gemm" and "Loop" not in x.name and x.gemm and x.gemm.n == 5
    )
    assert head.inputs[0].shape == (2, 32)  # the Loop's final state has its shape


def test_jax_scan_over_a_sequence_stacks_its_outputs() -> None:
    manifest = MANIFEST["jax_scan_rnn.onnx"]
    ir, _ = _ir("jax_scan_rnn.onnx", xs=(7, 2, 16))
    assert ir.totals.params == manifest["jax_parameters"] == 1_732
    body = [x for x in ir.layers if "Loop" in x.name]
    assert {x.repeats for x in body} == {manifest["scan_steps"]}
    # onnx leaves a Loop's scan outputs [?, B, 4]: with the trip count they are [7, B, 4]
    assert _layer(ir, "Softmax").inputs[0].shape == (7, 2, 4)


def test_torchscript_loop_runs_once_per_step_and_the_if_takes_its_branch() -> None:
    manifest = MANIFEST["torchscript_loop_if.onnx"]
    for steps, taken, skipped in ((6, "big", "small"), (3, "small", "big")):
        ir, _ = _ir("torchscript_loop_if.onnx", x=(steps, 2, 16))
        names = {x.name for x in ir.layers}
        assert taken in names
        assert skipped not in names
        # the branch not taken trains nothing: PyTorch's count less that Linear(32, 8)
        assert ir.totals.params == manifest["torch_parameters"] - manifest["untaken_branch_parameters"]
        recurrent = next(x for x in ir.layers if x.name.endswith("rec"))
        assert recurrent.repeats == steps
        assert recurrent.flops.forward == steps * (2 * 2 * 32 * 32 + 2 * 32)


def test_a_vad_with_an_if_on_its_sample_rate_costs_both_lstms() -> None:
    """The issue's `sr` case: an If on the value of an input, an LSTM in each branch, after pads
    computed from the input's length."""
    manifest = MANIFEST["torchscript_vad.onnx"]
    ir, codes = _ir("torchscript_vad.onnx", frozenset({"X504", "X513"}), x=(2, 510), sr=())
    assert "X513" in codes
    # PyTorch's count, the head's one-element bias (Linear(24, 1)) included
    assert ir.totals.params == manifest["torch_parameters"] == 8_233
    lstms = [x for x in ir.layers if x.op_type == "LSTM"]
    assert len(lstms) == 2  # both branches, each with its own weights
    assert {sum(p.elements for p in x.params) for x in lstms} == {manifest["lstm_parameters"]}
    # 510 samples padded to 512: the strided conv makes (512 - 8) / 4 + 1 = 127 frames
    assert lstms[0].inputs[0].shape == (127, 2, 16)
    assert all(x.flops_known for x in ir.layers)


def test_fused_attention_from_onnxruntimes_optimizer_has_every_shape() -> None:
    """bert_tiny_ort_fused.onnx is bert_tiny_legacy.onnx after onnxruntime's transformer
    optimizer (EmbedLayerNormalization, Attention, SkipLayerNormalization, BiasGelu): onnx's shape
    inference knows none of them, so without our rules every tensor after the embedding was unknown."""
    shapes = {"input_ids": (2, 32), "attention_mask": (2, 32), "token_type_ids": (2, 32)}
    fused, _ = _ir("bert_tiny_ort_fused.onnx", **shapes)
    plain, _ = _ir("bert_tiny_legacy.onnx", **shapes)
    torch_count = MANIFEST["bert_tiny_ort_fused.onnx"]["torch_parameters"]
    assert fused.totals.params == plain.totals.params == torch_count == 172_416
    fused_ops = set(MANIFEST["bert_tiny_ort_fused.onnx"]["fused_operators"])
    assert fused_ops <= {x.op_type for x in fused.layers}
    assert all(x.flops_known for x in fused.layers)
    # Megatron's forward FLOPs without the logits, per layer 24 B s h^2 + 4 B s^2 h (Narayanan et
    # al. 2021, eq. 2's terms): the unfused GEMMs are exactly that; the fused file keeps the two
    # attention products inside Attention, whose GEMM is the QKV projection
    b, s, h, layers = 2, 32, 64, 2
    megatron = layers * (24 * b * s * h * h + 4 * b * s * s * h)
    assert _gemm_flops(plain) == megatron
    assert _gemm_flops(fused) + layers * 4 * b * s * s * h == megatron
    assert _layer(fused, "Attention").outputs[0].shape == (2, 32, 64)


def _gemm_flops(ir: ModelIR) -> int:
    return sum(2 * x.gemm.m * x.gemm.k * x.gemm.n * x.gemm.groups for x in ir.layers if x.gemm)


@pytest.mark.slow
@pytest.mark.alone
def test_a_size_computed_from_a_huge_constant_does_not_exhaust_the_machine(tmp_path: Path) -> None:
    """Found by the fuzzer on torchscript_vad.onnx: the 4 of its pad arithmetic made 2**30 + 4 had
    onnx's data propagation allocate until the kernel killed the process (24 GB). Inference now
    has a memory budget, and past it runs without data propagation, saying so."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(FOLDER / "torchscript_vad.onnx"), load_external_data=False)
    node = next(n for n in model.graph.node if n.output[0] == "/Constant_13_output_0")
    node.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array(2**30 + 4, np.int64)))
    path = tmp_path / "vad.onnx"
    onnx.save(model, str(path))
    _, found = extract(path, file_hash=False)
    assert any(d.code == "X503" and "GiB" in d.message for d in found)
