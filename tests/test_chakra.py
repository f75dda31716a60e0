"""Chakra execution traces, read back with Chakra's own reader (needs the chakra extra; CI has it)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans.workload.parse import parse
from tests.chakra_io import read_trace

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("chakra") is None,
    reason="mlc-chakra is not installed (the README test command has it)",
)
Run = Callable[..., Result]


def _read(path: Path) -> tuple[Any, list[Any]]:
    return read_trace(path)


ADDED = ("is_cpu_op", "num_ops", "tensor_size", "inputs", "outputs", "pg_name")
"""The attributes ASTRA-sim 2.x reads that Chakra's text converter does not write."""


def _rebased(node: Any, base: int, *, timeless: bool = False) -> bytes:
    copy = type(node)()
    copy.CopyFrom(node)
    if timeless:
        copy.duration_micros = 0
    kept = [a for a in copy.attr if a.name not in ADDED]
    del copy.attr[:]
    copy.attr.extend(kept)
    copy.id -= base
    copy.data_deps[:] = [d - base for d in node.data_deps]
    return bytes(copy.SerializeToString())


def _attrs(node: Any) -> dict[str, Any]:
    """Each attribute's value, through the field Chakra's schema and the older feeder read it by."""
    out: dict[str, Any] = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        value = getattr(a, kind)
        out[a.name] = list(value.values) if kind.endswith("_list") else value
        out[f"{a.name}:type"] = kind
    return out


def test_data_parallel_traces_equal_chakras_own_conversion(run_cli: Run, tmp_path: Path) -> None:
    from chakra.src.converter.text_converter import TextConverter

    text = tmp_path / "r50.txt"
    result = run_cli(
        "translate", "resnet50", "--params", "weights", "--dialect", "chakra", "--time-unit", "us", "-o", text
    )
    assert result.exit_code == 0, result.stderr
    TextConverter(str(text), str(tmp_path / "theirs"), 2, 1).convert()
    result = run_cli(
        "translate",
        "resnet50",
        "--params",
        "weights",
        "--format",
        "chakra-et",
        "--npus",
        "2",
        "-o",
        tmp_path / "ours",
    )
    assert result.exit_code == 0, result.stderr
    for npu in range(2):
        _, ours = _read(tmp_path / f"ours.{npu}.et")
        _, theirs = _read(tmp_path / f"theirs.{npu}.et")
        # every layer all-reduces a non-empty weight gradient, so Chakra's converter emits no
        # 0-byte collective here and both traces must be the same graph, node for node (Chakra's
        # converter keeps counting node ids across the NPUs' files: compare from each file's first id)
        # (durations aside: Chakra's converter copies per-phase values rounded up to whole us; ours
        # carry the rounding, below; and the attributes ADDED for roofline and memory tracking),
        # but for our last node, the optimizer step: Chakra's converter keeps the update column as a
        # string and never uses it (chakra src/converter/text_converter.py, Layer: `self.bwd_wg_update_time
        # = str(col[11])`), and the one before it, the first line's input gradient: the backward of
        # the layers --params weights folds into conv1 (bn1, relu, maxpool: autograd runs it; none of
        # conv1's own, whose input is the image), which the converter never writes
        # (convert_data_parallel: `if idx != (len(layers) - 1)`) and ASTRA-sim 1.0's DATA loop skips
        assert [_rebased(n, ours[0].id, timeless=True) for n in ours[:-2]] == [
            _rebased(n, theirs[0].id, timeless=True) for n in theirs
        ]
        assert [n.name for n in ours[-2:]] == ["COMP_NODE_conv1_BWD_IG", "COMP_NODE_conv1_UPDATE"]
    # 54 forward, 54 weight-gradient, 54 input-gradient computes, 54 all-reduces, the step
    assert len(ours) == 217
    # The durations sum to the compute time to within 1 us; rounding each phase up adds ~0.5 us a node.
    ns = parse(run_cli("translate", "resnet50", "--params", "weights", "--time-unit", "ns").stdout).workload
    assert ns is not None
    total_ns = sum(layer.fwd.compute_time + layer.weight_grad.compute_time for layer in ns.layers)
    total_ns += sum(layer.input_grad.compute_time for layer in ns.layers[1:])
    first_ns = ns.layers[0].input_grad.compute_time
    step_ns = sum(layer.update_time for layer in ns.layers)  # DATA's lines: one collective each
    assert first_ns > 0
    assert abs(sum(n.duration_micros for n in ours) - (total_ns + first_ns + step_ns) / 1000) < 1
    assert sum(n.duration_micros for n in theirs) - total_ns / 1000 > 50


