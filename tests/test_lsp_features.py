"""Quick fixes, applied to real broken buffers, leave text that validates clean; completion offers
what each dialect reads, at positions in the real corpus files."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modtrans.comm import Policy
from modtrans.lsp.features import Fix, completions, fixes, looks_like_workload
from modtrans.workload.dialects import CHAKRA_POLICIES
from modtrans.workload.model import Dialect
from modtrans.workload.validate import validate
from tests.conftest import CORPUS

LAYER = "conv1 -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 64 1"


def _apply(text: str, fix: Fix) -> str:
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    for (l0, c0, l1, c1), new in sorted(fix.edits, reverse=True):
        text = text[: offsets[l0] + c0] + new + text[offsets[l1] + c1 :]
    return text


@pytest.mark.parametrize(
    ("broken", "code", "fixed"),
    [
        (f"DATA\n2\n{LAYER}\n", "V201", f"DATA\n1\n{LAYER}\n"),
        (f"DATA\n1\n{LAYER.replace('ALLREDUCE', 'AllReduce')}\n", "V210", f"DATA\n1\n{LAYER}\n"),
        (f"DATTA\n1\n{LAYER}\n", "P110", f"DATA\n1\n{LAYER}\n"),
        (f"DATA\n1\n\n{LAYER}\n", "V250", f"DATA\n1\n{LAYER}\n"),
        (f"DATA\n1\n{LAYER} DATA\n", "V220", f"DATA\n1\n{LAYER}\n"),
        (f"HYBRID_CUSTOMIZED\n1\n{LAYER}\n", "V221", f"HYBRID_CUSTOMIZED\n1\n{LAYER} DATA\n"),
        (f"\ufeffDATA\n1\n{LAYER}\n", "V251", f"DATA\n1\n{LAYER}\n"),
    ],
)
def test_the_preferred_fix_repairs_the_buffer(broken: str, code: str, fixed: str) -> None:
    diagnostic = next(d for d in validate(broken) if d.code == code)
    preferred = [f for f in fixes(broken, diagnostic) if f.preferred]
    assert len(preferred) == 1
    repaired = _apply(broken, preferred[0])
    assert repaired == fixed
    assert [d.code for d in validate(repaired)] == []


def test_sniff() -> None:
    assert looks_like_workload(f"DATA\n1\n{LAYER}\n")
    assert looks_like_workload(f"\ufeffHYBRID_TRANSFORMER model_parallel_NPU_group: 2\n1\n{LAYER}\n")
    assert looks_like_workload(f"DATTA\n1\n{LAYER}\n")  # a typo is still a workload to diagnose
    assert looks_like_workload(f"Foo\n1\n{LAYER}\n")  # count and a layer line
    assert not looks_like_workload("Shopping list\n- eggs\n- milk\n")
    assert not looks_like_workload("")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "DATA",
                "HYBRID_CUSTOMIZED",
                "HYBRID_TRANSFORMER model_parallel_NPU_group: 2",
                "2",
                "x",
                "",
                LAYER,
                LAYER + " DATA",
                LAYER.replace("NONE", "NONNE"),
                "\ufeffDATA",
                "conv -1 1",
                "  \t ",
            ]
        ),
        max_size=6,
    ),
    st.integers(0, 7),
    st.integers(0, 60),
)
def test_features_never_raise_on_any_buffer(rows: list[str], line: int, character: int) -> None:
    from modtrans.lsp.features import formatted, hover, symbols

    text = "\n".join(rows)
    hover(text, line, character)
    symbols(text)
    for dialect in (None, *Dialect):
        for item in completions(text, line, character, dialect):
            assert item.range[0] == line
            assert item.range[1] <= item.range[3]
    formatted(text, None)
    for diagnostic in validate(text):
        for fix in fixes(text, diagnostic):
            _apply(text, fix)


# ------------------------------------------------------------------------------------- completion


def _read(relative: str) -> str:
    return (CORPUS / relative).read_bytes().decode()


def _labels(text: str, line: int, column: int, dialect: Dialect | None = None) -> list[str]:
    return [c.label for c in completions(text, line, column, dialect)]


def _at(text: str, line: int, token: int) -> int:
    """The column of the `token`-th token of a line (the cursor on its first character)."""
    row = text.split("\n")[line]
    return [m.start() for m in re.finditer(r"\S+", row)][token]


PORTABLE = ["NONE", "ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL"]


def test_completion_in_an_astra_sim_file() -> None:
    text = _read("astra-sim/Resnet50_DataParallel.txt")
    assert _labels(text, 0, 0) == [p.value for p in Policy]  # every keyword, in the model's order
    assert _labels(text, 0, 2) == [p.value for p in Policy]  # in the middle of the word too
    for token in (3, 6, 9):  # the three comm-type fields: what ASTRA-sim 1.0 reads
        assert _labels(text, 2, _at(text, 2, token)) == PORTABLE
    for token in (0, 1, 2, 4, 5, 11):  # name, reserved, times, sizes: nothing to offer
        assert _labels(text, 2, _at(text, 2, token)) == []
    assert _labels(text, 1, 0) == []  # the layer count
    assert _labels(text, 2, len(text.split("\n")[2]) + 1) == []  # a 13th field outside HYBRID_CUSTOMIZED
    assert _labels(text.replace("DATA", "DATA ", 1), 0, 5) == []  # DATA takes no header key


def test_completion_replaces_the_whole_token_under_the_cursor() -> None:
    text = _read("astra-sim/Resnet50_DataParallel.txt")
    row = text.split("\n")[2]
    start = _at(text, 2, 9)
    (item, *_) = completions(text, 2, start + 3)
    assert item.range == (2, start, 2, start + len(row[start:].split()[0]))
    end_of_line = len(row)
    assert completions(text, 0, 4)[0].range == (0, 0, 0, 4)  # typing at the end of `DATA`
    assert all(c.range == (2, end_of_line, 2, end_of_line) for c in completions(text, 2, end_of_line))


def test_completion_in_a_simai_file() -> None:
    text = _read("SimAI/workload_analytical.txt")
    offered = _labels(text, 2, _at(text, 2, 9))
    assert offered[:5] == PORTABLE
    assert {"ALLREDUCE_EP", "ALLGATHER_DP_EP", "ALLTOALL_EP", "REDUCESCATTER_DP_EP"} <= set(offered)
    assert "BROADCAST" not in offered  # no collective for any consumer
    assert "ALLREDUCEALLTOALL" not in offered  # ASTRA-sim panics on it
    header = text.split("\n")[0]
    assert _labels(text, 0, len(header)) == []  # every key is there (`pp_comm 5` without a colon too)
    cut = header.replace(" ga: 24 all_gpus: 9216", "")
    assert _labels(text.replace(header, cut), 0, len(cut)) == ["ga:", "all_gpus:"]
    assert _labels(text.replace(header, cut + " ep:"), 0, len(cut) + 4) == []  # a value comes next


def test_completion_in_a_chakra_file() -> None:
    text = _read("chakra/AllGather_64KB.txt")
    keywords = _labels(text, 0, 0, Dialect.CHAKRA)
    assert keywords == [p.value for p in Policy if p in CHAKRA_POLICIES]
    assert "HYBRID_TRANSFORMER" not in keywords  # Chakra's converter rejects it (D301)
    assert _labels(text, 2, _at(text, 2, 9), Dialect.CHAKRA) == PORTABLE
    assert _labels(text, 2, _at(text, 2, 9), Dialect.SIMAI)[5:] != []  # the same file read for SimAI


def test_header_keys_follow_the_keyword_and_the_dialect() -> None:
    text = _read("astra-sim/Transformer_HybridParallel_Fwd_In_Bckwd.txt")
    header = text.split("\n")[0]
    bare = header.split()[0] + " "
    bare_text = text.replace(header, bare)
    astra = ["model_parallel_NPU_group:", "checkpoints:", "checkpoint_initiates:"]
    assert _labels(bare_text, 0, len(bare)) == astra
    simai = _labels(bare_text, 0, len(bare), Dialect.SIMAI)
    assert simai == [*astra, "ep:", "pp:", "vpp:", "ga:", "all_gpus:", "pp_comm:"]
    assert _labels(bare_text, 0, len(bare), Dialect.CHAKRA) == []
    dlrm = _read("astra-sim/DLRM_HybridParallel.txt")
    end = len(dlrm.split("\n")[0].rstrip())
    assert _labels(dlrm, 0, end + 1) == []  # ASTRA-sim reads `HYBRID_DLRM 4` by position
    assert _labels(dlrm, 0, end + 1, Dialect.SIMAI) == ["DLRM_LAST_BOTTOM_LAYER:"]


def test_the_per_layer_parallelism_under_hybrid_customized() -> None:
    text = _read("astra-sim/sample_per_layer_parallel_HybridCustomized.txt")
    assert _labels(text, 2, _at(text, 2, 12)) == ["DATA", "MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA"]
    assert _labels(text, 2, _at(text, 2, 3)) == PORTABLE


def test_completion_in_a_new_buffer() -> None:
    assert _labels("", 0, 0) == [p.value for p in Policy]
    assert _labels("DATA\n1\n", 2, 0) == []  # a layer name comes first
    assert _labels("DATA\n1\nconv -1 5 ", 2, 10) == PORTABLE
    assert _labels("DATA\n1\nconv -1 5 ", 7, 0) == []  # past the end
