"""The encoder-decoder T5 family from its published configurations (fixtures/configs: t5-base,
the original T5 with a ReLU MLP and a tied head; google/t5-v1_1-base, gated GELU and a head of its
own; t5-3b, 32 heads x d_kv 128 = 4,096 on d_model 1,024).

Expected counts: fixtures/configs/EXPECTED.json, made by tools/count_transformers_params.py with
transformers 4.57.6 (T5ForConditionalGeneration on the meta device, a tied head once): t5-base
222,903,552 ("223M" on its model card), t5-v1_1-base 247,577,856 ("248M"), t5-3b 2,851,598,336
("2.85B"). transformers 5.24 ties T5's head always (configuration_t5.py: "in fact we tie weights
always"), so it counts t5-v1_1-base 24,674,304 = 32,128 x 768 fewer (EXPECTED.json's
transformers_5); a T5 v1.1 checkpoint has its own lm_head.weight, so ModTrans follows the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from modtrans import pipeline
from modtrans.cli import app
from modtrans.ir.document import ModelIR

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
EXPECTED = json.loads((CONFIGS / "EXPECTED.json").read_text())["counts"]
T5 = sorted(n for n in EXPECTED if EXPECTED[n].get("model_class") == "T5ForConditionalGeneration")
INPUTS, TARGETS = 512, 114
"""T5's pre-training lengths: 512 input tokens, 114 targets (Raffel et al. 2020, section 3.1.4:
span corruption of 15 % of the tokens in spans of mean length 3)."""


def _ir(name: str, inputs: int = INPUTS, targets: int | None = TARGETS, path: Path | None = None) -> ModelIR:
    shapes = {"input_ids": (1, inputs)} | ({"decoder_input_ids": (1, targets)} if targets else {})
    ir, found = pipeline.extract_checked(path or CONFIGS / f"{name}.json", input_shapes=shapes)
    assert ir is not None, [d.message for d in found]
    return ir


def test_the_fixtures_are_the_t5_family() -> None:
    assert T5 == ["t5-3b", "t5-base", "t5-v1_1-base"]


@pytest.mark.parametrize("name", T5)
def test_the_parameters_are_those_transformers_4_builds(name: str) -> None:
    """Against T5ForConditionalGeneration's parameters() (transformers 4.57.6, EXPECTED.json); the
    count does not depend on the sequence lengths."""
    assert _ir(name).totals.params == EXPECTED[name]["parameters"]
    assert _ir(name, 64, None).totals.params == EXPECTED[name]["parameters"]


@pytest.mark.parametrize("name", T5)
def test_transformers_5_differs_by_the_untied_head_alone(name: str) -> None:
    """transformers 5.24 forces the tie: the same count for a tied configuration, vocab x d_model
    fewer for an untied one (T5 v1.1)."""
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    head = 0 if config.get("tie_word_embeddings", True) else config["vocab_size"] * config["d_model"]
    assert EXPECTED[name]["parameters"] - EXPECTED[name]["transformers_5"]["parameters"] == head


@pytest.mark.parametrize(("family", "expected"), [("mt5", 247_577_856), ("umt5", 247_586_304)])
def test_mt5_and_umt5_read_the_same_keys(family: str, expected: int, tmp_path: Path) -> None:
    """t5-v1_1-base's configuration as MT5Config and UMT5Config: MT5ForConditionalGeneration
    247,577,856 and UMT5ForConditionalGeneration 247,586,304 parameters (transformers 4.57.6,
    counted once as tools/count_transformers_params.py counts): umT5 has a relative_attention_bias
    in every block (modeling_umt5.py, UMT5LayerSelfAttention: has_relative_attention_bias=True),
    22 more [32 x 12] tables."""
    config = json.loads((CONFIGS / "t5-v1_1-base.json").read_text()) | {"model_type": family}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir = _ir(family, path=path)
    assert ir.totals.params == expected
    tables = [x.name for x in ir.layers if x.name.endswith("relative_attention_bias")]
    assert len(tables) == (24 if family == "umt5" else 2)


def _forward_closed_form(config: dict[str, Any], inputs: int, targets: int) -> int:
    """2 x each weight a token multiplies, plus the attention cores (Kaplan et al. 2020, table 1:
    2 x 2 x n_ctx x d_attn per block and token): per encoder token the encoder's q, k, v, o and
    MLP, the S x inner core, and every decoder block's cross-attention k and v (they run on the
    encoder's output); per decoder token the decoder's self-attention q, k, v, o, the
    cross-attention's q and o, the MLP, the head (a tied one a GEMM all the same), and the cores
    of T (self) and S (cross) keys. Norms, activations, softmax and the position bias add are
    within 2 %."""
    d, f, v = int(config["d_model"]), int(config["d_ff"]), int(config["vocab_size"])
    inner = int(config["num_heads"]) * int(config["d_kv"])
    encoders = int(config["num_layers"])
    decoders = int(config.get("num_decoder_layers", encoders))
    gated = str(config.get("feed_forward_proj", "relu")).startswith("gated-")
    mlp = (3 if gated else 2) * d * f
    per_input = encoders * (2 * (4 * d * inner + mlp) + 4 * inputs * inner) + decoders * 2 * 2 * d * inner
    per_target = decoders * (2 * (6 * d * inner + mlp) + 4 * targets * inner + 4 * inputs * inner) + 2 * v * d
    return int(inputs * per_input + targets * per_target)


@pytest.mark.parametrize("name", T5)
@pytest.mark.parametrize(("inputs", "targets"), [(INPUTS, TARGETS), (256, 256)])
def test_forward_flops_are_the_closed_form(name: str, inputs: int, targets: int) -> None:
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    closed = _forward_closed_form(config, inputs, targets)
    assert _ir(name, inputs, targets).totals.flops.forward == pytest.approx(closed, rel=0.02)


def test_the_decoder_runs_on_its_own_tokens_and_reads_the_encoder_s() -> None:
    """Encoder layers on S = 512 tokens, decoder layers on T = 114; each decoder block's
    cross-attention scores are T x S, its k and v read the encoder's final_layer_norm output; the
    encoder's self-attention is bidirectional, the decoder's causal; relative position biases
    only in block 0 of each stack (T5Attention: has_relative_attention_bias for layer 0)."""
    ir = _ir("t5-base")
    by_name = {x.name: x for x in ir.layers}
    assert by_name["encoder.block.11.layer.1.DenseReluDense.wo"].outputs[0].shape == (1, 512, 768)
    assert by_name["decoder.block.11.layer.2.DenseReluDense.wo"].outputs[0].shape == (1, 114, 768)
    assert by_name["lm_head"].outputs[0].shape == (1, 114, 32128)
    encoded = by_name["encoder.final_layer_norm"].outputs[0].name
    for i in range(12):
        cross = f"decoder.block.{i}.layer.1.EncDecAttention"
        assert by_name[f"{cross}.scores"].outputs[0].shape == (1, 12, 114, 512)
        assert [a.name for a in by_name[f"{cross}.k"].inputs] == [encoded]
        assert [a.name for a in by_name[f"{cross}.v"].inputs] == [encoded]
        heads = by_name[f"{cross}.scores"].block.heads  # type: ignore[union-attr]
        assert heads is not None
        assert heads.causal is False
    decoder_self = by_name["decoder.block.3.layer.0.SelfAttention.scores"].block.heads  # type: ignore[union-attr]
    encoder_self = by_name["encoder.block.3.layer.0.SelfAttention.scores"].block.heads  # type: ignore[union-attr]
    assert decoder_self is not None
    assert decoder_self.causal is True
    assert encoder_self is not None
    assert encoder_self.causal is False
    tables = [x.name for x in ir.layers if x.name.endswith("relative_attention_bias")]
    assert tables == [
        "encoder.block.0.layer.0.SelfAttention.relative_attention_bias",
        "decoder.block.0.layer.0.SelfAttention.relative_attention_bias",
    ]
    assert ir.provenance.input_shapes == {"input_ids": (1, 512), "decoder_input_ids": (1, 114)}


def test_the_decoder_length_defaults_to_the_encoder_s() -> None:
    ir = _ir("t5-base", 300, None)
    assert ir.provenance.input_shapes["decoder_input_ids"] == (1, 300)


def test_a_tied_head_is_the_shared_table_and_an_untied_one_its_own() -> None:
    tied = next(x for x in _ir("t5-base").layers if x.name == "lm_head")
    untied = next(x for x in _ir("t5-v1_1-base").layers if x.name == "lm_head")
    assert tied.params[0].shared_with == "shared"
    assert untied.params[0].shared_with is None


def _translate(tmp_path: Path, name: str, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["translate", str(CONFIGS / f"{name}.json"), "--seq-len", "128", *args])
    return done.exit_code, done.output


@pytest.mark.parametrize("name", T5)
def test_translation_under_tensor_and_data_parallelism_validates(name: str, tmp_path: Path) -> None:
    from modtrans.chakra.validate import validate_paths

    code, said = _translate(
        tmp_path, name, "--input-shape", "decoder_input_ids=1x32", "--tp", "2", "--dp", "2",
        "--format", "chakra-et", "-o", str(tmp_path / "t"),
    )  # fmt: skip
    assert code == 0, said
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 4
    assert [d for d in found if d.severity <= 2] == []
    code, said = _translate(
        tmp_path, name, "--tp", "2", "--dp", "2", "-d", "simai", "-o", str(tmp_path / "s.txt")
    )
    assert code == 0, said
    assert CliRunner().invoke(app, ["validate", str(tmp_path / "s.txt")]).exit_code == 0


@pytest.mark.parametrize(
    "split", [("--tp", "2"), ("-p", "HYBRID_TRANSFORMER", "--npus", "2", "--model-parallel-group", "2")]
)
def test_each_cross_attention_all_reduces_the_encoder_output_s_gradient(
    split: tuple[str, ...], tmp_path: Path
) -> None:
    """Megatron-Core's CrossAttention: linear_q on the decoder's hidden states, linear_kv (column-
    parallel) on the encoder's output, o row-parallel (megatron/core/transformer/attention.py,
    CrossAttention.get_query_key_value_tensors). So per decoder block and micro-batch: k's input
    gradient all-reduced over the tensor ranks, B x S x d_model x 4 bytes (fp32: the
    configuration has no torch_dtype) = 128 x 768 x 4 = 393,216, once for k and v; q's and o's
    sized by the decoder's 32 tokens (98,304). The layout's --tp and the keyword alike: one
    tensor-parallel implementation (strategy/llm/tensor.py)."""
    code, said = _translate(
        tmp_path, "t5-base", "--input-shape", "decoder_input_ids=1x32", *split, "-d", "simai",
        "-o", str(tmp_path / "s.txt"),
    )  # fmt: skip
    assert code == 0, said
    rows = {r.split("\t")[0]: r.split("\t") for r in (tmp_path / "s.txt").read_text().splitlines()[2:]}
    for i in range(12):
        p = f"decoder.block.{i}.layer.1.EncDecAttention"
        assert rows[f"{p}.k"][6:8] == ["ALLREDUCE", "393216"]
        assert rows[f"{p}.v"][6:8] == ["NONE", "0"]
        assert rows[f"{p}.q"][6:8] == ["ALLREDUCE", "98304"]
        assert rows[f"{p}.o"][3:5] == ["ALLREDUCE", "98304"]


def test_pipeline_stages_past_the_split_send_the_encoder_output_beside_their_own(tmp_path: Path) -> None:
    """Megatron-LM's T5 pipeline (schedules.py, get_tensor_shapes): encoder stages send one tensor
    (S, b, h); the stage at the split sends the encoder's output (S, b, h); decoder stages send two,
    the decoder's (T, b, h) and the encoder's (S, b, h), and receive both gradients back. t5-v1_1-base
    at P 4 cuts 24 blocks 6 a stage: the split between stages 1 and 2; the decoder's embedding on
    stage 2 with its first block (the split rank's)."""
    from modtrans.comm import Policy
    from modtrans.plan.model import Direction, Step, Transfer
    from modtrans.strategy import Parallelism
    from modtrans.strategy.llm import Layout

    s, t = 128, 32
    options = pipeline.Options(
        parallel=Parallelism(Policy.HYBRID_TRANSFORMER, 4, layout=Layout(npus=4, pp=4, global_batch=4)),
        input_shapes={"input_ids": (1, s), "decoder_input_ids": (1, t)},
        format="chakra-et",
    )
    result = pipeline.translate_checked(CONFIGS / "t5-v1_1-base.json", options)
    assert result.plan is not None, [d.message for d in result.diagnostics]
    width = 4  # float32: the file names no torch_dtype, and transformers loads it so
    encoder, decoder = s * 768 * width, t * 768 * width

    def sent(stage: int) -> set[int]:
        return {
            op.bytes
            for op in result.plan.program(stage)  # type: ignore[union-attr]
            if isinstance(op, Transfer) and op.direction is Direction.SEND and op.step is Step.FWD
        }

    assert [sent(p) for p in range(3)] == [{encoder}, {encoder}, {decoder + encoder}]
    assert sent(3) == set()


@pytest.mark.parametrize("schedule", ["1f1b", "dualpipe", "zb-h1"])
def test_the_shared_table_swaps_its_gradient_with_each_copy(schedule: str, tmp_path: Path) -> None:
    """t5-base ties its table three ways: `shared` on stage 0, the decoder's embedding at the split
    (stage 2 of 4) and the head on stage 3 (Megatron's embedding group: first, split and last
    ranks). Stage 0 swaps its gradient with each copy, 32,128 x 768 fp32 elements each way; under
    DualPipe stage 3 holds the table's mirror and stage 1 the decoder embedding's. Every send
    meets its receive (the set validates)."""
    from modtrans.chakra.validate import validate_paths

    code, said = _translate(
        tmp_path,
        "t5-base",
        "--pp",
        "4",
        "--schedule",
        schedule,
        "--format",
        "chakra-et",
        "-o",
        str(tmp_path / "t"),
    )
    assert code == 0, said
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 4
    assert [d for d in found if d.severity <= 2] == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--tp", "8"), "the 12 attention heads must divide by it"),
        (("--cp", "2"), "context parallelism of an encoder-decoder"),
    ],
)
def test_what_t5_cannot_do_is_refused_in_one_line(args: tuple[str, ...], words: str, tmp_path: Path) -> None:
    code, said = _translate(tmp_path, "t5-base", *args, "-o", str(tmp_path / "x"))
    assert code == 2
    assert words in said
    assert "Traceback" not in said
    assert len(said.strip().splitlines()) == 1


