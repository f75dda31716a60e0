"""--recompute selective --recompute-modules: Megatron-Core's modules (NVIDIA/Megatron-LM
core_r0.14.0), each held to what its source reruns and stops storing, counted by hand from the
source on DeepSeek-V2's published widths (multi-latent attention, shared and routed experts) and
Llama 3 8B's: transformer_layer.py (TransformerLayer.__init__'s recompute_input_layernorm,
recompute_pre_mlp_layernorm and recompute_mlp; _forward_attention, _forward_mlp),
gpt_layer_specs.py (get_gpt_layer_with_transformer_engine_spec: which norms are modules of their
own), multi_latent_attention.py (qkv_up_checkpoint), moe/moe_layer.py (moe_layer_recompute,
shared_experts_recompute), moe/experts.py (TEGroupedMLP's activation_checkpoint), and
transformer_config.py's refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans.api import run
from modtrans.comm import CommType
from modtrans.pipeline import extract
from modtrans.plan.model import Collective, Compute, Plan, Step
from modtrans.request import Request, prepare
from modtrans.strategy.llm import modules
from modtrans.strategy.program import in_attention_core
from tests.plans import DEEPSEEK_V2
from tests.refusals import refused_in_one_line

H, A, K, E, F_MOE, SHARED, F_DENSE = 5120, 128, 6, 160, 1536, 2 * 1536, 12288
S, T, W = 1024, 2, 2  # tokens, tensor ranks (SP on, ETP = T), bytes an element (bf16)


@pytest.fixture(scope="module")
def v2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("v2") / "deepseek-v2.json"
    path.write_text(json.dumps(DEEPSEEK_V2), encoding="utf-8")
    return path


def _plan(model: str | Path, chosen: tuple[str, ...] | None, **more: Any) -> Plan:
    layout: dict[str, Any] = {"tp": T, "sp": True, "seq_len": S, "attention": "flash", **more}
    request = Request(model=str(model), recompute="selective", recompute_modules=chosen, **layout)
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result.plan


def test_each_module_reruns_the_layers_megatron_checkpoints(v2: Path) -> None:
    """Block 1 of DeepSeek-V2 (MLA, MoE with shared experts), layer by layer: the attention core;
    the input norm (a TENorm under MLA) and the pre-MLP norm (a TENorm before a MoE); MLA's q and
    kv up projections and the rotary embedding (qkv_up_proj_and_rope_apply); the experts'
    activation (bias_act_func)."""
    ir = extract(v2, input_shapes={"input_ids": (1, 128)})
    p = "model.layers.1."

    def rerun(*chosen: str) -> set[str]:
        return {n for n in modules.reruns(ir, chosen, in_attention_core) if n.startswith(p)}

    assert rerun("core_attn") == {p + "self_attn.scores", p + "self_attn.softmax", p + "self_attn.context"}
    assert rerun("layernorm") == {p + "input_layernorm", p + "post_attention_layernorm"}
    assert rerun("mla_up_proj") == {
        p + "self_attn.q_b_proj",
        p + "self_attn.kv_b_proj",
        p + "self_attn.rotary",
    }
    assert rerun("moe_act") == {p + "mlp.experts.act"}
    assert rerun("mlp", "moe", "shared_experts") == set()  # forwards of whole units, not layers
    # block 0: MLA's input norm is a TENorm; its dense MLP's norm is fused (IdentityOp)
    zero = {n for n in modules.reruns(ir, ("layernorm",), in_attention_core) if ".layers.0." in n}
    assert zero == {"model.layers.0.input_layernorm"}


def test_whole_modules_rerun_their_units_forwards(v2: Path) -> None:
    ir = extract(v2, input_shapes={"input_ids": (1, 128)})
    moe = modules.reforwarded(ir, ("moe",))
    assert set(moe) == {1}  # block 0 is dense
    assert {n.removeprefix("model.layers.1.mlp.") for n in moe[1]} == {
        "gate", "experts.gate_proj", "experts.up_proj", "experts.down_proj",
        "shared_experts.gate_proj", "shared_experts.up_proj", "shared_experts.down_proj",
    }  # fmt: skip
    shared = modules.reforwarded(ir, ("shared_experts",))
    assert {n.removeprefix("model.layers.1.mlp.") for n in shared[1]} == {
        "shared_experts.gate_proj", "shared_experts.up_proj", "shared_experts.down_proj",
    }  # fmt: skip
    dense = modules.reforwarded(ir, ("mlp",))
    assert set(dense) == {0}  # a MoE layer's MLP is not `mlp` (`if not isinstance(self.mlp, MoELayer)`)
    assert {n.removeprefix("model.layers.0.mlp.") for n in dense[0]} == {"gate_proj", "up_proj", "down_proj"}


def test_moe_reruns_its_dispatch_all_to_alls(v2: Path) -> None:
    """tensor_parallel.checkpoint(custom_forward) reruns the token dispatcher too: under expert
    parallelism the recomputed forward sends its all-to-alls again."""

    def recomputed(plan: Plan) -> list[CommType]:
        return [op.comm for op in plan.program(0) if isinstance(op, Collective) and op.step is Step.RECOMPUTE]

    ep = {"npus": 4, "ep": 2}
    assert CommType.ALLTOALL not in recomputed(_plan(v2, ("core_attn",), **ep))
    assert CommType.ALLTOALL in recomputed(_plan(v2, ("moe",), **ep))


def test_a_module_adds_its_rerun_to_the_backward(v2: Path) -> None:
    """Recomputed FLOPs grow with each module (the attention core's alone by default)."""

    def flops(plan: Plan) -> int:
        return sum(
            op.flops for op in plan.program(0) if isinstance(op, Compute) and op.step is Step.RECOMPUTE
        )

    core = flops(_plan(v2, None))
    assert flops(_plan(v2, ("core_attn",))) == core
    for more in ("mla_up_proj", "moe", "shared_experts", "mlp", "moe_act"):
        assert flops(_plan(v2, ("core_attn", more))) > core, more


def _activations(model: str | Path, chosen: tuple[str, ...] | None) -> float:
    return float(_plan(model, chosen).memory[0].activations)


@pytest.mark.parametrize(
    ("module", "saved"),
    [
        # the normed hidden state, w sbh / T under SP: block 0's MLA input norm; block 1's and its
        # pre-MLP norm before the MoE (the dense MLP's norm is fused into linear_fc1: no saving)
        ("layernorm", 3 * W * S * H / T),
        # the decompressed Q and K (a heads of d_nope + d_rope) and V (a heads of d_v), / T
        ("mla_up_proj", 2 * W * S * A * (2 * (128 + 64) + 128) / T),
        # block 0's dense MLP: its input (the fused norm's output, / T under SP) and its gated
        # inner tensors, gate and up outputs and the down projection's input, 3 f / T
        ("mlp", W * S * (H + 3 * F_DENSE) / T),
        # block 1: the shared experts' 3 x their width / T
        ("shared_experts", W * S * 3 * SHARED / T),
        # block 1: each of the k copies' activation output (f_moe), / ETP
        ("moe_act", W * S * K * F_MOE / T),
        # block 1: routed copies in and out (2 k x h), the router's probabilities three ways
        # ((4 + w + 1) x E), / T under SP; the experts' 3 f_moe per copy / ETP; the shared experts'
        ("moe", (W * S * 2 * K * H + (4 + W + 1) * S * E + W * S * (K * 3 * F_MOE + 3 * SHARED)) / T),
    ],
)  # fmt: skip
def test_each_module_stops_storing_what_megatron_discards(v2: Path, module: str, saved: float) -> None:
    """The activations' difference with the module beside core_attn, one micro-batch in flight."""
    base = _activations(v2, ("core_attn",))
    assert base - _activations(v2, ("core_attn", module)) == pytest.approx(saved, rel=1e-9)


def test_core_attn_is_the_default_and_leaving_it_out_keeps_the_kernels_statistics(v2: Path) -> None:
    """Without core_attn in the list the core is not rerun: FlashAttention's fp32 logsumexp, 4
    bytes a head and token (/ T), is kept in each of the two blocks."""
    assert _activations(v2, None) == _activations(v2, ("core_attn",))
    kept = _activations(v2, ("layernorm",)) - _activations(v2, ("core_attn", "layernorm"))
    assert kept == pytest.approx(2 * 4 * A * S / T, rel=1e-9)


def test_layernorm_changes_nothing_where_transformer_engine_fuses_the_norms() -> None:
    """Llama's norms are TELayerNormColumnParallelLinear's own (input_layernorm and
    pre_mlp_layernorm IdentityOp in the TE spec): Megatron recomputes neither."""
    assert _activations("llama-3-8b", ("core_attn", "layernorm")) == _activations("llama-3-8b", None)
    ir = extract("llama-3-8b", input_shapes={"input_ids": (1, 128)})
    assert not any("layernorm" in n for n in modules.reruns(ir, ("layernorm",), in_attention_core))


@pytest.mark.parametrize(
    ("model", "options", "rule"),
    [
        ("llama-3-8b", ["--recompute-modules", "mla_up_proj"], "the model has no multi-latent attention"),
        ("llama-3-8b", ["--recompute-modules", "moe"], "the model has no MoE layer"),
        ("llama-3-8b", ["--recompute-modules", "moe_act"], "the model has no routed experts"),
        ("mixtral-8x7b", ["--recompute-modules", "shared_experts"], "the model has no shared experts"),
        ("mixtral-8x7b", ["--recompute-modules", "mlp"], "the model has no dense MLP"),
        ("llama-3-8b", ["--recompute-modules", "attention"], "is not one of core_attn"),
    ],
)
def test_the_command_line_refuses_a_module_the_model_lacks(
    run_cli: Any, tmp_path: Path, model: str, options: list[str], rule: str
) -> None:
    result: Result = run_cli(
        "translate", model, "--tp", "2", "--recompute", "selective", *options, "-o", tmp_path / "x"
    )
    refused_in_one_line(result, rule)


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        (["--recompute-modules", "mlp"], "it needs --recompute selective, not none"),
        (["--recompute", "full", "--recompute-modules", "mlp"], "it needs --recompute selective, not full"),
        (
            ["--recompute", "selective", "--recompute-modules", "mlp", "--framework", "deepspeed"],
            "it needs --framework megatron",
        ),
    ],
)
def test_the_command_line_refuses_modules_outside_megatrons_selective(
    run_cli: Any, tmp_path: Path, options: list[str], rule: str
) -> None:
    result: Result = run_cli("translate", "llama-3-8b", "--tp", "2", *options, "-o", tmp_path / "x")
    refused_in_one_line(result, rule)


def test_traces_with_modules_validate_and_say_them(run_cli: Any, tmp_path: Path, v2: Path) -> None:
    prefix = tmp_path / "m"
    options = ["--tp", "2", "--sp", "--dp", "2", "--ep", "2", "--seq-len", "256", "--recompute", "selective"]
    options += ["--recompute-modules", "core_attn,layernorm,mla_up_proj,moe"]
    made: Result = run_cli("translate", str(v2), *options, "--format", "chakra-et", "-o", prefix)
    assert made.exit_code == 0, made.output
    checked: Result = run_cli("validate", prefix)
    assert checked.exit_code == 0, checked.output
    llm = json.loads(prefix.with_name("m.et-meta.json").read_text(encoding="utf-8"))["parallel"]["llm"]
    assert llm["recompute_modules"] == ["core_attn", "layernorm", "mla_up_proj", "moe"]
