"""Quick fixes, applied to real broken buffers, leave text that validates clean."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modtrans.lsp.features import Fix, fixes, looks_like_workload
from modtrans.workload.validate import validate

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
    formatted(text, None)
    for diagnostic in validate(text):
        for fix in fixes(text, diagnostic):
            _apply(text, fix)
