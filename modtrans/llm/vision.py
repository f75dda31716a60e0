"""Vision-language models -> the IR: the image encoder, the layers that hand its features to the
language model, then the language model (build.py's decoder), named as transformers 5 names the
modules (modeling_llava.py, modeling_llava_next.py, modeling_gemma3.py, modeling_qwen2_vl.py,
modeling_qwen2_5_vl.py).

    LLaVA (LlavaForConditionalGeneration): model.vision_tower, a CLIP ViT: patch_embedding (a
        conv of patch x patch, stride patch, no bias), class_embedding, position_embedding
        (1 + patches rows), pre_layrnorm; per layer layer_norm1, q/k/v/out_proj, layer_norm2,
        fc1, quick GELU, fc2; post_layernorm (on the class token only: CLIPVisionTransformer.
        forward pools last_hidden_state[:, 0]). Every layer runs: LlavaModel.get_image_features
        calls the whole vision_tower and takes hidden_states[vision_feature_layer] (-2: the
        second-to-last layer's output; the last layer's is computed, then unused). Features
        without the class token ("default" strategy: 576 per 336-px image) go through
        model.multi_modal_projector (linear_1, GELU, linear_2).
    LLaVA-NeXT (LlavaNextForConditionalGeneration): LLaVA's tower and projector run on every tile
        of image_size (336) px of an image of any size: the image resized to 336 x 336 (the base
        tile), and resized and padded to the best-fitting of image_grid_pinpoints and cut into its
        grid of tiles (LlavaNextImageProcessor; select_best_resolution). The tiles' projected
        features are packed per image (LlavaNextModel.pack_image_features): the base tile's 576,
        then the grid's features as one picture, its padding cut off (unpad_image), and
        model.image_newline (a vector of the language model's width) after each of its rows.
    Gemma 3 (Gemma3ForConditionalGeneration): model.vision_tower.vision_model, a SigLIP ViT:
        patch_embedding (a conv of patch x patch, stride patch, with bias), position_embedding
        (one row per patch, no class token); CLIP's layers (gelu_pytorch_tanh); post_layernorm on
        every patch (last_hidden_state, which Gemma3Model.get_image_features takes). Then
        model.multi_modal_projector: the 64 x 64 patches of an 896-px image averaged over 4 x 4
        squares (avg_pool) to mm_tokens_per_image 256, mm_soft_emb_norm (an RMSNorm of the
        tower's width), mm_input_projection_weight (tower width x language width, no bias). The
        processor resizes every image to 896 x 896 (Gemma3ImageProcessor; pan and scan, off by
        default, is not modelled).
    Qwen2-VL, Qwen2.5-VL: model.visual: patch_embed.proj (a Conv3d over temporal_patch_size x
        patch x patch, no bias: an image is repeated to temporal_patch_size frames, one grid
        step in time); per block norm1, attn.qkv, 2-D rotary (no parameters), attn.proj, norm2,
        the MLP (Qwen2-VL: fc1, quick GELU, fc2; Qwen2.5-VL: gate_proj, up_proj, down_proj);
        merger: ln_q, then spatial_merge_size^2 neighbouring patches as one row through mlp.0,
        GELU, mlp.2. Attention is per image (cu_seqlens); Qwen2.5-VL's blocks outside
        fullatt_block_indexes attend within windows of window_size pixels
        (vision_utils.get_vision_window_index: window_size / spatial_merge_size / patch_size
        merged tokens a side, the last row and column of windows cut short by the image).

The language model reads input_ids of S tokens per sample, as the processor hands them to the model:
the prompt with each image's placeholder repeated once per image token (LlavaProcessor and
Qwen2VLProcessor expand <image> / <|image_pad|>), whose embeddings the image features replace
(masked_scatter in LlavaModel.forward and Qwen2VLModel.forward). S therefore counts the image
tokens: an image takes tokens(...) of the S positions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from modtrans.ir import flops
from modtrans.ir.document import Activation, Dim, Flops, Gemm, Kind, ModelIR, Part, Provenance, Role
from modtrans.llm.build import _attention_core, _Builder, _decoder, _swiglu, dims
from modtrans.llm.config import Arch, Vision

ANYRES_SIZE = 672
"""The default image side for LLaVA-NeXT: a 672 x 672 image fits the [672, 672] pinpoint, a 2 x 2
grid of 336-px tiles, five tiles through the tower with the base one, 576 + 48 x (48 + 1) = 2,928
image tokens (LlavaNextProcessor._get_number_of_features), the largest square grid of the
published image_grid_pinpoints (llava-hf/llava-v1.6-mistral-7b-hf) and the "672x672" of the
LLaVA-NeXT release's "4x more pixels" (Liu et al. 2024, the LLaVA-NeXT blog post)."""
QWEN_SIZE = 448
"""The default image side for Qwen2-VL and Qwen2.5-VL: 448 x 448 pixels are 32 x 32 patches, 256
image tokens, the lower end of the 256-1280 tokens per image the models' cards suggest
(Qwen/Qwen2-VL-7B-Instruct README, "Image Resolution for performance boost": min_pixels =
256 * 28 * 28). Their processor has no fixed size (it keeps each image's aspect ratio); LLaVA's
is its CLIP's image_size (336)."""


