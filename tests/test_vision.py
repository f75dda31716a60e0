"""Vision-language models from their published configurations (fixtures/configs: llava-hf/llava-1.5-
7b-hf, llava-hf/llava-v1.6-mistral-7b-hf, Qwen/Qwen2-VL-7B-Instruct, Qwen/Qwen2.5-VL-7B-Instruct,
google/gemma-3-4b-it): the parameters transformers builds,
exactly, in all and per part; the image tokens the processors make; forward FLOPs as the closed
form counts them; traces and SimAI text that validate under TP, DP and PP; one-line refusals.

The expected counts (fixtures/configs/EXPECTED.json) were made once by
tools/count_transformers_params.py: each model built on the meta device by the class its
`architectures` names (LlavaForConditionalGeneration, LlavaNextForConditionalGeneration,
Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration,
Gemma3ForConditionalGeneration; torch 2.13.0+cpu,
transformers 5.24.0), its parameters() counted, and per part by module path (the projector or
merger, with LLaVA-NeXT's image_newline; the rest of the vision tower; the language model and
lm_head, a tied head once). Published sizes: 7.06 B, 7.57 B, 8.29 B, 8.29 B, 4.30 B (the models'
Hub pages)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modtrans import pipeline
from modtrans.cli import app
from modtrans.ir.document import Kind, ModelIR

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
EXPECTED = json.loads((CONFIGS / "EXPECTED.json").read_text())["counts"]
NEXT = "llava-v1.6-mistral-7b-hf"
GEMMA = "gemma-3-4b-it"
MODELS = ("llava-1.5-7b-hf", NEXT, "qwen2-vl-7b-instruct", "qwen2.5-vl-7b-instruct", GEMMA)
PUBLISHED = {
    "llava-1.5-7b-hf": 7.06e9,
    NEXT: 7.57e9,
    "qwen2-vl-7b-instruct": 8.29e9,
    "qwen2.5-vl-7b-instruct": 8.29e9,
    GEMMA: 4.30e9,
}
LAYERS = {
    "llava-1.5-7b-hf": 32,
    NEXT: 32,
    "qwen2-vl-7b-instruct": 28,
    "qwen2.5-vl-7b-instruct": 28,
    GEMMA: 34,
}
"""The language models' blocks (their text_config's num_hidden_layers, or its class's default)."""
S = 1024
S_NEXT = 4096
"""LLaVA-NeXT's sequence: its default 672 x 672 image alone is 2,928 tokens."""


def _s(name: str) -> int:
    return S_NEXT if name == NEXT else S


def _ir(name: str, **shapes: tuple[int, ...]) -> ModelIR:
    ir, found = pipeline.extract_checked(
        CONFIGS / f"{name}.json", input_shapes={"input_ids": (1, _s(name)), **shapes}
    )
    assert ir is not None, [d.message for d in found]
    return ir


def _part(name: str) -> str:
    """The part of a parameter, by module path, as the counting tool sorts them (PARTS)."""
    if name.startswith(("model.multi_modal_projector.", "model.visual.merger.", "model.image_newline")):
        return "projector"
    return "vision" if name.startswith(("model.vision_tower.", "model.visual.")) else "language"


@pytest.mark.parametrize("name", MODELS)
def test_the_parameters_are_those_transformers_builds_in_all_and_per_part(name: str) -> None:
    ir = _ir(name)
    assert ir.totals.params == EXPECTED[name]["parameters"]
    assert round(ir.totals.params / 1e7) == round(PUBLISHED[name] / 1e7)
    parts = dict.fromkeys(("projector", "vision", "language"), 0)
    for layer in ir.layers:
        for p in layer.params:
            parts[_part(p.name)] += 0 if p.shared_with else p.elements
    assert parts == EXPECTED[name]["parts"]


def _features(ir: ModelIR) -> tuple[int, ...]:
    """The shape of the image features the language model's masked_scatter takes in."""
    scatter = next(x for x in ir.layers if x.name == "model.language_model.masked_scatter")
    shape = scatter.inputs[1].shape
    assert shape is not None
    return tuple(int(d) for d in shape)


