"""simulate/fusion.py: the trace set `modtrans simulate` gives ASTRA-sim 2.x, each chain of computes
one node. Real translations (a Megatron-LM 2022 GPT as Korthikanti et al. ran it, interleaved with
full recomputation and the optimizer's step; DualPipeV, whose computes may run in more than one
order; chakra/fuse.py's layouts), read back with Chakra's own reader (mlc-chakra); each joined
pair checked against the rule by a walk of the whole graph; the set timed by the exact tier's
reading of trace files, and where a binary is given (MODTRANS_ASTRA_SIM) by the simulator itself,
plain against fused, every rank to the nanosecond."""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

import pytest

import modtrans.estimate as estimate
from modtrans.chakra import write
from modtrans.request import prepare, request_of
from modtrans.simulate import astra2, fusion, network
from tests.chakra_io import read_trace
from tests.conftest import planned
from tests.test_chakra_fuse import LAYOUTS

COMP, COLL, SEND, RECV = 4, 7, 5, 6  # Chakra's NodeType (et_def.proto)

GPT_2022 = {  # Korthikanti et al. 2022's 175B layout (Table 3) at 8 layers and 8 ranks
    "tp": 2, "pp": 4, "vpp": 2, "schedule": "interleaved", "dp": 1, "micro_batch": 1,
    "global_batch": 8, "recompute": "full", "seq_len": 2048, "device": "a100",
    "attention": "eager", "framework": "megatron-2022",
}  # fmt: skip
DUALPIPEV = {"tp": 2, "pp": 2, "dp": 2, "global_batch": 8, "schedule": "dualpipev"}


def _gpt(folder: Path) -> str:
    """A GPT-2-architecture configuration as Megatron-LM trained it in fp16 (bench/configs.py)."""
    path = folder / "gpt.json"
    config = {
        "model_type": "gpt2", "n_embd": 1024, "n_layer": 8, "n_head": 16, "n_positions": 2048,
        "vocab_size": 51200, "torch_dtype": "float16", "attn_pdrop": 0.1,
    }  # fmt: skip
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


CASES = [
    ("gpt-2022", GPT_2022),
    ("llama-3-8b", DUALPIPEV),
    *LAYOUTS,
]


def _traces(model: str, options: dict[str, object], folder: Path) -> tuple[str, int]:
    """The layout's traces as `modtrans translate` writes them (1 ns ticks), and its ranks."""
    folder.mkdir(parents=True, exist_ok=True)
    source = _gpt(folder) if model == "gpt-2022" else model
    prepared = prepare(request_of(source, {**options, "format": "chakra-et", "output": str(folder / "x")}))
    plan = planned(prepared)
    write(plan, folder / "plain", tick_ns=1.0)
    return str(folder / "plain"), plan.npus


def _fused(plain: str, npus: int, folder: Path) -> tuple[str, fusion.Fused]:
    """The set fused beside it, with the group file and sidecar the exact tier reads."""
    made = fusion.fused_set(plain, npus, str(folder))
    for suffix in (".comm_groups.json", ".et-meta.json"):
        if Path(plain + suffix).is_file():
            Path(made.prefix + suffix).write_bytes(Path(plain + suffix).read_bytes())
    return made.prefix, made


def _closure(nodes: list, step: int) -> list[set[int]]:  # type: ignore[type-arg]
    """Per node (by index), the computes it waits for (`step` 1) or that wait for it (-1), by a
    walk of every path: the rule's oracle."""
    where = {n.id: i for i, n in enumerate(nodes)}
    parents = [[where[d] for d in {*n.data_deps, *n.ctrl_deps}] for n in nodes]
    links: list[list[int]] = parents if step > 0 else [[] for _ in nodes]
    if step < 0:
        for i, found in enumerate(parents):
            for k in found:
                links[k].append(i)
    out: list[set[int]] = [set() for _ in nodes]
    order = range(len(nodes)) if step > 0 else range(len(nodes) - 1, -1, -1)
    for i in order:
        for k in links[i]:
            out[i] |= out[k]
            if nodes[k].type == COMP:
                out[i].add(k)
    return out