@dataclass(frozen=True)
class Images:
    """The images of one sample: how many, and their size in pixels."""

    per_sample: int
    height: int
    width: int


def patches(v: Vision, images: Images) -> int:
    """Patches of one image (one tile of LLaVA-NeXT's) the encoder sees (CLIP's class token not
    counted): CLIP's image_size / patch a side, the only size it reads."""
    if v.image:
        return (v.image // v.patch) ** 2
    return (images.height // v.patch) * (images.width // v.patch)


def tiles(v: Vision, images: Images) -> int:
    """Images of image_size the tower runs on per image: LLaVA-NeXT's base tile and its grid of
    the best-fitting pinpoint (modeling_llava_next.py, image_size_to_num_patches); one otherwise."""
    if not v.grid:
        return 1
    height, width = best_resolution(v.grid, images.height, images.width)
    return 1 + (height // v.image) * (width // v.image)


def tokens(v: Vision, images: Images) -> int:
    """Language-model tokens one image becomes: CLIP's patches (and its class token under the
    "full" strategy); LLaVA-NeXT's base tile's patches, its grid's unpadded features and one
    image_newline per row of them; Qwen's patches / spatial_merge_size^2 ((H / 28) x (W / 28) at
    14 px and 2)."""
    if v.grid:
        rows, cols = unpadded(v, images)
        return patches(v, images) + rows * (cols + 1)
    if v.class_token:
        return patches(v, images) + v.keep_class
    return patches(v, images) // (v.merge * v.merge)


def best_resolution(grid: Sequence[tuple[int, int]], height: int, width: int) -> tuple[int, int]:
    """The pinpoint (height, width) an image of height x width is resized and padded to: the one
    keeping the most of its pixels when scaled to fit, the least padding among equals
    (transformers' image_processing_utils.select_best_resolution, its arithmetic exactly)."""
    best, kept, wasted = grid[0], 0, math.inf
    for h, w in grid:
        scale = min(w / width, h / height)
        effective = min(int(width * scale) * int(height * scale), width * height)
        if effective > kept or (effective == kept and h * w - effective < wasted):
            best, kept, wasted = (h, w), effective, h * w - effective
    return best


def unpadded(v: Vision, images: Images) -> tuple[int, int]:
    """Rows and columns of the grid's features once the padding is cut off: the grid's
    pinpoint / patch a side, less the rows (or columns) its letterboxing added
    (modeling_llava_next.py, unpad_image; LlavaNextProcessor._get_unpadded_features)."""
    height, width = best_resolution(v.grid, images.height, images.width)
    rows, cols = height // v.image * (v.image // v.patch), width // v.image * (v.image // v.patch)
    if images.width / images.height > cols / rows:
        padding = (rows - int(round(images.height * (cols / images.width), 7))) // 2
        return rows - 2 * padding, cols
    padding = (cols - int(round(images.width * (rows / images.height), 7))) // 2
    return rows, cols - 2 * padding


def inputs(v: Vision, pixel_values: Sequence[Dim] | None, batch: int, sequence: int) -> Images | str:
    """The images `--input-shape pixel_values=NxCxHxW` gives (N images for the micro-batch's
    `batch` samples: N / batch each), or one image per sample of the default size; a one-line
    reason when the shape is not one the model reads. LLaVA-NeXT's H x W is the image's own size
    (its image_sizes: any, the processor resizes it into tiles)."""
    side = ANYRES_SIZE if v.grid else v.image or QWEN_SIZE
    shape = tuple(pixel_values) if pixel_values is not None else (batch, v.channels, side, side)
    if len(shape) == 5 and v.grid:  # LlavaNextProcessor's (images, tiles, C, 336, 336)
        return (
            "pixel_values of 5 dimensions: give LLaVA-NeXT's images as NxCxHxW, their own sizes "
            "(the tiles follow from them)"
        )
    if len(shape) == 5:
        return "pixel_values of 5 dimensions is a video: video input is not modelled (images only)"
    sizes = [d for d in shape if isinstance(d, int) and d > 0]
    if len(shape) != 4 or len(sizes) != 4:
        return f"--input-shape pixel_values=NxCxHxW (four positive sizes), not {shape}"
    count, channels, height, width = sizes
    if count % batch:
        return f"pixel_values' {count} images do not split evenly over the micro-batch's {batch} samples"
    if channels != v.channels:
        return f"pixel_values has {channels} channels; the vision tower reads {v.channels}"
    step = 1 if v.grid else v.patch * v.merge
    if v.image and not v.grid and (height, width) != (v.image, v.image):
        return (
            f"pixel_values {height}x{width}: this {v.family} tower reads {v.image}x{v.image} images "
            "(its position embedding is learned for that grid)"
        )
    if height % step or width % step:
        return f"pixel_values {height}x{width}: each side must be a multiple of {step} pixels (patch x merge)"
    images = Images(count // batch, height, width)
    needed = images.per_sample * tokens(v, images)
    if needed > sequence:
        return (
            f"input_ids' {sequence:,} tokens per sample cannot hold the {needed:,} image tokens of "
            f"{images.per_sample} image(s) of {height}x{width} (S counts the image placeholders)"
        )
    return images


def build(arch: Arch, batch: int, sequence: int, images: Images, provenance: Provenance) -> ModelIR:
    """The IR of a vision-language model for `batch` samples of `sequence` tokens and `images`."""
    v = arch.vision
    assert v is not None
    b = _Builder(arch, batch, sequence)
    count = batch * images.per_sample
    side = (v.image, v.image) if v.grid else (images.height, images.width)
    pixels = b.tensor("pixel_values", (count * tiles(v, images), v.channels, *side))
    encoder = _clip if v.class_token else _siglip if v.family == "siglip_vision_model" else _qwen
    features = encoder(b, v, pixels, images)
    _decoder(b, b.tensor("input_ids", (batch, sequence), "int64"), features)
    return ModelIR(provenance, tuple(b.layers))


def _tower(b: _Builder, v: Vision, images: int, sequence: int) -> _Builder:
    """A builder of the encoder's layers, `images` sequences of `sequence` tokens, writing into
    the model's layers. Its layers are outside the language model's blocks (block index None), so
    a pipeline puts them in the first stage with the embedding, as Megatron-LM's LLaVA does
    (megatron/core/models/multimodal/llava_model.py, LLaVAModel.__init__: "When we use
    pipelining, the encoder will live on only the first stage")."""
    return _Builder(v.tower, images, sequence, layers=b.layers, producer=b.producer)


def _patch_embedding(t: _Builder, name: str, pixels: Activation, v: Vision, n: int) -> Activation:
    """The convolution of stride = kernel (no bias) that makes each patch a token: a GEMM of
    (images x patches) x (channels x kernel) x hidden. Its block part is the embedding, so the
    layout keeps it whole on every tensor rank (Megatron's CLIPViTModel builds conv1 as a plain
    torch.nn.Conv2d: strategy/llm/tensor.py, roles_of)."""
    a = t.arch
    kernel = (v.temporal, v.patch, v.patch) if v.temporal > 1 else (v.patch, v.patch)
    params = [t.param(f"{name}.weight", Role.WEIGHT, (a.hidden, v.channels, *kernel))]
    params += [t.param(f"{name}.bias", Role.BIAS, (a.hidden,))] if v.conv_bias else []
    m, k = t.batch * n, v.channels * math.prod(kernel)
    t.at(None, Part.EMBEDDING)
    shape = (t.batch, n, a.hidden)
    extra = m * a.hidden if v.conv_bias else 0
    fl = flops.gemm(m * k * a.hidden, extra, extra)
    return t.add(name, "Conv", Kind.CONV, [pixels], shape, fl, params, Gemm(m, k, a.hidden))


def _clip(b: _Builder, v: Vision, pixels: Activation, images: Images) -> Activation:
    """LLaVA's CLIP tower and multi_modal_projector (the module docstring); the projector's output."""
    a, n, root = v.tower, patches(v, images), "model.vision_tower"
    t = _tower(b, v, b.batch * images.per_sample * tiles(v, images), n + 1)
    hidden_states = _encoder(t, root, _clip_embeddings(t, root, pixels, v, n))
    x = hidden_states[-1]
    t.norm(f"{root}.post_layernorm", t.tensor(x.name, (t.batch, a.hidden)))  # the class token's
    kept = n + v.keep_class
    selected = [t.tensor(hidden_states[i].name, (t.batch, kept, a.hidden)) for i in v.feature_layers]
    projected = _projector(_tower(b, v, t.batch, kept), v, selected)
    return (
        _pack(_tower(b, v, b.batch * images.per_sample, tokens(v, images)), v, projected)
        if v.grid
        else projected
    )


def _pack(t: _Builder, v: Vision, projected: Activation) -> Activation:
    """LLaVA-NeXT's pack_image_features: per image its tiles' projected features, the grid's
    padding cut off (a slice) and model.image_newline concatenated after each row (a copy; the
    parameter whole on every tensor rank, as LLaVA's class embedding)."""
    newline = t.param("model.image_newline", Role.WEIGHT, (v.out,))
    shape = (t.batch, t.sequence, v.out)
    return t.add("model.image_newline", "Concat", Kind.DATA, [projected], shape, Flops(), [newline])


def _encoder(t: _Builder, root: str, x: Activation) -> list[Activation]:
    """CLIPEncoder's (and SiglipEncoder's) layers: layer_norm1, q/k/v_proj, attention over the
    whole image, out_proj, the residual; layer_norm2, the MLP, the residual. The hidden states:
    the embeddings' output, then every layer's."""
    a = t.arch
    hidden_states = [x]
    for i in range(a.layers):
        p = f"{root}.encoder.layers.{i}"
        t.at(None, Part.ATTENTION)
        h = t.norm(f"{p}.layer_norm1", x)
        q, k, w = (t.linear(f"{p}.self_attn.{c}_proj", h, a.hidden, bias=True) for c in "qkv")
        context = _attention_core(t, f"{p}.self_attn", q, k, w, a.head_dim, a.head_dim)
        out = t.linear(f"{p}.self_attn.out_proj", context, a.hidden, bias=True)
        x = t.elementwise(f"{p}.residual_attn", "Add", [x, out], dims(x))
        t.at(None, Part.MLP)
        out = _mlp(t, p, t.norm(f"{p}.layer_norm2", x))
        x = t.elementwise(f"{p}.residual_mlp", "Add", [x, out], dims(x))
        hidden_states.append(x)
    return hidden_states


def _siglip(b: _Builder, v: Vision, pixels: Activation, images: Images) -> Activation:
    """Gemma 3's SigLIP tower and multi_modal_projector (the module docstring); the projector's
    output, mm_tokens_per_image rows per image."""
    n, root = patches(v, images), "model.vision_tower.vision_model"
    t = _tower(b, v, b.batch * images.per_sample, n)
    x = _patch_embedding(t, f"{root}.embeddings.patch_embedding", pixels, v, n)
    ids = t.tensor(f"{root}.embeddings.position_ids", (t.batch, n), "int64")
    positions = t.embedding(f"{root}.embeddings.position_embedding", ids, n)
    x = t.elementwise(f"{root}.embeddings.add", "Add", [x, positions], dims(x))
    x = t.norm(f"{root}.post_layernorm", _encoder(t, root, x)[-1])
    p, hidden = "model.multi_modal_projector", v.tower.hidden
    t = _tower(b, v, t.batch, tokens(v, images))
    t.at(None, Part.MLP)
    shape = (t.batch, t.sequence, hidden)  # AvgPool2d: each output reads merge^2 patches
    x = t.add(f"{p}.avg_pool", "AveragePool", Kind.POOL, [x], shape, flops.pool(t.batch * n * hidden))
    rms = _Builder(
        dataclasses.replace(v.tower, norm="rms"), t.batch, t.sequence, layers=b.layers, producer=b.producer
    )
    rms.at(None, Part.MLP)  # Gemma3RMSNorm: a scale, no shift
    x = rms.norm(f"{p}.mm_soft_emb_norm", x)
    weight = t.param(f"{p}.mm_input_projection_weight", Role.WEIGHT, (hidden, v.out))
    m = t.tokens
    return t.add(
        f"{p}.mm_input_projection", "MatMul", Kind.LINEAR, [x], (t.batch, t.sequence, v.out),
        flops.gemm(m * hidden * v.out), [weight], Gemm(m, hidden, v.out),
    )  # fmt: skip


def _clip_embeddings(t: _Builder, root: str, pixels: Activation, v: Vision, n: int) -> Activation:
    """CLIPVisionEmbeddings and pre_layrnorm: the patches, the class embedding before them, the
    learned position embedding of every one of the 1 + n positions added."""
    a = t.arch
    x = _patch_embedding(t, f"{root}.embeddings.patch_embedding", pixels, v, n)
    cls = t.param(f"{root}.embeddings.class_embedding", Role.WEIGHT, (a.hidden,))
    shape = (t.batch, n + 1, a.hidden)
    x = t.add(f"{root}.embeddings.class_embedding", "Concat", Kind.DATA, [x], shape, Flops(), [cls])
    ids = t.tensor(f"{root}.embeddings.position_ids", (t.batch, n + 1), "int64")
    positions = t.embedding(f"{root}.embeddings.position_embedding", ids, n + 1)
    x = t.elementwise(f"{root}.embeddings.add", "Add", [x, positions], shape)
    return t.norm(f"{root}.pre_layrnorm", x)


def _projector(t: _Builder, v: Vision, selected: Sequence[Activation]) -> Activation:
    """LlavaMultiModalProjector on the selected features (several feature layers concatenated
    along the width): linear_1, GELU (projector_hidden_act), linear_2."""
    t.at(None, Part.MLP)
    x = selected[0]
    if len(selected) > 1:
        shape = (t.batch, t.sequence, sum(dims(s)[-1] for s in selected))
        x = t.add("model.vision_feature_concat", "Concat", Kind.DATA, selected, shape, Flops())
    x = t.linear("model.multi_modal_projector.linear_1", x, v.out, bias=v.projector_bias)
    x = t.elementwise("model.multi_modal_projector.act", "Gelu", [x], dims(x))
    return t.linear("model.multi_modal_projector.linear_2", x, v.out, bias=v.projector_bias)


def _mlp(t: _Builder, p: str, h: Activation) -> Activation:
    """The encoder block's MLP: fc1, (quick) GELU, fc2 (CLIPMLP, Qwen2-VL's VisionMlp) or the gated
    gate_proj, up_proj, down_proj (Qwen2_5_VLMLP with bias)."""
    a = t.arch
    if a.mlp == "swiglu":
        return _swiglu(t, f"{p}.mlp", h, a.intermediate)
    up = t.linear(f"{p}.mlp.fc1", h, a.intermediate, bias=True)
    return t.linear(
        f"{p}.mlp.fc2", t.elementwise(f"{p}.mlp.act", "Gelu", [up], dims(up)), a.hidden, bias=True
    )


def _qwen(b: _Builder, v: Vision, pixels: Activation, images: Images) -> Activation:
    """Qwen2-VL's or Qwen2.5-VL's ViT and merger (the module docstring); the merger's output."""
    a, n, root = v.tower, patches(v, images), "model.visual"
    t = _tower(b, v, b.batch * images.per_sample, n)
    x = _patch_embedding(t, f"{root}.patch_embed.proj", pixels, v, n)
    windows = _windows(v, images)
    for i in range(a.layers):
        p = f"{root}.blocks.{i}"
        t.at(None, Part.ATTENTION)
        qkv = t.linear(f"{p}.attn.qkv", t.norm(f"{p}.norm1", x), 3 * a.hidden, bias=True)
        rotated = t.elementwise(f"{p}.attn.rotary", "RotaryEmbedding", [qkv], (t.batch, n, 2 * a.hidden))
        if windows and i not in v.full_blocks:
            context = _windowed_core(t, f"{p}.attn", rotated, qkv, windows)
        else:
            context = _attention_core(t, f"{p}.attn", rotated, rotated, qkv, a.head_dim, a.head_dim)
        out = t.linear(f"{p}.attn.proj", context, a.hidden, bias=True)
        x = t.elementwise(f"{p}.residual_attn", "Add", [x, out], dims(x))
        t.at(None, Part.MLP)
        out = _mlp(t, p, t.norm(f"{p}.norm2", x))
        x = t.elementwise(f"{p}.residual_mlp", "Add", [x, out], dims(x))
    return _merger(_tower(b, v, t.batch, n // (v.merge * v.merge)), v, t.norm(f"{root}.merger.ln_q", x))


def _merger(t: _Builder, v: Vision, h: Activation) -> Activation:
    """The PatchMerger after ln_q: each merge x merge neighbouring patches as one row of
    merge^2 x hidden (the processor orders the patches so; a view, no data moved), mlp.0, GELU,
    mlp.2 to the language model's width."""
    t.at(None, Part.MLP)
    width = dims(h)[-1] * v.merge * v.merge
    rows = t.tensor(h.name, (t.batch, t.sequence, width))
    h = t.linear("model.visual.merger.mlp.0", rows, width, bias=True)
    h = t.elementwise("model.visual.merger.mlp.1", "Gelu", [h], dims(h))
    return t.linear("model.visual.merger.mlp.2", h, v.out, bias=True)


def _windows(v: Vision, images: Images) -> tuple[int, ...]:
    """Patches in each attention window of one image (Qwen2.5-VL; none without windows): the grid
    of merged tokens cut into squares of window_size / merge / patch a side from the top left,
    each window merge^2 patches per merged token (vision_utils.get_vision_window_index)."""
    if not v.window:
        return ()
    side = v.window // v.merge // v.patch
    rows, cols = images.height // v.patch // v.merge, images.width // v.patch // v.merge
    heights = [min(side, rows - r) for r in range(0, rows, side)]
    widths = [min(side, cols - c) for c in range(0, cols, side)]
    return tuple(h * w * v.merge * v.merge for h in heights for w in widths)


def _windowed_core(t: _Builder, p: str, q: Activation, v: Activation, windows: tuple[int, ...]) -> Activation:
    """Attention within windows: each window's tokens attend to one another (Qwen2.5-VL's blocks
    outside fullatt_block_indexes, cu_window_seqlens). FLOPs are the windows' own, exactly:
    images x heads x sum(window^2) x head_dim per product; the GEMM the cost models time is one of
    the root-mean-square window, repeated for every window and head."""
    a = t.arch
    area = sum(w * w for w in windows)
    side = round(math.sqrt(area / len(windows)))
    groups = t.batch * a.heads * len(windows)
    shape = (t.batch, a.heads, area)
    macs = t.batch * a.heads * area * a.head_dim
    scores = t.add(
        f"{p}.scores",
        "MatMul",
        Kind.MATMUL,
        [q],
        shape,
        flops.matmul(macs),
        gemm=Gemm(side, a.head_dim, side, groups),
    )
    probs = t.add(f"{p}.softmax", "Softmax", Kind.REDUCE, [scores], shape, flops.softmax(math.prod(shape)))
    out = (t.batch, t.sequence, a.hidden)
    return t.add(
        f"{p}.context",
        "MatMul",
        Kind.MATMUL,
        [probs, v],
        out,
        flops.matmul(macs),
        gemm=Gemm(side, side, a.head_dim, groups),
    )
