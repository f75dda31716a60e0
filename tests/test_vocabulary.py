"""workload/vocabulary.py, the one table of header keys and one of layer columns (issue 23): the
grammar spells the same keys, and every reader of the format takes its names from the tables."""

from __future__ import annotations

import re

from modtrans.comm import Policy
from modtrans.diff import FIELDS, GROUPS
from modtrans.lsp import features
from modtrans.workload import jsonform, parse, vocabulary, write
from modtrans.workload.model import Dialect, Header


def test_the_grammars_key_terminals_spell_exactly_the_tables_keys() -> None:
    keys = {name: re.compile(regex) for name, regex in parse._terminals().items() if name.startswith("KEY_")}
    for key in vocabulary.HEADER_KEYS:
        matched = [name for name, regex in keys.items() if regex.fullmatch(key.key)]
        assert len(matched) == 1, (key.key, matched)
    spelled = {k.key for k in vocabulary.HEADER_KEYS}
    for name, regex in keys.items():  # each terminal's alternatives, read off its regex
        words = re.findall(r"[A-Za-z_]+", regex.pattern.replace("(?:", "(").split(":")[0])
        assert words, name
        assert {f"{w}:" for w in words} <= spelled, name


def test_every_header_field_has_one_key() -> None:
    import dataclasses

    parameters = {f.name for f in dataclasses.fields(Header)} - {"policy", "extra", "span", "layout"}
    assert parameters == set(vocabulary.BY_FIELD)


def test_the_writer_puts_every_key_where_the_table_says() -> None:
    header = Header(
        Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD,
        **{k.field: (1, 0) if k.kind == "list" else 3 for k in vocabulary.HEADER_KEYS},  # type: ignore[arg-type]
    )
    tokens = write.header_tokens(header, Dialect.SIMAI)
    assert [t for t in tokens if t.endswith(":")] == [k.key for k in vocabulary.WRITTEN]


def test_the_columns_names_in_each_scheme() -> None:
    """The parser's message names, the JSON paths, diff's --fields and the hover titles: one row
    each in vocabulary.COLUMNS."""
    assert len(vocabulary.COLUMNS) == 13
    assert [c.index for c in vocabulary.COLUMNS] == list(range(13))
    assert parse._FIELD_NAMES[2] == "forward compute time"
    assert jsonform._FIELD_PATHS[10] == ("weight_grad", "comm_size")
    assert FIELDS[-3:] == ("update", "reserved", "policy")
    assert GROUPS["compute"] == ("fwd_compute", "ig_compute", "wg_compute")
    assert features._FIELDS[11][0] == "weight-gradient update time"
    assert vocabulary.NUMBERS == (1, 2, 4, 5, 7, 8, 10, 11)
    assert vocabulary.COMMS == (3, 6, 9)
    assert vocabulary.PHASE_COLUMNS["input_grad"] == (5, 6, 7)


def test_the_language_server_completes_the_keys_each_consumer_reads() -> None:
    assert features.header_keys(Policy.HYBRID_TRANSFORMER, Dialect.ASTRA_SIM) == ["model_parallel_NPU_group:"]
    assert features.header_keys(Policy.HYBRID_DLRM, Dialect.SIMAI) == ["DLRM_LAST_BOTTOM_LAYER:"]
    assert features.header_keys(Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, Dialect.CHAKRA) == []
    assert len(features.header_keys(Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, Dialect.SIMAI)) == 9
