"""The tensor-parallel plan derived from the forward (hf/derived.py), for a family transformers
publishes no base_model_tp_plan for, held to the plans it does publish: for every model type in
transformers' CONFIG_MAPPING whose configuration has a base_model_tp_plan and whose default
configuration builds on the meta device (two blocks), the derived plan names each block linear
layer the published plan splits with the same role (column- or row-parallel), and the same style
but where a family below says why not; where the derivation refuses, the family and its reason
are listed. Then the published runs that need it: BLOOM (TP 4 in BigScience's tr11), OPT (TP 8 in
metaseq), MPT, and GPT-J beside them, at --tp 2.

Measured with transformers 5.25 (the hf venv), 2026-12-07: 212 model types with a plan build; 117
derive exactly the published plan; 9 agree on every role and differ in style (RESTYLED); 23 agree
on every layer the published plan names and also split layers it leaves whole: the shared experts
(afmoe, exaone_moe, solar_open, minimax_m3_vl: Megatron-Core's SharedExpertMLP is split column /
row), plans that name only embed_tokens or one sublayer (gpt_oss, diffllama, emu3, lfm2, flint,
kolibri1_1, minimax's linear-attention layers), t5gemma's cross-attention, and per-head norms
whose gradient all-reduce the plan omits (qwen3_vl_moe, param2moe, sarvam_moe); 63 are refused
(REFUSED). None gives a layer the published plan splits another role.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import transformers

from modtrans import cost, hf
from modtrans.comm import Policy
from modtrans.diagnostics import DiagnosticError
from modtrans.hf import built, classes, configs, derived, library, plans
from modtrans.ir.document import Kind, ModelIR, Role
from modtrans.strategy import Parallelism, plan
from modtrans.strategy.llm import Layout
from modtrans.strategy.roles import LayerRole

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"

PACKED = (
    "transformers gathers a packed projection (gate_up_proj, qkv_proj: [gate; up] in one weight, "
    "which a contiguous split would pair wrongly): colwise_gather_output / rowwise_split_input; "
    "Megatron-LM stores linear_fc1 and linear_qkv per partition and splits them plainly "
    "(megatron/core/transformer/mlp.py, attention.py), which the derivation follows"
)
WHOLE_NORM = (
    "ESM C's q/k LayerNorm spans the whole projection: the derivation gathers it "
    "(colwise_gather_output, as OLMo 2's published plan does for its whole-width q_norm); "
    "transformers' plan splits it plainly"
)
RESTYLED = {
    "glm": PACKED,
    "glm4": PACKED,
    "glm_ocr": PACKED,
    "glm_ocr_text": PACKED,
    "phi3": PACKED,
    "phi4_multimodal": PACKED,
    "esmc": WHOLE_NORM,
    "minimax_m3_vl": "its plan gathers q/k/v around a per-head q_norm; the derivation gathers only "
    "around a whole-width one, and splits the shared experts the plan leaves whole",
    "minimax_m3_vl_text": "as minimax_m3_vl",
}
"""Families whose derived plan gives a layer the published plan splits the same role but another
style (a gathered output, a whole input split), and why."""

MLA = (
    "multi-head latent attention's low-rank pair (q_a_proj -> q_b_proj, kv_a_proj_with_mqa -> "
    "kv_b_proj): the down projection is whole or gathered (Megatron-Core's MLASelfAttention: "
    "linear_q_down_proj a duplicated Linear or a ColumnParallelLinear with gather_output; "
    "transformers: mla_kv_a_proj, replicated), which the column/row rule cannot tell"
)
MIXER = (
    "a state-space, linear-attention or short-convolution mixer (Mamba's in_proj/x_proj/out_proj, "
    "gated delta nets, LFM's and Inkling's convolutions): its channels split with collectives of "
    "their own (Megatron's MambaMixer), not a column/row pair"
)
HYPER = "hyper-connections: the residual stream itself passes through linear layers"
PER_LAYER = "per-layer embeddings made outside the blocks feed each block's projections (Gemma 3n / 4)"
CROSS = (
    "a block reads another model's output (a tower, an encoder, a target model) through no "
    "projection of its own"
)
REFUSED = {
    **dict.fromkeys(
        [
            "axk1",
            "axk2",
            "deepseek_v3",
            "deepseek_v32",
            "dots3_note",
            "dots3_note_text",
            "glm4_moe_lite",
            "glm_moe_dsa",
            "kimi_k25",
            "longcat_flash",
            "minicpm3",
            "mistral4",
            "mistral_large4",
            "mistral_large4_text",
            "sarvam_mla",
            "youtu",
        ],
        MLA,
    ),
    **dict.fromkeys(
        [
            "bailing_hybrid",
            "bamba",
            "doge",
            "falcon_h1",
            "granitemoehybrid",
            "inkling2",
            "inkling2_loop",
            "inkling2_loop_text",
            "inkling2_text",
            "inkling_mm_model",
            "inkling_text",
            "jamba",
            "kimi_linear",
            "lara_mini",
            "lfm3",
            "lfm3_vl",
            "minicpm_ocr",
            "minicpmv4_6",
            "minicpmv4_7",
            "nemo_speechlm",
            "nemotron_h",
            "olmo_hybrid",
            "qwen3_5",
            "qwen3_5_moe",
            "qwen3_5_moe_text",
            "qwen3_5_text",
            "qwen3_next",
        ],
        MIXER,
    ),
    **dict.fromkeys(
        [
            "deepseek_v4",
            "glm5_next",
            "glm5_next_text",
            "hy_v4",
            "hy_v4_vl",
            "hy_v4_vl_text",
            "qwen4_exp",
            "qwen4_exp_text",
        ],
        HYPER,
    ),
    **dict.fromkeys(
        ["embedding_gemma2", "embedding_gemma2_text", "gemma3n_text", "gemma4", "gemma4_text"], PER_LAYER
    ),
    **dict.fromkeys(
        ["granite_docling", "hyperclovax_vision_v2", "t5gemma2", "gemma4_unified_assistant"], CROSS
    ),
    "muse_spark": "a projection into the experts (pre_expert_proj: published rowwise_split_input)",
    "muse_spark_text": "as muse_spark",
    "qwen2_moe": "the shared expert's gate, a linear layer one wide whose output scales the residual",
}
"""Families with a published plan whose blocks the derivation refuses, and why: it derives no plan
it cannot check (X501 with the reason, where the family publishes none)."""


@functools.cache
def _planned_families() -> list[str]:
    """Every model type whose default configuration has a base_model_tp_plan: read once a test
    process (collection and test_the_derivation_is_held_to_enough_families; 1.6 CPU-s a pass once
    the configuration modules are imported, 7 s the first)."""
    found = []
    for model_type in sorted(transformers.CONFIG_MAPPING.keys()):
        try:
            if library.tp_plan(classes.default_config(model_type)):
                found.append(model_type)
        except Exception:  # a composite whose text configuration is ambiguous: no plan to read
            continue
    return found


def _small(model_type: str) -> Any:
    """The default configuration with two blocks (its layer_types cut to match), where it has more."""
    config = classes.default_config(model_type)
    for each in (config, *configs.nested(config)):
        if isinstance(getattr(each, "num_hidden_layers", None), int) and each.num_hidden_layers > 2:
            each.num_hidden_layers = 2
            if isinstance(getattr(each, "layer_types", None), list):
                each.layer_types = each.layer_types[:2]
    return config


def _read(model_type: str) -> built.Read:
    try:
        try:
            model = library.build(_small(model_type))
        except Exception:  # two blocks break its layout (a pattern over more): its default
            model = library.build(classes.default_config(model_type))
        try:
            return built.read(model, 1, 32)
        except DiagnosticError:  # a vision-language model's image tokens fill 32 (X501): room for them
            return built.read(model, 1, 32 + 4096)
    except Exception as error:  # transformers' own: its default configuration does not run on meta
        pytest.skip(f"{model_type}'s default configuration does not build or run on meta: {str(error)[:120]}")


@pytest.mark.parametrize("model_type", _planned_families())
def test_the_derived_plan_is_the_published_one_on_the_blocks(model_type: str) -> None:
    read = _read(model_type)
    found, reason = derived.derive(read.ir)
    if reason is not None:
        assert model_type in REFUSED, reason
        return
    assert model_type not in REFUSED, "it derives a plan now: take it off REFUSED"
    layers = [
        x
        for x in read.ir.layers
        if derived._in_block(x) and x.params and x.moe is None and (derived._linear(x) or x.kind is Kind.NORM)
    ]
    names = [x.name for x in layers]
    published, mine = plans.planned(read.plan, names), plans.planned(found, names)
    for name, style in published.items():
        role = plans.role(style)
        if role in (LayerRole.COLUMN, LayerRole.ROW):
            assert plans.role(mine.get(name, "")) is role, (name, style, mine.get(name))
            if model_type not in RESTYLED:
                assert plans.style(mine[name]) == plans.style(style), (name, style, mine[name])
        elif style == "replicated_with_grad_allreduce":
            assert mine.get(name) == style, (name, mine.get(name))


def test_the_derivation_is_held_to_enough_families() -> None:
    """Not vacuous: the families transformers publishes plans for, Llama's, Mistral's, Qwen's,
    Gemma's, GPT-NeoX's and GPT-J's among them."""
    families = set(_planned_families())
    assert {"llama", "mistral", "qwen2", "qwen3", "gemma3_text", "gpt_neox", "gptj", "olmo2"} <= families
    assert len(families) >= 200