def test_llava_takes_576_features_per_336_px_image_the_class_token_dropped() -> None:
    """(336 / 14)^2 = 576 patches; the "default" strategy drops CLIP's class token
    (LlavaModel.get_image_features: selected_image_feature[:, 1:]); LlavaConfig's
    image_seq_length 576. Two images per sample: pixel_values=4x3x336x336 for input_ids=2x2048."""
    assert _features(_ir("llava-1.5-7b-hf")) == (1, 576, 4096)
    two = _ir("llava-1.5-7b-hf", input_ids=(2, 2048), pixel_values=(4, 3, 336, 336))
    assert _features(two) == (4, 576, 4096)
    tower = next(x for x in two.layers if x.name == "model.vision_tower.encoder.layers.0.self_attn.q_proj")
    assert tower.gemm is not None
    assert tower.gemm.m == 4 * 577  # the class token and 576 patches


def test_several_feature_layers_widen_the_projector_and_full_keeps_the_class_token(tmp_path: Path) -> None:
    """vision_feature_layer [-2, -5]: the two layers' outputs concatenated, so linear_1 reads
    2 x 1,024 (LlavaMultiModalProjector: vision_config.hidden_size x the number of feature
    layers), 1,024 x 4,096 more parameters than one layer's; vision_feature_select_strategy
    "full": the class token kept, 577 features per image."""
    config = json.loads((CONFIGS / "llava-1.5-7b-hf.json").read_text())
    config.update(vision_feature_layer=[-2, -5], vision_feature_select_strategy="full")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, S)})
    assert ir is not None, [d.message for d in found]
    assert ir.totals.params == EXPECTED["llava-1.5-7b-hf"]["parameters"] + 1024 * 4096
    assert _features(ir) == (1, 577, 4096)
    linear = next(x for x in ir.layers if x.name == "model.multi_modal_projector.linear_1")
    assert linear.params[0].shape == (4096, 2048)


