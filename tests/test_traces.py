"""Chakra traces from the execution plan, per rank, read back with Chakra's own reader, and the
trace-set checks of `modtrans validate` on ours, on Chakra's converter's and on broken sets."""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans import chakra, pipeline
from modtrans.chakra.schema import encode, schema
from modtrans.chakra.validate import check_set
from modtrans.comm import Policy
from modtrans.plan import Axis, Compute, Direction, LayerInfo, Mesh, Plan, Purpose, Step, Tensor, Transfer
from modtrans.plan.model import Preset
from modtrans.plan.text import project
from modtrans.strategy import Parallelism
from modtrans.workload.model import Layer
from tests.chakra_io import read_trace

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("chakra") is None,
    reason="mlc-chakra is not installed (the README test command has it)",
)
Run = Callable[..., Result]
COMP, SEND, RECV, COLL = 4, 5, 6, 7

STRATEGIES = [
    ("resnet50", Policy.DATA, None),
    ("resnet50", Policy.MODEL, None),
    ("resnet50", Policy.HYBRID_DATA_MODEL, 4),
    ("resnet50", Policy.HYBRID_MODEL_DATA, 2),
    ("resnet50", Policy.HYBRID_CUSTOMIZED, None),
    ("gpt2", Policy.HYBRID_TRANSFORMER, 4),
    ("gpt2", Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, 2),
]


def _translate(model: str, policy: Policy, group: int | None, npus: int = 8) -> pipeline.Translation:
    options = pipeline.Options(parallel=Parallelism(policy, npus, group), format="chakra-et")
    result = pipeline.translate_checked(model, options)
    assert result.plan is not None, result.diagnostics
    return result


def _files(plan: Plan, folder: Path, **options: Any) -> tuple[list[Path], Path]:
    written = chakra.write(plan, folder / "t", tick_ns=1.0, **options)
    return written[:-1], written[-1]


def _read(path: Path) -> list[Any]:
    return read_trace(path)[1]


def _attrs(node: Any) -> dict[str, tuple[str, Any]]:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        value = getattr(a, kind)
        out[a.name] = (kind, list(value.values) if kind.endswith("_list") else value)
    return out


def _pairs(values: list[str]) -> list[tuple[str, int]]:
    assert len(values) % 2 == 0  # LocalMemUsageTracker: "IO infos list size is not even"
    return [(values[i], int(values[i + 1])) for i in range(0, len(values), 2)]


def _collectives(layer: Layer) -> int:
    return sum(p.comm_type.moves_data and p.comm_size > 0 for _, p in layer.phases)


