"""The attention a framework that runs the model's own module gets (`--framework fsdp` or
`deepspeed`, nothing chosen: cost.OWN_ATTENTION): op by op where transformers gives the family
no fused kernel (hf/blocks.eager_only), held to transformers refusing each fused implementation
for real; SDPA's first backend, FlashAttention-2, otherwise (held to torch's priority order);
Megatron's own model (the default framework) and an explicit --attention untouched.

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


def _refuses_every_fused_kernel(model_type: str) -> bool:
    """Whether transformers refuses to build the family with SDPA and with flex attention (the
    fused implementations it has without the flash-attn package): its own check,
    PreTrainedModel._check_and_adjust_attn_implementation, run by from_config."""
    config = transformers.AutoConfig.for_model(model_type, **SMALL)
    refused = 0
    for implementation in ("sdpa", "flex_attention"):
        try:
            with torch.device("meta"):
                transformers.AutoModel.from_config(config, attn_implementation=implementation)
        except (ValueError, ImportError):
            refused += 1
    return refused == 2


@pytest.mark.parametrize(
    "model_type", ["bloom", "mpt", "xglm", "openai-gpt", "gpt2", "llama", "t5", "opt", "gpt_neox"]
)
def test_eager_only_is_what_transformers_refuses(model_type: str) -> None:
    """eager_only(cls) reads the class's flags; transformers' own check refusing SDPA and flex
    attention when asked for them is the independent fact (BLOOM's baddbmm with ALiBi, MPT's,
    XGLM's and OpenAI GPT's attention are eager only; GPT-2, Llama, T5, OPT and GPT-NeoX take
    SDPA)."""
    config = transformers.AutoConfig.for_model(model_type, **SMALL)
    cls = transformers.AutoModel._model_mapping[type(config)]
    assert blocks.eager_only(cls) is _refuses_every_fused_kernel(model_type)


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