@pytest.mark.parametrize(("height", "width"), [(448, 448), (448, 672), (280, 924)])
def test_a_qwen_image_is_h_over_28_times_w_over_28_tokens(height: int, width: int) -> None:
    """Qwen2-VL: 14-px patches, 2 x 2 of them merged into one token (the model card: "each 28x28
    pixel unit is one token"; Qwen2VLImageProcessor's merge_size 2)."""
    for name in ("qwen2-vl-7b-instruct", "qwen2.5-vl-7b-instruct"):
        ir = _ir(name, pixel_values=(1, 3, height, width))
        assert _features(ir) == (1, height // 28 * (width // 28), 3584)


def test_llava_s_forward_flops_are_2n_per_token_of_each_part_plus_its_attention() -> None:
    """Per part, 2 x the weights a token meets x its tokens (Kaplan et al. 2020, table 1), plus
    the attention core, 4 x n x d per token and block: the CLIP tower on 577 tokens (the patch
    conv on the 576 patches; its position and class embeddings are looked up, its post_layernorm
    reads the class token alone), 24 layers of 577^2 x 1,024; the projector on 576 tokens; the
    Llama language model on S tokens (image placeholders included), 32 layers of S^2 x 4,096."""
    e = EXPECTED["llava-1.5-7b-hf"]
    parts = e["parts"]
    conv = 1024 * 3 * 14 * 14
    tower = 2 * (parts["vision"] - 577 * 1024 - 1024 - 2 * 1024 - conv) * 577 + 2 * conv * 576
    tower += 24 * 4 * 577 * 577 * 1024
    closed = tower + 2 * parts["projector"] * 576
    closed += 2 * (parts["language"] - e["embedding"]) * S + 32 * 4 * S * S * 4096
    assert _ir("llava-1.5-7b-hf").totals.flops.forward == pytest.approx(closed, rel=0.02)


@pytest.mark.parametrize(
    ("name", "full", "windowed"), [("qwen2-vl-7b-instruct", 32, 0), ("qwen2.5-vl-7b-instruct", 4, 28)]
)
def test_qwen_s_forward_flops_are_2n_per_token_plus_the_full_and_windowed_attention(
    name: str, full: int, windowed: int
) -> None:
    """A 448 x 448 image: 1,024 patches through the ViT, 256 merged tokens through the merger,
    S through the language model (28 layers of S^2 x 3,584). Qwen2-VL's 32 blocks attend to the
    whole image (1,024^2 x 1,280 each); Qwen2.5-VL's do in fullatt_block_indexes 7, 15, 23, 31
    only, the other 28 within 112-px windows: 8 x 8 patches, 64 tokens (window_size 112 /
    merge 2 / patch 14 = 4 merged tokens a side: vision_utils.get_vision_window_index)."""
    e = EXPECTED[name]
    parts = e["parts"]
    tower = 2 * parts["vision"] * 1024 + full * 4 * 1024 * 1024 * 1280 + windowed * 4 * 1024 * 64 * 1280
    closed = tower + 2 * parts["projector"] * 256
    closed += 2 * (parts["language"] - e["embedding"]) * S + 28 * 4 * S * S * 3584
    assert _ir(name).totals.flops.forward == pytest.approx(closed, rel=0.02)


def test_windows_cut_short_at_the_image_s_edge_cost_their_own_area() -> None:
    """476 px = 34 patches = 17 merged tokens a side: windows of 4, 4, 4, 4 and 1 merged tokens a
    side (the grid padded to a multiple of 4, the padding dropped: get_vision_window_index), so a
    windowed block's scores are heads x sum(window^2) x head_dim multiply-adds, window = rows x
    cols x 4 patches."""
    ir = _ir("qwen2.5-vl-7b-instruct", pixel_values=(1, 3, 476, 476))
    sides = [4, 4, 4, 4, 1]
    area = sum((r * c * 4) ** 2 for r in sides for c in sides)
    scores = next(x for x in ir.layers if x.name == "model.visual.blocks.0.attn.scores")
    assert scores.flops.forward == 2 * 16 * area * 80


def _run(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, done.stderr if done.exit_code else done.output


@pytest.mark.parametrize("name", MODELS)
def test_traces_under_tp_dp_and_pp_and_simai_text_validate(name: str, tmp_path: Path) -> None:
    """--tp 2 --pp 2 --dp 2 --sp: 8 traces; the vision tower and projector in the first pipeline
    stage with the embedding (Megatron-LM's LLaVAModel: "the encoder will live on only the first
    stage"), the language model's blocks cut evenly; SimAI text under --tp 2 --dp 2."""
    from modtrans.chakra.validate import validate_paths

    config, seq = str(CONFIGS / f"{name}.json"), str(_s(name))
    code, said = _run("translate", config, "--tp", "2", "--pp", "2", "--dp", "2", "--sp", "--seq-len", seq,
                      "--format", "chakra-et", "-o", str(tmp_path / "t"))  # fmt: skip
    assert code == 0, said
    found, checked = validate_paths(sorted(tmp_path.glob("t.*.et")), None)
    assert checked == 8
    assert [d for d in found if d.severity <= 2] == []
    chunks = json.loads((tmp_path / "t.et-meta.json").read_text())["parallel"]["llm"]["chunks"]
    assert chunks[0]["first"].startswith(("model.vision_tower.", "model.visual."))
    last = chunks[0]["last"]  # the first stage's last layer: half the blocks' last one
    assert last.startswith(f"model.language_model.layers.{LAYERS[name] // 2 - 1}.")
    assert last.endswith(("mlp.down_proj", "post_feedforward_layernorm"))  # Gemma 3: sandwich norms
    code, said = _run("translate", config, "--tp", "2", "--dp", "2", "--seq-len", seq, "-d", "simai",
                      "-o", str(tmp_path / "s.txt"))  # fmt: skip
    assert code == 0, said
    assert _run("validate", str(tmp_path / "s.txt"))[0] == 0


def test_the_vision_blocks_split_as_megatron_splits_them(tmp_path: Path) -> None:
    """Shoeybi et al. 2019 section 3, as Megatron's vision transformers build them: qkv and fc1 /
    gate and up column-parallel (the input's gradient all-reduced in the backward), proj and fc2 /
    down row-parallel (the output all-reduced in the forward); the patch embedding a plain conv on
    every rank (megatron/core/models/vision/clip_vit_model.py: torch.nn.Conv2d), no collective."""
    config = str(CONFIGS / "qwen2-vl-7b-instruct.json")
    code, said = _run("translate", config, "--tp", "2", "--seq-len", str(S), "-d", "simai",
                      "-o", str(tmp_path / "s.txt"))  # fmt: skip
    assert code == 0, said
    rows = {
        line.split("\t")[0]: line.split("\t") for line in (tmp_path / "s.txt").read_text().splitlines()[2:]
    }
    fwd, ig = 3, 6  # columns: name, dependency, fwd time, fwd comm, size, ig time, ig comm ...
    assert rows["model.visual.patch_embed.proj"][fwd] == rows["model.visual.patch_embed.proj"][ig] == "NONE"
    for column in ("attn.qkv", "mlp.fc1"):
        assert rows[f"model.visual.blocks.0.{column}"][ig] == "ALLREDUCE"
    for row in ("attn.proj", "mlp.fc2"):
        assert rows[f"model.visual.blocks.0.{row}"][fwd] == "ALLREDUCE"
    assert rows["model.visual.merger.mlp.2"][fwd] == "ALLREDUCE"


@pytest.mark.parametrize(
    ("name", "shapes", "said"),
    [
        ("qwen2-vl-7b-instruct", {"pixel_values": (1, 2, 3, 448, 448)}, "video input is not modelled"),
        ("llava-1.5-7b-hf", {"pixel_values": (1, 3, 448, 448)}, "reads 336x336 images"),
        (NEXT, {"pixel_values": (1, 5, 3, 336, 336)}, "give LLaVA-NeXT's images as NxCxHxW"),
        ("qwen2-vl-7b-instruct", {"pixel_values": (1, 3, 440, 448)}, "multiple of 28 pixels"),
        ("llava-1.5-7b-hf", {"input_ids": (1, 512)}, "cannot hold the 576 image tokens"),
        (
            "qwen2-vl-7b-instruct",
            {"pixel_values_videos": (1, 3, 448, 448)},
            "inputs are input_ids and pixel_values",
        ),
        (
            "qwen2-vl-7b-instruct",
            {"input_ids": (2, S), "pixel_values": (3, 3, 448, 448)},
            "do not split evenly",
        ),
    ],
)
def test_inputs_not_modelled_are_refused_in_one_line(
    name: str, shapes: dict[str, tuple[int, ...]], said: str
) -> None:
    ir, found = pipeline.extract_checked(CONFIGS / f"{name}.json", input_shapes=shapes)
    assert ir is None
    assert [d.code for d in found] == ["X501"]
    assert said in found[0].message
    assert "\n" not in found[0].message


def test_context_parallelism_with_a_vision_tower_is_refused_in_one_line(tmp_path: Path) -> None:
    code, said = _run("translate", str(CONFIGS / "llava-1.5-7b-hf.json"), "--cp", "2", "--seq-len", str(S),
                      "-o", str(tmp_path / "t.txt"))  # fmt: skip
    assert code == 2
    assert "vision tower is not modelled" in said
    assert len(said.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"vision_config": {"model_type": "siglip_vision_model"}}, "siglip_vision_model"),
        ({"text_config": {"model_type": "gemma"}}, "model_type 'gemma' is not modelled"),
        ({"vision_config": {"patch_size": 0}}, "`patch_size` must be a positive integer"),
        ({"vision_config": {"image_size": [336, 336]}}, "`image_size` must be a positive integer"),
        ({"vision_feature_layer": 99}, "vision_feature_layer 99"),
    ],
)
def test_a_llava_configuration_not_modelled_is_refused_in_one_line(
    change: dict[str, object], said: str, tmp_path: Path
) -> None:
    _refused("llava-1.5-7b-hf", change, said, tmp_path)


