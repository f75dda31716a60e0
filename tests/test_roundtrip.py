"""Lossless reading and writing of real files, and the canonical writer per dialect."""

from __future__ import annotations

from pathlib import Path

import pytest

import modtrans
from modtrans.comm import CommType, Policy
from modtrans.workload.model import Dialect, Header, Layer, Phase, Workload, layer_tokens
from modtrans.workload.write import write
from tests.conftest import CORPUS, REFERENCE, corpus_files, ids, reference_files


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


@pytest.mark.parametrize("path", corpus_files(), ids=ids(corpus_files(), CORPUS))
def test_corpus_round_trips_byte_for_byte(path: Path) -> None:
    text = _text(path)
    result = modtrans.parse(text)
    assert result.workload is not None
    assert modtrans.write(result.workload) == text


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="../shared/reference/workloads not present")
def test_every_reference_file_round_trips() -> None:
    files = reference_files()
    assert len(files) == 64  # the collection's MANIFEST lists 64 files
    for path in files:
        text = _text(path)
        result = modtrans.parse(text)
        assert result.workload is not None, path
        assert modtrans.write(result.workload) == text, path


@pytest.mark.parametrize("path", corpus_files(), ids=ids(corpus_files(), CORPUS))
def test_canonical_text_means_the_same_and_is_stable(path: Path) -> None:
    workload = modtrans.parse(_text(path)).workload
    assert workload is not None
    dialect = workload.dialect
    assert dialect is not None
    canonical = modtrans.write(workload, dialect)
    again = modtrans.parse(canonical).workload
    assert again == workload
    assert modtrans.write(again, dialect) == canonical  # a fixed point
    assert canonical.endswith("\n")
    assert "\r" not in canonical
    assert "\n\n" not in canonical
    assert all(line == line.rstrip(" \t") for line in canonical.splitlines())
    assert canonical.splitlines()[1] == str(len(workload.layers))


def test_resnet_canonical_astra_sim_form() -> None:
    text = _text(CORPUS / "astra-sim" / "Resnet50_DataParallel.txt")
    workload = modtrans.parse(text).workload
    assert workload is not None
    canonical = modtrans.write(workload, "astra-sim")
    lines = canonical.splitlines()
    assert lines[:3] == [
        "DATA",
        "54",
        "conv1\t-1\t13003\tNONE\t0\t12864\tNONE\t0\t32291\tALLREDUCE\t37632\t3229",
    ]
    # The source uses CRLF and runs of tabs; the same fields, normalised:
    assert [line.split() for line in text.splitlines()] == [line.split() for line in lines]


def test_header_forms_per_dialect() -> None:
    dlrm = modtrans.parse(_text(CORPUS / "astra-sim" / "DLRM_HybridParallel.txt")).workload
    assert dlrm is not None
    assert dlrm.header.dlrm_last_bottom_layer == 4
    assert modtrans.write(dlrm, "astra-sim").splitlines()[0] == "HYBRID_DLRM 4"
    assert modtrans.write(dlrm, "chakra").splitlines()[0] == "HYBRID_DLRM 4"
    assert modtrans.write(dlrm, "simai").splitlines()[0] == "HYBRID_DLRM DLRM_LAST_BOTTOM_LAYER: 4"

    simai = modtrans.parse(_text(CORPUS / "SimAI" / "workload_analytical.txt")).workload
    assert simai is not None
    assert simai.dialect is Dialect.SIMAI
    header = simai.header
    assert (header.model_parallel_group, header.ep, header.pp, header.vpp, header.ga) == (2, 16, 12, 8, 24)
    assert (header.all_gpus, header.pp_comm, header.checkpoints) == (9216, 50331648, ())
    assert modtrans.write(simai, "simai").splitlines()[0] == (
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 16 pp: 12 vpp: 8 ga: 24 "
        "all_gpus: 9216 checkpoints: 0 checkpoint_initiates: 0 pp_comm: 50331648"
    )
    with pytest.raises(modtrans.DiagnosticError) as refused:
        modtrans.write(simai, "astra-sim")
    assert {d.code for d in refused.value.diagnostics} == {"D310"}


def test_checkpoint_lists_are_indices_after_the_count() -> None:
    path = CORPUS / "astra-sim" / "Transformer_HybridParallel_Fwd_In_Bckwd.txt"
    workload = modtrans.parse(_text(path)).workload
    assert workload is not None
    header = workload.header
    # "checkpoints: 2 2 11 checkpoint_initiates: 2 19 10" (workload-format.md section 4)
    assert header.checkpoints == (2, 11)
    assert header.checkpoint_initiates == (19, 10)
    assert header.model_parallel_group == 4


