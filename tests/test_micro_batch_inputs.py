"""The batch and sequence a user asks for reach every input of every kind of model: the micro-batch
under a layout (--micro-batch), --batch, and --seq-len. Two defects of one class came before this:
a model transformers builds (BLOOM and every family llm/ does not describe) was read at one
sample whatever --micro-batch said, so each micro-batch was charged one sequence's compute; and
GPT-2's ONNX graph got input_ids=1xS from --seq-len while its attention_mask, the same [batch,
sequence] symbols, kept the built-in default 1x128, so the attention's shapes were unknown (X510).

The expected FLOPs are the linears' own arithmetic, 2 x tokens x fan-in x fan-out (+ tokens x
fan-out for a bias), from the models' published configurations (GPT-2 small: 768 wide, QKV 2,304;
BLOOM-3B's config.json in fixtures/hf: hidden 2,560, vocabulary 250,880), never read back from
the code under test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from modtrans import pipeline
from modtrans.ir.document import ModelIR
from modtrans.request import prepare, request_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GPT2_ONNX = Path(__file__).resolve().parent.parent / "modtrans" / "zoo" / "gpt2.onnx"


def _ir(model: str | Path, **options: Any) -> ModelIR:
    prepared = prepare(request_of(model, options))
    result = pipeline.translate_checked(model, prepared.options)
    assert result.ir is not None, result.diagnostics
    assert not [d for d in result.diagnostics if d.severity == 1], result.diagnostics
    return result.ir


def _forward(ir: ModelIR, name: str) -> int:
    (layer,) = [x for x in ir.layers if x.name == name]
    return layer.flops.forward


@pytest.mark.parametrize(
    ("options", "batch"),
    [
        ({"seq_len": 256}, 1),
        ({"seq_len": 256, "batch": 2}, 2),
        ({"seq_len": 256, "npus": 2, "micro_batch": 2, "global_batch": 4}, 2),
        ({"input_shape": {"input_ids": (3, 256)}}, 3),
    ],
)
@pytest.mark.parametrize("model", ["gpt2", GPT2_ONNX], ids=["built-in", "onnx-file"])
def test_gpt2_inputs_follow_the_sequence_and_batch(
    model: str | Path, options: dict[str, Any], batch: int
) -> None:
    ir = _ir(model, **options)
    tokens = batch * 256
    assert _forward(ir, "transformer.h.0.attn.c_attn") == tokens * 2304 * (2 * 768 + 1)  # + the bias add
    assert ir.provenance.input_shapes["attention_mask"] == (batch, 256)


def test_an_onnx_copy_binds_the_named_dims_too(tmp_path: Path) -> None:
    """A plain ONNX file (not the built-in entry, whose defaults resolve the names) goes through
    extraction/load.apply_inputs: the mask follows input_ids by the names they share."""
    copy = tmp_path / "model.onnx"
    shutil.copyfile(GPT2_ONNX, copy)
    ir = _ir(copy, seq_len=64, batch=4)
    assert ir.provenance.input_shapes == {"input_ids": (4, 64), "attention_mask": (4, 64)}


RESNET50_ONNX = GPT2_ONNX.with_name("resnet50.onnx")


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # the manifest's defaults (modtrans/zoo/manifest.json: batch 1, sequence 128) fill what
        # nothing else sets; --batch sets every input's batch axis
        ({}, {"input_ids": (1, 128), "attention_mask": (1, 128)}),
        ({"batch": 3}, {"input_ids": (3, 128), "attention_mask": (3, 128)}),
        # a shape given binds its dims' names for the other input, the batch's too
        ({"input_shape": {"input_ids": (2, 64)}}, {"input_ids": (2, 64), "attention_mask": (2, 64)}),
        ({"input_shape": {"attention_mask": (2, 64)}}, {"input_ids": (2, 64), "attention_mask": (2, 64)}),
        (
            {"input_shape": {"input_ids": (2, 64)}, "batch": 2},
            {"input_ids": (2, 64), "attention_mask": (2, 64)},
        ),
    ],
)
def test_a_built_in_binds_its_inputs_as_the_same_onnx_file_does(
    options: dict[str, Any], expected: dict[str, tuple[int, ...]], tmp_path: Path
) -> None:
    """One binding for a built-in and a file: the built-in's defaults (its manifest's) are the last
    word, after the shapes given and the batch; the file has none, so it is handed the rest."""
    copy = tmp_path / "gpt2.onnx"
    shutil.copyfile(GPT2_ONNX, copy)
    assert _ir("gpt2", **options).provenance.input_shapes == expected
    given = {"input_shape": {"input_ids": expected["input_ids"]}} if not options.get("input_shape") else {}
    assert _ir(copy, **options, **given).provenance.input_shapes == expected


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("gpt2", {"input_shape": {"input_ids": (2, 64)}, "batch": 4}),
        (
            "gpt2",
            {"input_shape": {"attention_mask": (1, 64)}, "npus": 2, "micro_batch": 4, "global_batch": 8},
        ),
        ("resnet50", {"input_shape": {"input": (4, 3, 224, 224)}, "batch": 8}),
        (RESNET50_ONNX, {"input_shape": {"input": (4, 3, 224, 224)}, "batch": 8}),
    ],
)
def test_a_batch_a_given_shape_contradicts_is_refused(model: str | Path, options: dict[str, Any]) -> None:
    """--batch (or the micro-batch under a layout) and an --input-shape whose batch axis says
    otherwise: the model cannot be read at both, so the translation is refused in one line (it
    used to keep the shape's size for that input and the batch's for the others on a built-in,
    the shape's alone on a file, silently)."""
    prepared = prepare(request_of(model, options))
    result = pipeline.translate_checked(model, prepared.options)
    (error,) = [d for d in result.diagnostics if d.severity == 1]
    assert error.code == "X501"
    assert "two sizes" in error.message
    assert "dimension 0" in error.message


@pytest.mark.hf
@pytest.mark.parametrize("micro", [1, 2])
def test_a_family_transformers_builds_reads_the_micro_batch(
    micro: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    config = FIXTURES / "hf" / "bloom-3b-finetune.json"
    ir = _ir(config, seq_len=128, npus=2, micro_batch=micro, global_batch=4, dialect="simai")
    assert _forward(ir, "lm_head") == 2 * micro * 128 * 2560 * 250880
    # + its bias add: BloomMLP's dense_h_to_4h is an nn.Linear with a bias (modeling_bloom.py), which
    # torch runs as one addmm (the bias add not in FlopCounterMode's count of it)
    tokens = micro * 128
    assert _forward(ir, "transformer.h.0.mlp.dense_h_to_4h") == tokens * 10240 * (2 * 2560 + 1)