def test_the_language_model_keeps_its_own_heads_and_widths_for_the_memory_estimate() -> None:
    """The activation estimate (strategy/llm/activations.py) reads the language model's heads and MLP
    width, not the vision tower's that come first in the IR: LLaVA's Llama 32 heads, 11,008."""
    from modtrans.strategy.llm.activations import dims

    found = dims(_ir("llava-1.5-7b-hf"), 1)
    assert found is not None
    assert (found.s, found.h, found.a, found.v, found.mlp(0).inner) == (S, 4096, 32, 32064, 3 * 11008)
    assert all(x.kind is not Kind.CONV or x.block is not None for x in _ir("llava-1.5-7b-hf").layers)


def test_a_configuration_without_model_type_is_read_from_its_architectures(tmp_path: Path) -> None:
    """Qwen2_5_VLForConditionalGeneration names the family qwen2_5_vl (its underscores aside)."""
    config = json.loads((CONFIGS / "qwen2.5-vl-7b-instruct.json").read_text())
    del config["model_type"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path, input_shapes={"input_ids": (1, S)})
    assert ir is not None, [d.message for d in found]
    assert ir.totals.params == EXPECTED["qwen2.5-vl-7b-instruct"]["parameters"]


ANYRES = [
    ((672, 672), 5, 2928),
    ((336, 336), 3, 1176),
    ((480, 640), 5, 2340),
    ((1000, 300), 4, 2232),
    ((300, 1000), 4, 2182),
    ((768, 1024), 5, 2340),
    ((224, 224), 3, 1176),
    ((1080, 1920), 5, 1948),
    ((500, 333), 3, 1476),
]
"""((H, W), tiles, image tokens) as transformers 5.24.0 computes them for llava-v1.6-mistral-7b-hf's
image_grid_pinpoints, made once in /tmp/torchenv (torch 2.13.0+cpu): tiles by
modeling_llava_next.image_size_to_num_patches(image_size, pinpoints, 336); tokens by
LlavaNextModel.pack_image_features on that many tiles of 576 features with image_sizes [[H, W]]
(feature_lens), the same as LlavaNextProcessor._get_number_of_features(H, W, 336, 336) - 1 (the
"default" strategy's class token)."""


