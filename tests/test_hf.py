"""The generic path (modtrans/hf/): a family's model built by transformers on the meta device,
held to the library itself. Parameters equal sum(p.numel() for p in model.parameters()) (a tied
table once); the forward FLOPs of the matrix products (linear, matmul, conv layers) within 2 % of
FlopCounterMode's count of a forward pass, which torch makes with its own module tracker; the
hand-written families (fixtures/configs) give transformers' parameters and FLOPs within 1 %.

Marker hf: needs torch and transformers (the extra `hf`); CI's last stage installs them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans import pipeline
from modtrans.hf import built, classes, library
from modtrans.ir.document import Kind, ModelIR, Part
from modtrans.llm.config import ALIASES
from tests.hfcheck import GEMMS, agrees

pytestmark = pytest.mark.hf

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "hf"
CONFIGS = ROOT / "fixtures" / "configs"

SAMPLE = ("opt", "olmoe", "bert", "t5", "whisper", "vit", pytest.param("gpt_oss", marks=pytest.mark.slow))
"""A sample of the families of every task (causal LM, MoE, masked LM, seq2seq, speech, vision);
tools/hf_families.py runs every model_type transformers ships."""


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads its own IR cache: an IR an earlier build of the code kept is not read back."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))


def traced(model_type: str, sequence: int = 64) -> tuple[Any, dict[str, Any], ModelIR]:
    """(model, inputs, IR) of a model_type's default configuration."""
    model = library.build(classes.default_config(model_type))
    read = built.read(model, 1, sequence)
    return model, read.given, read.ir


@pytest.mark.parametrize("model_type", SAMPLE)
def test_parameters_and_forward_flops_are_the_library_s(model_type: str) -> None:
    model, given, ir = traced(model_type)
    agrees(model, given, ir)


@pytest.mark.parametrize("model_type", ["opt", "olmoe", "t5"])
def test_backward_flops_are_the_library_s_backward(model_type: str) -> None:
    """The input- and weight-gradient FLOPs of the matrix products (ir/flops.py's formulas from
    each op's shapes) against FlopCounterMode's count of a real backward on meta tensors: its
    total, not its per-module attribution (off for the backward, as issue 36 measured)."""
    model, given, ir = traced(model_type)
    _, backward = library.count_step(model, given)
    ours = sum(x.flops.input_grad + x.flops.weight_grad for x in ir.layers if x.kind in GEMMS)
    assert backward > 0
    assert abs(ours - backward) <= 0.005 * backward, (ours, backward)


def test_a_tied_head_counts_the_embedding_table_once() -> None:
    """GPT2LMHeadModel ties lm_head.weight to transformer.wte.weight (tie_word_embeddings)."""
    _, _, ir = traced("gpt2")
    head = ir.layer("lm_head")
    assert [p.shared_with for p in head.params] == ["transformer.wte"]
    assert not any(p.shared_with for p in ir.layer("transformer.wte").params)


def test_blocks_parts_and_experts_are_read_from_the_modules() -> None:
    """OLMoE: 16 blocks; q_proj in the attention with its 16 heads; the router a linear layer of
    64 outputs; the experts one grouped layer per fused parameter, on tokens x top_k rows."""
    model, _, ir = traced("olmoe")
    config = model.config
    blocks = {x.block.index for x in ir.layers if x.block is not None and x.block.index is not None}
    assert blocks == set(range(config.num_hidden_layers))
    q = ir.layer("model.layers.3.self_attn.q_proj")
    assert q.block is not None
    assert q.block.index == 3
    assert q.block.part is Part.ATTENTION
    assert q.block.heads is not None
    assert q.block.heads.query == config.num_attention_heads
    assert q.block.heads.causal is True
    router = ir.layer("model.layers.3.mlp.gate")
    assert router.moe is not None
    assert router.moe.expert is None
    assert router.moe.experts == config.num_experts
    experts = [x for x in ir.layers if x.moe is not None and x.moe.grouped and x.block and x.block.index == 3]
    gemms = [x for x in experts if x.kind is Kind.LINEAR]
    assert {x.name.rsplit(".", 1)[-1] for x in gemms} == {"gate_up_proj", "down_proj"}
    tokens = 64 * config.num_experts_per_tok
    up = next(x for x in gemms if x.name.endswith("gate_up_proj"))
    assert up.flops.forward == 2 * tokens * config.hidden_size * 2 * config.intermediate_size
    assert up.gemm is not None
    assert up.gemm.groups == config.num_experts


