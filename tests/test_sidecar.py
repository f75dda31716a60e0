"""The .meta.json (sidecar.py): what real translations write holds to schemas/translation.schema.json
(typed values a script reads without parsing strings), its numbers agree with the options given
and the output written, version 1 files (fixtures/sidecar/, written by the version 1 writer) read
as the translations now write them, and outputs of different formats never share a sidecar."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import Result

from modtrans import resources, sidecar

Run = Callable[..., Result]
ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "fixtures" / "sidecar"

LAYOUT = ("gpt2", "--tp", "2", "--pp", "2", "--dp", "2", "--format", "chakra-et")
MOE = ("deepseek-moe-16b", "--dp", "4", "--ep", "2", "--pp", "2", "-d", "simai")
PRESET = ("gpt2", "-p", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "--npus", "4", "--model-parallel-group", "2")
KINDS = {  # name: (arguments, output, sidecar's name): a CNN's text, an LLM's traces, SimAI, MoE
    "cnn-text": (("resnet50",), "r.txt", "r.txt.meta.json"),
    "llm-traces": (LAYOUT, "t", "t.et-meta.json"),
    "llm-simai": (("gpt2", "--tp", "2", "--sp", "--zero", "1", "-d", "simai"), "s.txt", "s.txt.meta.json"),
    "moe-simai": (MOE, "m.txt", "m.txt.meta.json"),
    "preset-text": (PRESET, "h.txt", "h.txt.meta.json"),
}


def _translated(run_cli: Run, tmp_path: Path, kind: str) -> dict[str, Any]:
    args, output, meta = KINDS[kind]
    done = run_cli("translate", *args, "-o", tmp_path / output)
    assert done.exit_code == 0, done.output
    return dict(json.loads((tmp_path / meta).read_text()))


@pytest.mark.parametrize("kind", list(KINDS))
def test_what_translate_writes_holds_to_the_schema(run_cli: Run, tmp_path: Path, kind: str) -> None:
    meta = _translated(run_cli, tmp_path, kind)
    schema = resources.schema("translation")
    jsonschema.Draft202012Validator.check_schema(schema)
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(meta)]
    assert errors == []
    assert meta["version"] == sidecar.VERSION == 2


@pytest.mark.parametrize("kind", ["cnn-text", "llm-simai", "moe-simai", "preset-text"])
def test_the_policy_is_the_written_workload_s(run_cli: Run, tmp_path: Path, kind: str) -> None:
    """The header's first token of the file written (an LLM layout's SimAI text says
    HYBRID_TRANSFORMER_FWD_IN_BCKWD, not the DATA the version 1 writer said)."""
    meta = _translated(run_cli, tmp_path, kind)
    header = (tmp_path / KINDS[kind][1]).read_text().split(maxsplit=1)[0]
    assert meta["parallel"]["policy"] == header


def test_a_layout_s_trace_set_has_no_policy(run_cli: Run, tmp_path: Path) -> None:
    assert "policy" not in _translated(run_cli, tmp_path, "llm-traces")["parallel"]


def test_the_layout_is_numbers_booleans_and_objects(run_cli: Run, tmp_path: Path) -> None:
    """The options given, as given; D the layout's (experts carved from it), one memory object per
    stage whose parts sum to its total, one chunk per stage naming the first and last layer."""
    llm = _translated(run_cli, tmp_path, "moe-simai")["parallel"]["llm"]
    assert (llm["tp"], llm["pp"], llm["dp"], llm["ep"], llm["sp"], llm["zero"]) == (1, 2, 4, 2, False, 0)
    assert [m["stage"] for m in llm["memory"]] == [0, 1]
    for m in llm["memory"]:
        parts = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")
        assert m["total_bytes"] == sum(m[p] for p in parts) > 0
    assert [(c["chunk"], c["stage"]) for c in llm["chunks"]] == [(0, 0), (1, 1)]
    assert llm["chunks"][0]["first"] == "model.embed_tokens"
    assert llm["chunks"][-1]["last"] == "lm_head"
    assert sum(c["blocks"] for c in llm["chunks"]) == 28  # deepseek-moe-16b's num_hidden_layers
    simai = _translated(run_cli, tmp_path, "llm-simai")["parallel"]["llm"]
    assert (simai["tp"], simai["sp"], simai["zero"]) == (2, True, 1)


@pytest.mark.parametrize(
    ("fixture", "args", "output", "meta"),
    [
        (
            "gpt2-pp2-vpp2-interleaved.v1.meta.json",
            ("gpt2", "--pp", "2", "--vpp", "2", "--schedule", "interleaved", "--global-batch", "4"),
            "g",
            "g.et-meta.json",
        ),
        (
            "deepseek-moe-16b-dp4-ep2-pp2-simai.v1.meta.json",
            KINDS["moe-simai"][0],
            "m.txt",
            "m.txt.meta.json",
        ),
    ],
)
def test_version_1_reads_as_version_2_writes(
    run_cli: Run, tmp_path: Path, fixture: str, args: tuple[str, ...], output: str, meta: str
) -> None:
    """The version 1 writer's file (fixtures/sidecar/MANIFEST.md) read by llm_of is the layout the
    version 2 writer writes for the same translation."""
    fmt = ("--format", "chakra-et") if output == "g" else ()
    done = run_cli("translate", *args, *fmt, "-o", tmp_path / output)
    assert done.exit_code == 0, done.output
    new = json.loads((tmp_path / meta).read_text())
    old = json.loads((OLD / fixture).read_text())
    assert old["version"] == 1
    assert isinstance(old["parallel"]["llm"]["tp"], str)
    assert sidecar.llm_of(new) == new["parallel"]["llm"]
    # the activation estimate has changed since version 1 (FlashAttention keeps no s x s tensor:
    # strategy/llm/activations.py); the rest of every stage's memory reads as written then
    assert _state(sidecar.llm_of(old)) == _state(sidecar.llm_of(new))


def _state(llm: dict[str, Any]) -> dict[str, Any]:
    """The layout with each stage's memory less its activations (and so its total and the
    reserved bytes version 1 did not write)."""
    dropped = ("activations_bytes", "total_bytes", "reserved_bytes")
    memory = [{k: v for k, v in m.items() if k not in dropped} for m in llm["memory"]]
    return {**llm, "memory": memory}


def test_inspect_reads_a_version_1_set_by_its_old_name(run_cli: Run, tmp_path: Path) -> None:
    """A set written before version 2 has PREFIX.meta.json: inspect shows its memory per stage and
    --timeline its chunks and title from it, as from the set's new PREFIX.et-meta.json."""
    args = ("gpt2", "--pp", "2", "--vpp", "2", "--schedule", "interleaved", "--global-batch", "4")
    assert run_cli("translate", *args, "--format", "chakra-et", "-o", tmp_path / "g").exit_code == 0
    new = run_cli("inspect", tmp_path / "g", "--timeline", tmp_path / "new.svg")
    (tmp_path / "g.et-meta.json").unlink()
    (tmp_path / "g.meta.json").write_bytes((OLD / "gpt2-pp2-vpp2-interleaved.v1.meta.json").read_bytes())
    old = run_cli("inspect", tmp_path / "g", "--timeline", tmp_path / "old.svg")
    assert new.exit_code == old.exit_code == 0, old.output
    assert new.stdout == old.stdout
    assert "memory per rank, stage 1" in old.stdout
    assert (tmp_path / "new.svg").read_text() == (tmp_path / "old.svg").read_text()
    assert "TP1 x PP2 x DP1, interleaved V=2" in (tmp_path / "old.svg").read_text()


def test_a_text_output_s_sidecar_is_never_taken_for_a_set_s(tmp_path: Path) -> None:
    (tmp_path / "x.meta.json").write_text(json.dumps({"format": "modtrans-translation", "output": {}}))
    assert sidecar.of_set(tmp_path / "x") == tmp_path / "x.et-meta.json"


def test_outputs_of_different_formats_keep_their_own_sidecars(run_cli: Run, tmp_path: Path) -> None:
    """`-o r50.txt` then `-o r50.txt --format chakra-et`: the text's r50.txt.meta.json still
    describes r50.txt (its SHA-256), and the set has its own."""
    out = tmp_path / "r50.txt"
    assert run_cli("translate", "resnet50", "-o", out).exit_code == 0
    before = (tmp_path / "r50.txt.meta.json").read_bytes()
    done = run_cli("translate", "resnet50", "--npus", "2", "--format", "chakra-et", "-o", out)
    assert done.exit_code == 0, done.output
    assert (tmp_path / "r50.txt.meta.json").read_bytes() == before
    assert json.loads(before)["output"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert json.loads((tmp_path / "r50.txt.et-meta.json").read_text())["parallel"]["npus"] == 2
    assert "r50.txt.et-meta.json" in done.stderr