@pytest.mark.parametrize(
    ("model", "options"), CASES, ids=lambda x: x if isinstance(x, str) else "-".join(map(str, x.values()))
)
def test_the_fused_set_keeps_every_communication_and_the_time(
    model: str, options: dict[str, object], tmp_path: Path
) -> None:
    """Every rank: the same collectives, sends and receives in the same order with the same
    attributes, the same compute microseconds in fewer nodes, every dependency a node of the
    trace; chakra/fuse.py's node count where its plan-level rule holds (all but DualPipeV); each
    stage timed alike to the nanosecond (estimate.trace_set)."""
    plain, npus = _traces(model, options, tmp_path / "in")
    (tmp_path / "out").mkdir()
    fused, made = _fused(plain, npus, tmp_path / "out")
    counted = [0, 0]
    for rank in range(npus):
        _, before = read_trace(Path(f"{plain}.{rank}.et"))
        _, after = read_trace(Path(f"{fused}.{rank}.et"))
        counted[0] += len(before)
        counted[1] += len(after)

        def comms(nodes: list) -> list:  # type: ignore[type-arg]
            return [(n.type, n.name, str(n.attr)) for n in nodes if n.type in (COLL, SEND, RECV)]

        assert comms(after) == comms(before)
        assert sum(n.duration_micros for n in after if n.type == COMP) == sum(
            n.duration_micros for n in before if n.type == COMP
        )
        ids = {n.id for n in after}
        assert all(set(n.data_deps) | set(n.ctrl_deps) <= ids for n in after)
    assert (made.nodes, made.kept) == tuple(counted)
    assert (made.kept < made.nodes) is (options.get("framework") != "fsdp")
    a = estimate.trace_set(plain, network="hgx-h100")
    b = estimate.trace_set(fused, network="hgx-h100")
    assert [round(s.wall_s * 1e9) for s in b.stages] == [round(s.wall_s * 1e9) for s in a.stages]
    assert [round(s.compute_s * 1e9) for s in b.stages] == [round(s.compute_s * 1e9) for s in a.stages]


@pytest.mark.parametrize(("model", "options"), CASES[:2], ids=["gpt-2022", "dualpipev"])
def test_every_joined_pair_has_no_other_compute_that_could_come_between(
    model: str, options: dict[str, object], tmp_path: Path
) -> None:
    """Against a walk of every path: each pair joined is one the second waits for alone and is
    all that waits for it, every other compute waited for by the first or waiting for the second.
    DualPipeV's computes of two micro-batches may run in either order: there the rule holds pairs
    apart that the plan-level fusion, which reads the program's order, joins. So does Megatron's
    2022 layout at D = 1: each bucket's `buffer /= 1` after the schedule waits for its unit's last
    weight gradient alone, and the next unit's backward may run before it (program.py,
    _alone_kernels): both cases hold some pairs apart."""
    plain, npus = _traces(model, options, tmp_path)
    held_apart = 0
    for rank in (0, npus - 1):
        _, nodes = read_trace(Path(f"{plain}.{rank}.et"))
        ups, downs = _closure(nodes, 1), _closure(nodes, -1)
        computes = [i for i, n in enumerate(nodes) if n.type == COMP]
        chains = fusion._chains([fusion._node(n.SerializeToString()) for n in nodes])
        joined = {(m[k], m[k + 1]) for m in chains.values() for k in range(len(m) - 1)}
        for a, b in itertools.pairwise(computes):
            alone = (
                set(nodes[b].data_deps) | set(nodes[b].ctrl_deps) == {nodes[a].id}
                and sum(nodes[a].id in {*n.data_deps, *n.ctrl_deps} for n in nodes) == 1
                and nodes[a].duration_micros > 0
                and nodes[b].duration_micros > 0
            )
            others = set(computes) - {a, b}
            ordered = others <= ups[a] | downs[b]
            assert ((a, b) in joined) is (alone and ordered), (rank, a, b)
            held_apart += alone and not ordered
    assert held_apart > 0


def test_a_copy_that_cannot_be_written_leaves_the_set_as_written(tmp_path: Path) -> None:
    """Fusion only saves the simulator work: where the copy cannot be made (here its folder is a
    file), the simulator is given the traces as written, no traceback."""
    plain, npus = _traces("llama-3-8b", {"tp": 2, "pp": 2, "dp": 2, "global_batch": 8}, tmp_path)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("", encoding="utf-8")
    made = fusion.fused_set(plain, npus, str(blocked))
    assert (made.prefix, made.nodes, made.kept) == (plain, 0, 0)


@pytest.mark.skipif(not os.environ.get("MODTRANS_ASTRA_SIM"), reason="no ASTRA-sim 2.x binary given")
@pytest.mark.parametrize(("model", "options"), CASES[:3], ids=["gpt-2022", "dualpipev", "llama-tp2-pp2-dp2"])
def test_the_simulator_runs_the_fused_set_to_the_same_nanosecond_on_every_rank(
    model: str, options: dict[str, object], tmp_path: Path
) -> None:
    """ASTRA-sim 2.x on the traces as written and as `modtrans simulate` gives them: every rank's
    iteration and exposed communication alike."""
    plain, npus = _traces(model, options, tmp_path)
    binary = astra2.binary(None)
    runs = []
    for fuse in (False, True):
        for _ in range(3):  # it exits early now and then (simulate/astra2.py): run again
            found, log = astra2.run(binary, plain, npus, network("hgx-h100", npus), fuse=fuse)
            if found.finished:
                break
        assert found.finished, "ASTRA-sim did not finish the run"
        finished = r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+)"
        runs.append(sorted(re.findall(finished, log)))
    assert len(runs[0]) == npus
    assert runs[1] == runs[0]
