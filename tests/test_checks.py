"""Diagnostics on invalid fixtures (positions as tuples) and on the real corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

import modtrans
from modtrans.diagnostics import CATALOG, Severity
from modtrans.workload.checks import REGISTRY
from modtrans.workload.load import validate_file
from tests.conftest import CORPUS, INVALID, REFERENCE, corpus_files, ids, reference_files

INVALID_CASES = sorted(INVALID.glob("*.txt"))


def _expected(case: Path) -> list[tuple[int, int, str]]:
    rows = []
    for line in case.with_suffix(".diagnostics").read_text().split("\n"):
        if line.strip():
            where, code = line.split()
            row, column = where.split(":")
            rows.append((int(row), int(column), code))
    return rows


@pytest.mark.parametrize("case", INVALID_CASES, ids=[c.stem for c in INVALID_CASES])
def test_invalid_fixture_gives_exactly_the_expected_diagnostics(case: Path) -> None:
    _, found = validate_file(case)
    got = [(d.span.line, d.span.column, d.code) for d in found if d.span is not None]
    assert got == _expected(case)
    assert all(d.span is not None for d in found)


# Findings on real files that the files' own provenance explains (fixtures/workloads/corpus/MANIFEST.md):
EXPLAINED = {
    # "declared layer count 839 but only 33 layer lines": the one real error in the collection.
    "aicb/L65B-M1-C05_Llama65B_megatron_tp8_pp1_mbs1_A100.txt": {"V201"},
    # "HYBRID_TRANSFORMER header WITHOUT model_parallel_NPU_group"
    "astra-sim/history/9ccbd7e/Transformer_HybridParallel.txt": {"V240", "V230"},
    # "header has checkpoints/checkpoint_initiates but NO model_parallel_NPU_group"
    "astra-sim/history/165211c/Transformer_HybridParallel_Fwd_In_Bckwd.txt": {"V240"},
    "astra-sim/history/f24cf9e/Transformer_HybridParallel_Fwd_In_Bckwd.txt": {"V240"},
    # "layer names not unique (layernorm2 twice)"
    "astra-sim/Transformer_HybridParallel.txt": {"V230"},
    "chakra/Transformer_HybridParallel.txt": {"V230"},
    # "uses BROADCAST comm type (unknown to every consumer)"; old short header (SimAI warns); the
    # grad_norm line's parameter all-gather in the forward column (the tensor group for SimAI)
    "aicb/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt": {"D303", "D307", "V230", "D312"},
    "aicb/G13B-M1-C02_GPT13B_megatron_tp8_pp1_mbs1_sp_A100.txt": {"D303", "D307", "V230", "D312"},
}


@pytest.mark.parametrize("path", corpus_files(), ids=ids(corpus_files(), CORPUS))
def test_corpus_has_no_errors_in_its_own_dialect(path: Path) -> None:
    name = str(path.relative_to(CORPUS))
    _, found = validate_file(path)
    errors = {d.code for d in found if d.severity is Severity.ERROR}
    assert errors == ({"V201"} if name.startswith("aicb/L65B-M1-C05") else set())
    if name in EXPLAINED:
        assert EXPLAINED[name] <= {d.code for d in found}


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="../shared/reference/workloads not present")
def test_reference_collection_errors_are_only_the_known_one() -> None:
    with_errors = []
    for path in reference_files():
        _, found = validate_file(path)
        if any(d.severity is Severity.ERROR for d in found):
            with_errors.append(path.name)
    assert with_errors == ["L65B-M1-C05_Llama65B_megatron_tp8_pp1_mbs1_A100.txt"]


def test_count_mismatch_on_the_real_file_names_both_numbers() -> None:
    path = CORPUS / "aicb" / "L65B-M1-C05_Llama65B_megatron_tp8_pp1_mbs1_A100.txt"
    _, found = validate_file(path)
    (v201,) = [d for d in found if d.code == "V201"]
    assert v201.span is not None
    assert (v201.span.line, v201.span.column) == (2, 1)
    assert "839" in v201.message
    assert "33" in v201.message


def test_duplicate_names_reported_once_per_name() -> None:
    _, found = validate_file(CORPUS / "astra-sim" / "Transformer_HybridParallel.txt")
    dups = [d for d in found if d.code == "V230"]
    assert [(d.span.line if d.span else 0) for d in dups] == [30]
    assert "layernorm2" in dups[0].message
    assert "line 21" in dups[0].message


def test_chakra_dialect_reports_what_chakra_rejects_or_changes() -> None:
    path = CORPUS / "astra-sim" / "Transformer_HybridParallel.txt"
    _, found = validate_file(path, dialect="chakra")
    assert [d.code for d in found if d.severity is Severity.ERROR] == ["D301"]
    text = "MODEL\n2\na -1 1 NONE 0 1 NONE 0 1 NONE 0 1\nb -1 1 ALLGATHER 8 1 NONE 0 1 NONE 0 1\n\n"
    codes = [(d.code, d.span.line if d.span else 0) for d in modtrans.validate(text, dialect="chakra")]
    # MODEL emits fwd nodes for every layer and ig nodes from layer 1 on: three NONE phases become
    # all-reduces (a fwd, b ig) -- b's fwd is a real ALLGATHER; the trailing blank line is fatal.
    assert ("D303", 3) in codes
    assert ("D303", 4) in codes
    assert sum(code == "D303" for code, _ in codes) == 2
    assert ("D304", 5) in codes


def test_astra_sim_dialect_rejects_simai_long_header() -> None:
    _, found = validate_file(CORPUS / "SimAI" / "workload_analytical.txt", dialect="astra-sim")
    assert "D302" in {d.code for d in found if d.severity is Severity.ERROR}
    d303 = [d for d in found if d.code == "D303"]
    assert d303
    assert all("SimAI-only" in d.message for d in d303)


def test_every_registered_check_is_catalogued_and_documented() -> None:
    for code in REGISTRY:
        assert code in CATALOG
        assert CATALOG[code].explanation


def test_unknown_comm_type_suggests_the_nearest_spelling() -> None:
    found = modtrans.validate("DATA\n1\na -1 1 NONE 0 1 NONE 0 1 all_reduce 8 1\n")
    (d,) = found
    assert d.code == "V210"
    assert d.hint is not None
    assert "ALLREDUCE" in d.hint


@pytest.mark.parametrize("field", ["DATA", "BOGUS"])
def test_a_13th_field_outside_hybrid_customized_is_one_finding_in_one_wording(field: str) -> None:
    """V220 is reported by the check when the field is a parallelism keyword (the layer is built)
    and by the parser when it is not (no layer is): the same words, the layer named, either way."""
    found = modtrans.validate(f"DATA\n1\nconv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1 {field}\n")
    (d,) = found
    assert d.code == "V220"
    assert d.message == f"layer `conv1` has a 13th field `{field}` but the header is DATA"
    assert d.hint == "remove the 13th field"
    assert d.span is not None
    assert (d.span.line, d.span.column) == (3, 45)


def test_one_bad_line_does_not_hide_the_others() -> None:
    good = "{} -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1"
    lines = [good.format("a"), "bad -1 1 NONE 0 1", good.format("c"), "bad2 -1 1 NONE 0 1 NONE 0 1 XX 8 1"]
    text = "DATA\n4\n" + "\n".join(lines) + "\n"
    found = modtrans.validate(text)
    assert [(d.code, d.span.line if d.span else 0) for d in found] == [("P130", 4), ("V210", 6)]


def test_an_update_time_of_zero_after_a_collective_is_for_astra_sim_only() -> None:
    """D313: ASTRA-sim 1.0 aborts on it (its event queue's assertion, found running it); SimAI runs."""
    text = (INVALID / "update_zero_after_a_collective.txt").read_text()
    assert [d.code for d in modtrans.validate(text, dialect="astra-sim")] == ["D313", "D313"]
    assert "D313" not in {d.code for d in modtrans.validate(text, dialect="simai")}


@pytest.mark.parametrize(
    "args",
    [
        ("gpt2", "-p", "HYBRID_TRANSFORMER", "--npus", "8", "--model-parallel-group", "4"),
        ("gpt2", "--tp", "2", "--sp", "--dp", "2"),
        ("gpt2", "--dp", "4", "--zero", "2"),
        ("resnet50", "--npus", "8", "--like", str(CORPUS / "astra-sim" / "Resnet50_DataParallel.txt")),
        ("bert-base", "-p", "HYBRID_DATA_MODEL", "--npus", "8", "--model-parallel-group", "2"),
        ("gpt2", "--tp", "2", "--dp", "4", "--recompute", "full"),
    ],
    ids=["transformer-keyword", "tp-sp", "zero-2", "resnet50-reference", "bert-hybrid", "recompute-full"],
)
def test_what_we_write_for_astra_sim_never_stops_it(args: tuple[str, ...], tmp_path: Path) -> None:
    """Every ASTRA-sim 1.0 file we translate has a positive update time wherever a layer has a
    collective (D313: the .pre / .post lines of further collectives and a tied LM head had 0), and
    the header it reads whole (V240: --recompute full's FWD_IN_BCKWD had no checkpoint lists, and no
    pass of ASTRA-sim 1.0 finished on it)."""
    from typer.testing import CliRunner

    from modtrans.cli import app
    from modtrans.simulate import astra1

    out = tmp_path / "w.txt"
    done = CliRunner().invoke(app, ["translate", *args, "-o", str(out)])
    assert done.exit_code == 0, done.output
    _, found = validate_file(out, dialect="astra-sim")
    assert not {"D313", *astra1.CANNOT_RUN} & {d.code for d in found}


@pytest.mark.parametrize(
    ("size", "flagged"),
    [(2**31 - 1, False), (2**31, True), (2**32, True), (3_235_072_000, True)],
)
def test_a_collective_over_an_ints_range_is_one_astra_sim_1_cannot_hold(size: int, flagged: bool) -> None:
    """D315: ASTRA-sim-1.0 07d5d19 (AnalyticalAstra) on one DATA line, switch:8:300, 2026-12-07: an
    all-reduce of 2,147,483,647 B took 11.678 ms, of 2,147,483,648 B the run aborted (its event
    queue's assertion), of 4,294,967,296 B it finished with no communication; GPT-3 13B at --tp 8
    --dp 2, whose embedding line carries the 3,235,072,000 B gradient all-reduce, aborted after its
    pass. SimAI 1.6 ran the same sizes in proportion (10.211, 10.211, 20.420 ms)."""
    text = f"DATA\n1\nl0\t-1\t1000\tNONE\t0\t1000\tNONE\t0\t1000\tALLREDUCE\t{size}\t1\n"
    found = [d for d in modtrans.validate(text, dialect="astra-sim") if d.code == "D315"]
    assert bool(found) is flagged
    if flagged:
        assert f"{size:,} B" in found[0].message
    header = "HYBRID_TRANSFORMER model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8"
    simai = text.replace("DATA", header, 1)
    assert "D315" not in {d.code for d in modtrans.validate(simai, dialect="simai")}


def test_a_keyword_not_a_transformers_is_one_simai_cannot_run() -> None:
    """D314: SimAI reads its header's keys only under the transformer keywords, and its analytical
    report divides by them: SimAI 1.6 (f5efb5a9, SimAI_analytical) aborted with SIGFPE after the
    pass on AICB's own MICRO micro test, as on DATA and the other keywords (found running it), and
    ran AICB's GPT-13B (HYBRID_TRANSFORMER_FWD_IN_BCKWD)."""
    micro = (CORPUS / "aicb" / "all_gather.txt").read_text()
    assert "D314" in {d.code for d in modtrans.validate(micro, dialect="simai")}
    assert "D314" not in {d.code for d in modtrans.validate(micro, dialect="astra-sim")}
    gpt = (CORPUS / "aicb" / "G13B-M1-C02_GPT13B_megatron_tp8_pp1_mbs1_sp_A100.txt").read_text()
    assert "D314" not in {d.code for d in modtrans.validate(gpt, dialect="simai")}