@pytest.mark.parametrize(("size", "tiles", "tokens"), ANYRES)
def test_a_llava_next_image_is_its_tiles_and_the_tokens_transformers_packs(
    size: tuple[int, int], tiles: int, tokens: int
) -> None:
    """An H x W image (its image_sizes) is resized to the best-fitting pinpoint
    (select_best_resolution) and cut into tiles of 336 px, plus the base tile: the CLIP tower and
    projector run on each (577 and 576 tokens); pack_image_features keeps the base tile's 576,
    the grid's features less the letterbox padding (unpad_image) and one image_newline per row.
    672 x 672, the default: the [672, 672] pinpoint, 2 x 2 tiles, 576 + 48 x 49 = 2,928."""
    ir = _ir(NEXT, pixel_values=(1, 3, *size))
    assert _features(ir) == (1, tokens, 4096)
    q = next(x for x in ir.layers if x.name == "model.vision_tower.encoder.layers.0.self_attn.q_proj")
    assert q.gemm is not None
    assert q.gemm.m == tiles * 577
    conv = next(x for x in ir.layers if x.name == "model.vision_tower.embeddings.patch_embedding")
    assert conv.inputs[0].shape == (tiles, 3, 336, 336)
    linear = next(x for x in ir.layers if x.name == "model.multi_modal_projector.linear_2")
    assert linear.gemm is not None
    assert linear.gemm.m == tiles * 576
    if size == (672, 672):
        assert _features(_ir(NEXT)) == (1, tokens, 4096)


