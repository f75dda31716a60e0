"""What real config.json files carry beside their model, read through the generic path without a
traceback: the 48 published files of fixtures/hf (MANIFEST.md) of families outside the
hand-written list, each mutated along the axes real files vary on (an auto_map with or without a
model_type transformers defines, `architectures` missing or naming a remote class,
`torch_dtype`/`dtype` strings, `rope_scaling` of every type, `quantization_config` of every
method, nested sub-configurations, `tie_word_embeddings` at either level, an old
`transformers_version` with renamed fields). Each read gives an IR, or a one-line
M8xx diagnostic; an IR's parameters are sum(p.numel()) of the model transformers builds from the
same file, a checkpoint dtype the IR holds is the IR's, and a quantization_config is said.

Marker hf: needs torch and transformers (the extra `hf`); the property test slow.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modtrans import pipeline
from modtrans.hf import classes, library
from modtrans.llm.config import DTYPES, FAMILIES

pytestmark = pytest.mark.hf

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
PUBLISHED = sorted(
    p.stem
    for p in FIXTURES.glob("*.json")
    if not p.stem.endswith("-default") and json.loads(p.read_text()).get("model_type") not in FAMILIES
)  # the 48 verbatim files of families read through transformers (the -default ones are its
# defaults; tests/test_hf_real.py reads the hand-written families' files against it)

TOKENS = {"input_ids": (1, 16)}

DTYPE_NAMES = [
    "float32",
    "float16",
    "bfloat16",
    "torch.bfloat16",
    "torch.float16",
    "auto",
    "float8_e4m3fn",
    "int8",
]
ROPE: dict[str, dict[str, Any]] = {
    "linear": {"factor": 2.0},
    "dynamic": {"factor": 2.0},
    "yarn": {"factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1},
    "longrope": {
        "long_factor": [1.0] * 32,
        "short_factor": [1.0] * 32,
        "original_max_position_embeddings": 4096,
    },
    "llama3": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "mrope": {"mrope_section": [16, 24, 24]},
}
QUANTIZED = [
    {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "lm_head"]},
    {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]},
    {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"},
    {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
    {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
    {"load_in_8bit": True},
    "gptq",
]
RENAMED = {  # fields transformers' configuration classes read under their older names (attribute_map)
    "num_hidden_layers": "n_layer",
    "num_attention_heads": "n_head",
    "hidden_size": "n_embd",
    "max_position_embeddings": "n_positions",
}


def _sub(data: dict[str, Any]) -> list[str]:
    return [k for k, v in data.items() if isinstance(v, dict) and k.endswith("_config") and "quant" not in k]


def _mutation(draw: Any, data: dict[str, Any]) -> str:
    """One axis, applied to `data` in place; its name."""
    axis: str = draw(
        st.sampled_from(
            ["auto_map", "architectures", "dtype", "rope", "quantized", "nested", "tie", "version"]
        )
    )
    if axis == "auto_map":
        mapped = {"AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XForCausalLM"}
        data["auto_map"] = draw(st.sampled_from([mapped, {}, {"AutoTokenizer": ["tokenization_x.X", None]}]))
        if draw(st.booleans()):
            data["model_type"] = "x_remote"  # a model_type only its own code defines
    elif axis == "architectures":
        choice = draw(st.sampled_from(["missing", "remote", "none", "text"]))
        if choice == "missing":
            data.pop("architectures", None)
        else:
            data["architectures"] = {"remote": ["XRemoteForCausalLM"], "none": None, "text": "XForCausalLM"}[
                choice
            ]
    elif axis == "dtype":
        key = draw(st.sampled_from(["torch_dtype", "dtype"]))
        data.pop("torch_dtype", None)
        data.pop("dtype", None)
        data[key] = draw(st.sampled_from(DTYPE_NAMES))
    elif axis == "rope":
        kind = draw(st.sampled_from(sorted(ROPE)))
        data["rope_scaling"] = {draw(st.sampled_from(["type", "rope_type"])): kind, **ROPE[kind]}
        data["rope_theta"] = draw(st.sampled_from([10000.0, 500000.0, 1000000.0]))
    elif axis == "quantized":
        data["quantization_config"] = draw(st.sampled_from(QUANTIZED))
    elif axis == "nested" and _sub(data):
        key = draw(st.sampled_from(_sub(data)))
        data[key] = draw(st.sampled_from([{}, None, {**data[key], "torch_dtype": "bfloat16"}]))
    elif axis == "tie":
        at = draw(st.sampled_from(["top", *_sub(data)]))
        value = draw(st.booleans())
        (data if at == "top" else data[at])["tie_word_embeddings"] = value
    elif axis == "version":
        data["transformers_version"] = draw(st.sampled_from(["4.21.0", "4.39.3", "4.56.0", "5.0.0"]))
        for new, old in RENAMED.items():
            if new in data and old not in data and draw(st.booleans()):
                data[old] = data.pop(new)
    return axis


@st.composite
def mutated(draw: Any) -> tuple[str, dict[str, Any], list[str]]:
    name = draw(st.sampled_from(PUBLISHED))
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    axes = [_mutation(draw, data) for _ in range(draw(st.integers(1, 3)))]
    return name, data, axes


def read(path: Path, data: dict[str, Any]) -> tuple[Any, list[Any]]:
    path.write_text(json.dumps(data))
    return pipeline.extract_checked(path, input_shapes=TOKENS)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))


def test_the_published_files_are_the_48() -> None:
    assert len(PUBLISHED) == 48


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutated())
def test_a_real_configuration_s_quirks_give_an_ir_or_one_line(tmp_path: Path, case: Any) -> None:
    name, data, axes = case
    ir, found = read(tmp_path / f"{name}.json", data)
    assert all("\n" not in d.message for d in found), axes
    if ir is None:
        assert found, axes
        assert all(d.code[0] in "MX" for d in found), axes
        return
    model = library.build(classes.config_of(data))
    assert ir.totals.params == sum(p.numel() for p in model.parameters()), axes  # transformers' count
    stated = data.get("dtype") if data.get("dtype") is not None else data.get("torch_dtype")
    held = str(stated or "float32").removeprefix("torch.")
    assert {p.dtype for x in ir.layers for p in x.params} == {DTYPES.get(held, DTYPES["float32"])[0]}, axes
    if data.get("quantization_config"):
        assert any("quantization_config" in d.message for d in found if d.code == "M805"), axes


@pytest.mark.parametrize(
    ("stated", "held", "warned"),
    [
        ("torch.bfloat16", "bfloat16", False),  # the torch spelling: the checkpoint's dtype
        ("auto", "float", True),  # from_pretrained's argument, no dtype: transformers' config stops on it
        (16, "float", True),
    ],
)
def test_a_checkpoint_dtype_is_read_or_said(tmp_path: Path, stated: object, held: str, warned: bool) -> None:
    data = json.loads((FIXTURES / "opt-1.3b.json").read_text())
    data["torch_dtype"] = stated
    ir, found = read(tmp_path / "opt.json", data)
    assert ir is not None
    assert {p.dtype for x in ir.layers for p in x.params} == {held}
    assert [d.code for d in found] == (["M805"] if warned else [])
    if warned:
        assert f"dtype {stated!r}" in found[0].message


def test_a_quantization_config_transformers_cannot_read_is_built_unquantized_and_said(tmp_path: Path) -> None:
    """A quantization_config that is not a table (transformers' PretrainedConfig.to_dict calls
    .to_dict() on it): the model is built unquantized, as for every method, and the method named."""
    data = json.loads((FIXTURES / "opt-1.3b.json").read_text())
    data["quantization_config"] = "gptq"
    ir, found = read(tmp_path / "opt.json", data)
    assert ir is not None
    assert ir.totals.params == 1_315_758_080  # OPT-1.3B's, fixtures/hf/MANIFEST.md
    assert [d.code for d in found] == ["M805"]
    assert "quantization_config (gptq)" in found[0].message