def test_trace_contents_and_metadata(run_cli: Run, tmp_path: Path) -> None:
    result = run_cli(
        "translate",
        "resnet50",
        "--params",
        "weights",
        "--format",
        "chakra-et",
        "--npus",
        "4",
        "-o",
        tmp_path / "r50",
    )
    assert result.exit_code == 0
    text = run_cli("translate", "resnet50", "--params", "weights", "--time-unit", "ns").stdout
    workload = parse(text).workload
    assert workload is not None
    metadata, nodes = _read(tmp_path / "r50.3.et")
    info = json.loads(next(a.string_val for a in metadata.attr if a.name == "modtrans"))
    assert "multiplies by 1000" in info["duration_micros"]
    assert info["compute"]["unit"] == "ns"  # computed exactly, written in whole us with the carry
    by_name = {n.name: n for n in nodes}
    conv1 = workload.layers[0]
    assert by_name["COMP_NODE_conv1_FWD"].duration_micros == conv1.fwd.compute_time // 1000
    comm = by_name["COMM_COLL_NODE_conv1_ALLREDUCE"]
    attrs = _attrs(comm)
    assert (attrs["comm_type"], attrs["comm_size"]) == (0, 37632)  # ALL_REDUCE of conv1's fp32 weights
    assert "pg_name" not in attrs  # the group of every rank: ASTRA-sim reads no pg_name as all ranks
    assert comm.data_deps == [by_name["COMP_NODE_conv1_BWD_WG"].id]
    assert all(d < n.id for n in nodes for d in n.data_deps)  # a DAG in file order
    assert len(list(tmp_path.glob("r50.*.et"))) == 4


def test_transformer_traces_that_chakras_converter_rejects(run_cli: Run, tmp_path: Path) -> None:
    args = ("translate", "gpt2", "-p", "HYBRID_TRANSFORMER", "--npus", "8", "--model-parallel-group", "4")
    result = run_cli(*args, "--format", "chakra-et", "-o", tmp_path / "gpt2")
    assert result.exit_code == 0, result.stderr
    workload = parse(run_cli(*args, "--time-unit", "us").stdout).workload
    assert workload is not None
    _, nodes = _read(tmp_path / "gpt2.0.et")
    comms = [n for n in nodes if n.type == 7]  # COMM_COLL_NODE
    # a unit's further collectives (the LM head's loss all-reduces) are text lines of their own,
    # UNIT.post1 ... (plan/lines.py); the trace names them by the unit
    unit = {layer.name: re.sub(r"\.(pre|post)\d+$", "", layer.name) for layer in workload.layers}
    expected = [
        (unit[layer.name], phase.comm_size)
        for layer in workload.layers
        for _, phase in layer.phases
        if phase.comm_type.moves_data and phase.comm_size > 0
    ]
    assert sorted(
        (n.name.split("COMM_COLL_NODE_")[1].rsplit("_", 1)[0], _attrs(n)["comm_size"]) for n in comms
    ) == sorted(expected)
    assert {_attrs(n)["comm_type"] for n in comms} == {0}  # Megatron: all-reduces only
    computes = [n for n in nodes if n.type == 4]
    # per unit a forward, an input and a weight gradient (the first unit's input gradient not
    # run: its inputs are token ids), and the optimizer step, charged to the first unit
    assert len(computes) == 3 * len(set(unit.values())) - 1 + 1
    assert computes[-1].name == "COMP_NODE_transformer.wte_UPDATE"


def test_chakra_et_needs_an_output_prefix(run_cli: Run) -> None:
    result = run_cli("translate", "resnet50", "--format", "chakra-et")
    assert result.exit_code == 2
    assert "-o DIR/PREFIX" in result.stderr


def _masks(path: Path) -> dict[str, list[bool]]:
    _, nodes = _read(path)
    out = {}
    for n in nodes:
        for a in n.attr:
            if a.name == "involved_dim":
                out[n.name] = list(a.bool_list.values)
    return out


def test_involved_dims_follow_astra_sims_masks(run_cli: Run, tmp_path: Path) -> None:
    # HYBRID_DATA_MODEL on 4 x 2 NPUs, groups of 4 = dimension 0: model parallel (fwd, ig) on dim 0,
    # data parallel (wg) on dim 1 (decode_involved_dimensions, workload-format spec section 8)
    args = ("translate", "vgg16", "--params", "weights", "--format", "chakra-et", "--npus", "8")
    result = run_cli(
        *args,
        "-p",
        "HYBRID_DATA_MODEL",
        "--model-parallel-group",
        "4",
        "--network-dims",
        "4,2",
        "-o",
        tmp_path / "hdm",
    )
    assert result.exit_code == 0, result.stderr
    masks = _masks(tmp_path / "hdm.0.et")
    assert masks["COMM_COLL_NODE_features.0_ALLGATHER"] == [True, False]
    assert masks["COMM_COLL_NODE_features.0_ALLREDUCE"] == [False, True]
    # DATA: every weight-gradient all-reduce spans all dims
    run_cli(*args, "--network-dims", "2,2,2", "-o", tmp_path / "data")
    assert set(map(tuple, _masks(tmp_path / "data.0.et").values())) == {(True, True, True)}
    # no --network-dims: no mask (ASTRA-sim 2.x then uses every dimension), as Chakra's converter
    run_cli(*args, "-o", tmp_path / "plain")
    assert _masks(tmp_path / "plain.0.et") == {}


