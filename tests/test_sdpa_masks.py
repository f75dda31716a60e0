"""Which attentions transformers hands PyTorch's SDPA a mask or a bias for (cost/attention.py,
masked; pipeline.own_attention's sdpa and M808), held to transformers 5.25 run for real on the
CPU: torch.nn.functional.scaled_dot_product_attention recorded, each call's attn_mask and
is_causal. A plain causal decoder gets is_causal and no mask (FlashAttention-2 takes it); a
sliding-window layer a [b, 1, q, k] bool mask; T5 a [1, heads, q, k] float bias at every
attention; Gemma 3 a mask at its local layers only (the rule is per attention).

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch
import transformers
from typer.testing import CliRunner

from modtrans.cli import app

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
SMALL = {
    "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
    "num_hidden_layers": 2, "vocab_size": 100, "head_dim": 16,
}  # fmt: skip


def _recorded(model_type: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[tuple[Any, bool]]:
    """Each SDPA call of one training forward: (the mask's shape, or None, and is_causal)."""
    calls: list[tuple[Any, bool]] = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def record(
        q: Any, k: Any, v: Any, attn_mask: Any = None, *args: Any, is_causal: bool = False, **kw: Any
    ) -> Any:
        calls.append((None if attn_mask is None else tuple(attn_mask.shape), is_causal))
        return sdpa(q, k, v, attn_mask, *args, is_causal=is_causal, **kw)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", record)
    config = transformers.AutoConfig.for_model(model_type, **options)
    model = transformers.AutoModel.from_config(config, attn_implementation="sdpa").train()
    ids = torch.randint(0, 100, (2, 8))
    if model_type == "t5":
        model(input_ids=ids, decoder_input_ids=ids)
    else:
        model(input_ids=ids)
    return calls


def test_a_causal_decoder_gets_no_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _recorded("llama", monkeypatch, **SMALL) == [(None, True)] * 2


@pytest.mark.parametrize(
    ("model_type", "window"),
    [
        ("mistral", {"sliding_window": 4}),
        ("qwen2", {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 0}),
    ],
)
def test_a_sliding_window_is_a_mask(
    model_type: str, window: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _recorded(model_type, monkeypatch, **SMALL, **window) == [((2, 1, 8, 8), False)] * 2


def test_gemma3_masks_its_local_layers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _recorded("gemma3_text", monkeypatch, **SMALL, sliding_window=4, sliding_window_pattern=2)
    assert calls == [((2, 1, 8, 8), False), (None, True)]


def test_t5_hands_every_attention_a_per_head_bias(monkeypatch: pytest.MonkeyPatch) -> None:
    t5 = {"d_model": 64, "d_kv": 16, "d_ff": 128, "num_heads": 4, "num_layers": 2, "vocab_size": 100}
    assert _recorded("t5", monkeypatch, **t5) == [((1, 4, 8, 8), False)] * 6  # 2 encoder, 2 x 2 decoder


def _translate(tmp_path: Path, config: Path, *options: str) -> tuple[str, dict[str, Any]]:
    prefix = tmp_path / "out"
    done = CliRunner().invoke(
        app,
        [
            "translate", str(config), "--seq-len", "1024", "--dp", "2", "--zero", "3", *options,
            "--format", "chakra-et", "-o", str(prefix),
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return done.output, json.loads(prefix.with_name("out.et-meta.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("config", "edit", "said"),
    [
        ("qwen2.5-0.5b-instruct.json", {"use_sliding_window": True, "sliding_window": 256}, True),
        ("qwen2.5-0.5b-instruct.json", {}, False),  # use_sliding_window false: no window, no mask
        ("flan-t5-base.json", {}, True),
    ],
)
def test_fsdp_charges_sdpas_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config: str, edit: dict[str, Any], said: bool
) -> None:
    """Under --framework fsdp a windowed Qwen2 and T5 (each recorded above passing SDPA a mask)
    are charged as --attention sdpa, with M808; Qwen2 without its window as flash2, without M808;
    under Megatron (its own model, flash attention) no M808."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads((FIXTURES / config).read_text(encoding="utf-8")), **edit}))
    output, meta = _translate(tmp_path, path, "--framework", "fsdp")
    assert ("M808" in output) is said
    chosen = _translate(tmp_path, path, "--framework", "fsdp", "--attention", "sdpa" if said else "flash2")[1]
    assert meta["compute"] == chosen["compute"]
    assert meta["parallel"] == chosen["parallel"]
    assert "M808" not in _translate(tmp_path, path, "--framework", "megatron")[0]


@pytest.mark.parametrize(
    ("config", "every"), [("flan-t5-base.json", True), ("llama-3.2-1b-instruct.json", False)]
)
def test_the_ir_masks_what_transformers_hands_sdpa(config: str, every: bool) -> None:
    """The IR's attentions (ir/core.py's Heads.bias, cost/attention.py's masked) against the
    calls recorded above: T5 hands every attention a bias, its cross-attentions included; Llama
    none."""
    from modtrans.cost.attention import masked
    from modtrans.pipeline import extract_checked

    ir, _ = extract_checked(FIXTURES / config)
    assert ir is not None
    products = [x for x in ir.layers if x.block and x.block.heads and x.gemm is not None and not x.params]
    assert len(products) > 0
    assert {masked(x.block.heads) for x in products if x.block and x.block.heads} == {every}
