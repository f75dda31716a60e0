"""The published configurations of fixtures/hf (MANIFEST.md) without the extra `hf` (no torch, no
transformers: the default test environment): a hand-written family is read, any other model_type
is refused in one line that names it and the install command, a file without one in one line that
says what to add. tests/test_hf_real.py reads the same files with the extra."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans import hf, pipeline
from modtrans.llm.config import ALIASES, FAMILIES, undescribed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hf"
PUBLISHED = sorted(p.stem for p in FIXTURES.glob("*.json"))


@pytest.mark.skipif(hf.available(), reason="torch and transformers are installed here (test_hf_real.py)")
@pytest.mark.parametrize("name", PUBLISHED)
def test_a_published_configuration_without_the_extra_is_read_or_one_line(name: str) -> None:
    path = FIXTURES / f"{name}.json"
    data = json.loads(path.read_text())
    family = data.get("model_type")
    ir, found = pipeline.extract_checked(path)  # its default sequence: a VLM's holds its image
    if family in FAMILIES or family in ALIASES:
        assert ir is not None, found
        said = " ".join(d.message for d in found if d.code == "M805")
        other = undescribed(data)  # a class the family does not describe: read as its LM, said
        assert (f"names {other}," in said) == (other is not None)
        assert ("quantization_config (" in said) == ("quantization_config" in data)  # as hf/ says
        assert ("auto_map names code" in said) == ("auto_map" in data)
        return
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "\n" not in found[0].message
    if family is None:
        assert 'add "model_type"' in found[0].message
    else:
        assert f"model_type {family!r}" in found[0].message
        assert "[hf]" in found[0].message


def test_every_published_file_has_its_row_in_the_manifest() -> None:
    """Each file's provenance (MANIFEST.md: a row naming it, with the repository and the commit it
    was copied from, or the transformers version that wrote it)."""
    rows = [x for x in (FIXTURES / "MANIFEST.md").read_text().splitlines() if x.startswith("| `")]
    named = {x.split("`")[1].removesuffix(".json"): x for x in rows}
    assert set(PUBLISHED) <= set(named), sorted(set(PUBLISHED) - set(named))
    for name in PUBLISHED:
        assert " @ " in named[name] or name.endswith("-default"), named[name]


def test_a_diffusers_model_s_configuration_is_said_to_be_one() -> None:
    """FLUX.1-schnell's transformer/config.json (fixtures/hf/diffusers: a diffusers model, its
    _class_name FluxTransformer2DModel, no transformers configuration): one F004 line saying so."""
    ir, found = pipeline.extract_checked(FIXTURES / "diffusers" / "flux-transformer.json")
    assert ir is None
    assert [d.code for d in found] == ["F004"]
    assert "a diffusers model's configuration" in found[0].message


@pytest.mark.parametrize(
    ("stated", "held", "warned"),
    [("torch.bfloat16", "bfloat16", False), ("auto", "float", True), ("float16", "float16", False)],
)
def test_a_hand_written_family_s_checkpoint_dtype_is_read_as_the_generic_path_reads_it(
    stated: str, held: str, warned: bool, tmp_path: Path
) -> None:
    """Llama 3.2 1B Instruct's published file with its `dtype` in torch's spelling, "auto" (what
    from_pretrained's torch_dtype="auto" saves), or a plain name: the IR's weights in that dtype,
    float32 with M805 for "auto" (hf/classes.buildable, hf/configs.warnings)."""
    data = json.loads((FIXTURES / "llama-3.2-1b-instruct.json").read_text())
    data.pop("torch_dtype")
    data["dtype"] = stated
    (tmp_path / "config.json").write_text(json.dumps(data))
    ir, found = pipeline.extract_checked(tmp_path / "config.json", input_shapes={"input_ids": (1, 64)})
    assert ir is not None
    assert {p.dtype for x in ir.layers for p in x.params} == {held}
    assert any(d.code == "M805" and "'auto'" in d.message for d in found) == warned


@pytest.mark.skipif(hf.available(), reason="torch and transformers are installed here (test_hf_real.py)")
def test_trust_remote_code_on_a_hand_written_family_s_file_needs_the_extra() -> None:
    """Phi-2's published file names its own code (auto_map) beside model_type phi: the option
    that runs that code runs it through transformers, so without the extra it is one line."""
    path = FIXTURES / "phi-2-auto-map.json"
    ir, found = pipeline.extract_checked(path, trust_remote_code=True)
    assert ir is None
    assert [d.code for d in found] == ["M801"]
    assert "--trust-remote-code runs the code" in found[0].message
    assert "[hf]" in found[0].message
