"""The attention a framework that runs the model's own module gets (`--framework fsdp` or
`deepspeed`, nothing chosen: cost.OWN_ATTENTION): op by op where transformers gives the family
no SDPA (hf/blocks.eager_only: transformers' default falls back to eager), held to the
implementation transformers picks for real; SDPA's first backend, FlashAttention-2, otherwise
(held to torch's priority order); Megatron's own model (the default framework) and an explicit
--attention untouched.

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
from modtrans.hf import blocks

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
SMALL = {"num_hidden_layers": 1, "n_layer": 1, "n_layers": 1, "vocab_size": 128}


def _default_implementation(model_type: str) -> str:
    """The attention implementation transformers picks for the family when none is asked for
    (PreTrainedModel.get_correct_attn_implementation, run by from_config on the meta device)."""
    config = transformers.AutoConfig.for_model(model_type, **SMALL)
    with torch.device("meta"):
        model = transformers.AutoModel.from_config(config)
    return str(model.config._attn_implementation)


@pytest.mark.parametrize(
    "model_type", ["bloom", "mpt", "xglm", "openai-gpt", "gemma2", "gpt2", "llama", "t5", "opt", "gpt_neox"]
)
def test_eager_only_is_the_implementation_transformers_picks(model_type: str) -> None:
    """eager_only(cls) reads the class's flags; transformers building the family without an
    attn_implementation is the independent fact: eager for BLOOM (baddbmm with ALiBi), MPT, XGLM,
    OpenAI GPT and Gemma 2 (FlashAttention and flex attention only when asked for), SDPA for
    GPT-2, Llama, T5, OPT and GPT-NeoX."""
    config = transformers.AutoConfig.for_model(model_type, **SMALL)
    cls = transformers.AutoModel._model_mapping[type(config)]
    assert blocks.eager_only(cls) is (_default_implementation(model_type) == "eager")


def test_sdpa_runs_flashattention_2_first() -> None:
    """What an SDPA-capable class runs (pipeline.own_attention: flash2): torch's default backend
    order puts FLASH_ATTENTION (FlashAttention-2) first, cuDNN's last."""
    backend = torch.nn.attention.SDPBackend
    order = [backend(b) for b in torch._C._get_sdp_priority_order()]
    assert order[0] == backend.FLASH_ATTENTION
    assert order.index(backend.CUDNN_ATTENTION) > order.index(backend.EFFICIENT_ATTENTION)


def _translate(tmp_path: Path, name: str, *options: str) -> tuple[str, dict[str, Any]]:
    prefix = tmp_path / name
    done = CliRunner().invoke(
        app,
        [
            "translate", str(FIXTURES / "bloom-3b-finetune.json"), "--seq-len", "512", "--dp", "2",
            "--zero", "3", *options, "--format", "chakra-et", "-o", str(prefix),
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    meta = json.loads(prefix.with_name(f"{name}.et-meta.json").read_text(encoding="utf-8"))
    return done.output, {**meta["parallel"]["llm"]["memory"][0], "fused": meta["compute"]["flash_attention"]}


def test_fsdp_runs_blooms_own_attention_op_by_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BLOOM-3B under --framework fsdp (transformers' BloomAttention: no fused kernel) is charged
    and stored as --attention eager, and M807 says why; under Megatron (its own model, fused
    attention) and with --attention flash it is the fused kernel's, without M807. The s x s
    tensors are what the two differ by: more activations, the same weights."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    said, own = _translate(tmp_path, "own", "--framework", "fsdp")
    assert "M807" in said
    assert "BloomForCausalLM" in said
    assert _translate(tmp_path, "eager", "--framework", "fsdp", "--attention", "eager")[1] == own
    chosen, flash = _translate(tmp_path, "flash", "--framework", "fsdp", "--attention", "flash2")
    assert "M807" not in chosen
    assert (own["fused"], flash["fused"]) == (False, True)
    assert flash["weights_bytes"] == own["weights_bytes"]
    assert flash["activations_bytes"] < own["activations_bytes"]
    assert "M807" not in _translate(tmp_path, "megatron", "--framework", "megatron")[0]


def test_a_sweep_says_what_translate_says_of_the_attention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`modtrans sweep` settles the attention once for every layout, as translate does for one: it
    says M807 once, on standard error and in the table's JSON; with --attention given, nothing."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    common = [
        "sweep", str(FIXTURES / "bloom-3b-finetune.json"), "--framework", "fsdp", "--gpus", "8",
        "--global-batch", "16", "--seq-len", "512", "--tp", "1", "--pp", "1", "--no-cache",
    ]  # fmt: skip
    done = CliRunner().invoke(app, [*common, "-o", str(tmp_path / "own")])
    assert done.exit_code == 0, done.output
    assert done.output.count("warning M807") == 1
    table = json.loads((tmp_path / "own.json").read_text(encoding="utf-8"))
    assert [w.split()[1] for w in table["warnings"]] == ["M807"]
    chosen = CliRunner().invoke(app, [*common, "--attention", "flash2"])
    assert chosen.exit_code == 0, chosen.output
    assert "M807" not in chosen.output