@pytest.mark.parametrize(("model", "policy", "group"), STRATEGIES, ids=[s[1].value for s in STRATEGIES])
def test_every_rank_carries_what_astra_sim_reads(
    model: str, policy: Policy, group: int | None, tmp_path: Path
) -> None:
    result = _translate(model, policy, group)
    plan = result.plan
    assert plan is not None
    assert result.workload is None  # a trace run projects no text: the text is projected here
    workload = project(plan)
    traces, group_file = _files(plan, tmp_path)
    groups = {int(k): v for k, v in json.loads(group_file.read_text()).items()}
    assert all(gid > 0 and len(ranks) > 1 for gid, ranks in groups.items())
    # ASTRA-sim 1.0 runs the workload file: every forward, weight and input gradient (not layer
    # 0's input gradient, as its training loop skips it), and FWD_IN_BCKWD's recomputed segments
    text_ns = sum(x.fwd.compute_time + x.weight_grad.compute_time for x in workload.layers)
    text_ns += sum(x.input_grad.compute_time for x in workload.layers[1:])
    if policy is Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD:
        # default: one segment, recomputed from layer 0 up to the layer before the initiating last
        # unit (ASTRA-sim 1.0's Workload.cc, iterate_hybrid_parallel_Transformer_fwd_in_bckwd:
        # Forward_In_BackPass stops at the layer that needs_fwd_in_bckwd_initiation); the lines
        # after it hold the LM head's further collectives, no compute (plan/lines.py)
        assert workload.header.checkpoint_initiates is not None
        (initiating,) = workload.header.checkpoint_initiates
        text_ns += sum(x.fwd.compute_time for x in workload.layers[:initiating])
    # and the optimizer step, which the traces run as one node: in the update column of a line
    # ASTRA-sim 1.0 waits it after once (one collective: Layer::call), else in the weight-gradient
    # compute (counted above); a column of 1 there may be the tick D313 asks for a step of 0
    once = [x for x in workload.layers if _collectives(x) == 1]
    text_ns += sum(x.update_time for x in once)
    ticks = sum(x.update_time == 1 for x in once)
    for rank, path in enumerate(traces):
        assert path.name == f"t.{rank}.et"
        nodes = _read(path)
        ids = {n.id for n in nodes}
        written: list[str] = []
        for node in nodes:
            attrs = _attrs(node)
            assert all(d in ids and d < node.id for d in node.data_deps)
            assert attrs["is_cpu_op"] == ("bool_val", False)
            written += [name for name, _ in _pairs(attrs["outputs"][1])]
            _pairs(attrs["inputs"][1])
            if node.type == COMP:
                assert attrs["num_ops"][0] == "int64_val"
                assert attrs["tensor_size"][0] == "uint64_val"
                io = sum(b for _, b in _pairs(attrs["inputs"][1]) + _pairs(attrs["outputs"][1]))
                assert attrs["tensor_size"][1] == io
            elif node.type == COLL:
                assert attrs["comm_type"][0] == attrs["comm_size"][0] == "int64_val"
                assert attrs["comm_size"][1] > 0
                if "pg_name" in attrs:
                    kind, name = attrs["pg_name"]
                    assert kind == "string_val"
                    assert rank in groups[int(name)]
            else:
                pytest.fail(f"unexpected node type {node.type}")
        assert len(written) == len(set(written))  # each tensor written once (the memory tracker asserts)
        total_us = sum(n.duration_micros for n in nodes)
        assert abs(total_us - Fraction(text_ns, 1000)) < 1 + Fraction(ticks, 1000)
        assert 0 <= text_ns - plan.compute_time(rank) <= ticks
    assert not [
        d for d in check_set({p: p.read_bytes() for p in traces}, group_file.read_bytes()) if d.severity <= 2
    ]