def test_decoder_input_ids_on_a_decoder_only_family_is_refused(tmp_path: Path) -> None:
    ir, found = pipeline.extract_checked(
        CONFIGS / "gemma-2b.json", input_shapes={"input_ids": (1, 64), "decoder_input_ids": (1, 16)}
    )
    assert ir is None
    assert [d.code for d in found] == ["X501"]
    assert "decoder_input_ids" in found[0].message
    assert "encoder-decoder" in found[0].message


def test_input_and_target_batches_must_agree() -> None:
    ir, found = pipeline.extract_checked(
        CONFIGS / "t5-base.json", input_shapes={"input_ids": (2, 64), "decoder_input_ids": (1, 16)}
    )
    assert ir is None
    assert [d.code for d in found] == ["X501"]
    assert "batch" in found[0].message


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"feed_forward_proj": "gelu-gated"}, "feed_forward_proj"),
        ({"feed_forward_proj": "gated-gelu-new"}, "feed_forward_proj"),
        ({"d_kv": None}, "d_kv"),
        ({"num_decoder_layers": 0}, "num_decoder_layers"),
    ],
)
def test_a_malformed_t5_configuration_is_one_m801(
    change: dict[str, object], words: str, tmp_path: Path
) -> None:
    config = json.loads((CONFIGS / "t5-v1_1-base.json").read_text()) | change
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    ir, found = pipeline.extract_checked(path)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert words in found[0].message


def test_the_ir_document_of_a_t5_configuration_passes_its_schema(tmp_path: Path) -> None:
    """`modtrans extract` writes the IR and checks it against schemas/model-ir.schema.json: T5's
    attention dropout (dropout_rate 0.1, T5Config's default) is a field of its heads there."""
    done = CliRunner().invoke(
        app,
        ["extract", str(CONFIGS / "t5-v1_1-base.json"), "--input-shape", "decoder_input_ids=1x16",
         "--input-shape", "input_ids=1x64", "-o", str(tmp_path / "t5.ir.json")],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    document = json.loads((tmp_path / "t5.ir.json").read_text())
    heads = [x["block"]["heads"] for x in document["layers"] if "heads" in x.get("block", {})]
    assert {h.get("dropout") for h in heads} == {0.1}
