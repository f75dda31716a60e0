"""Property tests: parse(write(w)) == w for generated workloads of every keyword and dialect."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import modtrans
from modtrans.workload import jsonform
from modtrans.workload.model import Dialect, Workload
from tests.strategies import workloads


def _round_trip(workload: Workload, dialect: Dialect) -> None:
    text = modtrans.write(workload, dialect)
    result = modtrans.parse(text)
    assert [d for d in result.diagnostics if d.severity == 1] == []
    assert result.workload == workload
    assert modtrans.write(result.workload, dialect) == text
    assert jsonform.loads(jsonform.dumps(workload)) == (workload, [])


@settings(max_examples=150, deadline=None)
@given(workloads(Dialect.ASTRA_SIM))
def test_astra_sim(workload: Workload) -> None:
    _round_trip(workload, Dialect.ASTRA_SIM)


@settings(max_examples=150, deadline=None)
@given(workloads(Dialect.SIMAI))
def test_simai(workload: Workload) -> None:
    _round_trip(workload, Dialect.SIMAI)


@settings(max_examples=150, deadline=None)
@given(workloads(Dialect.CHAKRA))
def test_chakra(workload: Workload) -> None:
    _round_trip(workload, Dialect.CHAKRA)


@settings(max_examples=100, deadline=None)
@given(workloads(Dialect.ASTRA_SIM), st.sampled_from(["\n", "\r\n"]), st.sampled_from([" ", "\t", " \t\t"]))
def test_lossless_for_any_spacing(workload: Workload, eol: str, sep: str) -> None:
    text = modtrans.write(workload, Dialect.ASTRA_SIM).replace("\t", sep).replace("\n", eol)
    parsed = modtrans.parse(text).workload
    assert parsed == workload
    assert modtrans.write(parsed) == text
