"""Activation memory of state-space blocks and vision towers (strategy/llm/mixers.py,
activations.py), by hand from the published configurations (fixtures/configs) and the tensors
the training kernels save:

- Mamba-1, mamba_ssm/ops/selective_scan_interface.py, MambaInnerFn.forward (checkpoint_lvl 1):
  ctx.save_for_backward(xz, ..., x_dbl, ..., conv1d_out=None, delta=None, A, B, C, D, delta_bias,
  scan_intermediates, ..., out): xz 2 d_inner, x_dbl dt_rank + 2 N, B and C (contiguous copies) 2 N,
  out d_inner a token at the model's dtype, scan_intermediates fp32 d_inner x ceil(L / 2048) x 2 N
  a sequence (selective_scan.cpp, selective_scan_fwd);
- Mamba-2, mamba_ssm/ops/triton/ssd_combined.py, MambaSplitConv1dScanCombinedFn.forward:
  ctx.save_for_backward(zxbcdt, ..., out_x, ...): zxbcdt 2 d_inner + 2 G N + H and out_x d_inner
  a token;
- beside the mixer, as for an attention block (Korthikanti et al. 2022, section 4.1): the norm's
  input and the in_proj's (the QKV projections') input, h each;
- a vision tower's blocks: Korthikanti's terms at the tower's own hidden width, heads, MLP and
  tokens (patches, + CLIP's class token), times its images.

Mamba-2, Nemotron-H and Falcon-H1 read through transformers: tests/test_memory_ssm_hf.py; a tower
block against the bytes torch's autograd saves: tests/test_memory_saved_tensors.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from modtrans import pipeline
from modtrans.plan.model import Recompute
from modtrans.strategy.llm import activations, memory
from modtrans.strategy.llm.mixers import Mixer
from modtrans.strategy.llm.options import Layout

CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def _config(name: str) -> dict:  # type: ignore[type-arg]
    found: dict = json.loads((CONFIGS / f"{name}.json").read_text())  # type: ignore[type-arg]
    return found


def _dims(name: str, batch: int, seq: int) -> activations.Dims:
    ir, found = pipeline.extract_checked(CONFIGS / f"{name}.json", input_shapes={"input_ids": (batch, seq)})
    assert ir is not None, [d.message for d in found]
    d = activations.dims(ir, batch)
    assert d is not None
    return d


def _mamba1(c: dict, h: int, seq: int, batch: int, width: int, prefix: str = "") -> float:  # type: ignore[type-arg]
    """One Mamba-1 mixer's bytes a micro-batch, and its norm's and in_proj's inputs, by hand."""
    inner = c.get(f"{prefix}expand", 2) * h
    state = c[f"{prefix}state_size" if not prefix else f"{prefix}d_state"]
    rank = c["time_step_rank" if not prefix else f"{prefix}dt_rank"]
    saved = 2 * inner + (rank + 2 * state) + 2 * state + inner  # xz, x_dbl, B and C, out
    chunks = math.ceil(seq / 2048)
    return float(width * seq * batch * (h + h + saved) + 4 * batch * inner * chunks * 2 * state)


@pytest.mark.parametrize(("seq", "batch"), [(2048, 1), (4096, 2), (5000, 1)])
def test_a_mamba_block_stores_what_mamba_inner_fn_saves(seq: int, batch: int) -> None:
    """state-spaces/mamba-130m-hf (fp32: 4 bytes an element): d_inner = expand x hidden = 1,536,
    state_size 16, time_step_rank 48; chunk states for ceil(L / 2048) chunks."""
    c = _config("mamba-130m-hf")
    d = _dims("mamba-130m-hf", batch, seq)
    h = c["hidden_size"]
    assert d.mixers[0] == Mixer(inner=2 * h, projected=4 * h, state=16, rank=48)
    got = activations.layer(d, 0, 1, False, Recompute.NONE, activations.FLASH, 1)
    assert got == _mamba1(c, h, seq, batch, width=4)
    # eager or flash, Megatron's selective recomputation: a Mamba block has no attention core
    assert activations.layer(d, 5, 1, False, Recompute.SELECTIVE, activations.EAGER, 1) == got
    assert activations.layer(d, 0, 1, False, Recompute.FULL, activations.FLASH, 1) == 4 * seq * batch * h