def test_megatron_groups_and_payloads_per_rank(tmp_path: Path) -> None:
    plan = _translate("gpt2", Policy.HYBRID_TRANSFORMER, 4).plan
    assert plan is not None
    traces, group_file = _files(plan, tmp_path)
    groups = json.loads(group_file.read_text())
    # tensor groups of 4 consecutive ranks, data groups across them (Megatron's tensor-fastest order)
    assert groups == {
        "1": [0, 1, 2, 3],
        "2": [4, 5, 6, 7],
        "3": [0, 4],
        "4": [1, 5],
        "5": [2, 6],
        "6": [3, 7],
    }
    for rank, path in enumerate(traces):
        used = {_attrs(n)["pg_name"][1] for n in _read(path) if n.type == COLL}
        assert used == {str(1 + rank // 4), str(3 + rank % 4)}


def test_recomputed_forwards_come_before_the_backward(tmp_path: Path) -> None:
    plan = _translate("gpt2", Policy.HYBRID_TRANSFORMER_FWD_IN_BCKWD, 2).plan
    plain = _translate("gpt2", Policy.HYBRID_TRANSFORMER, 2).plan
    assert plan is not None
    assert plain is not None
    nodes = _read(_files(plan, tmp_path)[0][0])
    names = [n.name for n in nodes]
    recomputed = [i for i, n in enumerate(names) if n.endswith("_FWD_RECOMPUTE")]
    # the default: one segment, every layer but the initiating last one (lm_head), as ASTRA-sim 1.0
    # recomputes (Workload.cc, iterate_hybrid_parallel_Transformer_fwd_in_bckwd, Forward_In_BackPass)
    assert len(recomputed) == len(plan.layers) - 1
    assert "COMP_NODE_lm_head_FWD_RECOMPUTE" not in names
    last_forward = max(i for i, n in enumerate(names) if n.endswith("_FWD") and n.startswith("COMP"))
    first_backward = min(i for i, n in enumerate(names) if "_BWD_" in n)
    assert last_forward < min(recomputed)
    assert max(recomputed) < first_backward
    # the recomputation re-issues the forward's tensor-parallel all-reduces
    forward_comms = sum(1 for i in range(last_forward + 1) if nodes[i].type == COLL)
    recompute_comms = sum(1 for i in range(min(recomputed), first_backward) if nodes[i].type == COLL)
    assert recompute_comms == forward_comms > 0
    forwards = [op for op in plain.programs[0] if isinstance(op, Compute) and op.step is Step.FWD]
    head = forwards[-1].time  # lm_head's forward: 253,358 ns at G 2 (126,679 at G 4, issue 23), not run again
    assert plan.compute_time(0) - plain.compute_time(0) == sum(op.time for op in forwards) - head


def test_passes_repeat_the_iteration_and_wait_for_the_gradients(tmp_path: Path) -> None:
    plan = _translate("resnet50", Policy.DATA, None, npus=2).plan
    assert plan is not None
    one = _read(_files(plan, tmp_path)[0][0])
    two = _read(chakra.write(plan, tmp_path / "p", passes=2, tick_ns=1.0)[0])
    assert len(two) == 2 * len(one)
    second_conv1 = next(n for n in two[len(one) :] if n.name == "COMP_NODE_conv1_FWD")
    reduce_conv1 = next(n for n in two[: len(one)] if n.name == "COMM_COLL_NODE_conv1_ALLREDUCE")
    assert reduce_conv1.id in second_conv1.data_deps
    outputs = [v for n in two for v in _pairs(_attrs(n)["outputs"][1])]
    assert len(outputs) == len(set(outputs))


def _pipeline_plan(tag: int = 7, size: int = 4096) -> Plan:
    """Two stages: rank 0 computes layer a and sends its activation to rank 1, which computes b."""
    mesh = Mesh((Axis(Purpose.PIPELINE, 2),))
    a = Compute(0, Step.FWD, 1500, 10**6, (Tensor("x", 64),), (Tensor("a", size),))
    b = Compute(1, Step.FWD, 2500, 10**6, (Tensor("a.received", size),), (Tensor("b", 64),))
    send = Transfer(0, Step.FWD, Direction.SEND, Purpose.PIPELINE, 1, tag, size, (0,))
    recv = Transfer(1, Step.FWD, Direction.RECV, Purpose.PIPELINE, -1, tag, size)
    stage0, stage1 = (a, send), (recv, Compute(1, Step.FWD, b.time, b.flops, b.inputs, b.outputs, (0,)))
    return Plan(mesh, (LayerInfo("a", 0), LayerInfo("b", 0)), (stage0, stage1), (0, 1), Preset(Policy.DATA))


def test_send_and_receive_carry_identical_matching_keys(tmp_path: Path) -> None:
    traces, group_file = _files(_pipeline_plan(), tmp_path)
    send = next(n for n in _read(traces[0]) if n.type == SEND)
    recv = next(n for n in _read(traces[1]) if n.type == RECV)
    keys = ("comm_src", "comm_dst", "comm_tag", "comm_size")
    assert [_attrs(send)[k] for k in keys] == [_attrs(recv)[k] for k in keys]
    assert [_attrs(send)[k] for k in keys] == [
        ("int32_val", 0),
        ("int32_val", 1),
        ("int32_val", 7),
        ("int64_val", 4096),
    ]
    assert not check_set({p: p.read_bytes() for p in traces}, group_file.read_bytes())


# ------------------------------------------------------------------------- broken sets, by code


def _decoded(data: bytes) -> tuple[Any, list[Any]]:
    from modtrans.integers import decoded

    pb = schema()
    messages: list[Any] = []
    at = 0
    while at < len(data):
        length, body = decoded(data, at)
        message = pb.GlobalMetadata() if not messages else pb.Node()
        message.ParseFromString(data[body : body + length])
        messages.append(message)
        at = body + length
    return messages[0], messages[1:]


def _encoded(metadata: Any, nodes: list[Any]) -> bytes:
    import io

    out = io.BytesIO()
    for message in (metadata, *nodes):
        encode(out, message)
    return out.getvalue()


@functools.cache
def gpt2_set() -> tuple[dict[str, bytes], bytes]:
    """gpt2 under HYBRID_TRANSFORMER (group 2) on 4 NPUs, as bytes: the set the broken sets edit."""
    plan = _translate("gpt2", Policy.HYBRID_TRANSFORMER, 2, npus=4).plan
    assert plan is not None
    outputs = chakra.files(plan, Path("t"), tick_ns=1.0)
    return {str(p): data for p, data in outputs[:-1]}, outputs[-1][1]


@pytest.fixture(scope="module")
def base() -> tuple[dict[str, bytes], bytes]:
    return gpt2_set()


def _edit(traces: dict[str, bytes], rank: int, change: Callable[[list[Any]], None]) -> dict[str, bytes]:
    metadata, nodes = _decoded(traces[f"t.{rank}.et"])
    change(nodes)
    return {**traces, f"t.{rank}.et": _encoded(metadata, nodes)}


def _first(nodes: list[Any], kind: int) -> Any:
    return next(n for n in nodes if n.type == kind)


def _set_attr(node: Any, name: str, **value: Any) -> None:
    for a in node.attr:
        if a.name == name:
            a.ClearField(a.WhichOneof("value"))
            for key, v in value.items():
                if key.endswith("_list"):
                    getattr(a, key).values.extend(v)
                else:
                    setattr(a, key, v)


def _each(change: Callable[[Any], None]) -> Callable[[list[Any]], None]:
    def apply(nodes: list[Any]) -> None:
        for node in nodes:
            change(node)

    return apply


def _drop_attr(node: Any, name: str) -> None:
    kept = [a for a in node.attr if a.name != name]
    del node.attr[:]
    node.attr.extend(kept)


def _cycle(nodes: list[Any]) -> None:
    nodes[0].data_deps.append(nodes[3].id)


def _half_size(nodes: list[Any]) -> None:
    node = _first(nodes, COLL)
    size = next(a for a in node.attr if a.name == "comm_size").int64_val
    values = [f"{node.name}.payload", str(2 * size)]
    _set_attr(node, "inputs", string_list=values)


def _gathered_size(nodes: list[Any]) -> None:
    """An all-gather written as its gathered output (the bug of issue 24: n x the traffic)."""
    node = _first(nodes, COLL)
    size = next(a for a in node.attr if a.name == "comm_size").int64_val
    _set_attr(node, "comm_type", int64_val=2)
    _set_attr(node, "inputs", string_list=[f"{node.name}.part", str(size // 2)])
    _set_attr(node, "outputs", string_list=[f"{node.name}.whole", str(size)])


BROKEN: dict[str, Callable[[dict[str, bytes], bytes], tuple[dict[str, bytes], bytes | None]]] = {
    "T701": lambda t, g: ({k: v for k, v in t.items() if k != "t.1.et"}, g),
    "T702": lambda t, g: ({**t, "t.2.et": t["t.2.et"][:-7]}, g),
    "T703": lambda t, g: (_edit(t, 0, lambda n: setattr(n[5], "id", n[4].id)), g),
    "T704": lambda t, g: (_edit(t, 1, lambda n: n[9].data_deps.append(99999)), g),
    "T705": lambda t, g: (_edit(t, 0, _cycle), g),
    "T707": lambda t, g: (_edit(t, 3, lambda n: _set_attr(_first(n, COLL), "comm_size", int64_val=12)), g),
    "T708": lambda t, g: (t, None),
    "T709": lambda t, g: (_edit(t, 0, _each(lambda x: _drop_attr(x, "num_ops"))), g),
    "T710": lambda t, g: (_edit(t, 0, _half_size), g),
    "T711": lambda t, g: (_edit(t, 2, _each(lambda x: setattr(x, "duration_micros", 0))), g),
    "T712": lambda t, g: (_edit(t, 0, _each(lambda x: _set_attr(x, "comm_type", int64_val=9))), g),
    "T714": lambda t, g: (t, b'{"1": "all"}'),
    "T715": lambda t, g: (_edit(t, 0, _gathered_size), g),
}


def test_our_traces_have_no_findings(base: tuple[dict[str, bytes], bytes]) -> None:
    traces, groups = base
    assert check_set(traces, groups, "t.comm_groups.json") == []


@pytest.mark.parametrize("code", sorted(BROKEN))
def test_each_check_fails_its_broken_set(code: str, base: tuple[dict[str, bytes], bytes]) -> None:
    traces, groups = BROKEN[code](*base)
    found = check_set(traces, groups, "t.comm_groups.json")
    assert code in {d.code for d in found}, [str(d) for d in found]
    assert all(d.path for d in found)


def test_a_comm_type_of_the_wrong_attribute_type_is_a_finding(base: tuple[dict[str, bytes], bytes]) -> None:
    """A collective whose comm_type is a list (a mis-typed attribute; found by bench/fuzz.py seed 26,
    which crashed the validator with "unhashable type: 'list'"): T712, and inspect still sums it."""
    traces, groups = _edit(base[0], 0, _each(lambda x: _set_attr(x, "comm_type", int64_list=[4, 2]))), base[1]
    found = check_set(traces, groups, "t.comm_groups.json")
    assert "T712" in {d.code for d in found}
    from modtrans.chakra.read import read
    from modtrans.chakra.summary import summarize

    rows = summarize([read(data, path) for path, data in traces.items()])
    assert rows


def test_unmatched_point_to_point_hangs_are_found() -> None:
    good = {str(p): data for p, data in chakra.files(_pipeline_plan(), Path("t"))[:-1]}
    wrong_tag = {str(p): data for p, data in chakra.files(_pipeline_plan(tag=8), Path("t"))[:-1]}
    mixed = {"t.0.et": good["t.0.et"], "t.1.et": wrong_tag["t.1.et"]}
    found = check_set(mixed)
    assert sorted(d.code for d in found) == ["T706", "T706"]  # the send and the receive, each alone
    assert "0 -> 1, tag 7" in found[0].message
    no_tag = _edit(good, 0, lambda n: _drop_attr(_first(n, SEND), "comm_tag"))
    assert "T713" in {d.code for d in check_set(no_tag)}


def test_a_file_that_is_not_a_trace(tmp_path: Path) -> None:
    found = check_set({"t.0.et": b"DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 8 5\n"})
    assert [d.code for d in found][:1] == ["T702"]
    assert check_set({"t.0.et": b""})[0].code == "T702"


def test_chakras_own_converter_traces_only_lack_the_newer_attributes(run_cli: Run, tmp_path: Path) -> None:
    from chakra.src.converter.text_converter import TextConverter

    text = tmp_path / "r50.txt"
    assert (
        run_cli("translate", "resnet50", "--dialect", "chakra", "--time-unit", "us", "-o", text).exit_code
        == 0
    )
    TextConverter(str(text), str(tmp_path / "theirs"), 2, 1).convert()
    found = check_set({p: p.read_bytes() for p in sorted(tmp_path.glob("theirs.*.et"))})
    assert {d.code for d in found} == {"T709"}  # no num_ops / tensor_size, no inputs / outputs
    assert all(d.severity == 2 for d in found)


def test_validate_and_inspect_a_trace_set(run_cli: Run, tmp_path: Path) -> None:
    prefix = tmp_path / "g"
    args = ("translate", "gpt2", "-p", "HYBRID_TRANSFORMER", "--npus", "4", "--model-parallel-group", "2")
    assert run_cli(*args, "--format", "chakra-et", "-o", prefix).exit_code == 0
    clean = run_cli("validate", prefix)
    assert clean.exit_code == 0, clean.stdout
    assert "4 files checked" in clean.stdout
    (tmp_path / "g.comm_groups.json").unlink()
    broken = run_cli("validate", *sorted(tmp_path.glob("g.*.et")), "--format", "json")
    assert broken.exit_code == 1
    assert {d["code"] for d in json.loads(broken.stdout)} == {"T708"}
    shown = run_cli("inspect", prefix)
    assert shown.exit_code == 0
    total = sum(n.duration_micros for n in _read(tmp_path / "g.0.et"))
    assert f"{total:,}" in shown.stdout.splitlines()[1]


def test_quiet_translate_says_nothing_of_the_traces_it_writes(run_cli: Run, tmp_path: Path) -> None:
    args = ("translate", "gpt2", "--tp", "2", "--pp", "2", "--format", "chakra-et", "-o", tmp_path / "g")
    loud = run_cli(*args)
    assert loud.exit_code == 0, loud.stderr
    assert "wrote 4 Chakra traces" in loud.stderr
    quiet = run_cli(*args, "-q")
    assert quiet.exit_code == 0, quiet.stderr
    assert quiet.stderr == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        *(f"g.{r}.et" for r in range(4)),
        "g.comm_groups.json",
        "g.et-meta.json",
    ]


def _force_threshold() -> int:
    """The trace count above which the manual (docs/formats.md) says --force is needed."""
    import re

    formats = (Path(__file__).parent.parent / "docs" / "formats.md").read_text(encoding="utf-8")
    found = re.search(r"over ([\d,]+) NPUs needs\s+`--force`", formats, re.IGNORECASE)
    assert found, "docs/formats.md no longer states when --format chakra-et needs --force"
    return int(found.group(1).replace(",", ""))


@pytest.mark.parametrize("given", ["npus", "layout"])
def test_more_traces_than_the_manual_allows_need_force(given: str, run_cli: Run, tmp_path: Path) -> None:
    limit = _force_threshold()
    layout = ["--tp", "8", "--pp", "8", "--dp", str(limit // 32)]  # T x P x D = twice the limit
    over = ["--npus", str(limit + 1)] if given == "npus" else layout
    done = run_cli("translate", "llama-3-70b", *over, "--format", "chakra-et", "-o", tmp_path / "x")
    assert done.exit_code == 2
    assert "pass --force" in done.stderr
    assert f"over {limit}" in done.stderr
    assert list(tmp_path.iterdir()) == []  # refused before anything was translated or written


def test_diff_of_traces_says_it_compares_workloads(
    run_cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ("translate", "gpt2", "--tp", "2", "--format", "chakra-et", "-q")
    assert run_cli(*args, "-o", "a").exit_code == 0
    assert run_cli(*args, "-o", "gpt2").exit_code == 0  # a set named like the built-in model
    assert run_cli("translate", "gpt2", "-o", "w.txt", "-q").exit_code == 0
    for pair, shown in ((("a.0.et", "gpt2.1.et"), "a.0.et is a Chakra trace,"), (("w.txt", "a"), "a is")):
        said = run_cli("diff", *pair)
        assert said.exit_code == 2
        lines = said.stderr.splitlines()
        assert len(lines) == 1, said.stderr
        assert shown in lines[0]
        assert "`modtrans validate" in lines[0]
        assert "F004" not in lines[0]
    assert run_cli("diff", "gpt2", "w.txt").exit_code in (0, 1)  # the built-in model, not the set


def test_inspect_shows_one_rank_per_stage_unless_asked_for_every_rank(run_cli: Run, tmp_path: Path) -> None:
    """A stage's ranks run one program: inspect reads the first rank of each stage (a 1,024-rank set
    in about a second, where reading every rank took 119 s), says so, and --ranks shows them all."""
    prefix = tmp_path / "p"
    args = ("--tp", "2", "--pp", "2", "--dp", "2", "--seq-len", "256", "--format", "chakra-et")
    assert run_cli("translate", "llama-3-8b", *args, "-o", prefix).exit_code == 0
    staged = run_cli("inspect", prefix).stdout
    assert staged.startswith("8 ranks; the first of each pipeline stage")
    shown = [
        int(line.split()[0])
        for line in staged.splitlines()
        if re.match(r"\s+\d+\s+\d+\s+[\d,]+\s+[\d.]+", line)
    ]
    assert shown[:2] == [0, 4]  # the first ranks of stages 0 and 1 (tensor x data = 4 per stage)
    assert re.search(r"^\s+1\s+4\s", staged, re.M)  # the stage table counts the stage's 4 ranks
    every = run_cli("inspect", prefix, "--ranks").stdout
    assert len(re.findall(r"^\s+\d+\s+\d+\s+[\d,]+\s+[\d.]+\s+[\d.]+", every, re.M)) >= 8


def test_inspect_shows_the_rate_and_utilisation_the_compute_model_assumes(
    run_cli: Run, tmp_path: Path
) -> None:
    """Per rank, TFLOP/s while computing (the trace's num_ops over its duration_micros, summed)
    and that as a share of the device's BF16 peak from the set's .meta.json ("peak%", not the MFU,
    which is over the iteration: `modtrans estimate`): under the roofline at peak a GEMM-bound
    model runs at no more than the peak; the GPU kernel model, below it."""
    shown = {}
    for compute in ("roofline", "gpu"):
        prefix = tmp_path / compute
        made = run_cli("translate", "llama-3-8b", "--tp", "2", "--seq-len", "512", "--compute", compute,
                       "--format", "chakra-et", "-o", prefix)  # fmt: skip
        assert made.exit_code == 0, made.stderr
        nodes = _read(tmp_path / f"{compute}.0.et")
        computes = [n for n in nodes if n.type == COMP]
        flops = sum(_attrs(n).get("num_ops", ("", 0))[1] for n in computes)
        micros = sum(n.duration_micros for n in computes)
        done = run_cli("inspect", prefix)
        assert done.exit_code == 0
        shown_lines = done.stdout.splitlines()
        at = next(i for i, line in enumerate(shown_lines) if "TFLOP/s" in line)
        header, first = shown_lines[at : at + 2]
        assert header.split()[5:7] == ["TFLOP/s", "peak%"]  # after "compute us", "GFLOP"
        rate, mfu = first.split()[4:6]
        assert float(rate) == pytest.approx(flops / micros / 1e6, abs=0.06)
        assert float(mfu.rstrip("%")) == pytest.approx(flops / micros / 1e6 / 312 * 100, abs=0.06)
        shown[compute] = float(rate)
    assert shown["gpu"] < shown["roofline"] <= 312


@pytest.mark.parametrize("layout", [{"dp": 2}, {"tp": 2, "dp": 2}], ids=["dp", "tp-dp"])
def test_a_tied_parameter_is_updated_once(layout: dict[str, int], tmp_path: Path) -> None:
    """GPT-2's LM head reuses the word embedding's weight (transformers' tie_word_embeddings): the
    optimizer step writes it updated once, as every trace writes each tensor once (for ASTRA-sim
    2.x's memory tracking, test_every_rank_carries_what_astra_sim_reads); the step node wrote it
    twice, once for each unit holding it."""
    import modtrans

    plan = modtrans.translate("gpt2", **layout).plan
    assert plan is not None
    traces, _ = _files(plan, tmp_path)
    for path in traces:
        # the step, after Megatron's gradient norm's kernel and all-reduce (strategy/llm/clipping.py)
        update = [n for n in _read(path) if n.name.endswith("_UPDATE")][-1]
        written = [name for name, _ in _pairs(_attrs(update)["outputs"][1])]
        assert len(written) == len(set(written))
        assert "transformer.wte.weight#updated" in written