def test_llava_next_s_forward_flops_are_2n_per_token_of_each_part_plus_its_attention() -> None:
    """As LLaVA's (Kaplan et al. 2020, table 1; 4 x n x d per token and block of attention), on
    the five 336-px tiles of the default 672 x 672 image: the tower on 5 x 577 tokens, the
    projector on 5 x 576 (image_newline is copied, not multiplied), the Mistral language model on
    S = 4,096 tokens (32 layers of S^2 x 4,096; its grouped key and value heads change the
    projections' weights, counted in the parts, not the core)."""
    e = EXPECTED[NEXT]
    parts = e["parts"]
    conv = 1024 * 3 * 14 * 14
    tower = 2 * (parts["vision"] - 577 * 1024 - 1024 - 2 * 1024 - conv) * 5 * 577 + 2 * conv * 5 * 576
    tower += 24 * 4 * 5 * 577 * 577 * 1024
    closed = tower + 2 * (parts["projector"] - 4096) * 5 * 576
    closed += 2 * (parts["language"] - e["embedding"]) * S_NEXT + 32 * 4 * S_NEXT * S_NEXT * 4096
    assert _ir(NEXT).totals.flops.forward == pytest.approx(closed, rel=0.02)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"image_grid_pinpoints": [[336, 500]]}, "each side a multiple of image_size 336"),
        ({"image_grid_pinpoints": "anyres"}, "`image_grid_pinpoints` must be a list"),
        ({"vision_feature_select_strategy": "full"}, "full with LLaVA-NeXT's tiles is not modelled"),
        ({"vision_config": {"model_type": "siglip_vision_model"}}, "siglip_vision_model"),
    ],
)
def test_a_llava_next_configuration_not_modelled_is_refused_in_one_line(
    change: dict[str, object], said: str, tmp_path: Path
) -> None:
    _refused(NEXT, change, said, tmp_path)


def test_llava_next_s_sequence_must_hold_its_image_tokens() -> None:
    """S counts the image placeholders LlavaNextProcessor expands: 2,928 for the default image."""
    ir, found = pipeline.extract_checked(CONFIGS / f"{NEXT}.json", input_shapes={"input_ids": (1, 2048)})
    assert ir is None
    assert [d.code for d in found] == ["X501"]
    assert "cannot hold the 2,928 image tokens" in found[0].message


def test_gemma3_takes_256_pooled_features_per_896_px_image() -> None:
    """SigLIP at 896 px, 14-px patches: 64 x 64 = 4,096 patches, no class token (SiglipVisionEmbeddings:
    num_positions = num_patches), all 4,096 through every layer; Gemma3MultiModalProjector averages
    4 x 4 squares (kernel = 64 / sqrt(mm_tokens_per_image 256)) to 256 tokens, normed
    (mm_soft_emb_norm) and projected to the language model's 2,560. Two images per sample:
    pixel_values=4x3x896x896 for input_ids=2x1024."""
    assert _features(_ir(GEMMA)) == (1, 256, 2560)
    two = _ir(GEMMA, input_ids=(2, S), pixel_values=(4, 3, 896, 896))
    assert _features(two) == (4, 256, 2560)
    q_proj = "model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj"
    q = next(x for x in two.layers if x.name == q_proj)
    assert q.gemm is not None
    assert q.gemm.m == 4 * 4096
    pool = next(x for x in two.layers if x.name == "model.multi_modal_projector.avg_pool")
    assert pool.inputs[0].shape == (4, 4096, 1152)
    assert pool.flops.forward == 4 * 4096 * 1152  # 256 outputs x 16 reads x 1,152 per image