@pytest.mark.parametrize("name", ["ernie4_5-default", "olmoe-default"])
def test_a_family_outside_the_hand_written_list_translates_and_validates(name: str, tmp_path: Path) -> None:
    """The CLI reads them through modtrans/hf/ (llm/__init__.py's M801 path): traces under TP, PP
    and DP (and EP for the mixture), and SimAI text, that validate."""
    from typer.testing import CliRunner

    from modtrans.chakra.validate import validate_paths
    from modtrans.cli import app

    config = str(FIXTURES / f"{name}.json")
    moe = ["--ep", "2"] if "olmoe" in name else []  # its plan gathers whole activations: no --sp
    runner = CliRunner()
    args = ["translate", config, "--tp", "2", *moe, "--pp", "2", "--dp", "2", "--seq-len", "128"]
    traces = runner.invoke(app, [*args, "--format", "chakra-et", "-o", str(tmp_path / "t")])
    assert traces.exit_code == 0, traces.output
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 8
    assert [d for d in found if d.severity <= 2] == []
    text = runner.invoke(app, [*args, "-d", "simai", "-o", str(tmp_path / "s.txt")])
    assert text.exit_code == 0, text.output
    assert runner.invoke(app, ["validate", str(tmp_path / "s.txt")]).exit_code == 0