def test_transformer_masks_split_at_the_group(run_cli: Run, tmp_path: Path) -> None:
    args = (
        "translate",
        "gpt2",
        "-p",
        "HYBRID_TRANSFORMER",
        "--npus",
        "8",
        "--model-parallel-group",
        "4",
        "--format",
        "chakra-et",
    )
    result = run_cli(*args, "--network-dims", "2,2,2", "-o", tmp_path / "t")
    assert result.exit_code == 0, result.stderr
    masks = _masks(tmp_path / "t.0.et")
    # the group of 4 is dims 0 and 1: fwd / ig collectives there, weight gradients on dim 2
    fwd = masks["COMM_COLL_NODE_transformer.h.0.attn.c_proj_ALLREDUCE"]
    assert fwd in ([True, True, False], [False, False, True])  # its fwd and wg all-reduces share a name
    assert {tuple(m) for m in masks.values()} == {(True, True, False), (False, False, True)}
    bad = run_cli(*args, "--network-dims", "8", "-o", tmp_path / "bad")  # group 4 is no product of (8,)
    assert bad.exit_code == 2
    assert "model_parallel_NPU_group 4" in bad.stderr
    assert not list(tmp_path.glob("bad*"))


def test_our_schema_is_chakras_for_every_field_we_write() -> None:
    """chakra/schema.py declares the messages on protobuf; each field must be Chakra's own, number, type
    and label (et_def.proto as mlc-chakra ships it), and so must every enum value."""
    from chakra.schema.protobuf import et_def_pb2
    from google.protobuf import descriptor_pb2

    from modtrans.chakra.schema import schema

    theirs = descriptor_pb2.FileDescriptorProto()
    et_def_pb2.DESCRIPTOR.CopyToProto(theirs)
    ours = schema()
    by_name = {m.name: m for m in theirs.message_type}
    checked = 0
    lists = [name for name in by_name if name.endswith("List")]
    assert len(lists) == 15
    for name in ("AttributeProto", "Node", "GlobalMetadata", *lists):
        official = {f.name: f for f in by_name[name].field}
        for field in getattr(ours, name).DESCRIPTOR.fields:
            twin = official[field.name]
            assert (field.number, field.type) == (twin.number, twin.type), (name, field.name)
            assert field.is_repeated == (twin.label == twin.LABEL_REPEATED), (name, field.name)
            checked += 1
    for enum in theirs.enum_type:
        if enum.name in ("NodeType", "CollectiveCommType"):
            for value in enum.value:
                assert getattr(ours, value.name) == value.number
    assert checked == 57  # every field schema.py declares: 2 + 30 attribute, 15 lists, 8 node, 2 metadata


def test_traces_are_written_without_the_chakra_package(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['chakra'] = None\n"  # any import of chakra now fails
        "from modtrans.cli import main; sys.argv = ['modtrans'] + sys.argv[1:]; main()"
    )
    prefix = tmp_path / "t"
    args = ["translate", "resnet50", "--format", "chakra-et", "--npus", "2", "-o", str(prefix)]
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    _, nodes = _read(tmp_path / "t.0.et")
    assert len(nodes) > 100
    _, again = _read(tmp_path / "t.1.et")
    assert [bytes(n.SerializeToString()) for n in again] == [bytes(n.SerializeToString()) for n in nodes]


def test_a_time_unit_a_trace_cannot_hold_is_refused(run_cli: Run, tmp_path: Path) -> None:
    for unit in ("ns", "cycles"):
        result = run_cli(
            "translate", "resnet50", "--format", "chakra-et", "--time-unit", unit, "-o", tmp_path / "t"
        )
        assert result.exit_code == 2
        assert result.stderr.startswith(f"modtrans: --time-unit {unit}: a Chakra trace holds microseconds")
    assert not list(tmp_path.iterdir())
    ok = run_cli("translate", "resnet50", "--format", "chakra-et", "--time-unit", "us", "-o", tmp_path / "t")
    assert ok.exit_code == 0
