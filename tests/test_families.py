"""Every decoder family's published configuration (fixtures/configs: Gemma, Gemma 2, Gemma 3 text,
Phi-3, Falcon under both its names, GPT-NeoX, OLMo 2, StarCoder2, Mamba, Jamba, Phi-2, OLMo 1,
StableLM 2, Command-R, Granite 3.1, SantaCoder's GPT-BigCode) gives the
parameters the transformers class builds from it, exactly, and FLOPs per token as the closed form
counts them (T5's: tests/test_t5.py; LLaVA's and Qwen2-VL's: tests/test_vision.py).

The expected counts (fixtures/configs/EXPECTED.json) were made once by
tools/count_transformers_params.py: each model built by AutoModelForCausalLM.from_config (T5:
AutoModelForSeq2SeqLM; a vision-language model: its image-text-to-text class) on the meta device,
its parameters() counted (a tied output layer once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans import pipeline
from modtrans.ir.document import Kind

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
EXPECTED = json.loads((CONFIGS / "EXPECTED.json").read_text())["counts"]
DECODERS = sorted(n for n in EXPECTED if EXPECTED[n]["model_class"].endswith("ForCausalLM"))
"""The decoder-only families (the encoder-decoder T5's and the vision-language models' have tests
of their own: tests/test_t5.py, tests/test_vision.py)."""
SEQUENCE = 512


def _ir(name: str):  # type: ignore[no-untyped-def]
    ir, found = pipeline.extract_checked(CONFIGS / f"{name}.json", input_shapes={"input_ids": (1, SEQUENCE)})
    assert ir is not None, [d.message for d in found]
    return ir


@pytest.mark.parametrize("name", DECODERS)
def test_the_parameters_are_those_transformers_builds(name: str) -> None:
    assert _ir(name).totals.params == EXPECTED[name]["parameters"]


@pytest.mark.parametrize("name", [n for n in DECODERS if not n.startswith(("mamba", "jamba"))])
def test_forward_flops_per_token_are_2n_plus_the_attention_term(name: str) -> None:
    """Forward FLOPs per token: 2 x every weight a token is multiplied by (the parameters less the
    embedding table, which is looked up, plus the output layer's, counted again if tied) plus
    the attention core, 2 x 2 x s x heads x head_dim per block (Kaplan et al. 2020, table 1:
    2 n_layer n_ctx d_attn, with both products); norms, activations, biases (Phi-2's lm_head's
    among them) and GPT-BigCode's learned positions (2 x its wpe rows here, a lookup) are within
    2 %. GPT-BigCode's configuration names its sizes n_embd, n_head, n_layer (GPTBigCodeConfig)."""
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    ir = _ir(name)
    hidden = config.get("hidden_size") or config["n_embd"]
    heads = config.get("num_attention_heads") or config["n_head"]
    head_dim = config.get("head_dim", hidden // heads)
    layers = config.get("num_hidden_layers") or config["n_layer"]
    embedding = EXPECTED[name]["embedding"]
    head = next(x for x in reversed(ir.layers) if x.kind is Kind.LINEAR)
    tied_again = embedding if head.params[0].shared_with else 0
    weights = EXPECTED[name]["parameters"] - embedding + tied_again
    closed = 2 * weights + 4 * layers * SEQUENCE * heads * head_dim
    assert ir.totals.flops.forward / SEQUENCE == pytest.approx(closed, rel=0.02)


def test_mamba_s_forward_flops_are_its_gemms_conv_and_selective_scan() -> None:
    """Mamba-130M (state-spaces/mamba-130m-hf): per token and block 2 x (in_proj 768 x 3,072 +
    x_proj 1,536 x 80 + dt_proj 48 x 1,536 + out_proj 1,536 x 768) + dt_proj's bias, the depthwise
    conv's 2 x 4 + 1 per channel, the scan's 9 x 16 + 2 per channel (state-spaces/mamba issue
    110); the tied head's 2 x 768 x 50,280; the norms 5 per element, the residual add 1."""
    ir = _ir("mamba-130m-hf")
    inner, state, hidden = 1536, 16, 768
    gemms = 2 * (hidden * 2 * inner + inner * (48 + 2 * state) + 48 * inner + inner * hidden) + inner
    block = gemms + inner * (2 * 4 + 1) + inner * (9 * state + 2)
    closed = 24 * block + 2 * hidden * 50_280
    assert ir.totals.flops.forward / SEQUENCE == pytest.approx(closed, rel=0.005)


def test_jamba_is_attention_every_eighth_block_mamba_elsewhere_and_experts_every_second() -> None:
    """Jamba-v0.1 (ai21labs): 51,570,323,328 parameters (transformers, EXPECTED.json), "12B
    active": top-2 of 16 experts in 16 of 32 blocks. Forward FLOPs per token: 2 x the active
    weights less the embedding, the attention of blocks 4, 12, 20, 28 (4 x s x 32 x 128 each),
    the Mamba mixers' convolution (2 x 4 + 1) and scan (9 x 16 + 2) per channel in the other 28."""
    ir = _ir("jamba-v0.1")
    t = ir.totals
    assert t.params == EXPECTED["jamba-v0.1"]["parameters"]
    assert round(t.active_params / 1e9) == 12
    attention = {x.block.index for x in ir.layers if x.name.endswith("self_attn.q_proj") and x.block}
    assert attention == {4, 12, 20, 28}
    inner = 2 * 4096
    closed = 2 * (t.active_params - t.embedding_params) + 4 * 4 * SEQUENCE * 32 * 128
    closed += 28 * inner * (2 * 4 + 1 + 9 * 16 + 2)
    assert ir.totals.flops.forward / SEQUENCE == pytest.approx(closed, rel=0.02)


def test_a_mamba_mixer_over_tensor_ranks_is_refused(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from modtrans.cli import app

    done = CliRunner().invoke(
        app, ["translate", str(CONFIGS / "mamba-130m-hf.json"), "--tp", "2", "-o", str(tmp_path / "m.txt")]
    )
    assert done.exit_code == 2
    assert "Mamba" in done.stderr


def test_falcon_s_first_configurations_are_read_as_falcon() -> None:
    """tiiuae/falcon-7b's first config.json said model_type RefinedWebModel, n_head, n_layer."""
    assert _ir("falcon-7b-refinedweb").totals.params == _ir("falcon-7b").totals.params


@pytest.mark.parametrize("name", DECODERS)
def test_every_family_translates_to_traces_and_simai_text_that_validate(name: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from modtrans.chakra.validate import validate_paths
    from modtrans.cli import app

    config = str(CONFIGS / f"{name}.json")
    runner = CliRunner()
    traces = runner.invoke(
        app, ["translate", config, "--pp", "2", "--dp", "2", "--seq-len", "128", "--format", "chakra-et",
              "-o", str(tmp_path / "t")],
    )  # fmt: skip
    assert traces.exit_code == 0, traces.output
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 4
    assert [d for d in found if d.severity <= 2] == []
    text = runner.invoke(
        app,
        ["translate", config, "--dp", "2", "--seq-len", "128", "-d", "simai", "-o", str(tmp_path / "s.txt")],
    )
    assert text.exit_code == 0, text.output
    assert runner.invoke(app, ["validate", str(tmp_path / "s.txt")]).exit_code == 0


def test_a_mixture_s_active_parameters_are_top_k_of_its_experts() -> None:
    """Mixtral-8x7B (built-in): 46,702,792,704 parameters; a token goes through 2 of the 8 experts
    of each of 32 blocks, each expert 3 x 4,096 x 14,336: active = all - 32 x 6 x 3 x 4,096 x 14,336
    = 12,879,925,248, the "12.9B active parameters" Mistral AI published; less the 32,000 x 4,096
    embedding table without it."""
    ir, _ = pipeline.extract_checked("mixtral-8x7b", input_shapes={"input_ids": (1, 128)})
    assert ir is not None
    t = ir.totals
    assert t.params == 46_702_792_704
    assert t.active_params == t.params - 32 * 6 * 3 * 4096 * 14336 == 12_879_925_248
    assert t.embedding_params == 32_000 * 4096


def test_inspect_says_total_and_active_with_and_without_embeddings(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from modtrans.cli import app

    done = CliRunner().invoke(app, ["inspect", "mixtral-8x7b"])
    assert done.exit_code == 0, done.output
    said = " ".join(done.stdout.split())
    assert "46,702,792,704 in all, 46,571,720,704 without the embedding tables" in said
    assert "active per token 12,879,925,248 (12,748,853,248 without)" in said


NEW_FAMILIES = ["phi-2", "olmo-1b-hf", "stablelm-2-1_6b", "c4ai-command-r-v01", "granite-3.1-2b-base"]
"""Issue 26's further families with heads that split over two tensor ranks (SantaCoder's one
key/value head does not: test_a_multi_query_gpt_bigcode_over_tensor_ranks_is_refused)."""


@pytest.mark.parametrize("name", NEW_FAMILIES)
def test_the_further_families_split_over_tensor_and_pipeline_ranks(name: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from modtrans.chakra.validate import validate_paths
    from modtrans.cli import app

    config, runner = str(CONFIGS / f"{name}.json"), CliRunner()
    split = ["--tp", "2", "--pp", "2", "--seq-len", "128"]
    traces = runner.invoke(
        app, ["translate", config, *split, "--format", "chakra-et", "-o", str(tmp_path / "t")]
    )
    assert traces.exit_code == 0, traces.output
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 4
    assert [d for d in found if d.severity <= 2] == []
    text = runner.invoke(app, ["translate", config, *split, "-d", "simai", "-o", str(tmp_path / "s.txt")])
    assert text.exit_code == 0, text.output
    assert runner.invoke(app, ["validate", str(tmp_path / "s.txt")]).exit_code == 0


def test_a_multi_query_gpt_bigcode_over_tensor_ranks_is_refused(tmp_path: Path) -> None:
    """SantaCoder's multi_query attention has one key/value head (GPTBigCodeAttention: kv_heads =
    1 if multi_query): Megatron-Core cannot split one query group over two ranks (X501)."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    config = str(CONFIGS / "gpt_bigcode-santacoder.json")
    done = CliRunner().invoke(app, ["translate", config, "--tp", "2", "-o", str(tmp_path / "s.txt")])
    assert done.exit_code == 2
    assert "X501" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


VARIANTS: dict[tuple[str, str], tuple[dict[str, object], int]] = {
    ("phi-2", "qk_layernorm, tied"): ({"qk_layernorm": True, "tie_word_embeddings": True}, 288_471_680),
    ("stablelm-2-1_6b", "qk_layernorm, parallel, 8 kv heads"): (
        {"qk_layernorm": True, "use_parallel_residual": True, "num_key_value_heads": 8}, 501_242_880),
    ("stablelm-2-1_6b", "no qkv bias"): ({"use_qkv_bias": False}, 513_822_720),
    ("c4ai-command-r-v01", "use_qk_norm, attention_bias, 8 kv heads"): (
        {"use_qk_norm": True, "attention_bias": True, "num_key_value_heads": 8}, 3_506_518_016),
    ("olmo-1b-hf", "attention_bias, untied, 4 kv heads"): (
        {"attention_bias": True, "tie_word_embeddings": False, "num_key_value_heads": 4}, 327_690_240),
    ("granite-3.1-2b-base", "attention_bias, mlp_bias, untied"): (
        {"attention_bias": True, "mlp_bias": True, "tie_word_embeddings": False}, 323_018_752),
    ("gpt_bigcode-santacoder", "multi_query false, n_inner 4h, untied"): (
        {"multi_query": False, "n_inner": None, "tie_word_embeddings": False}, 306_765_824),
}  # fmt: skip
"""Each published file with two blocks and the options its class reads set otherwise, and the
parameters transformers 5.24 builds from it (AutoModelForCausalLM.from_config on the meta device,
as tools/count_transformers_params.py counts, checked once: torch 2.13.0+cpu); the state-dict keys
of block 0 and outside the blocks were the same as ModTrans's parameter names."""


@pytest.mark.parametrize(("name", "what"), list(VARIANTS))
def test_each_family_s_options_give_the_parameters_transformers_builds(
    name: str, what: str, tmp_path: Path
) -> None:
    changes, expected = VARIANTS[(name, what)]
    config = {**json.loads((CONFIGS / f"{name}.json").read_text()), **changes}
    config["n_layer" if "n_layer" in config else "num_hidden_layers"] = 2
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    assert ir.totals.params == expected


def test_the_query_and_key_norms_are_named_and_shaped_as_transformers_builds_them(tmp_path: Path) -> None:
    """StableLmLayerNormPerHead: one nn.LayerNorm(head_dim, bias=False) per head, norms.N;
    CohereLayerNorm((heads, head_dim)): one weight, no bias; Phi: nn.LayerNorm(hidden / heads)
    with a bias; OlmoLayerNorm: no parameters; PhiForCausalLM's lm_head has a bias."""
    shapes: dict[str, dict[str, tuple[int, ...]]] = {}
    for name, changes in (
        ("stablelm-2-1_6b", {"qk_layernorm": True}),
        ("c4ai-command-r-v01", {"use_qk_norm": True}),
        ("phi-2", {"qk_layernorm": True}),
        ("olmo-1b-hf", {}),
    ):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**json.loads((CONFIGS / f"{name}.json").read_text()), **changes}))
        ir, _ = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 16)})
        assert ir is not None
        shapes[name] = {p.name: tuple(p.shape) for layer in ir.layers for p in layer.params}
    attn = "model.layers.0.self_attn"
    stablelm, cohere, phi = shapes["stablelm-2-1_6b"], shapes["c4ai-command-r-v01"], shapes["phi-2"]
    assert stablelm[f"{attn}.q_layernorm.norms.31.weight"] == (64,)
    assert f"{attn}.q_layernorm.norms.0.bias" not in stablelm
    assert cohere[f"{attn}.q_norm.weight"] == (64, 128)
    assert cohere[f"{attn}.k_norm.weight"] == (64, 128)
    assert "model.layers.0.input_layernorm.bias" not in cohere
    assert phi[f"{attn}.q_layernorm.bias"] == (80,)
    assert phi["lm_head.bias"] == (51_200,)
    assert not [n for n in shapes["olmo-1b-hf"] if "norm" in n]