def test_edited_workload_keeps_the_spacing_of_untouched_lines() -> None:
    from dataclasses import replace

    text = _text(CORPUS / "astra-sim" / "Resnet50_DataParallel.txt")
    workload = modtrans.parse(text).workload
    assert workload is not None
    first = workload.layers[0]
    edited = replace(workload, layers=(replace(first, update_time=9999), *workload.layers[1:]))
    out = modtrans.write(edited).split("\r\n")
    original = text.split("\r\n")
    assert original[2].endswith("\t3229")
    assert out[2] == original[2][: -len("3229")] + "9999"
    assert out[3:] == original[3:]
    shorter = replace(workload, layers=workload.layers[:-1])
    lines = modtrans.write(shorter).split("\r\n")
    assert lines[1] == "53"
    assert lines[-1] == original[-2]


def test_canonical_and_json_forms_agree(tmp_path: Path) -> None:
    from modtrans.workload import jsonform

    text = _text(CORPUS / "astra-sim" / "sample_per_layer_parallel_HybridCustomized.txt")
    workload = modtrans.parse(text).workload
    assert workload is not None
    back, problems = jsonform.loads(jsonform.dumps(workload))
    assert problems == []
    assert back == workload
    assert [layer.policy for layer in workload.layers][:2] == [
        modtrans.Policy.HYBRID_DATA_MODEL,
        modtrans.Policy.HYBRID_MODEL_DATA,
    ]


@pytest.mark.parametrize("path", corpus_files(), ids=ids(corpus_files(), CORPUS))
def test_the_streamed_json_is_what_json_dumps_writes(path: Path) -> None:
    """`convert --to json` writes the document layer by layer (the indented encoder of json holds
    every token at once); the bytes are json.dumps's, indent 2, for every real file and for none."""
    import dataclasses
    import json

    from modtrans.workload import jsonform

    workload = modtrans.parse(_text(path)).workload
    assert workload is not None
    for case in (workload, dataclasses.replace(workload, layers=())):
        assert "".join(jsonform.chunks(case)) == json.dumps(jsonform.to_dict(case), indent=2) + "\n"


def test_a_layer_line_spells_each_keyword_as_the_vocabulary_does() -> None:
    """The writer spells a collective and a policy by str() (workload/model.py layer_tokens): each
    member's str() is its value, a plain str, for every keyword the reader knows."""
    for comm in CommType:
        for policy in Policy:
            layer = Layer("x", Phase(1, comm, 2), Phase(3, comm, 4), Phase(5, comm, 6), 7, policy=policy)
            tokens = layer_tokens(layer)
            assert tokens == [
                "x",
                "-1",
                "1",
                comm.value,
                "2",
                "3",
                comm.value,
                "4",
                "5",
                comm.value,
                "6",
                "7",
                policy.value,
            ]
            assert all(type(t) is str for t in tokens)


def test_lines_that_share_phases_keep_their_own_names_and_fields() -> None:
    """The canonical writer spells the fields after the name once for lines holding the same Phase
    objects (a projection's micro-batch copies): a shared phase under another name, update,
    reserved field or policy is still written as that line says."""
    fwd, ig, wg = Phase(10, CommType.ALLREDUCE, 64), Phase(20), Phase(30, CommType.ALLGATHER, 8)
    layers = (
        Layer("a", fwd, ig, wg, 5),
        Layer("a.mb1", fwd, ig, wg, 5),
        Layer("b", fwd, ig, wg, 6),
        Layer("c", fwd, ig, wg, 5, reserved=3),
        Layer("d", fwd, ig, wg, 5, policy=Policy.DATA),
        Layer("e", fwd, ig, wg, 5, policy=Policy.MODEL),
    )
    text = write(Workload(Header(Policy.HYBRID_CUSTOMIZED), layers), Dialect.ASTRA_SIM)
    fields = "10\tALLREDUCE\t64\t20\tNONE\t0\t30\tALLGATHER\t8"
    assert text.split("\n")[2:-1] == [
        f"a\t-1\t{fields}\t5",
        f"a.mb1\t-1\t{fields}\t5",
        f"b\t-1\t{fields}\t6",
        f"c\t3\t{fields}\t5",
        f"d\t-1\t{fields}\t5\tDATA",
        f"e\t-1\t{fields}\t5\tMODEL",
    ]