def test_gemma3_s_forward_flops_are_2n_per_token_of_each_part_plus_its_attention() -> None:
    """Kaplan et al. 2020, table 1, per part: the SigLIP tower on 4,096 patches (its position
    embedding looked up), 27 layers of 4,096^2 x 1,152 attention; the projector's matrix on the
    256 pooled tokens; the language model on S tokens, its tied head included once in its part
    (the embedding looked up, the head multiplied), 34 layers of S^2 x 8 heads x 256 (Gemma 3's
    attention width, not its 2,560 hidden; S = 1,024 is within its 1,024-token sliding window)."""
    e = EXPECTED[GEMMA]
    parts = e["parts"]
    tower = 2 * (parts["vision"] - 4096 * 1152) * 4096 + 27 * 4 * 4096 * 4096 * 1152
    closed = tower + 2 * parts["projector"] * 256
    closed += 2 * parts["language"] * S + 34 * 4 * S * S * 2048
    assert _ir(GEMMA).totals.flops.forward == pytest.approx(closed, rel=0.02)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"vision_config": {"model_type": "clip_vision_model"}}, "clip_vision_model"),
        ({"vision_config": {"vision_use_head": True}}, "attention-pooling head"),
        ({"mm_tokens_per_image": 250}, "mm_tokens_per_image 250 is not a square"),
        ({"mm_tokens_per_image": 225}, "mm_tokens_per_image 225 is not a square"),
        ({"text_config": {"model_type": "llama"}}, "model_type 'llama' is not modelled (gemma3_text)"),
        ({"text_config": None}, "without a text_config"),
    ],
)
def test_a_gemma3_configuration_not_modelled_is_refused_in_one_line(
    change: dict[str, object], said: str, tmp_path: Path
) -> None:
    _refused(GEMMA, change, said, tmp_path)


def test_a_gemma3_image_of_another_size_is_refused_in_one_line() -> None:
    """Gemma3ImageProcessor resizes every image to 896 x 896; its position embedding is learned for
    that grid."""
    ir, found = pipeline.extract_checked(
        CONFIGS / f"{GEMMA}.json", input_shapes={"input_ids": (1, S), "pixel_values": (1, 3, 448, 448)}
    )
    assert ir is None
    assert [d.code for d in found] == ["X501"]
    assert "reads 896x896 images" in found[0].message


@pytest.mark.parametrize(
    "split", [("--tp", "2"), ("-p", "HYBRID_TRANSFORMER", "--npus", "2", "--model-parallel-group", "2")]
)
def test_gemma3_s_one_matrix_projector_gathers_its_output_over_the_tensor_ranks(
    split: tuple[str, ...], tmp_path: Path
) -> None:
    """mm_input_projection_weight is the projector's only matrix: column-parallel, its output
    all-gathered after the forward, as Megatron-LM's one-layer ("affine") projector is a
    ColumnParallelLinear with gather_output=True (megatron/core/models/vision/
    multimodal_projector.py), for the language model reads the image features whole: 256 tokens x
    2,560 x 2 bytes (bfloat16) per image; its input's gradient all-reduced (1,152 wide). The
    layout's --tp and the transformer keyword alike (one implementation: strategy/llm/tensor.py)."""
    code, said = _run("translate", str(CONFIGS / f"{GEMMA}.json"), *split, "--seq-len", str(S),
                      "-d", "simai", "-o", str(tmp_path / "s.txt"))  # fmt: skip
    assert code == 0, said
    rows = {
        line.split("\t")[0]: line.split("\t") for line in (tmp_path / "s.txt").read_text().splitlines()[2:]
    }
    row = rows["model.multi_modal_projector.mm_input_projection"]
    assert row[3:5] == ["ALLGATHER", str(256 * 2560 * 2)]
    assert row[6:8] == ["ALLREDUCE", str(256 * 1152 * 2)]
    assert rows["model.multi_modal_projector.mm_soft_emb_norm"][3] == "NONE"


def _refused(name: str, change: dict[str, object], said: str, tmp_path: Path) -> None:
    """The fixture `name` with `change` merged in (a dict into the key's dict): one M801 line
    saying `said`."""
    config = json.loads((CONFIGS / f"{name}.json").read_text())
    for key, value in change.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    ir, found = pipeline.extract_checked(path)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert said in found[0].message
    assert "\n" not in found[0].message
