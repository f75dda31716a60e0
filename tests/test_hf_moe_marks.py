"""A mixture read through transformers (modtrans/hf/) marks its router, routed experts and shared
experts as the configuration and the built model say, whatever the family names them or holds
its counts in: a router module that runs its softmax and top-k after the linear (transformers 5's
MixtralTopKRouter, NemotronHTopkRouter: the module's output is [tokens, k], its weight [E, h]),
the counts in a sub-configuration (DbrxConfig's ffn_config), a top-k no configuration key names
(SwitchTransformersTop1Router), experts in a ModuleDict of expert_<i>. Each against the
configuration's numbers, and the parameters and FLOPs still transformers' own (hfcheck.agrees).
tools/hf_moe_marks.py runs the same comparison over every MoE model type transformers defines.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import built, classes, library
from modtrans.ir.document import Kind, ModelIR, Part
from modtrans.strategy.llm import activations
from tests.hfcheck import agrees

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"


def _read(config: Any, sequence: int = 8) -> tuple[Any, dict[str, Any], ModelIR]:
    model = library.build(config)
    read = built.read(model, 1, sequence)
    return model, read.given, read.ir


def _moe_blocks(ir: ModelIR) -> dict[int, list[Any]]:
    found: dict[int, list[Any]] = {}
    for x in ir.layers:
        if x.block is not None and x.block.index is not None:
            found.setdefault(x.block.index, []).append(x)
    return {i: xs for i, xs in found.items() if any(x.block.part is Part.EXPERT for x in xs)}


def _routers_and_experts(ir: ModelIR, experts: int, top_k: int, routers: set[str]) -> None:
    """Every MoE block: its router (the linear whose weight is [E, h]) marked router, with the
    configuration's E and k on every mark; no layer of the block's MLP as wide as E."""
    sparse = _moe_blocks(ir)
    assert sparse
    for index, xs in sparse.items():
        marked = [x for x in xs if x.block.part is Part.ROUTER]
        assert [x.node for x in marked] == [r.format(index) for r in sorted(routers)], index
        assert {(x.moe.experts, x.moe.top_k) for x in xs if x.moe is not None} == {(experts, top_k)}
        dense = [x for x in xs if x.block.part is Part.MLP and x.gemm is not None]
        assert all(x.gemm.n != experts for x in dense), [x.name for x in dense if x.gemm.n == experts]


def test_nemotron_h_marks_its_router_and_its_moe_block_keeps_the_experts_width() -> None:
    """NemotronHTopkRouter runs the linear, sigmoid and top-k as one module (modeling_nemotron_h.py):
    its output is [tokens, k], not [tokens, E]. Read as a router, the block's MLP width is the
    experts' moe_intermediate_size and its shared expert's, not the router's E."""
    config = classes.default_config("nemotron_h")
    model, given, ir = _read(config)
    agrees(model, given, ir)
    k, e, f = config.num_experts_per_tok, config.n_routed_experts, config.moe_intermediate_size
    _routers_and_experts(ir, e, k, {"model.layers.{}.mixer.gate"})
    dims = activations.dims(ir, 1)
    assert dims is not None
    moe = [i for i, kind in enumerate(config.layers_block_type) if kind == "moe"]
    assert sorted(_moe_blocks(ir)) == moe
    for i in moe:
        # relu2 experts and shared expert: one up projection each, whose output and the down
        # projection's input are stored (2 f: mlps.stored), the experts' on k tokens a token
        assert dims.mlps[i].experts == k * 2 * f
        assert dims.mlps[i].inner == 2 * config.moe_shared_expert_intermediate_size


@pytest.mark.parametrize(
    ("source", "router"),
    [
        ("mixtral", "model.layers.{}.mlp.gate"),
        ("olmoe-default.json", "model.layers.{}.mlp.gate"),
        ("gpt-oss-20b-echocog.json", "model.layers.{}.mlp.router"),
        ("testers/hunyuan_v1_moe.json", "model.layers.{}.mlp.gate.wg"),
    ],
)
def test_a_router_module_that_runs_its_top_k_is_the_router(source: str, router: str) -> None:
    """The router module's output is its top-k's ([tokens, k]); its weight is [E, h]."""
    if source.endswith(".json"):
        config = classes.config_of(json.loads((FIXTURES / source).read_text()))
    else:
        config = classes.default_config(source)
    model, given, ir = _read(config)
    agrees(model, given, ir)
    text = config.get_text_config()
    e = next(getattr(text, k) for k in ("num_local_experts", "num_experts") if getattr(text, k, None))
    k = next(getattr(text, k) for k in ("num_experts_per_tok", "moe_topk") if getattr(text, k, None))
    _routers_and_experts(ir, e, k if isinstance(k, int) else k[0], {router})