@pytest.mark.parametrize(
    ("name", "changes", "said"),
    [
        ("stablelm-2-1_6b", {"num_attention_heads": 30, "head_dim": 64}, "does not split into 30 heads"),
        ("stablelm-2-1_6b", {"num_attention_heads": 0}, "heads must be a positive integer"),
        ("gpt_bigcode-santacoder", {"add_cross_attention": True}, "add_cross_attention"),
    ],
)
def test_a_further_family_s_impossible_file_is_refused_in_one_line(
    name: str, changes: dict[str, object], said: str, tmp_path: Path
) -> None:
    """StableLmAttention reads no head_dim and raises when hidden_size / heads is not whole;
    GPTBigCodeBlock's cross-attention is not a causal decoder's (and raises under multi_query)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((CONFIGS / f"{name}.json").read_text()), **changes}))
    ir, found = pipeline.extract_checked(path)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert said in found[0].message


# Two-block toys of every Llama-layout family (hidden 64, 4 heads of 16 in 2 key/value groups,
# MLP 128, vocabulary 96; MoE: 4 experts of 32, top-2, a shared expert where the family has one;
# DeepSeek: latent attention, q_lora_rank 24 when biased), with attention_bias and mlp_bias both
# false, then both true (DeepSeek-V2's mlp_bias left false: not read, config.MLP_BIAS). Expected:
# what transformers 5.24 builds, AutoModelForCausalLM.from_config(CONFIG_MAPPING[model_type](**rest))
# on the meta device, parameters() counted once (made once, by hand, with torch 2.13.0+cpu).
_TOY = {
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 96, "head_dim": 16,
}  # fmt: skip
_TOY_MOE = {
    "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2, "num_local_experts": 4,
    "n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "shared_expert_intermediate_size": 64,
}  # fmt: skip
_BIASED = {
    "llama": (86_336, 87_360), "mistral": (86_336, 86_336), "qwen2": (86_592, 86_592),
    "qwen3": (86_400, 86_784), "mixtral": (234_304, 234_304), "qwen2_moe": (111_808, 111_808),
    "qwen3_moe": (86_912, 87_296), "deepseek_v2": (90_720, 88_944), "deepseek_v3": (90_720, 88_944),
    "granite": (86_336, 87_360),
}  # fmt: skip


@pytest.mark.parametrize("biased", [False, True])
@pytest.mark.parametrize("family", sorted(_BIASED))
def test_each_family_takes_the_biases_its_attention_and_mlp_classes_build(
    family: str, biased: bool, tmp_path: Path
) -> None:
    """attention_bias and mlp_bias as each transformers class reads them: Llama, Qwen3 and Granite
    every projection, Qwen2 q/k/v always and o never, Mistral and Mixtral none, DeepSeek's latent
    attention q_a_proj, kv_a_proj_with_mqa and o_proj; Qwen3-MoE no shared expert whatever
    shared_expert_intermediate_size says."""
    config = {"model_type": family, **_TOY, "attention_bias": biased}
    config["mlp_bias"] = biased and family != "deepseek_v2"
    if family in ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3"):
        config.update(_TOY_MOE)
    if family.startswith("deepseek"):
        config["q_lora_rank"] = 24 if biased else None
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, 16)})
    assert ir is not None, [d.message for d in found]
    assert ir.totals.params == _BIASED[family][biased]
