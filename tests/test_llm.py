"""Transformer configurations -> IR: the built-in LLMs against their published sizes, and a
configuration against the ONNX export of the same model."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans import pipeline
from modtrans.ir.document import Kind, ModelIR
from modtrans.llm.families import DEFAULTS
from modtrans.workload.parse import parse

Run = Callable[..., Result]


def _ir(spec: str | Path, **options: Any) -> ModelIR:
    ir, found = pipeline.extract_checked(spec, **options)
    assert ir is not None, [str(d) for d in found]
    return ir


def _active(ir: ModelIR) -> int:
    """Parameters one token meets: everything but the experts it is not routed to (top_k of each
    block's routed experts)."""
    return ir.totals.active_params


def test_llama_and_mixtral_have_their_published_parameter_counts() -> None:
    # total parameters as the models' Hugging Face safetensors indexes give them (bf16 bytes / 2):
    # Meta-Llama-3-8B 8,030,261,248; Meta-Llama-3-70B 70,553,706,496; Mixtral-8x7B 46,702,792,704
    assert _ir("llama-3-8b").totals.params == 8_030_261_248
    assert _ir("llama-3-70b").totals.params == 70_553_706_496
    mixtral = _ir("mixtral-8x7b")
    assert mixtral.totals.params == 46_702_792_704
    assert round(_active(mixtral) / 1e9, 1) == 12.9  # Jiang et al. 2024: "12.9B active parameters"


def test_deepseek_moe_16b_has_its_published_total_and_active_counts() -> None:
    ir = _ir("deepseek-moe-16b")
    # Dai et al. 2024 (DeepSeekMoE), table 1 / section 5: 16.4B total, 2.8B activated
    assert round(ir.totals.params / 1e9, 1) == 16.4
    assert round(_active(ir) / 1e9, 1) == 2.8
    grouped = {
        (x.moe.expert, x.moe.count) for x in ir.layers if x.moe is not None and x.moe.expert is not None
    }
    assert grouped == {(0, 64)}  # the 64 routed experts of each MoE block as one grouped GEMM
    assert not any(x.moe for x in ir.layers if x.name.startswith("model.layers.0."))  # first block dense


def test_deepseek_moe_s_sparse_blocks_are_those_its_own_code_builds(tmp_path: Path, run_cli: Run) -> None:
    """DeepSeek-MoE has no transformers class (its files name their own code): its
    DeepseekDecoderLayer (deepseek-ai/deepseek-moe-16b-base modeling_deepseek.py, as vLLM's
    models/deepseek.py) has the mixture where `layer_idx >= first_k_dense_replace and layer_idx %
    moe_layer_freq == 0`: with 1 and 2 over 7 blocks, blocks 2, 4 and 6. A frequency of 0 (a
    division by zero in that code) is M801, exit 2."""
    extra = {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}
    path = tmp_path / "config.json"
    config = _family("deepseek", extra, num_hidden_layers=7, first_k_dense_replace=1, moe_layer_freq=2)
    path.write_text(json.dumps(config))
    sparse = {int(x.name.split(".")[2]) for x in _ir(path).layers if x.moe is not None}
    assert sorted(sparse) == [2, 4, 6]
    for model_type, key in (("deepseek", "moe_layer_freq"), ("qwen2_moe", "decoder_sparse_step")):
        extra = dict(FAMILIES)[model_type]
        path.write_text(json.dumps(_family(model_type, extra, **{key: 0})))
        ir, found = pipeline.extract_checked(path)
        assert ir is None
        assert [(d.code, d.message) for d in found] == [
            ("M801", f"`{key}` must be a positive integer, not 0")
        ]
        assert run_cli("translate", path).exit_code == 2


def test_gpt3_13b_follows_megatrons_parameter_formula() -> None:
    # Narayanan et al. 2021 (Megatron-LM at scale), section 5.1:
    # P = 12 L h^2 (1 + 13/(12 h) + (V + s)/(12 L h)) = 12 L h^2 + 13 L h + (V + s) h,
    # plus the final LayerNorm's 2h the formula leaves out
    layers, h, v, s = 40, 5120, 51200, 2048
    assert _ir("gpt3-13b").totals.params == 12 * layers * h * h + 13 * layers * h + (v + s) * h + 2 * h


def test_the_13b_tensor_parallel_message_is_a_block_output(run_cli: Run) -> None:
    args = ("translate", "gpt3-13b", "-p", "HYBRID_TRANSFORMER", "--npus", "8", "--model-parallel-group", "8")
    result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    workload = parse(result.stdout).workload
    assert workload is not None
    proj = {x.name: x for x in workload.layers}["transformer.h.0.attn.c_proj"]
    # sequence 2048 x micro-batch 1 x hidden 5120 x 2 bytes (fp16): the 20,971,520
    assert proj.fwd.comm_size == 2 * 2048 * 5120 == 20_971_520


@pytest.mark.parametrize(
    ("config", "onnx"),
    [
        (
            {
                "model_type": "gpt2",
                "n_embd": 768,
                "n_layer": 12,
                "n_head": 12,
                "n_positions": 1024,
                "vocab_size": 50257,
            },
            "gpt2",
        ),
        (
            {
                "model_type": "bert",
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "max_position_embeddings": 512,
                "vocab_size": 30522,
            },
            "bert-base",
        ),
    ],
)
def test_a_configuration_gives_the_ir_of_its_onnx_export(
    config: dict[str, Any], onnx: str, tmp_path: Path
) -> None:
    """The built-in gpt2 and bert-base are transformers exports of these default configurations
    (modtrans/zoo/manifest.json): parameters and every GEMM, matmul and norm's FLOPs are equal."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "torch_dtype": "float32"}))
    ours, exported = _ir(path, input_shapes={"input_ids": (1, 128)}), _ir(onnx)
    assert ours.totals.params == exported.totals.params
    assert ours.totals.trainable_bytes == exported.totals.trainable_bytes
    for kind in (Kind.LINEAR, Kind.MATMUL, Kind.NORM, Kind.EMBEDDING):
        mine = sorted(x.flops.forward for x in ours.layers if x.kind is kind)
        theirs = sorted(x.flops.forward for x in exported.layers if x.kind is kind)
        assert mine == theirs, kind
        gemms = sorted((x.gemm.m, x.gemm.k, x.gemm.n) for x in ours.layers if x.kind is kind and x.gemm)
        assert gemms == sorted(
            (x.gemm.m, x.gemm.k, x.gemm.n) for x in exported.layers if x.kind is kind and x.gemm
        )
    # the rest (residual adds, activations, softmax) is counted per op; the exporter splits GELU
    assert abs(ours.totals.flops.forward / exported.totals.flops.forward - 1) < 0.002


def test_sequence_and_micro_batch_come_from_the_input_shape() -> None:
    small = _ir("llama-3-8b", input_shapes={"input_ids": (2, 512)})
    q = small.layer("model.layers.0.self_attn.q_proj")
    assert q.gemm is not None
    assert (q.gemm.m, q.gemm.k, q.gemm.n) == (2 * 512, 4096, 4096)
    assert small.provenance.input_shapes == {"input_ids": (2, 512)}
    assert _ir("llama-3-8b").provenance.input_shapes == {"input_ids": (1, 2048)}  # the documented default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"model_type": "bart"}', "model_type 'bart' is not a family"),
        ('{"model_type": "llama", "hidden_size": 64}', "has no `num_attention_heads`"),
        ('{"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2}', "`hidden_size` must be"),
        ('{"model_type": "llama", "hidden_size": true}', "`hidden_size` must be"),
        ('{"model_type": "llama", "num_attention_heads": 6, "num_key_value_heads": 4, "hidden_size": 48,'
         ' "num_hidden_layers": 1, "intermediate_size": 8, "vocab_size": 9}', "do not split"),
        ('{"model_type": "gpt2", "n_embd": 1e30, "n_head": 2}', "`n_embd` must be"),
        ('{"model_type": "gpt2", "n_embd": 100000000, "n_head": 2, "n_layer": 1, "n_positions": 8,'
         ' "vocab_size": 8}', "over 10,000,000"),
        ('{"model_type": "mixtral"', "not JSON"),
    ],
)  # fmt: skip
def test_a_bad_configuration_is_one_positioned_line(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    ir, found = pipeline.extract_checked(path)
    assert ir is None
    assert [d.code for d in found] == ["M801"] or not text.endswith("}")
    assert message in found[0].message


ZOO_CONFIGS = Path(pipeline.__file__).parent / "zoo" / "configs"
BUILT_IN = sorted(p.stem for p in ZOO_CONFIGS.glob("*.json") if p.stem != "index")
FAMILIES = [  # (model_type, its extra keys)
    ("llama", {}), ("mistral", {}), ("qwen2", {}), ("qwen3", {}),
    ("mixtral", {"num_local_experts": 4, "num_experts_per_tok": 2}),
    ("qwen2_moe", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    ("deepseek", {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32}),
    ("gpt2", {"n_positions": 1024}), ("bert", {"max_position_embeddings": 512}),
]  # fmt: skip


def _family(model_type: str, extra: dict[str, Any], **keys: int) -> dict[str, Any]:
    names = (
        ("n_embd", "n_head", "n_layer")
        if model_type == "gpt2"
        else ("hidden_size", "num_attention_heads", "num_hidden_layers")
    )
    base = {
        "model_type": model_type,
        "vocab_size": 96,
        "intermediate_size": 128,
        names[0]: 64,
        names[1]: 4,
        names[2]: 2,
    }
    return {**base, **extra, **keys}  # fmt: skip


@pytest.mark.parametrize(("model_type", "extra"), FAMILIES)
def test_heads_that_do_not_split_the_hidden_size_are_a_model_that_cannot_exist(
    model_type: str,
    extra: dict[str, Any],
    tmp_path: Path,
    run_cli: Run,
) -> None:
    """Every family: hidden 60 in 8 heads (7.5 dimensions each) is M801 naming both numbers, exit 2,
    unless the configuration gives head_dim (then the heads need not split it), or its class does
    (Qwen3Config.head_dim = 128: families.DEFAULTS). Eight key/value heads, given: the classes'
    own defaults (Qwen2Config's 32, Qwen2MoeConfig's 16) do not split 8 heads."""
    heads_key = "n_head" if model_type == "gpt2" else "num_attention_heads"
    hidden_key = "n_embd" if model_type == "gpt2" else "hidden_size"
    path = tmp_path / "config.json"
    sizes = {hidden_key: 60, heads_key: 8} | (
        {} if model_type in ("gpt2", "bert") else {"num_key_value_heads": 8}
    )
    path.write_text(json.dumps(_family(model_type, extra, **sizes)))
    ir, found = pipeline.extract_checked(path)
    if "head_dim" in DEFAULTS.get(model_type, {}):
        assert ir is not None, found
        gemm = ir.layer("model.layers.0.self_attn.q_proj").gemm
        assert gemm is not None
        assert gemm.n == 8 * 128  # transformers 5.25 configuration_qwen3.py: head_dim: int = 128
        return
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert (
        f"`{hidden_key}` 60 does not split into 8 attention heads (a head of 7.5 dimensions)"
        in found[0].message
    )
    assert run_cli("translate", path).exit_code == 2
    if model_type not in ("gpt2", "bert"):  # the families whose configuration class has head_dim
        path.write_text(json.dumps(_family(model_type, extra, **sizes, head_dim=8)))
        gemm = _ir(path).layer("model.layers.0.self_attn.q_proj").gemm
        assert gemm is not None
        assert gemm.n == 64


@pytest.mark.parametrize("model", BUILT_IN)
def test_a_sequence_beyond_the_models_context_is_a_warning_naming_both(model: str) -> None:
    config = json.loads((ZOO_CONFIGS / f"{model}.json").read_text())
    context = config.get("max_position_embeddings") or config.get("n_positions")
    assert context, f"{model}: the built-in configuration gives its context"
    for sequence in (context, context + 1, 16 * context):
        ir, found = pipeline.extract_checked(model, input_shapes={"input_ids": (1, sequence)})
        assert ir is not None
        warned = [d for d in found if d.code == "M802"]
        if sequence == context:
            assert not warned
            continue
        (warning,) = warned
        assert warning.severity.name == "WARNING"
        assert f"{sequence:,} tokens" in warning.message
        assert f"the model's context of {context:,}" in warning.message
        assert "\n" not in warning.message


@pytest.mark.parametrize("micro_batch", [1, 1_000, 70_000])
def test_a_micro_batch_whose_activations_fit_no_device_is_a_warning(micro_batch: int, run_cli: Run) -> None:
    from modtrans.llm import ACTIVATION_BOUND

    ir, found = pipeline.extract_checked("llama-3-8b", batch=micro_batch)
    assert ir is not None
    largest = max(a.bytes or 0 for layer in ir.layers for a in layer.outputs)
    warned = [d for d in found if d.code == "M803"]
    assert bool(warned) == (largest > ACTIVATION_BOUND)
    assert bool(warned) == (micro_batch == 70_000)  # the logits: 70,000 x 2,048 x 128,256 x 2 bytes
    if warned:
        assert f"{micro_batch:,} sequences x 2,048 tokens" in warned[0].message
        result = run_cli(
            "translate", "llama-3-8b", "--micro-batch", str(micro_batch), "--tp", "8", "--dialect", "simai"
        )
        assert "warning M803" in result.stderr


@pytest.mark.parametrize("code", ["M801", "M802", "M803", "M804", "M805"])
def test_the_llm_codes_are_explained_with_examples(code: str, run_cli: Run) -> None:
    result = run_cli("validate", "--explain", code)
    assert result.exit_code == 0
    assert "bad:" in result.stdout
    assert "good:" in result.stdout


def test_qwen3_has_its_per_head_query_and_key_norms(tmp_path: Path) -> None:
    """Qwen3Attention normalises each head's query and key (q_norm, k_norm: Qwen3RMSNorm(head_dim))
    before the rotation. Qwen3-8B's config.json (Qwen/Qwen3-8B): its safetensors index holds
    16,381,470,720 bytes of bf16, 8,190,735,360 parameters; 36 layers x 2 x 128 of them are these
    norms (the 9,216 missing before issue 26)."""
    config = {
        "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "max_position_embeddings": 40960,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 128)})
    assert ir is not None, found
    assert ir.totals.params == 16_381_470_720 // 2
    norm = ir.layer("model.layers.5.self_attn.k_norm")
    assert [p.shape for p in norm.params] == [(128,)]


@pytest.mark.parametrize(
    ("architectures", "family"),
    [(["GPT2LMHeadModel"], "gpt2"), (["LlamaForCausalLM"], "llama"), (["Qwen2MoeForCausalLM"], "qwen2_moe")],
)
def test_a_configuration_without_model_type_is_known_by_its_architecture(
    architectures: list[str], family: str
) -> None:
    """Older configurations (GPT-2 XL's) have no model_type: the class in `architectures` says the
    family, the longest that names it (Qwen2Moe... is qwen2_moe, not qwen2)."""
    from modtrans.llm.config import _family_of

    assert _family_of(architectures, {}) == family


def test_a_configuration_without_model_type_or_known_architecture_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["FancyNewModel"], "n_embd": 64}))
    ir, found = pipeline.extract_checked(path)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "no model_type" in found[0].message
    assert "FancyNewModel" in found[0].message
    gpt2_xl = tmp_path / "xl.json"
    gpt2_xl.write_text(
        json.dumps(
            {
                "architectures": ["GPT2LMHeadModel"],
                "n_embd": 64,
                "n_head": 4,
                "n_layer": 2,
                "n_positions": 128,
                "vocab_size": 96,
            }
        )
    )
    ir, found = pipeline.extract_checked(gpt2_xl, input_shapes={"input_ids": (1, 16)})
    assert ir is not None, found


@pytest.mark.parametrize(
    ("architectures", "params"),
    [
        (None, 334_092_288),  # no class named: the encoder alone
        (["BertModel"], 335_141_888),
        (["BertForMaskedLM"], 335_174_458),  # the masked-LM head, no pooler
        (["BertForPreTraining"], 336_226_108),  # both, and the next-sentence classifier
    ],
)
def test_bert_has_the_heads_of_its_class(
    architectures: list[str] | None, params: int, tmp_path: Path
) -> None:
    """bert-large-uncased (24 layers, hidden 1024, 16 heads, MLP 4096, vocabulary 30,522) as
    transformers' classes build it (modeling_bert.py), counted by hand: the encoder 334,092,288;
    BertPooler a 1024 x 1024 dense with bias, 1,049,600; BertLMPredictionHead a 1024 x 1024 dense
    with bias, a LayerNorm (2,048) and the decoder's own bias (30,522; its weight is the word
    embeddings'), 1,082,170 (what was missing before issue 26); BertOnlyNSPHead 1024 x 2 + 2."""
    config = {
        "model_type": "bert", "vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24,
        "num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 512,
    }  # fmt: skip
    if architectures is not None:
        config["architectures"] = architectures
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 128)})
    assert ir is not None, found
    assert ir.totals.params == params
    assert 334_092_288 + 1_049_600 == 335_141_888
    assert 334_092_288 + 1_082_170 == 335_174_458