def _per_rank(name: str, tp: int) -> int:
    """One rank's parameter elements at `tp` ranks, the blocks' biases left out (the weights alone)."""
    data = (FIXTURES / f"{name}.json").read_bytes()
    ir, found = hf.extract(json.loads(data), data, name=name, batch=1, sequence=64, tensor=tp)
    assert ir is not None, found
    own = library.tp_plan(classes.config_of(json.loads(data)))
    assert [d.code for d in found if d.code == "M806"] == (["M806"] if tp > 1 and not own else [])
    layers = tuple(
        dataclasses.replace(x, params=tuple(p for p in x.params if p.role is not Role.BIAS))
        for x in ir.layers
    )
    bare: ModelIR = dataclasses.replace(ir, layers=layers)
    layout = Layout(npus=tp, tp=tp, micro_batch=1, global_batch=1)
    return (
        plan(bare, cost.get("gpu"), Parallelism(Policy.HYBRID_TRANSFORMER, tp, layout=layout))
        .memory[0]
        .parameters
    )


def _split_weights(config: dict[str, Any]) -> int:
    """The weights Megatron-LM splits over the tensor ranks, from the published configuration: each
    block's QKV (3h^2), attention output (h^2) and MLP (2 h f) in ColumnParallelLinear and
    RowParallelLinear, the word embedding in VocabParallelEmbedding (V h) and an untied head as
    the output layer (another V h)."""
    h = config.get("hidden_size") or config.get("n_embd") or config["d_model"]
    blocks = config.get("n_layer") or config.get("num_hidden_layers") or config["n_layers"]
    f = config.get("ffn_dim") or config.get("n_inner") or 4 * h  # BLOOM, GPT-J, MPT: 4h
    tied = config.get("tie_word_embeddings", True) is not False
    return int(blocks * (4 * h * h + 2 * h * f) + config["vocab_size"] * h * (1 if tied else 2))


