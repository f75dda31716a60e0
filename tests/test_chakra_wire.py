"""The trace writer's hand-made wire bytes (chakra/wire.py) against protobuf's own: every node of
real trace sets, parsed by protobuf into the schema's message and serialized again, must come back
byte for byte (protobuf writes one canonical form), and the large-set self-check (over
outputs.SELF_CHECK ranks: a trace of each program, and the plan's pairing) must agree with the
validator reading every rank whole."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

import modtrans
from modtrans import chakra, integers, outputs
from modtrans.chakra.patch import Template
from modtrans.chakra.read import attributes, read
from modtrans.chakra.schema import schema
from modtrans.chakra.validate import check_set
from modtrans.plan import Direction, Plan, Purpose, Transfer

GPT2 = Path(__file__).parent.parent / "fixtures" / "configs" / "gpt2.json"


def _records(data: bytes) -> list[bytes]:
    """A trace's messages, the metadata first, each without its length prefix."""
    out, at = [], 0
    while at < len(data):
        head = integers.decoded_or_none(data, at)
        assert head is not None
        length, start = head
        out.append(data[start : start + length])
        at = start + length
    return out


def _translate(folder: Path, **layout: object) -> Plan:
    result = modtrans.translate(
        GPT2,
        seq_len=128,
        format="chakra-et",
        output=folder / "t",
        **layout,
    )
    assert result.plan is not None
    return result.plan


@pytest.mark.parametrize(
    "layout",
    [
        # an interleaved pipeline with a data-parallel axis: groups that differ between a program's ranks
        {"tp": 2, "pp": 2, "dp": 2, "vpp": 2, "schedule": "interleaved", "global_batch": 8, "sp": True},
        # two passes, network dims (involved_dim bool lists), ZeRO-3's collectives
        {"tp": 2, "dp": 2, "zero": 3, "passes": 2, "network_dims": [2, 2], "global_batch": 4},
    ],
    ids=["interleaved-dp", "passes-dims-zero3"],
)
def test_every_node_is_what_protobuf_writes(layout: dict[str, object], tmp_path: Path) -> None:
    plan = _translate(tmp_path, **layout)
    node = schema().Node
    count = 0
    for path in sorted(tmp_path.glob("t.*.et")):
        for body in _records(path.read_bytes())[1:]:
            assert node.FromString(body).SerializeToString() == body
            count += 1
    assert count > 100 * plan.npus


def test_a_large_set_is_checked_as_the_whole_set_is(tmp_path: Path) -> None:
    """72 ranks (TP 2 x PP 4 x DP 9), over SELF_CHECK: nothing found, by the sample and the plan's
    pairing as by decoding every rank whole; a receive broken in the plan is found."""
    layout = {"tp": 2, "pp": 4, "dp": 9, "global_batch": 36, "micro_batch": 1}
    plan = _translate(tmp_path, **layout)
    assert plan.npus > outputs.SELF_CHECK
    written = {str(p): p.read_bytes() for p in tmp_path.glob("t.*.et")}
    assert check_set(written, (tmp_path / "t.comm_groups.json").read_bytes(), "t.comm_groups.json") == []
    made = chakra.files(plan, tmp_path / "u", tick_ns=1.0, lazy=True)
    assert outputs.checked(plan, made) == []
    program = list(plan.programs[1])
    i = next(i for i, op in enumerate(program) if isinstance(op, Transfer) and op.direction is Direction.RECV)
    op = program[i]
    assert isinstance(op, Transfer)
    program[i] = dataclasses.replace(op, tag=op.tag + 10**6)
    broken = dataclasses.replace(plan, programs=(plan.programs[0], tuple(program), *plan.programs[2:]))
    made = chakra.files(broken, tmp_path / "v", tick_ns=1.0, lazy=True)
    assert {d.code for d in outputs.checked(broken, made)} == {"T706"}


