"""A refusal gives the way out, located at what the user gave, and the way out it names works."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

Run = Callable[..., Result]


def test_zero3_for_astra_sim_text_names_the_formats_that_hold_it(run_cli: Run, tmp_path: Path) -> None:
    """ZeRO-3's forward all-gathers run over the data group, a column ASTRA-sim 1.0's keyword
    gives another group: refused at the model, naming Chakra traces and SimAI's text, and both
    of those write the same layout."""
    layout = ("translate", "llama-3-8b", "--tp", "2", "--dp", "4", "--zero", "3")
    refused = run_cli(*layout, "-o", tmp_path / "z.txt")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("llama-3-8b: error D310"), refused.stderr
    assert "--format chakra-et" in refused.stderr
    assert "--dialect simai" in refused.stderr
    assert not list(tmp_path.iterdir())
    simai = run_cli(*layout, "--dialect", "simai", "-o", tmp_path / "z.txt")
    assert simai.exit_code == 0, simai.stderr
    traces = run_cli(*layout, "--format", "chakra-et", "-o", f"{tmp_path}/traces/")
    assert traces.exit_code == 0, traces.stderr
    assert (tmp_path / "traces" / "llama-3-8b.7.et").is_file()


def test_chakra_dialect_refusal_is_at_the_model_and_its_option(run_cli: Run, tmp_path: Path) -> None:
    """Not `<input>` (no text exists yet to point into): the model, the option and the way out."""
    keyword = ("translate", "gpt2", "-p", "HYBRID_TRANSFORMER", "--npus", "4", "--model-parallel-group", "2")
    refused = run_cli(*keyword, "--dialect", "chakra", "--time-unit", "us", "-o", tmp_path / "c.txt")
    assert refused.exit_code == 1
    assert "<input>" not in refused.stderr
    assert "gpt2: error D310 --dialect chakra: " in refused.stderr, refused.stderr
    assert "--format chakra-et" in refused.stderr
    out = run_cli(*keyword, "--format", "chakra-et", "-o", f"{tmp_path}/t/")
    assert out.exit_code == 0, out.stderr


def test_a_trailing_slash_makes_the_folder_a_prefix_does_not(run_cli: Run, tmp_path: Path) -> None:
    """-o DIR/ names a folder, made as `mkdir -p` would; -o DIR/PREFIX in a folder that does not
    exist is refused (a typo is not made into folders) and nothing is created."""
    made = run_cli("translate", "resnet50", "--format", "chakra-et", "--npus", "2", "-o", f"{tmp_path}/a/b/")
    assert made.exit_code == 0, made.stderr
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir())[:2] == ["resnet50.0.et", "resnet50.1.et"]
    typo = run_cli(
        "translate", "resnet50", "--format", "chakra-et", "--npus", "2", "-o", tmp_path / "c" / "p"
    )
    assert typo.exit_code == 2
    assert "does not exist" in typo.stderr
    assert not (tmp_path / "c").exists()
