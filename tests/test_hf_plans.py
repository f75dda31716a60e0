"""The model's own tensor-parallel plan (transformers' base_model_tp_plan) drives the split and
the collectives of a model read through transformers (hf/plans.py -> strategy/llm/tensor.py).

What each style sends is transformers/distributed/tensor_parallel.py (5.x):
    colwise_gather_output  ColwiseParallel(output_layouts=Replicate()): the output's Shard(-1) ->
                           Replicate redistribute after the forward, an all-gather of the whole
                           output; the replicated input's Partial gradient all-reduced
    rowwise_split_input    RowwiseParallel(input_layouts=Replicate()): the partial output all-reduced
                           after the forward; the input's Shard(-1) gradient all-gathered back to
                           Replicate in the backward
A plan of plain colwise / rowwise sends what Megatron-LM's ColumnParallelLinear / RowParallelLinear
send: the collectives tensor.py's data-flow rules (roles_of) give the same IR with no plan.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans import cost, hf
from modtrans.comm import Policy
from modtrans.hf import classes, library, plans
from modtrans.ir.document import ModelIR
from modtrans.plan import Collective, Purpose
from modtrans.strategy import Parallelism, plan
from modtrans.strategy.llm import Layout

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
SEQ = 64


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))


def _rows(path: Path) -> dict[str, list[str]]:
    """SimAI text's layer rows by name (after its two header lines)."""
    return {line.split("\t")[0]: line.split("\t") for line in path.read_text().splitlines()[2:]}


def test_olmoe_gathers_what_its_plan_gathers_with_the_bytes_of_its_configuration(tmp_path: Path) -> None:
    """OLMoE's plan (transformers' OlmoeConfig.base_model_tp_plan) gathers q_proj, k_proj and
    v_proj's outputs (its q_norm / k_norm normalise the whole projection) and splits o_proj's
    whole input. At --tp 2, batch 1 and 64 tokens each all-gather moves the projection's whole
    output, tokens x hidden_size x 4 bytes (the configuration names no dtype: torch's default
    float32); the input's gradient all-reduced once for the three projections of one input
    (Megatron's fused linear_qkv); o_proj all-reduces its output and all-gathers its input's
    gradient (tokens x hidden_size x 4)."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    config = json.loads((FIXTURES / "olmoe-default.json").read_text())
    built = library.tp_plan(classes.config_of(config))
    assert {k: built[k] for k in built if "self_attn" in k} == {
        "layers.*.self_attn.q_proj": "colwise_gather_output",
        "layers.*.self_attn.k_proj": "colwise_gather_output",
        "layers.*.self_attn.v_proj": "colwise_gather_output",
        "layers.*.self_attn.o_proj": "rowwise_split_input",
    }
    assert config["dtype"] is None
    whole = 1 * SEQ * config["hidden_size"] * 4  # 524,288
    out = tmp_path / "s.txt"
    args = ["translate", str(FIXTURES / "olmoe-default.json"), "--tp", "2", "--seq-len", str(SEQ)]
    done = CliRunner().invoke(app, [*args, "-d", "simai", "-o", str(out)])
    assert done.exit_code == 0, done.output
    rows = _rows(out)
    for block in (0, config["num_hidden_layers"] - 1):
        attention = f"model.layers.{block}.self_attn"
        # columns: name, dependency, fwd time, fwd comm, bytes, ig time, ig comm, bytes, ...
        assert rows[f"{attention}.q_proj"][3:5] == ["ALLGATHER", str(whole)]
        assert rows[f"{attention}.q_proj"][6:8] == ["ALLREDUCE", str(whole)]
        for name in ("k_proj", "v_proj"):
            assert rows[f"{attention}.{name}"][3:5] == ["ALLGATHER", str(whole)]
            assert rows[f"{attention}.{name}"][6:8] == ["NONE", "0"]
        assert rows[f"{attention}.o_proj"][3:5] == ["ALLREDUCE", str(whole)]
        assert rows[f"{attention}.o_proj"][6:8] == ["ALLGATHER", str(whole)]
        assert rows[f"{attention}.q_norm"][3] == "NONE"  # replicated: not in the plan


def test_a_whole_activation_style_under_sequence_parallelism_is_refused_in_one_line(tmp_path: Path) -> None:
    """Megatron-LM splits no gathered output or whole input over the sequence
    (ColumnParallelLinear.forward asserts not sequence_parallel under gather_output;
    RowParallelLinear raises for input_is_parallel False): --sp with OLMoE's plan is one X501."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    args = ["translate", str(FIXTURES / "olmoe-default.json"), "--tp", "2", "--sp", "--seq-len", str(SEQ)]
    refused = CliRunner().invoke(app, [*args, "-d", "simai", "-o", str(tmp_path / "s.txt")])
    assert refused.exit_code == 2
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1
    assert "X501 --sp: the model's tensor-parallel plan gives whole activations" in lines[0]
    assert not (tmp_path / "s.txt").exists()