def test_a_large_sets_quick_check_reads_structure_and_full_reads_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over SELF_CHECK, the default (quick) self-check decodes the sampled traces and checks their
    graphs: a patched trace one byte short is T702. Node attributes are --check full's: a tick so
    short that every compute's whole microseconds are 0 is T711 there, and not in the quick check
    (the encoder writes every node of a kind alike: test_chakra checks one of each, node by node)."""
    plan = _translate(tmp_path, tp=2, pp=4, dp=9, global_batch=36, micro_batch=1)
    assert plan.npus > outputs.SELF_CHECK
    ticked = chakra.files(plan, tmp_path / "u", tick_ns=1e-9, lazy=True)
    assert outputs.checked(plan, ticked) == []
    assert {d.code for d in outputs.checked(plan, ticked, full=True)} == {"T711"}
    fill = Template.fill

    def short(self: Template, values: Sequence[bytes], head: Sequence[bytes] = ()) -> list[bytes | bytearray]:
        pieces = fill(self, values, head)
        return [*pieces[:-1], pieces[-1][:-1]]

    monkeypatch.setattr(Template, "fill", short)
    cut = chakra.files(plan, tmp_path / "v", tick_ns=1.0, lazy=True)
    assert {d.code for d in outputs.checked(plan, cut)} == {"T702"}


def test_a_trace_reads_alike_alone_bare_and_with_its_set(tmp_path: Path) -> None:
    """read() decodes a sampled trace (alone) and the quick check's (bare) into one message reused
    node by node, from a view of the file's bytes, where a whole set's nodes are decoded once
    each and shared: every node of a real set, read each way, is what protobuf decodes from that
    node's bytes alone, and a node protobuf cannot decode is T702 at its own byte each way."""
    _translate(tmp_path, tp=2, pp=2, dp=2, global_batch=8, sp=True)
    node = schema().Node
    for path in sorted(tmp_path.glob("t.*.et")):
        data = path.read_bytes()
        decoded = [node.FromString(body) for body in _records(data)[1:]]
        expected = [
            (m.id, m.name, m.type, tuple(m.data_deps), tuple(m.ctrl_deps), m.duration_micros) for m in decoded
        ]
        ways = read(data, str(path)), read(data, str(path), alone=True), read(data, str(path), bare=True)
        for trace in ways:
            assert trace.problem is None
            assert [
                (n.id, n.name, n.type, n.data_deps, n.ctrl_deps, n.duration) for n in trace.nodes
            ] == expected
        for trace in ways[:2]:
            assert [n.attrs for n in trace.nodes] == [attributes(m) for m in decoded]
        assert all(n.attrs == {} for n in ways[2].nodes)
    at = ways[0].nodes[5].offset
    body = integers.decoded(data, at)[1]
    broken = data[:body] + b"\x07" + data[body + 1 :]  # field 0, wire type 7: no message has it
    for options in ({}, {"alone": True}, {"bare": True}):
        trace = read(broken, str(path), **options)
        assert trace.problem is not None
        assert trace.problem.code == "T702"
        assert f"byte {at}: node #5 does not decode" in trace.problem.message
        assert len(trace.nodes) == 5


def test_the_sample_holds_the_first_and_last_programs() -> None:
    assert outputs.sample(35) == [0, 11, 23, 34]  # round(i * 34 / 3), by hand
    assert outputs.sample(3) == [0, 1, 2]


def test_ranks_whose_peers_and_groups_take_more_bytes_carry_their_own(tmp_path: Path) -> None:
    """A program's ranks share one encoding, patched per rank (chakra/patch.py); here their values
    differ in length (ranks and peers on both sides of 128, a varint's second byte; group ids of
    one and two digits), which moves every length before them. Each node parses to itself with
    protobuf and names the rank's own peers and groups, as the plan's mesh and group file say."""
    plan = _translate(tmp_path, tp=2, pp=2, dp=40, global_batch=80, micro_batch=1)
    groups = {int(k): set(v) for k, v in json.loads((tmp_path / "t.comm_groups.json").read_text()).items()}
    pb = schema()
    stage0 = [r for r, p in enumerate(plan.program_of) if p == 0]
    peers = {p for r in stage0 if (p := plan.mesh.peer(r, Purpose.PIPELINE, 1)) is not None}
    assert min(peers) < 128 <= max(peers)  # the premise: one program, peers of 1 and 2 bytes
    widths = {len(str(gid)) for r in stage0 for gid in map(int, groups) if r in groups[gid]}
    assert {1, 2} <= widths  # and three: the model-parallel groups of the gradient norm's all-reduce
    for rank in range(plan.npus):
        records = _records((tmp_path / f"t.{rank}.et").read_bytes())
        meta = pb.GlobalMetadata.FromString(records[0])
        assert meta.SerializeToString() == records[0]
        info = json.loads(next(a.string_val for a in meta.attr if a.name == "modtrans"))
        assert (info["rank"], info["stage"]) == (rank, plan.program_of[rank])
        neighbours = {plan.mesh.peer(rank, Purpose.PIPELINE, d) for d in (-1, 1)}
        sends = recvs = colls = 0
        for body in records[1:]:
            node = pb.Node.FromString(body)
            assert node.SerializeToString() == body
            attrs = {a.name: a for a in node.attr}
            if node.type == pb.COMM_SEND_NODE:
                sends += 1
                assert attrs["comm_src"].int32_val == rank
                assert attrs["comm_dst"].int32_val in neighbours
            elif node.type == pb.COMM_RECV_NODE:
                recvs += 1
                assert attrs["comm_dst"].int32_val == rank
                assert attrs["comm_src"].int32_val in neighbours
            elif node.type == pb.COMM_COLL_NODE:
                colls += 1
                assert rank in groups[int(attrs["pg_name"].string_val)]
        assert sends
        assert recvs
        assert colls


