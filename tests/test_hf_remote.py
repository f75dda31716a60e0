"""--trust-remote-code: a configuration whose model_type only its own code defines (auto_map:
configuration_*.py and modeling_*.py beside its config.json, as on the Hub) is refused in one
line naming the flag, and with the flag built by that code, as transformers'
trust_remote_code=True builds it (no network: the code is a local folder, which transformers'
dynamic modules load as they load a downloaded one).

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from typer.testing import CliRunner

from modtrans import pipeline
from modtrans.cli import app
from modtrans.hf import classes, library

pytestmark = pytest.mark.hf

CONFIGURATION = """
from transformers import LlamaConfig


class TinyRemoteConfig(LlamaConfig):
    model_type = "tiny_remote"
"""

MODELING = """
from transformers import LlamaForCausalLM

from .configuration_tiny import TinyRemoteConfig


class TinyRemoteForCausalLM(LlamaForCausalLM):
    config_class = TinyRemoteConfig
"""

DIMENSIONS = {
    "hidden_size": 256,
    "intermediate_size": 688,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test reads through transformers, not an IR an earlier run kept (hf/cache.py)."""
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))


def folder(tmp_path: Path) -> Path:
    """A model folder as the Hub holds one with its own code: config.json naming it in auto_map."""
    (tmp_path / "configuration_tiny.py").write_text(CONFIGURATION)
    (tmp_path / "modeling_tiny.py").write_text(MODELING)
    config = {
        "model_type": "tiny_remote",
        "architectures": ["TinyRemoteForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_tiny.TinyRemoteConfig",
            "AutoModelForCausalLM": "modeling_tiny.TinyRemoteForCausalLM",
        },
        **DIMENSIONS,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path / "config.json"


def test_remote_code_is_refused_in_one_line_naming_the_flag(tmp_path: Path) -> None:
    config = str(folder(tmp_path))
    done = CliRunner().invoke(app, ["translate", config, "--seq-len", "64", "-o", str(tmp_path / "a.txt")])
    lines = done.output.strip().splitlines()
    assert done.exit_code in (1, 2)
    assert len(lines) == 1
    assert "M801" in lines[0]
    assert "--trust-remote-code" in lines[0]
    assert not (tmp_path / "a.txt").exists()


def test_with_the_flag_the_code_beside_the_configuration_builds_the_model(tmp_path: Path) -> None:
    """The folder's TinyRemoteForCausalLM is a Llama: the IR's parameters are those of transformers'
    own LlamaForCausalLM of the same dimensions, built independently."""
    path = folder(tmp_path)
    ir, found = pipeline.extract_checked(path, trust_remote_code=True, input_shapes={"input_ids": (1, 64)})
    assert ir is not None, found
    assert ir.provenance.graph == "TinyRemoteForCausalLM"
    config = classes.config_of({"model_type": "llama", **DIMENSIONS})
    llama = library.build(config, classes.named_class("LlamaForCausalLM"))
    assert ir.totals.params == sum(p.numel() for p in llama.parameters())
    args = ["translate", str(path), "--seq-len", "64", "--trust-remote-code", "-d", "simai"]
    done = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "b.txt")])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "b.txt").read_text().strip()