@pytest.mark.parametrize("name", ["bloom-3b-finetune", "opt-1.3b", "gpt-j-6b", "mpt-7b-instruct"])
def test_a_published_run_without_a_plan_splits_at_tp_2(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--tp 2 on BLOOM, OPT and MPT (X501 before), and GPT-J (a parallel-residual block: two
    row-parallel outputs; its configuration publishes a plan, which the derived one equals): one
    rank holds the whole model's weights less half of those Megatron-LM splits, counted from the
    configuration (_split_weights); the Chakra traces validate, and M806 says where the plan is
    derived."""
    from typer.testing import CliRunner

    from modtrans.chakra.validate import validate_paths
    from modtrans.cli import app

    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    config = json.loads((FIXTURES / f"{name}.json").read_text())
    whole, half = _per_rank(name, 1), _per_rank(name, 2)
    assert whole - half == _split_weights(config) // 2
    args = ["translate", str(FIXTURES / f"{name}.json"), "--tp", "2", "--seq-len", "64"]
    done = CliRunner().invoke(app, [*args, "--format", "chakra-et", "-o", str(tmp_path / "t")])
    assert done.exit_code == 0, done.output
    assert ("M806" in done.output) is (name != "gpt-j-6b")  # GPTJConfig publishes a plan (5.x)
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 2
    assert [d for d in found if d.severity <= 2] == []


def test_heads_that_do_not_divide_are_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BLOOM-3B's 32 heads (its configuration's n_head) over 3 ranks: Megatron-Core asserts the
    division (attention.py: divide(num_attention_heads, world_size)); its fused query_key_value is
    split by heads too. One X501 line, exit 2, and no M806 beside it."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    path = FIXTURES / "bloom-3b-finetune.json"
    heads = json.loads(path.read_text())["n_head"]
    assert heads % 3
    args = [
        "translate",
        str(path),
        "--tp",
        "3",
        "--seq-len",
        "64",
        "-d",
        "simai",
        "-o",
        str(tmp_path / "s.txt"),
    ]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2
    lines = done.output.strip().splitlines()
    assert len(lines) == 1
    assert f"X501 --tp 3: the {heads} attention heads must divide by it" in lines[0]


@pytest.mark.parametrize(
    ("name", "family"), [("hunyuan-mt-7b-nanoquant", "hunyuan_v1_dense"), ("gpt-oss-20b-echocog", "gpt_oss")]
)
def test_a_published_plan_of_embed_tokens_alone_is_completed_on_the_blocks(
    name: str, family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HunYuan dense's and GPT-OSS's configuration classes publish a base_model_tp_plan that names
    no layer of the blocks (transformers 5.25: embed_tokens alone; GPT-OSS's experts take its
    base_model_ep_plan), which tp_plan="auto" applies to the modules it names alone
    (distributed/tensor_parallel.apply_tensor_parallelism). At --tp 2 the published styles stay
    and each block's attention and dense MLP linear layers take the style transformers' own Llama
    plan gives the module of the same name (LlamaConfig.base_model_tp_plan: Megatron-LM's column /
    row split), said in one M806 line; the experts stay expert parallelism's."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    data = (FIXTURES / f"{name}.json").read_bytes()
    published = library.tp_plan(classes.config_of(json.loads(data)))
    assert classes.config_of(json.loads(data)).model_type == family
    whole, _ = hf.extract(json.loads(data), data, name=name, batch=1, sequence=64)
    assert whole is not None
    assert published
    assert derived.blockless(whole, published)
    ir, found = hf.extract(json.loads(data), data, name=name, batch=1, sequence=64, tensor=2)
    assert ir is not None, found
    said = [d.message for d in found if d.code == "M806"]
    assert len(said) == 1, said
    assert "alone, no layer of its blocks" in said[0], said
    styles = {x.name: x.tp_style for x in ir.layers}
    for layer, style in plans.planned(published, list(styles)).items():
        assert styles[layer] == style, (layer, styles[layer], style)
    llama = library.tp_plan(transformers.LlamaConfig())
    blocks = [x for x in ir.layers if derived._in_block(x) and derived._linear(x)]
    assert blocks
    for x in blocks:
        assert x.tp_style == plans.planned(llama, [x.name]).get(x.name), (x.name, x.tp_style)
    assert all(x.tp_style is None for x in ir.layers if x.moe is not None)


def test_a_published_plan_of_no_block_layer_is_followed_and_said_where_none_derives() -> None:
    """Inkling 2's configuration class publishes embed_tokens alone (replicate), and its blocks hold
    a short convolution the derivation refuses (REFUSED: MIXER): at --tp 2 the published plan is
    followed as transformers applies it, its blocks whole on every rank, and M806 says so with the
    derivation's reason."""
    read = _read("inkling2")
    assert "inkling2" in REFUSED
    assert derived.blockless(read.ir, read.plan)
    found, reason = derived.derive(read.ir)
    assert reason is not None
    assert not found
    plan, refused, said = hf._derived(read.ir, read.plan, "inkling2", 2, "config.json")
    assert plan == read.plan
    assert refused is None
    assert [d.code for d in said] == ["M806"]
    assert said[0].message.endswith(f"{reason}; its blocks stay whole on every tensor rank")