@pytest.mark.parametrize("note", ["plain", "\ue000rank", "\ue000stage \ue000stage"])
def test_each_trace_names_its_rank_and_stage_whatever_the_metadata_holds(note: str, tmp_path: Path) -> None:
    """The metadata's JSON is made once and each trace's rank and stage put in; metadata that holds
    the writer's own marks (private-use characters) still reads back whole, as protobuf and json
    decode it."""
    plan = _translate(tmp_path, tp=2, pp=2, global_batch=4)
    made = chakra.files(plan, tmp_path / "m", tick_ns=1.0, metadata={"note": note, "rank": -1})
    pb = schema()
    for rank, (_, data) in enumerate(made[:-1]):
        meta = pb.GlobalMetadata.FromString(_records(data)[0])
        info = json.loads(next(a.string_val for a in meta.attr if a.name == "modtrans"))
        assert info == {"note": note, "rank": rank, "stage": plan.program_of[rank]}


WIDTHS = [
    0,
    1,
    127,
    128,
    300,
    16383,
    16384,
    *(1 << 7 * k for k in range(3, 10)),
    (1 << 63) - 1,
    (1 << 64) - 1,
]
"""A value of every varint length, 1 to 10 bytes, at each length's edges."""


@pytest.mark.parametrize("value", [*WIDTHS, *(-v for v in WIDTHS[1:9])])
def test_a_varint_reads_back_as_protobuf_wrote_it(value: int) -> None:
    """Every varint length as protobuf itself serializes it (an attribute's uint64_val, or its
    int64_val for a negative value, the ten-byte two's complement; a oneof member is written
    even when 0, after its one-byte key): `decoded` gives the value and the end of the field, and
    every shorter prefix is cut (IndexError; None for a reader that reports it)."""
    pb = schema()
    message = pb.AttributeProto(int64_val=value) if value < 0 else pb.AttributeProto(uint64_val=value)
    data = message.SerializeToString()
    assert data[0] == (9 << 3 if value < 0 else 13 << 3)
    assert integers.decoded(data, 1) == (value & ((1 << 64) - 1), len(data))
    assert integers.varint(value) == data[1:]
    for cut in range(1, len(data)):
        with pytest.raises(IndexError):
            integers.decoded(data[:cut], 1)
        assert integers.decoded_or_none(data[:cut], 1) is None


def test_a_varint_over_ten_bytes_is_refused() -> None:
    """protobuf's varints are at most ten bytes (64 bits); an eleventh is malformed."""
    data = b"\xff" * 10 + b"\x01"
    with pytest.raises(ValueError, match="more than ten bytes"):
        integers.decoded(data, 0)
    assert integers.decoded_or_none(data, 0) is None
    assert integers.decoded(b"\xff" * 9 + b"\x01", 0) == ((1 << 64) - 1, 10)


@pytest.mark.parametrize("length", [0, 1, 127, 128, 300, 16384])
def test_a_string_list_entry_and_the_entries_after_it_are_what_protobuf_writes(length: int) -> None:
    """wire.entry's value, and the encoded entries it is joined to (`then`), as protobuf
    serializes a StringList of those values: a name of every length prefix (one byte below 128,
    two and three above) and non-ASCII text (its UTF-8 bytes counted, not its characters)."""
    pb = schema()
    name = ("é" * length)[: length // 2] + "x" * (length - length // 2)
    values = [name, "12345678", ""]
    expected = pb.StringList(values=values).SerializeToString()
    then = b"".join(chakra.wire.entry(v) for v in values[1:])
    assert chakra.wire.entry(name, then) == expected
    assert chakra.wire.entry(name) + then == expected
