"""The trace-set validator at scale: `modtrans validate` streams a set, decoding each distinct node
once and checking each distinct node sequence once (chakra/ranks.py). Its findings must be those of
the validator before it (commit 535fd77), which read every rank whole: that validator's checks
across ranks are kept below, verbatim, as the reference. Only their order changed (the collectives,
T707, before the transfers they leave unmatched, T706).

Speed and memory are measured by bench/bench_llm.py, not asserted here."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from modtrans import chakra
from modtrans.chakra import ranks
from modtrans.chakra.read import Trace, TraceNode, read
from modtrans.chakra.validate import NAMES, RECV, SEND, check_set, one_trace, validate_paths
from modtrans.chakra.validate import _groups as groups_of
from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.plan import Plan
from modtrans.strategy.llm import Layout
from tests import plans
from tests.test_traces import BROKEN, _decoded, _drop_attr, _encoded, _first, _set_attr, gpt2_set

COLL = 7
Groups = Any

# --------------------------------------------- the reference: every rank read whole (535fd77)


def reference(traces: Mapping[str, bytes], groups: bytes | None, groups_path: str) -> list[Diagnostic]:
    """The findings of the validator that decoded every rank whole, T707 moved before T706."""
    read_traces = [read(data, path) for path, data in traces.items()]
    found = [d for trace in read_traces for d in one_trace(trace)]
    ranked = {t.rank: t for t in read_traces if t.rank is not None}
    if ranked:
        missing = [r for r in range(max(ranked) + 1) if r not in ranked]
        if missing:
            some = ", ".join(map(str, missing[:8])) + (" ..." if len(missing) > 8 else "")
            first = next(iter(ranked.values())).path
            found.append(
                diagnostic(
                    "T701",
                    f"{len(missing)} rank file(s) missing from 0..{max(ranked)}: rank {some}",
                    path=first,
                    hint="ASTRA-sim stops: `workload file: PREFIX.N.et does not exist`",
                )
            )
    # Traces where Ranks are meant: _groups reads only the rank numbers, the keys
    table = groups_of(groups, groups_path, ranked, found)  # type: ignore[arg-type]
    whole = {r: t for r, t in ranked.items() if t.problem is None}
    found += _collectives(whole, table, set(ranked))
    found += _transfers(whole)
    return found


def _pg(node: TraceNode) -> int:
    """The group a collective names: 0 for every rank ("" or "0" or absent, as ASTRA-sim reads it)."""
    value = node.value("pg_name", "")
    text = str(value).strip()
    return int(text) if text.isdigit() else (0 if text == "" else -1)


def _collectives(ranked: Mapping[int, Trace], table: Groups | None, present: set[int]) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    sequences: dict[int, dict[int, list[TraceNode]]] = defaultdict(dict)  # group -> rank -> nodes
    unknown: Counter[tuple[str, str]] = Counter()
    for rank, trace in sorted(ranked.items()):
        for node in trace.nodes:
            if node.type != COLL:
                continue
            pg = _pg(node)
            if pg < 0:
                found.append(
                    diagnostic(
                        "T708",
                        f"{node.where()}: pg_name {node.value('pg_name')!r} is no group id",
                        path=trace.path,
                    )
                )
                continue
            if pg > 0:
                if table is None:
                    unknown[(trace.path, "no group file")] += 1
                    continue
                if pg not in table.members:
                    unknown[(trace.path, f"group {pg} is not in {table.path or 'the group file'}")] += 1
                    continue
                if rank not in table.members[pg]:
                    found.append(
                        diagnostic(
                            "T708",
                            f"{node.where()}: rank {rank} is not a member of group {pg}",
                            path=trace.path,
                        )
                    )
                    continue
            sequences[pg].setdefault(rank, []).append(node)
    for (path, why), count in unknown.items():
        found.append(
            diagnostic(
                "T708",
                f"{count} collective(s) name a communicator group, but {why}",
                path=path,
                hint="ASTRA-sim aborts: `communicator group N not found`; pass --comm-groups FILE",
            )
        )
    for pg, by_rank in sorted(sequences.items()):
        members = table.members[pg] if pg and table is not None else tuple(sorted(present))
        found += _agree(pg, [r for r in members if r in ranked], by_rank, ranked)
    return found


def _agree(
    pg: int, members: Iterable[int], by_rank: Mapping[int, list[TraceNode]], ranked: Mapping[int, Trace]
) -> list[Diagnostic]:
    members = list(members)
    if not members:
        return []
    lead = members[0]
    reference = by_rank.get(lead, [])
    group = f"group {pg}" if pg else "the group of every rank"
    found = []
    for rank in members[1:]:
        mine = by_rank.get(rank, [])
        for i, (a, b) in enumerate(zip(reference, mine, strict=False)):
            key_a = (a.value("comm_type"), a.value("comm_size"))
            key_b = (b.value("comm_type"), b.value("comm_size"))
            if key_a != key_b:
                found.append(
                    diagnostic(
                        "T707",
                        f"{b.where()}: collective {i + 1} of {group} is {_show(key_b)} here and "
                        f"{_show(key_a)} on rank {lead} ({a.where()})",
                        path=ranked[rank].path,
                    )
                )
                break
        else:
            if len(mine) != len(reference):
                found.append(
                    diagnostic(
                        "T707",
                        f"rank {rank} issues {len(mine)} collective(s) in {group}, "
                        f"rank {lead} {len(reference)}",
                        path=ranked[rank].path,
                    )
                )
    return found


def _show(key: tuple[object, object]) -> str:
    kind, size = key
    return f"{NAMES.get(kind, kind) if isinstance(kind, int) else kind} of {size} bytes"


def _transfers(ranked: Mapping[int, Trace]) -> list[Diagnostic]:
    sends: dict[tuple[int, int, int, int], list[tuple[Trace, TraceNode]]] = defaultdict(list)
    recvs: dict[tuple[int, int, int, int], list[tuple[Trace, TraceNode]]] = defaultdict(list)
    for rank, trace in ranked.items():
        for node in trace.nodes:
            if node.type not in (SEND, RECV):
                continue
            src = node.value("comm_src", rank)
            dst = node.value("comm_dst", rank)
            key = (node.value("comm_tag", -1), src, dst, node.value("comm_size", 0))
            (sends if node.type == SEND else recvs)[key].append((trace, node))
    found = []
    for mine, theirs, what, partner in ((sends, recvs, "send", "receive"), (recvs, sends, "receive", "send")):
        for key, items in mine.items():
            extra = len(items) - len(theirs.get(key, []))
            for trace, node in items[len(items) - extra :] if extra > 0 else []:
                tag, src, dst, size = key
                close = [k for k in theirs if k[1:3] == (src, dst) and k != key]
                hint = (
                    f"the {partner}s from {src} to {dst} have (tag, size) {[(k[0], k[3]) for k in close[:3]]}"
                    if close
                    else None
                )
                found.append(
                    diagnostic(
                        "T706",
                        f"{node.where()}: {what} of {size} bytes, {src} -> {dst}, tag {tag}, "
                        f"has no matching {partner}",
                        path=trace.path,
                        hint=hint,
                    )
                )
    return found


# ---------------------------------------------------------------------------------- the sets


def _llm_plan(folder: Path, micro: int = 2) -> Plan:
    layout = Layout(npus=8, tp=2, pp=2, dp=2, micro_batch=micro, global_batch=4 * micro)
    return plans.plan(plans.config(folder, plans.TOY), layout, (micro, 16))


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, bytes], bytes]:
    """TP2 x PP2 x DP2: ranks of one stage hold the same nodes but for group ids and peers."""
    outputs = chakra.files(_llm_plan(tmp_path_factory.mktemp("llm")), Path("t"), tick_ns=1.0)
    return {str(p): data for p, data in outputs[:-1]}, outputs[-1][1]


def _region(data: bytes) -> bytes:
    """A trace's bytes after its metadata."""
    from modtrans.integers import decoded

    return data[sum(decoded(data, 0)) :]