def test_dbrx_counts_from_its_ffn_config() -> None:
    """DbrxConfig holds moe_num_experts and moe_top_k in ffn_config (a DbrxFFNConfig): its experts,
    [E x f, h] weights run an expert at a time, are marked with them."""
    data = json.loads((FIXTURES / "testers" / "dbrx.json").read_text())
    config = classes.config_of(data)
    model, given, ir = _read(config)
    agrees(model, given, ir)
    ffn = config.ffn_config
    _routers_and_experts(ir, ffn.moe_num_experts, ffn.moe_top_k, {"transformer.blocks.{}.ffn.router.layer"})
    assert sorted(_moe_blocks(ir)) == list(range(config.n_layers))
    # w1, v1, w2: [E x ffn_hidden_size, d_model] each (modeling_dbrx.py, DbrxExpertGLU), read an
    # expert at a time (DbrxExperts.forward's loop over the experts hit; balanced routing hits each
    # once, in order): run j expert j, its GEMM the [tokens, f] it ran
    runs = [x for x in ir.layers if x.node.endswith("ffn.experts.mlp") and x.gemm is not None]
    for index in _moe_blocks(ir):
        ran = [x for x in runs if x.block is not None and x.block.index == index]
        up = [x.moe.expert for x in ran if x.name.rsplit(".", 1)[-1].split("_")[0] == "w1" and x.moe]
        assert up == list(range(ffn.moe_num_experts))
    for x in runs:
        assert x.block is not None
        assert x.block.part is Part.EXPERT
        assert x.moe is not None
        assert x.moe.count == 1
        assert x.gemm is not None
        assert x.gemm.n in (ffn.ffn_hidden_size, config.d_model)


def test_switch_routes_each_token_to_one_expert_of_its_module_dict() -> None:
    """SwitchTransformersConfig names num_experts and no top-k: its router is
    SwitchTransformersTop1Router; its experts a ModuleDict of expert_<i>, each marked with its
    index, in every sparse_step-th block of encoder and decoder."""
    config = classes.default_config("switch_transformers")
    model, given, ir = _read(config)
    agrees(model, given, ir)
    e = config.num_experts
    sparse = _moe_blocks(ir)
    for xs in sparse.values():
        routers = [x for x in xs if x.block.part is Part.ROUTER]
        assert len(routers) == 1
        assert routers[0].node.endswith("mlp.router.classifier")
        assert {(x.moe.experts, x.moe.top_k) for x in xs if x.moe is not None} == {(e, 1)}
        ran = {x.moe.expert for x in xs if x.block.part is Part.EXPERT and x.params}
        assert ran
        assert ran <= set(range(e))
        for x in xs:
            if x.block.part is Part.EXPERT and x.params:
                assert f"experts.expert_{x.moe.expert}." in x.node
    encoder = config.num_layers // config.encoder_sparse_step
    decoder = config.num_decoder_layers // config.decoder_sparse_step
    assert len(sparse) == encoder + decoder


def test_expert_parallel_translates_a_family_read_from_its_default(tmp_path: Path) -> None:
    """Nemotron-H under --ep 2 (its experts over two data ranks): Chakra traces (the all-to-all
    names its own group) that validate."""
    from typer.testing import CliRunner

    from modtrans.chakra.validate import validate_paths
    from modtrans.cli import app

    data = classes.default_config("nemotron_h").to_dict()
    data.update(num_hidden_layers=4, layers_block_type=["mamba", "moe", "attention", "moe"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    args = ["translate", str(path), "--npus", "4", "--dp", "4", "--ep", "2", "--seq-len", "128"]
    result = CliRunner().invoke(app, [*args, "--format", "chakra-et", "-o", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 4
    assert [d for d in found if d.severity <= 2] == []


def test_a_leaf_experts_module_is_a_layer_per_projection() -> None:
    """Lfm2MoeExperts holds gate_up_proj [E, 2f, h] and down_proj [E, h, f] and runs both products
    itself (no child module): two grouped expert layers, the up projection's N 2 f and the down
    projection's K f (moe_intermediate_size), not one layer of the first product's shape."""
    data = json.loads((FIXTURES / "testers" / "lfm2_moe.json").read_text())
    config = classes.config_of(data)
    model, given, ir = _read(config)
    agrees(model, given, ir)
    f, e = config.moe_intermediate_size, config.num_experts
    _routers_and_experts(ir, e, config.num_experts_per_tok, {"model.layers.{}.feed_forward.gate"})
    for xs in _moe_blocks(ir).values():
        gemms = {x.name.rsplit(".", 1)[-1]: x for x in xs if x.block.part is Part.EXPERT and x.gemm}
        assert sorted(gemms) == ["down_proj", "gate_up_proj"]
        assert (gemms["gate_up_proj"].gemm.n, gemms["gate_up_proj"].gemm.groups) == (2 * f, e)
        assert (gemms["down_proj"].gemm.k, gemms["down_proj"].gemm.n) == (f, config.hidden_size)


def test_a_convolution_of_as_many_channels_as_experts_is_no_expert() -> None:
    """Muse Spark's audio tower runs depthwise convolutions of 256 channels ([256, 1, 7] weights,
    3-D and led by E as fused expert weights are) beside its 256-expert decoder: only the
    decoder's mixture is marked, its experts' matrix products."""
    config = classes.default_config("muse_spark")
    _, _, ir = _read(config)
    e = config.get_text_config().num_local_experts
    marked = [x for x in ir.layers if x.moe is not None]
    assert marked
    assert not [x.name for x in marked if x.node.startswith("audio_tower.")]
    assert {x.moe.experts for x in marked if x.moe is not None} == {e}
    assert not [x.name for x in marked if x.kind is Kind.CONV]
