"""Memory per rank (strategy/llm/memory.py, activations.py) against what Korthikanti et al. 2022
(arXiv 2205.05198) measured, and against the attention kernel and the model family: FlashAttention
keeps no s x s tensor, dropout masks only where the model trains with dropout, a gated MLP its
three f-wide tensors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans.api import run
from modtrans.plan.model import StageMemory
from modtrans.request import Request, prepare
from tests.plans import DEEPSEEK_V2

GIB = 2**30
# Megatron's loss holds the 16-bit logits beside its fp32 copy of them, 2 B a logit beyond
# theoretical_memory_usage.py's 4 (megatron/core/tensor_parallel/cross_entropy.py at core_r0.8.0,
# calculate_logits_max's `.float()`, the caller's `logits` alive; tests/test_loss_memory_measured.py)
LOGITS_16 = 2

# Korthikanti et al. 2022, figure 1, GiB per GPU: parameters + optimizer state, activations without
# recomputation, activations with selective recomputation + sequence parallelism (the bars' values
# as calculon-ai/calculon's llm-validation transcribes them, calculon/llm/validation.py
# seqsel_fig1). The models and layouts are the paper's table 3: fp16, sequence 2,048, GPT-2's
# vocabulary (51,200 padded), TP 8; 22B micro-batch 4, the others 1; 175B and 530B interleaved
# with 3 model chunks per rank.
FIGURE_1 = {
    # name: (hidden, layers, heads, P, V, micro-batch), (params + optimizer, none, selective + SP)
    "22B": ((6144, 48, 64, 1, 1, 4), (45.5625, 59.25, 9.5625)),
    "175B": ((12288, 96, 96, 8, 3, 1), (45.5625, 66.84375, 12.3515625)),
    "530B": ((20480, 105, 128, 35, 3, 1), (31.640625, 114.0234375, 23.076171875)),
    "1T": ((25600, 128, 160, 64, 1, 1), (32.958984375, 131.25, 26.5625)),
}
LARGE = {"530B", "1T"}  # 35 and 64 pipeline stages: seconds each


def _memory(model: str | Path, **layout: object) -> tuple[StageMemory, ...]:
    result = run(prepare(Request(model=str(model), **layout)))  # type: ignore[arg-type]
    assert result.plan is not None, result.diagnostics
    assert result.plan.layout is not None
    return result.plan.layout.memory


def _gpt(tmp_path: Path, h: int, layers: int, heads: int) -> Path:
    """A GPT-2-family configuration (GPT2Config: attention and residual dropout 0.1)."""
    config = tmp_path / "config.json"
    gpt = {"model_type": "gpt2", "n_embd": h, "n_layer": layers, "n_head": heads, "n_positions": 2048}
    config.write_text(json.dumps({**gpt, "vocab_size": 51200, "torch_dtype": "float16"}))
    return config


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in LARGE else n for n in FIGURE_1]
)
def test_korthikantis_measured_memory_within_5_percent(name: str, tmp_path: Path) -> None:
    """Megatron-LM as it ran in 2022: eager attention (its softmax and dropout materialised), fp16
    with an fp32 main gradient (18 B per parameter). Parameters + optimizer on a stage without the
    embedding (figure 1 counts the transformer layers), activations on stage 0 (the most in flight)."""
    (h, layers, heads, p, v, b), (state, none, selective) = FIGURE_1[name]
    config = _gpt(tmp_path, h, layers, heads)
    common = {"tp": 8, "pp": p, "vpp": v if v > 1 else None, "micro_batch": b, "global_batch": p * b}
    plain = _memory(config, attention="eager", **common)
    kept = plain[1] if len(plain) > 1 else plain[0]
    assert (kept.weights + kept.gradients + kept.optimizer) / GIB == pytest.approx(state, rel=0.05)
    assert plain[0].activations / GIB == pytest.approx(none, rel=0.05)
    recomputed = _memory(config, attention="eager", sp=True, recompute="selective", **common)
    assert recomputed[0].activations / GIB == pytest.approx(selective, rel=0.05)


def test_korthikantis_table_2_terms_by_hand(tmp_path: Path) -> None:
    """GPT-22B's layers at TP 8, eager, no recomputation: Korthikanti's table 2, sbh (10 + 24 / t)
    + 5 a s^2 b / t per layer, plus the embedding's input and dropout (8 sb + sbh) and the output
    layer's input and logits (4 sbh (1 + v / h) / t), Megatron's compute_activation_memory for P = 1."""
    h, layers, a, s, b, t, v = 6144, 48, 64, 2048, 4, 8, 51200
    config = _gpt(tmp_path, h, layers, a)
    found = _memory(config, tp=t, micro_batch=b, global_batch=b, attention="eager")[0].activations
    sbh = s * b * h
    expected = layers * (sbh * (10 + 24 / t) + 5 * a * s * s * b / t) + 8 * s * b + sbh
    expected += 4 * sbh * (1 + v / h) / t + LOGITS_16 * s * b * v / t
    assert found == pytest.approx(expected, rel=1e-9)


def test_flash_attention_keeps_no_s_squared_tensor(tmp_path: Path) -> None:
    """The same model with FlashAttention: the 5 a s^2 b / t of each layer become the fp32
    logsumexp of each head and token, 4 a s b / t (Dao et al. 2022, algorithm 2)."""
    h, layers, a, s, b, t = 6144, 48, 64, 2048, 4, 8
    config = _gpt(tmp_path, h, layers, a)
    eager = _memory(config, tp=t, micro_batch=b, global_batch=b, attention="eager")[0].activations
    flash = _memory(config, tp=t, micro_batch=b, global_batch=b, attention="flash")[0].activations
    assert eager - flash == pytest.approx(layers * (5 * a * s * s * b - 4 * a * s * b) / t, rel=1e-9)


def test_flash_activations_grow_linearly_with_the_sequence() -> None:
    """Llama-3-8B at TP 2 (the issue's case): with FlashAttention nothing is s^2, so 8,192 tokens
    hold 4 x what 2,048 do (the embedding's and loss's terms are linear too); eager grows faster."""
    short, long = (_memory("llama-3-8b", tp=2, seq_len=n)[0].activations for n in (2048, 8192))
    assert long / short == pytest.approx(4, rel=1e-9)
    eager = [_memory("llama-3-8b", tp=2, seq_len=n, attention="eager")[0].activations for n in (2048, 8192)]
    assert eager[1] / eager[0] > 4.5


def test_llama_fits_an_80_gib_device_at_tp_2() -> None:
    """Llama-3-8B at TP 2, bf16, sequence 2,048, FlashAttention, no ZeRO: 8.03 B / 2 parameters x 18 B
    (Megatron's num_bytes_per_parameter) = 67.3 GiB of state, and activations by the terms by hand:
    32 layers x (8 sbh replicated + (2 sb (hq + 2 hkv) + 2 sb hq + 6 sbf + 4 a s b) / 2) + the output
    layer's 4 sbh (1 + v / h) / 2; Llama trains without dropout, so no mask."""
    h, f, a, kv, v, layers, s, b, t = 4096, 14336, 32, 8, 128256, 32, 2048, 1, 2
    stage = _memory("llama-3-8b", tp=t)[0]
    sb, hkv = s * b, h * kv // a
    block = 8 * sb * h + (2 * sb * (h + 2 * hkv) + 2 * sb * h + 6 * sb * f + 4 * a * sb) / t
    expected = layers * block + 8 * sb + sb * h + (4 * sb * h * (1 + v / h) + LOGITS_16 * sb * v) / t
    assert stage.activations == pytest.approx(expected, rel=1e-9)
    assert stage.total < 80 * GIB


def test_dropout_masks_only_where_the_model_has_dropout(tmp_path: Path) -> None:
    """GPT-2's configuration with its dropout set to 0: the two 1-byte masks per layer (2 sbh,
    sequence-parallel: / t) go, and eager attention keeps the softmax output alone. The file states
    no dtype (fp32, as GPT2Config builds it): the attention dropout's 1-byte mask and its fp32
    output go, (1 + 4) a s^2 b, where Korthikanti's 16-bit count is 1 + 2."""
    h, layers, a, s, t = 1024, 4, 16, 1024, 2
    config = tmp_path / "config.json"
    gpt = {"model_type": "gpt2", "n_embd": h, "n_layer": layers, "n_head": a, "n_positions": s}
    gpt["vocab_size"] = 50257
    layout = {"tp": t, "sp": True, "attention": "eager"}
    config.write_text(json.dumps(gpt))
    dropped = _memory(config, **layout)[0].activations
    config.write_text(json.dumps({**gpt, "attn_pdrop": 0.0, "resid_pdrop": 0.0}))
    none = _memory(config, **layout)[0].activations
    assert dropped - none == pytest.approx(layers * (2 * s * h + (1 + 4) * a * s * s) / t, rel=1e-9)


CONFIGS = Path(__file__).parent.parent / "fixtures" / "configs"
# Each fixture's dropout of the hidden state as its file sets it, under the key its transformers
# configuration class reads (absent: the class's default): phi-2 resid_pdrop 0.1 (PhiConfig), GPT-2
# resid_pdrop 0.1, StarCoder2-3B residual_dropout 0.1, T5 dropout_rate 0.1, Falcon-7B hidden_dropout
# 0.0, Pythia (GPTNeoXConfig's hidden_dropout: absent, 0.0), Phi-3 resid_pdrop 0.0, Gemma none.
HIDDEN = {
    "phi-2": 0.1,
    "gpt2": 0.1,
    "starcoder2-3b": 0.1,
    "t5-base": 0.1,
    "falcon-7b": 0.0,
    "pythia-160m": 0.0,
    "phi-3-mini-4k-instruct": 0.0,
    "gemma-2b": 0.0,
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_the_hidden_dropout_each_family_names_reaches_the_ir(name: str) -> None:
    """Every attention layer of the model's IR carries the hidden-state dropout its configuration
    sets (the IR's block.heads.hidden_dropout, absent at 0)."""
    result = run(prepare(Request(model=str(CONFIGS / f"{name}.json"))))
    assert result.ir is not None, result.diagnostics
    found = {x.block.heads.hidden_dropout for x in result.ir.layers if x.block and x.block.heads}
    assert found == {HIDDEN[name]}


def test_phi_2s_residual_dropout_masks_without_attention_dropout(tmp_path: Path) -> None:
    """phi-2 drops out the attention's and the MLP's outputs (resid_pdrop 0.1) but not the attention
    probabilities (attention_dropout 0.0): its two 1-byte masks per layer are 2 sbh (/ t under
    SP) against the same file with resid_pdrop 0, and eager attention keeps the softmax output
    alone, 2 a s^2 b / t (Korthikanti et al. 2022 section 4.1 without the dropout's 3 a s^2 b)."""
    h, layers, a, s, t = 2560, 32, 32, 1024, 2
    config = json.loads((CONFIGS / "phi-2.json").read_text())
    layout = {"tp": t, "sp": True, "seq_len": s}
    phi = _memory(CONFIGS / "phi-2.json", attention="eager", **layout)[0].activations
    (tmp_path / "config.json").write_text(json.dumps({**config, "resid_pdrop": 0.0}))
    kept = _memory(tmp_path / "config.json", attention="eager", **layout)[0].activations
    assert phi - kept == pytest.approx(layers * 2 * s * h / t, rel=1e-9)
    flash = _memory(CONFIGS / "phi-2.json", attention="flash", **layout)[0].activations
    assert phi - flash == pytest.approx(layers * (2 * a * s * s - 4 * a * s) / t, rel=1e-9)


@pytest.mark.parametrize(
    ("change", "per_token"),
    [
        # each latent's RMSNorm input and up projection's input, 2 B each (replicated: / t under SP)
        ({"kv_lora_rank": 1024}, lambda a, t: 2 * 2 * (1024 - 512) / t),
        ({"q_lora_rank": None}, lambda a, t: -2 * 2 * 1536 / t),
        # the decompressed V (a heads of d_v) and the context (a x d_v), split over the tensor ranks
        ({"v_head_dim": 256}, lambda a, t: 2 * (a * 128 + a * 128) / t),
        # Q and the decompressed K, a heads of d_nope + d_rope each
        ({"qk_nope_head_dim": 192}, lambda a, t: 2 * (a * 64 + a * 64) / t),
    ],
)
def test_multi_head_latent_attention_stores_its_latents_and_decompressed_heads(
    change: dict[str, object], per_token: object, tmp_path: Path
) -> None:
    """What DeepSeek-V2's attention keeps per token differs, block by block, by the paper's widths:
    the compressed c^KV and c^Q (normed, then projected up) and the a decompressed heads."""
    layers, a, s, t = 2, 128, 1024, 2
    layout = {"tp": t, "sp": True, "seq_len": s, "attention": "flash"}
    (tmp_path / "v2.json").write_text(json.dumps(DEEPSEEK_V2))
    (tmp_path / "changed.json").write_text(json.dumps({**DEEPSEEK_V2, **change}))
    base = _memory(tmp_path / "v2.json", **layout)[0].activations
    changed = _memory(tmp_path / "changed.json", **layout)[0].activations
    assert callable(per_token)
    assert changed - base == pytest.approx(layers * s * per_token(a, t), rel=1e-9)


HF = Path(__file__).parent.parent / "fixtures" / "hf"


@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_gpt_j_stores_its_fp32_activations_at_4_bytes_an_element(attention: str) -> None:
    """GPT-J-6B's published configuration states no dtype: transformers builds it in fp32, and a run
    in it stores each activation at 4 bytes (torch's element_size), twice what --precision bf16
    stores. Korthikanti et al. 2022's terms by hand (section 4.1, 16-bit: 2 bytes an element), TP 2,
    no SP: each layer's tensors 8 sbh replicated and (6 sbh + 2 sbh + 4 sbf) / t split (Q, K, V,
    the output projection's input, the MLP's two f-wide tensors), eager attention's softmax output
    2 a s^2 b / t (GPT-J trains without dropout: no masks, no dropout output); the final norm's and
    output layer's inputs 4 sbh / t. Not scaled: FlashAttention's fp32 logsumexp 4 a s b / t, the
    embedding's int64 ids and 1-byte dropout mask 8 sb + sbh, Megatron's fp32 logits 4 s b V / t."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # fixtures/hf/gpt-j-6b.json: n_embd, n_head, n_layer, n_inner null (4 n_embd), vocab_size
    h, a, layers, f, v = 4096, 16, 28, 4 * 4096, 50400
    s, b, t = 2048, 1, 2
    sb, sbh = s * b, s * b * h
    per_layer = 8 * sbh + (6 * sbh + 2 * sbh + 4 * sb * f) / t
    if attention == "eager":
        per_layer += 2 * a * s * s * b / t
    tensors_16 = layers * per_layer + 4 * sbh / t
    fixed = 8 * sb + sbh + 4 * sb * v / t + (layers * 4 * a * sb / t if attention == "flash" else 0)
    layout = {"tp": t, "seq_len": s, "micro_batch": b, "global_batch": b, "attention": attention}
    fp32 = _memory(HF / "gpt-j-6b.json", **layout)[0].activations
    bf16 = _memory(HF / "gpt-j-6b.json", precision="bf16", **layout)[0].activations
    logits_16 = LOGITS_16 * sb * v / t  # fp32 logits are their own fp32 copy
    assert bf16 == pytest.approx(tensors_16 + fixed + logits_16, rel=1e-9)
    assert fp32 == pytest.approx(2 * tensors_16 + fixed, rel=1e-9)
    assert fp32 - bf16 == pytest.approx(tensors_16 - logits_16, rel=1e-9)


def test_gpt_2s_fp32_activations_keep_their_1_byte_masks() -> None:
    """GPT-2's published configuration (no dtype: fp32; attention and residual dropout 0.1), eager
    attention at TP 2: against --precision bf16 every tensor term doubles and the 1-byte masks do
    not. By Korthikanti et al. 2022's 16-bit terms (section 4.1) a layer stores 10 sbh + (24 sbh +
    5 a s^2 b) / t, of which masks 2 sbh + a s^2 b / t (the residual dropouts' and the attention
    dropout's): fp32 adds the rest once more, 8 sbh + (24 sbh + 4 a s^2 b) / t, and the final
    norm's and output layer's inputs 4 sbh / t; the embedding's ids and mask and the fp32 logits
    stay, and bf16's 16-bit logits beside them (LOGITS_16) go."""
    # fixtures/configs/gpt2.json: n_embd, n_head, n_layer, n_positions
    h, a, layers, s, b, t = 768, 12, 12, 1024, 1, 2
    sbh = s * b * h
    layout = {"tp": t, "seq_len": s, "micro_batch": b, "global_batch": b, "attention": "eager"}
    fp32 = _memory(CONFIGS / "gpt2.json", **layout)[0].activations
    bf16 = _memory(CONFIGS / "gpt2.json", precision="bf16", **layout)[0].activations
    fp16 = _memory(CONFIGS / "gpt2.json", precision="fp16", **layout)[0].activations
    expected = layers * (8 * sbh + (24 * sbh + 4 * a * s * s * b) / t) + 4 * sbh / t
    # less bf16's logits beside their fp32 copy; the vocabulary 50,257 padded to a multiple of
    # 128 x T (Megatron's _vocab_size_with_padding, --make-vocab-size-divisible-by 128)
    expected -= LOGITS_16 * s * b * 50432 / t
    assert fp32 - bf16 == pytest.approx(expected, rel=1e-9)
    assert fp16 == bf16