def _edit(traces: dict[str, bytes], rank: int, change: Callable[[list[Any]], object]) -> dict[str, bytes]:
    metadata, nodes = _decoded(traces[f"t.{rank}.et"])
    change(nodes)
    return {**traces, f"t.{rank}.et": _encoded(metadata, nodes)}


def _comm(nodes: list[Any], kind: int, name: str) -> Any:
    return next(n for n in nodes if n.type == kind and any(a.name == name for a in n.attr))


def _bump(name: str, kind: int, by: int) -> Callable[[list[Any]], None]:
    """The first `kind` node's int attribute `name` moved by `by` (the same bytes wide)."""

    def change(nodes: list[Any]) -> None:
        node = _comm(nodes, kind, name)
        a = next(a for a in node.attr if a.name == name)
        field = a.WhichOneof("value")
        setattr(a, field, getattr(a, field) + by)

    return change


def _each(change: Callable[[Any], None]) -> Callable[[list[Any]], None]:
    def every(nodes: list[Any]) -> None:
        for node in nodes:
            change(node)

    return every


def _group(value: str) -> Callable[[list[Any]], None]:
    return lambda nodes: _set_attr(_comm(nodes, COLL, "pg_name"), "pg_name", string_val=value)


R = 3  # rank 3 is rank 2's stage and replica group: its bytes are rank 2's but for peers and ids
PLANTED: dict[str, Callable[[dict[str, bytes], bytes], tuple[dict[str, bytes], bytes | None]]] = {
    "T701": lambda t, g: ({k: v for k, v in t.items() if k != f"t.{R}.et"}, g),
    "T702": lambda t, g: ({**t, f"t.{R}.et": t[f"t.{R}.et"][:-5]}, g),
    "T703": lambda t, g: (_edit(t, R, lambda n: setattr(n[7], "id", n[6].id)), g),
    "T704": lambda t, g: (_edit(t, R, lambda n: n[9].data_deps.append(99999)), g),
    "T705": lambda t, g: (_edit(t, R, lambda n: n[0].data_deps.append(n[3].id)), g),
    "T706": lambda t, g: (_edit(t, R, _bump("comm_tag", SEND, 1)), g),
    "T707": lambda t, g: (_edit(t, R, _bump("comm_size", COLL, 2)), g),
    "T708": lambda t, g: (_edit(t, R, _group("9")), g),
    "T708 no id": lambda t, g: (_edit(t, R, _group("x")), g),
    "T708 no file": lambda t, g: (t, None),
    "T709": lambda t, g: (_edit(t, R, _each(lambda x: _drop_attr(x, "num_ops"))), g),
    "T710": lambda t, g: (_edit(t, R, _half_size), g),
    "T711": lambda t, g: (_edit(t, R, _each(lambda x: setattr(x, "duration_micros", 0))), g),
    "T712": lambda t, g: (_edit(t, R, lambda n: _set_attr(_first(n, COLL), "comm_type", int64_val=9)), g),
    "T713": lambda t, g: (_edit(t, R, lambda n: _drop_attr(_first(n, SEND), "comm_tag")), g),
    "T714": lambda t, g: (t, b'{"1": [0, 0]}'),
}