LLAMA: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 512,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "dtype": "bfloat16",
}


def _collectives(ir: ModelIR, layout: Layout) -> list[tuple[str, str, str, int, frozenset[Purpose]]]:
    the_plan = plan(ir, cost.get("gpu"), Parallelism(Policy.HYBRID_TRANSFORMER, layout.npus, layout=layout))
    return [
        (the_plan.layers[op.layer].name, op.step.value, op.comm.value, op.bytes, op.over)
        for op in the_plan.program(0)
        if isinstance(op, Collective)
    ]


@pytest.mark.parametrize("sp", [False, True])
def test_a_dense_plan_sends_exactly_megatrons_collectives(sp: bool) -> None:
    """Llama's plan (colwise q/k/v/gate/up, rowwise o/down) read through transformers: the same
    collectives, in the same order and of the same bytes, as tensor.py's Megatron rules give the
    same IR without the plan (roles_of, from the data flow), with and without SP; and the plan
    named every one of the seven projections in each block."""
    data = json.dumps(LLAMA).encode()
    ir, found = hf.extract(json.loads(data), data, name="llama", batch=1, sequence=SEQ, tensor=2)
    assert ir is not None, found
    styled = {x.name: x.tp_style for x in ir.layers if x.tp_style}
    assert len(styled) == 7 * LLAMA["num_hidden_layers"]
    assert set(styled.values()) == {"colwise", "rowwise"}
    bare = dataclasses.replace(ir, layers=tuple(dataclasses.replace(x, tp_style=None) for x in ir.layers))
    layout = Layout(npus=4, tp=2, dp=2, sp=sp, micro_batch=1, global_batch=2)
    mine, megatron = _collectives(ir, layout), _collectives(bare, layout)
    assert any(c[2] == "ALLREDUCE" and Purpose.TENSOR in c[4] for c in megatron) or sp
    assert mine == megatron


def test_the_plan_s_gradient_all_reduce_of_a_replicated_norm() -> None:
    """Qwen3's q_norm / k_norm: replicated_with_grad_allreduce (ReplicatedWithGradAllReduce
    all-reduces the parameter's gradient over the tensor ranks: each rank's covers its own heads):
    at --tp 2 without SP one all-reduce over the tensor group of each norm's head_dim weights per
    iteration, in the gradient buffer's dtype (fp32 for bfloat16 parameters: Megatron-LM's main
    gradients, strategy/frameworks.py): head_dim x 4 bytes."""
    config: dict[str, Any] = {
        **LLAMA,
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "head_dim": 32,
    }
    data = json.dumps(config).encode()
    ir, found = hf.extract(json.loads(data), data, name="qwen3", batch=1, sequence=SEQ, tensor=2)
    assert ir is not None, found
    layout = Layout(npus=2, tp=2, micro_batch=1, global_batch=1)
    tensor = frozenset({Purpose.TENSOR})
    norms = [c for c in _collectives(ir, layout) if c[0].endswith(("q_norm", "k_norm")) and c[4] == tensor]
    assert norms
    assert {(c[2], c[3]) for c in norms} == {("ALLREDUCE", config["head_dim"] * 4)}
    assert len({c[0] for c in norms}) == 2 * config["num_hidden_layers"]


def test_styles_cover_every_style_transformers_registers() -> None:
    """plans.STYLES names each tensor-parallel style in transformers' ALL_PARALLEL_STYLES (those
    of distributed/tensor_parallel.py; distributed/expert_parallel.py registers the expert plan's
    there too), so no plan entry is silently dropped as unknown."""
    import transformers.distributed.expert_parallel  # noqa: F401  (its styles registered too)
    from transformers.distributed.tensor_parallel import ALL_PARALLEL_STYLES

    names = set(ALL_PARALLEL_STYLES)
    tensor = {n for n in names if type(ALL_PARALLEL_STYLES[n]).__module__.endswith(".tensor_parallel")}
    assert len(tensor) >= 18
    assert tensor <= set(plans.STYLES)
    assert not (names - tensor) & set(plans.STYLES)