def test_a_pure_state_space_model_has_memory(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Mamba-130M on one rank: its 24 blocks' bytes, the embedding's input ids and dropout, and
    the last stage's final norm and output layer inputs and fp32 logits (memory.py's ends)."""
    c = _config("mamba-130m-hf")
    out = tmp_path / "t"
    seq, h, v = 2048, c["hidden_size"], c["vocab_size"]
    done = run_cli(
        "translate", CONFIGS / "mamba-130m-hf.json", "--dp", "1", "--seq-len", str(seq),
        "--format", "chakra-et", "-o", out,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    stage = json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"][0]
    padded = -(-v // 128) * 128  # Megatron's make-vocab-size-divisible-by 128
    ends = 8 * seq + seq * h + 2 * 4 * seq * h + 4 * seq * padded
    assert stage["activations_bytes"] == pytest.approx(
        c["num_hidden_layers"] * _mamba1(c, h, seq, 1, 4) + ends, rel=1e-9
    )


def test_jamba_counts_its_blocks_by_kind() -> None:
    """ai21labs/Jamba-v0.1 (bf16), s 4,096: attention where i % 8 == 4 (4 blocks, all with a dense
    SwiGLU MLP: experts where i % 2 == 1), Mamba elsewhere (12 with the dense MLP, 16 with 16
    experts top-2). Each kind by hand, summed; a MoE's inputs and experts for k = 2 routed copies
    (balanced routing, activations.py), the experts' k outputs Megatron-Core's unpermute keeps for
    the probabilities' gradient, and for each of the 16 experts its router's fp32 softmax, the
    dense probabilities and the routing map (mlps.of, activations.routing)."""
    c = _config("jamba-v0.1")
    seq, w = 4096, 2
    h, f, a, kv = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
    k, d_head = c["num_experts_per_tok"], h // a
    d = _dims("jamba-v0.1", 1, seq)
    # the mixer's half (its norm's input, the in_proj's or QKV's input, what it saves), the MLP's
    mamba = _mamba1(c, h, seq, 1, w, prefix="mamba_")
    attention = w * seq * (h + h + (a * d_head + 2 * kv * d_head + a * d_head)) + 4 * a * seq  # flash
    dense = w * seq * (h + h + 3 * f)  # the norm's input, the MLP's; gate, up and down inputs
    # ... and its k routed copies, the experts' k outputs, each expert's 3f; the router's scores
    moe = w * seq * (h + (1 + 2 * k) * h + k * 3 * f) + (4 + w + 1) * seq * c["num_experts"]
    expected = 12 * (mamba + dense) + 16 * (mamba + moe) + 4 * (attention + dense)
    assert d.attending == frozenset({4, 12, 20, 28})
    layout = Layout(npus=1)
    got = memory.activation_bytes(layout, d, 0, range(c["num_hidden_layers"]), (False, False))
    assert got == pytest.approx(expected, rel=1e-12)


def _clip_tower(c: dict, images: int, attention: str, w: int = 2) -> float:  # type: ignore[type-arg]
    """LLaVA-1.5's CLIP ViT-L/14-336 (vision_config: hidden 1,024, 16 heads, MLP 4,096 GELU, 24
    layers, 336 px images of 14 px patches: 576 patches + the class token), attention_dropout 0
    (CLIPVisionConfig's default: no mask), no hidden dropout (CLIPEncoderLayer has none)."""
    v = c["vision_config"]
    h, a, f, layers = (
        v["hidden_size"],
        v["num_attention_heads"],
        v["intermediate_size"],
        v["num_hidden_layers"],
    )
    s = (v["image_size"] // v["patch_size"]) ** 2 + 1
    block = w * s * images * (2 * h + h + h + 4 * h + 2 * f)  # norms, QKV input, MLP input, Q K V O, 2f
    block += w * a * s * s * images if attention == activations.EAGER else 4 * a * s * images
    return float(layers * block)


@pytest.mark.parametrize("attention", [activations.FLASH, activations.EAGER])
def test_llavas_clip_tower_is_korthikantis_terms_at_its_own_dims(attention: str) -> None:
    c = _config("llava-1.5-7b-hf")
    d = _dims("llava-1.5-7b-hf", 2, 4096)  # one image a sample: 2 images a micro-batch
    got = activations.tower(d, 1, False, Recompute.NONE, attention, 1)
    assert got == pytest.approx(_clip_tower(c, 2, attention), rel=1e-12)


def test_the_tower_is_on_the_first_pipeline_stage_only() -> None:
    """Under PP 2 (1F1B, 4 micro-batches) stage 0 holds the tower's activations for its 2 micro-
    batches in flight (Megatron's LLaVA keeps the encoder on the first stage), the last stage none."""
    c = _config("llava-1.5-7b-hf")
    d = _dims("llava-1.5-7b-hf", 1, 4096)
    layout = Layout(npus=2, pp=2, global_batch=4)
    first = memory.activation_bytes(layout, d, 0, [], (True, False))
    last = memory.activation_bytes(layout, d, 1, [], (False, True))
    embedding = (8 * 4096 + 4096 * d.h) * 2
    assert first == pytest.approx(embedding + 2 * _clip_tower(c, 1, activations.FLASH), rel=1e-12)
    # the final norm's and output layer's inputs, the fp32 logits and the 16-bit ones beside them
    # (Megatron's loss: tests/test_loss_memory_measured.py)
    assert last == pytest.approx(2 * d.width * 4096 * d.h + (4 + d.width) * 4096 * d.v, rel=1e-12)


def test_qwen2_5_vl_window_blocks_store_their_windows_scores() -> None:
    """Qwen2.5-VL-7B's ViT (vision_config: hidden 1,280, 16 heads, depth 32, gated MLP 3,420,
    patch 14, spatial_merge_size 2, window_size 112, fullatt_block_indexes [7, 15, 23, 31]) on
    one 448 px image (llm/vision.py's default): 32 x 32 = 1,024 patches; a window is 112 / 2 / 14
    = 4 merged tokens a side, 8 x 8 patches: 16 windows of 64. Eager attention keeps the softmax's
    output: 1,024^2 scores a head in the 4 full blocks, 16 x 64^2 in the 28 window blocks."""
    v = _config("qwen2.5-vl-7b-instruct")["vision_config"]
    d = _dims("qwen2.5-vl-7b-instruct", 1, 4096)
    patches = (448 // v["patch_size"]) ** 2
    side = v["window_size"] // v["spatial_merge_size"] // v["patch_size"] * v["spatial_merge_size"]
    windows = (448 // v["patch_size"] // side) ** 2
    full, windowed = len(v["fullatt_block_indexes"]), v["depth"] - len(v["fullatt_block_indexes"])
    a, w = v["num_heads"], 2
    scores = full * patches**2 + windowed * windows * side**4
    eager = activations.tower(d, 1, False, Recompute.NONE, activations.EAGER, 1)
    flash = activations.tower(d, 1, False, Recompute.NONE, activations.FLASH, 1)
    assert eager - flash == pytest.approx(w * a * scores - v["depth"] * 4 * a * patches, rel=1e-12)
    h, f = v["hidden_size"], v["intermediate_size"]
    per_block = w * patches * (2 * h + h + h + 4 * h + 3 * f) + 4 * a * patches  # gated: 3f
    assert flash == pytest.approx(v["depth"] * per_block, rel=1e-12)


def test_gemma_3s_siglip_tower_has_no_class_token() -> None:
    """Gemma 3 4B's SigLIP tower (vision_config: hidden 1,152, 16 heads, MLP 4,304 GELU, 27
    layers, 896 px images of 14 px patches: 4,096 tokens, no class token), bf16, eager attention
    without dropout (SiglipVisionConfig's attention_dropout 0): the softmax output's 2 a s^2 b."""
    v = _config("gemma-3-4b-it")["vision_config"]
    d = _dims("gemma-3-4b-it", 1, 4096)
    h, a, f = v["hidden_size"], v["num_attention_heads"], v["intermediate_size"]
    s = (v["image_size"] // v["patch_size"]) ** 2
    block = 2 * s * (2 * h + h + h + 4 * h + 2 * f) + 2 * a * s * s
    eager = activations.tower(d, 1, False, Recompute.NONE, activations.EAGER, 1)
    assert eager == pytest.approx(v["num_hidden_layers"] * block, rel=1e-12)