def _half_size(nodes: list[Any]) -> None:
    node = _first(nodes, COLL)
    size = next(a for a in node.attr if a.name == "comm_size").int64_val
    _set_attr(node, "inputs", string_list=[f"{node.name}.payload", str(2 * size)])


def test_the_planted_rank_duplicates_another(llm: tuple[dict[str, bytes], bytes]) -> None:
    traces, _ = llm
    mine, theirs = _region(traces[f"t.{R}.et"]), _region(traces[f"t.{R - 1}.et"])
    assert len(mine) == len(theirs)
    assert 0 < sum(a != b for a, b in zip(mine, theirs, strict=True)) < len(mine) // 100


@pytest.mark.parametrize("case", sorted(PLANTED))
def test_every_planted_defect_is_found_as_reading_every_rank_whole(
    case: str, llm: tuple[dict[str, bytes], bytes]
) -> None:
    traces, groups = PLANTED[case](*llm)
    found = check_set(traces, groups, "t.comm_groups.json")
    assert case.split()[0] in {d.code for d in found}, [str(d) for d in found]
    assert found == reference(traces, groups, "t.comm_groups.json")
    changed = f"t.{R}.et"
    if case not in ("T701", "T708 no file", "T714"):
        assert changed in {d.path for d in found}


@pytest.mark.parametrize("pure", [0, 1 << 40], ids=["numpy", "halving"])
@pytest.mark.parametrize("case", ["T703", "T706", "T707", "T708", "T710", "T712", "T713"])
def test_both_ways_of_finding_differing_bytes_give_the_findings_of_reading_every_rank_whole(
    case: str, pure: int, llm: tuple[dict[str, bytes], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A set compares its first PURE_BYTES by halving and the rest with numpy: each way alone."""
    monkeypatch.setattr(ranks, "PURE_BYTES", pure)
    traces, groups = PLANTED[case](*llm)
    assert check_set(traces, groups, "t.comm_groups.json") == reference(traces, groups, "t.comm_groups.json")


def test_the_stretches_found_by_halving_hold_every_differing_byte(
    llm: tuple[dict[str, bytes], bytes],
) -> None:
    """Against a byte-by-byte comparison: real ranks of one stage, and the same with bytes flipped
    at both ends, at a stretch's edges and in a run longer than a stretch."""
    traces, _ = llm
    a, b = _region(traces[f"t.{R - 1}.et"]), _region(traces[f"t.{R}.et"])
    flipped = bytearray(b)
    for i in (0, 1, ranks.LEAF - 1, ranks.LEAF, 1000, *range(5000, 5000 + 3 * ranks.LEAF), len(b) - 1):
        flipped[i] ^= 0xFF
    for x, y in ((a, b), (a, bytes(flipped)), (a, a)):
        differ = [i for i in range(len(x)) if x[i] != y[i]]
        stretches = ranks._stretches(x, y)
        assert all(hi - lo <= ranks.LEAF and x[lo:hi] != y[lo:hi] for lo, hi in stretches)
        assert stretches == sorted(stretches)
        covered = {i for lo, hi in stretches for i in range(lo, hi)}
        assert set(differ) <= covered
        assert len(covered) <= ranks.LEAF * len(differ)


@pytest.fixture(scope="module")
def base() -> tuple[dict[str, bytes], bytes]:
    return gpt2_set()


@pytest.mark.parametrize("code", ["clean", *sorted(BROKEN)])
def test_the_broken_sets_of_test_traces_give_what_they_gave(
    code: str, base: tuple[dict[str, bytes], bytes]
) -> None:
    traces, groups = base if code == "clean" else BROKEN[code](*base)
    assert check_set(traces, groups, "t.comm_groups.json") == reference(traces, groups, "t.comm_groups.json")


def test_a_cut_trace_a_foreign_file_and_a_rank_twice(llm: tuple[dict[str, bytes], bytes]) -> None:
    traces, groups = llm
    odd = {
        **traces,
        "t.1.et": traces["t.1.et"][:100],  # cut inside its first nodes
        "t.2.et": b"DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n",
        "u/t.3.et": traces["t.5.et"],  # rank 3 twice: the last one read stands for it
        "t.9.et": b"",
    }
    found = check_set(odd, groups, "t.comm_groups.json")
    assert {"T701", "T702"} <= {d.code for d in found}
    assert found == reference(odd, groups, "t.comm_groups.json")


def test_a_mismatched_rank_shows_its_cause_before_the_hangs(
    llm: tuple[dict[str, bytes], bytes], tmp_path: Path
) -> None:
    """A rank of another translation (micro-batch 4, not 2): its collectives differ in size (T707),
    and so its sends and receives find no partner (T706). The cause comes first, in the text report
    too, where each code shows three findings per file."""
    from typer.testing import CliRunner

    from modtrans.cli import app

    traces, groups = llm
    other = chakra.files(_llm_plan(tmp_path, micro=4), Path("t"), tick_ns=1.0)
    for path, data in {**traces, "t.comm_groups.json": groups}.items():
        (tmp_path / path).write_bytes(data)
    (tmp_path / f"t.{R}.et").write_bytes({str(p): d for p, d in other[:-1]}[f"t.{R}.et"])
    found, checked = validate_paths([tmp_path / "t"])
    assert checked == 8
    codes = [d.code for d in found]
    assert codes.index("T707") < codes.index("T706")
    shown = CliRunner().invoke(app, ["validate", str(tmp_path / "t"), "--no-color"], env={"NO_COLOR": "1"})
    assert shown.exit_code == 1
    lines = [line for line in shown.stdout.splitlines() if " T70" in line and ": error" in line]
    assert "T707" in lines[0]
    assert any("T706" in line for line in lines)
    prefixed = {str(tmp_path / p): d for p, d in traces.items()}
    prefixed[str(tmp_path / f"t.{R}.et")] = (tmp_path / f"t.{R}.et").read_bytes()
    assert found == reference(prefixed, groups, str(tmp_path / "t.comm_groups.json"))


def test_a_set_holds_one_programs_template_and_any_order_makes_the_same_bytes(tmp_path: Path) -> None:
    """The encoder drops a program's template once the program's last rank is made, so a set made
    in rank order (as it is written) holds one at a time, not one per pipeline stage; made in any
    other order (the self-check's sample first) the bytes are the same."""
    plan = _llm_plan(tmp_path)
    whole = dict(chakra.files(plan, Path("t"), tick_ns=1.0)[:-1])
    made = chakra.files(plan, Path("t"), tick_ns=1.0, lazy=True)[:-1]
    encoder = made[0][1].batch
    held = []
    for path, make in made:
        assert b"".join(make()) == whole[path]
        held.append(len(encoder.templates))
    assert len(set(plan.program_of)) == 2
    assert held == [1, 1, 1, 0, 1, 1, 1, 0]
    for path, make in reversed(chakra.files(plan, Path("t"), tick_ns=1.0, lazy=True)[:-1]):
        assert b"".join(make()) == whole[path]


def test_pieces_held_past_the_next_rank_are_still_their_ranks(tmp_path: Path) -> None:
    """A program's ranks are filled into one buffer per layout (chakra/patch.py: each rank's values
    written over the last's); what a set hands out (fileio.Part) is the rank's own all the same:
    every rank's pieces made first and held, then each joined, are the bytes of the set made whole."""
    plan = _llm_plan(tmp_path)
    whole = dict(chakra.files(plan, Path("t"), tick_ns=1.0)[:-1])
    made = chakra.files(plan, Path("t"), tick_ns=1.0, lazy=True)[:-1]
    held = [(path, make()) for path, make in made]
    assert len(set(whole.values())) == len(whole)  # the premise: no two ranks alike
    for path, pieces in held:
        assert b"".join(pieces) == whole[path]