def test_a_gemma_3_text_configuration_without_model_type_is_the_text_model(tmp_path: Path) -> None:
    """Gemma3ForCausalLM is built from a Gemma3TextConfig (transformers' gemma3 modeling file):
    without model_type it is gemma3_text, not the vision-language gemma3 its prefix also names."""
    config = json.loads(
        (Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "gemma-3-1b-pt.json").read_text()
    )
    del config["model_type"]
    config["architectures"] = ["Gemma3ForCausalLM"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    assert ir.provenance.graph == "gemma3_text"


FIXTURE_CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
NO_MODEL_TYPE = FIXTURE_CONFIGS / "gpt2-xl-without-model-type.json"


@pytest.mark.parametrize("command", ["translate", "inspect", "diff"])
def test_a_configuration_naming_neither_model_type_nor_architectures_is_refused_in_one_line(
    command: str, run_cli: Run
) -> None:
    """GPT-2 XL's published configuration without its model_type and architectures (the keys of
    the Hub's first files) is recognised by its keys, not read as a workload document (S402
    'format' is missing): one line that names model_type and the family GPT-2's keys suggest."""
    args = (command, NO_MODEL_TYPE) + (("gpt2",) if command == "diff" else ())
    result = run_cli(*args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "M801" in line
    assert '"model_type": "gpt2"' in line
    assert "S402" not in result.output


def test_the_same_configuration_with_its_model_type_is_gpt2_xl(tmp_path: Path) -> None:
    """With the key put back the file is the published one: GPT-2 XL's 1,557,611,200 parameters
    (transformers' GPT2LMHeadModel, the output layer tied to the embedding)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(NO_MODEL_TYPE.read_text()), "model_type": "gpt2"}))
    assert _ir(path).totals.params == 1_557_611_200


@pytest.mark.parametrize(
    "path",
    sorted(p for p in FIXTURE_CONFIGS.glob("*.json") if p.name != "EXPECTED.json"),
    ids=lambda p: p.stem,
)
def test_every_published_configuration_is_recognised_as_one(path: Path) -> None:
    from modtrans import llm

    assert llm.is_config(path.read_bytes()[: 1 << 16])


def test_a_workload_document_is_not_a_configuration(run_cli: Run, tmp_path: Path) -> None:
    from modtrans import llm

    out = tmp_path / "gpt2.json"
    assert run_cli("translate", FIXTURE_CONFIGS / "gpt2.json", "--format", "json", "-o", out).exit_code == 0
    assert not llm.is_config(out.read_bytes()[: 1 << 16])
    assert not llm.is_config((FIXTURE_CONFIGS / "EXPECTED.json").read_bytes()[: 1 << 16])


@pytest.mark.parametrize("name", ["gpt2.json", "gpt2-xl.json"])
def test_the_default_sequence_is_the_models_context_when_shorter(name: str, run_cli: Run) -> None:
    """GPT-2's published configurations give n_positions 1,024: with no option the sequence is
    the context and nothing warns (it was 2,048 and M802 "2x the model's context"); a --seq-len
    beyond it still warns."""
    path = FIXTURE_CONFIGS / name
    context = json.loads(path.read_text())["n_positions"]
    ir, found = pipeline.extract_checked(path)
    assert ir is not None
    assert ir.provenance.input_shapes == {"input_ids": (1, context)}
    assert "M802" not in [d.code for d in found]
    assert "M802" not in run_cli("inspect", path).output
    beyond = f"input_ids=1x{context + 1}"
    assert "M802" in run_cli("inspect", path, "--input-shape", beyond).output
    longer = run_cli("translate", path, "--dp", "2", "--seq-len", "2048")
    assert longer.exit_code == 0, longer.output
    assert "M802" in longer.stderr
    assert "M802" not in run_cli("translate", path, "--dp", "2").stderr


def test_a_file_without_num_key_value_heads_takes_its_class_s_default(tmp_path: Path, run_cli: Run) -> None:
    """An omitted key is the configuration class's default, not the query head count: Gemma 3 1B's
    file without it has Gemma3TextConfig's 4 key/value heads (transformers 5.25
    configuration_gemma3.py: num_key_value_heads: int = 4), k_proj 4 x 256 wide; Qwen2.5 0.5B's
    14 heads with Qwen2Config's 32 (configuration_qwen2.py: num_key_value_heads: int | None = 32)
    is a model whose forward fails in transformers (repeat_kv: 14 // 32 = 0 copies): refused, M801."""
    gemma = json.loads((FIXTURE_CONFIGS / "gemma-3-1b-pt.json").read_text())
    del gemma["num_key_value_heads"]
    (tmp_path / "gemma.json").write_text(json.dumps(gemma))
    k = _ir(tmp_path / "gemma.json").layer("model.layers.0.self_attn.k_proj").gemm
    assert k is not None
    assert k.n == 4 * 256
    qwen = json.loads((FIXTURE_CONFIGS.parent / "hf" / "qwen2.5-0.5b-instruct.json").read_text())
    del qwen["num_key_value_heads"]
    (tmp_path / "qwen.json").write_text(json.dumps(qwen))
    ir, found = pipeline.extract_checked(tmp_path / "qwen.json")
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "no `num_key_value_heads`" in found[0].message
    assert "default of 32 does not split its 14 attention heads" in found[0].message
    assert run_cli("translate", tmp_path / "qwen.json").exit_code == 2