def test_what_the_plan_leaves_out_is_replicated() -> None:
    """gpt-oss's plan names its embedding alone (GptOssConfig.base_model_tp_plan: embed_tokens
    embedding_rowwise; its experts follow the expert plan), so its attention takes the split the
    derivation gives (M806: Megatron's column q/k/v, row o_proj): at --tp 2 what neither names,
    the router and the experts, sends nothing over the tensor ranks; each block's attention sends
    Megatron's two all-reduces of tokens x hidden x 4 bytes (the input's gradient once for q/k/v,
    o_proj's output), the embedding all-reduces its output and the head keeps Megatron's
    vocabulary-parallel loss."""
    config: dict[str, Any] = {
        "model_type": "gpt_oss",
        "architectures": ["GptOssForCausalLM"],
        "vocab_size": 512,
        "hidden_size": 256,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 32,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "layer_types": ["sliding_attention", "full_attention"],
    }
    data = json.dumps(config).encode()
    ir, found = hf.extract(json.loads(data), data, name="gpt_oss", batch=1, sequence=SEQ, tensor=2)
    assert ir is not None, found
    assert [d.code for d in found if d.code == "M806"] == ["M806"]
    assert {x.name: x.tp_style for x in ir.layers if x.tp_style and ".self_attn." not in x.name} == {
        "model.embed_tokens": "embedding_rowwise"
    }
    layout = Layout(npus=2, tp=2, micro_batch=1, global_batch=1)
    tensor = [c for c in _collectives(ir, layout) if c[4] == frozenset({Purpose.TENSOR})]
    assert not [c for c in tensor if ".mlp." in c[0]]
    activation = SEQ * config["hidden_size"] * 4
    assert ("model.embed_tokens", "fwd", "ALLREDUCE", activation) in [c[:4] for c in tensor]
    for block in range(config["num_hidden_layers"]):
        attention = [c[:4] for c in tensor if c[0].startswith(f"model.layers.{block}.self_attn.")]
        assert sorted(attention) == [
            (f"model.layers.{block}.self_attn.o_proj", "fwd", "ALLREDUCE", activation),
            (f"model.layers.{block}.self_attn.q_proj", "input_grad", "ALLREDUCE", activation),
        ]
    assert {c[0] for c in tensor if ".self_attn." not in c[0]} == {"model.embed_tokens", "lm_head"}


def test_split_experts_without_sequence_parallelism_are_refused(tmp_path: Path) -> None:
    """OLMoE's plan at --tp 2 runs without SP, each tensor rank with whole experts on the whole
    sequence: --etp 2 (the experts split over the tensor ranks) is one X501 line."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    args = [
        "translate",
        str(FIXTURES / "olmoe-default.json"),
        "--tp",
        "2",
        "--etp",
        "2",
        "--seq-len",
        str(SEQ),
    ]
    refused = CliRunner().invoke(app, [*args, "-d", "simai", "-o", str(tmp_path / "s.txt")])
    assert refused.exit_code == 2
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1
    assert "X501 --etp 2: without --sp every tensor rank keeps whole experts" in lines[0]


def test_a_plan_splits_the_text_model_not_a_tower_of_the_same_names() -> None:
    """PaliGemma's plan (its Gemma text configuration's base_model_tp_plan) names
    `layers.*.self_attn.q_proj`; its SigLIP tower has modules of those names too. transformers
    applies the plan under the text model alone (the model's tp_plan: model.language_model.layers
    ...), so the tower's projections stay replicated and every text block's are split."""
    data = (FIXTURES / "paligemma-3b-pt-224.json").read_bytes()
    # its 256 image tokens (SigLIP at 224 px, patch 14) and SEQ of text
    ir, found = hf.extract(json.loads(data), data, name="paligemma", batch=1, sequence=256 + SEQ, tensor=2)
    assert ir is not None, found
    projections = [x for x in ir.layers if x.name.endswith("self_attn.q_proj")]
    tower = [x for x in projections if ".vision_tower." in x.name]
    text = [x for x in projections if ".language_model." in x.name]
    assert tower
    assert text
    assert {x.tp_style for x in tower} == {None}
    assert {x.tp_style for x in text} == {"colwise"}