def test_the_second_read_comes_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The IR is kept by the configuration's digest: the second read builds nothing."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path))
    config = FIXTURES / "opt-default.json"
    first, found = pipeline.extract_checked(config, batch=1, input_shapes={"input_ids": (1, 64)})
    assert first is not None
    assert found == []
    assert len(list((tmp_path / "hf").glob("*.json"))) == 1

    def refuse(*_: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(library, "build", refuse)
    second, _ = pipeline.extract_checked(config, batch=1, input_shapes={"input_ids": (1, 64)})
    assert second is not None
    assert second.totals == first.totals
    assert [x.name for x in second.layers] == [x.name for x in first.layers]


HAND_WRITTEN = sorted(
    n
    for n, e in json.loads((CONFIGS / "EXPECTED.json").read_text())["counts"].items()
    if e["model_class"].endswith("ForCausalLM") and e.get("made_with", "").endswith("5.24.0")
)


DIFFERENTIAL_SAMPLE = {"falcon-7b", "phi-3-mini-4k-instruct", "pythia-160m"}
"""The families CI builds both ways (-m "hf and not slow"); `-m hf` by hand builds every one."""


@pytest.mark.parametrize(
    "name", [n if n in DIFFERENTIAL_SAMPLE else pytest.param(n, marks=pytest.mark.slow) for n in HAND_WRITTEN]
)
def test_the_hand_written_families_agree_with_transformers(name: str, tmp_path: Path) -> None:
    """Each hand-written decoder family (llm/config.py) against the same configuration built by
    transformers: equal parameters, each parameter both name of the same shape (the hand-written
    names are transformers' state-dict keys) and dtype (the file's torch_dtype), forward FLOPs
    within 1 %."""
    data = json.loads((CONFIGS / f"{name}.json").read_text())
    data["model_type"] = ALIASES.get(data["model_type"], data["model_type"])  # Falcon's first name
    written, _ = pipeline.extract_checked(
        CONFIGS / f"{name}.json", batch=1, input_shapes={"input_ids": (1, 128)}
    )
    assert written is not None
    model = library.build(classes.config_of(data))
    read = built.read(model, 1, 128)
    recorded, generic = read.recorded, read.ir
    assert written.totals.params == generic.totals.params == recorded.total_params
    shapes = {p.name: p.shape for x in generic.layers for p in x.params}
    mine = {p.name: p.shape for x in written.layers for p in x.params}
    both = sorted(set(mine) & set(shapes))
    assert len(both) >= 0.9 * len(mine), sorted(set(mine) - set(shapes))[:5]
    assert {n: mine[n] for n in both} == {n: shapes[n] for n in both}
    dtypes = {p.dtype for x in written.layers for p in x.params}  # the file's torch_dtype
    assert dtypes == {p.dtype for x in generic.layers for p in x.params}
    ours, theirs = written.totals.flops.forward, generic.totals.flops.forward
    assert abs(ours - theirs) <= 0.01 * theirs, (ours, theirs)


@pytest.mark.parametrize("model_type", ["llama", "olmoe", "gemma3_text"])
def test_the_model_s_own_tensor_parallel_plan_is_the_split_tensor_py_gives(model_type: str) -> None:
    """Every layer base_model_tp_plan names gets, from tensor.py's reading of the data flow, the
    role its style maps to (plans.STYLES): the plan and the strategy agree on which projections
    are column- and row-parallel."""
    from modtrans.hf import plans
    from modtrans.strategy.llm.tensor import roles_of
    from modtrans.strategy.roles import LayerRole

    model, _, ir = traced(model_type)
    plan = model.config.base_model_tp_plan
    assert plan
    owners = [x for x in ir.layers if x.moe is None and x.params]
    given = roles_of(ir, owners)
    named = {n: plans.role(s) for n, s in plans.planned(plan, [x.name for x in owners]).items()}
    checked = {n: r for n, r in named.items() if r in (LayerRole.COLUMN, LayerRole.ROW)}
    assert checked
    assert {n: given.get(n) for n in checked} == checked
    if model.config.base_model_pp_plan:  # the pipeline's cut points: one block per decoder layer
        blocks = {x.block.index for x in ir.layers if x.block is not None and x.block.index is not None}
        assert blocks == set(range(model.config.num_hidden_layers))


def test_a_model_without_a_plan_whose_blocks_the_rule_cannot_split_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """RWKV's configuration names no tensor-parallel split, and its blocks are no column/row pairs
    Megatron's rule derives (hf/derived.py: its feed-forward's receptance gates the residual
    stream, models/rwkv/modeling_rwkv.py, RwkvFeedForward.forward: torch.sigmoid(self.receptance(...)) *
    value): --tp 2 is one X501 line with the reason, exit 2; data parallelism with ZeRO works.
    OPT, which publishes no plan either, is split by the derived one (test_hf_derived_plans.py)."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    assert not getattr(classes.default_config("rwkv"), "base_model_tp_plan", None)
    small = {"model_type": "rwkv", "vocab_size": 512, "hidden_size": 64, "attention_hidden_size": 64}
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**small, "num_hidden_layers": 2, "intermediate_size": 256}))
    runner = CliRunner()
    args = ["translate", str(config), "--seq-len", "64", "-d", "simai"]
    refused = runner.invoke(app, [*args, "--tp", "2", "-o", str(tmp_path / "a.txt")])
    assert refused.exit_code == 2
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1
    assert "X501 --tp 2: rwkv's configuration has no base_model_tp_plan" in lines[0]
    assert "derived from its forward: rwkv.blocks.0.feed_forward.receptance's split output" in lines[0]
    done = runner.invoke(app, [*args, "--dp", "4", "--zero", "2", "-o", str(tmp_path / "b.txt")])
    assert done.exit_code == 0, done.output


def test_modules_the_forward_does_not_run_are_counted_and_said(tmp_path: Path) -> None:
    """Qwen2-VL's default configuration traced on token ids alone (its vision merger's 3584-wide
    features do not fit its 8192-wide text: inputs.images gives it no image): its vision tower
    keeps its parameters (the IR's count is still transformers'), and M804 names it."""
    config = classes.default_config("qwen2_vl")
    assert config.vision_config.hidden_size != config.text_config.hidden_size
    config.text_config.num_hidden_layers = config.vision_config.depth = 2  # a fast trace
    config.text_config.layer_types = config.text_config.layer_types[:2]
    from modtrans import hf

    config.architectures = ["Qwen2VLForConditionalGeneration"]
    data = json.dumps(config.to_dict()).encode()
    ir, found = hf.extract(json.loads(data), data, name="paligemma", batch=1, sequence=64)
    assert ir is not None
    model = library.build(classes.config_of(json.loads(data)))
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    assert [d.code for d in found] == ["M804"]
    assert "model.visual" in found[0].message


def test_an_embedding_the_forward_does_not_run_is_split_by_tensor_ranks(tmp_path: Path) -> None:
    """Idefics3's configuration as transformers writes it, traced on token ids alone: its vision
    tower's patch and position embeddings never run (no output recorded, M804). Tensor and
    sequence parallelism over its text model's plan translate it (they read an embedding's output
    shape to tell added positions: one not run has none), to text and to Chakra traces."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    config = classes.default_config("idefics3")
    config.text_config.num_hidden_layers = config.vision_config.num_hidden_layers = 2  # a fast trace
    config.architectures = ["Idefics3ForConditionalGeneration"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    runner = CliRunner()
    common = [str(path), "--npus", "4", "--tp", "2", "--dp", "2", "--sp", "--seq-len", "128"]
    text = runner.invoke(app, ["translate", *common, "-o", str(tmp_path / "w.txt")])
    assert text.exit_code == 0, text.output
    assert "M804" in text.output
    assert "vision_model.embeddings.patch_embedding" in text.output
    (tmp_path / "et").mkdir()
    traces = runner.invoke(
        app, ["translate", *common, "--format", "chakra-et", "-o", str(tmp_path / "et" / "p")]
    )
    assert traces.exit_code == 0, traces.output


def test_a_configuration_that_needs_its_own_code_is_refused_in_one_line(tmp_path: Path) -> None:
    """ChatGLM3-6B's config.json (THUDM/chatglm3-6b: model_type chatglm, its classes in
    configuration_chatglm.py and modeling_chatglm.py beside it, auto_map) names a model_type
    transformers does not define: M801 in one line, no code run."""
    config = {
        "_name_or_path": "THUDM/chatglm3-6b",
        "model_type": "chatglm",
        "architectures": ["ChatGLMModel"],
        "auto_map": {
            "AutoConfig": "configuration_chatglm.ChatGLMConfig",
            "AutoModel": "modeling_chatglm.ChatGLMForConditionalGeneration",
            "AutoModelForCausalLM": "modeling_chatglm.ChatGLMForConditionalGeneration",
        },
        "num_layers": 28,
        "padded_vocab_size": 65024,
        "hidden_size": 4096,
        "ffn_hidden_size": 13696,
        "kv_channels": 128,
        "num_attention_heads": 32,
        "seq_length": 8192,
        "multi_query_attention": True,
        "multi_query_group_num": 2,
        "torch_dtype": "float16",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "auto_map" in found[0].message
    assert "trust_remote_code" in found[0].message


def test_a_parameter_read_first_outside_its_module_is_counted_once_by_its_module() -> None:
    """RwkvModel rescales each block's output weights in place in its own forward, before the
    blocks run (RwkvModel._rescale_layers): the weight stays its Linear's, counted once."""
    config = classes.default_config("rwkv")
    config.num_hidden_layers, config.hidden_size, config.attention_hidden_size = 2, 64, 64
    config.intermediate_size, config.vocab_size = 256, 100
    model = library.build(config)
    ir = built.read(model, 1, 8).ir
    assert ir.totals.params == sum(p.numel() for p in model.parameters())
    output = ir.layer("rwkv.blocks.1.attention.output")
    assert [(p.name, p.shared_with) for p in output.params] == [
        ("rwkv.blocks.1.attention.output.weight", None)
    ]


SURVEYED = (
    "gpt_oss",
    "opt",
    "bloom",
    "gptj",
    "mpt",
    "gpt_neox",
    "falcon",
    "phi3",
    "gemma2",
    "gemma3_text",
    "qwen2",
    "qwen3",
    "qwen2_moe",
    "qwen3_moe",
    "mixtral",
    "deepseek_v3",
    "olmoe",
    "jamba",
    "recurrent_gemma",
    "whisper",
    "seamless_m4t",
    "speech_to_text",
    "vit",
    "swin",
    "convnext",
    "llava",
    "idefics",
    "idefics2",
    "idefics3",
    "mllama",
    "granitemoe",
    "jetmoe",
    "phimoe",
    "modernbert",
)
"""The families the issue names among the published configurations it is checked on (decoders,
mixtures of experts, a recurrent hybrid, speech, vision, vision-language), at the shape each
configuration class's defaults give (its docstring's checkpoint)."""
SURVEY_SAMPLE = {"gpt_oss", "idefics3", "qwen3_moe", "whisper"}


@pytest.mark.parametrize(
    "model_type", [t if t in SURVEY_SAMPLE else pytest.param(t, marks=pytest.mark.slow) for t in SURVEYED]
)
def test_a_named_family_translates_or_is_refused_in_one_line(model_type: str, tmp_path: Path) -> None:
    """Each through the CLI under the layouts the issue asks for (tensor and sequence parallelism
    from the model's plan, pipeline stages, experts over data ranks), to text and to traces: a
    workload, or one diagnostic line and exit 1 or 2, never a traceback."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(classes.default_config(model_type).to_dict()))
    (tmp_path / "et").mkdir()
    layouts = (
        ["--tp", "2", "--dp", "2", "--sp", "-o", str(tmp_path / "a.txt")],
        ["--pp", "2", "--dp", "2", "--format", "chakra-et", "-o", str(tmp_path / "et" / "p")],
        ["--dp", "4", "--ep", "2", "--format", "chakra-et", "-o", str(tmp_path / "et" / "q")],
    )
    runner = CliRunner()
    # LLaVA-1.5's default: 576 image tokens (CLIP ViT-L/14 at 336 px) before the text (X501 where fewer)
    sequence = str(576 + 128 if model_type == "llava" else 128)
    for layout in layouts:
        result = runner.invoke(app, ["translate", str(path), "--npus", "4", "--seq-len", sequence, *layout])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            layout,
            result.exception,
        )
        if result.exit_code:
            assert result.exit_code in (1, 2)
            errors = [
                line
                for line in result.output.splitlines()
                if " error " in line or line.startswith("modtrans:")
            ]
            assert len(errors) == 1, result.output


def test_mfu_counts_a_plans_moe_once_over_the_tensor_ranks(tmp_path: Path) -> None:
    """Under a model's own tensor-parallel plan without SP (the only way ModTrans runs a mixture of
    experts over T > 1 ranks: Megatron-Core's MoELayer refuses it, llm/tensor.py check) every
    tensor rank routes the whole sequence and runs its experts whole (the plan leaves them to
    expert parallelism): the model runs them once. OLMoE at T 2, E 2, D 2: MFU x iteration x GPUs
    x peak, read by the fast tier and from the plan walked, is the model's FLOPs at T 1 on the
    same two data ranks. Before, router and experts counted twice: 1.81 x the model's FLOPs."""
    import modtrans
    from modtrans import estimate
    from modtrans.estimate import Layout

    config = str(FIXTURES / "olmoe-default.json")
    common: dict[str, Any] = {"device": "h100", "network": "hgx-h100", "seq_len": 128}
    alone = estimate.layout(config, Layout(npus=2, dp=2, ep=2, vocab_divisor=1, global_batch=2), **common)
    layout = Layout(npus=4, tp=2, dp=2, ep=2, vocab_divisor=1, global_batch=2)
    fast = estimate.layout(config, layout, **common)
    done = modtrans.translate(
        config,
        format="chakra-et",
        output=str(tmp_path / "x"),
        tp=2,
        dp=2,
        ep=2,
        global_batch=2,
        device="h100",
        seq_len=128,
        make_vocab_size_divisible_by=1,
    )
    assert done.plan is not None
    exact = estimate.plan(done.plan, network="hgx-h100", peak_flops=fast.peak_flops)
    for e in (fast, exact):
        work = (e.mfu or 0) * e.iteration_s * e.npus * (e.peak_flops or 0)
        assert work == pytest.approx(alone.flops, rel=1e-12), e
