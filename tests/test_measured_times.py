"""--per-layer-times: measured compute times in (modtrans/cost/measured.py), projected onto a
rank's share by the cost model, from a CSV or an AICB/AIOB computation profile."""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import Result

from modtrans import cost, pipeline
from modtrans.cost import measured, profiler
from modtrans.ir.document import ModelIR
from modtrans.workload.parse import parse

Run = Callable[..., Result]


def _lines(path: Path) -> dict[str, list[str]]:
    workload = parse(path.read_text()).workload
    assert workload is not None
    return {
        x.name: [str(x.fwd.compute_time), str(x.input_grad.compute_time), str(x.weight_grad.compute_time)]
        for x in workload.layers
    }


@functools.cache
def _model(name: str) -> int:
    """The GPU model's forward ticks for one IR layer of GPT-3 13B, whole."""
    ir, _ = pipeline.extract_checked("gpt3-13b")
    assert ir is not None
    return cost.get("gpu").times(ir.layer(name)).forward


def test_a_measured_layer_is_projected_onto_the_tensor_parallel_shard(run_cli: Run, tmp_path: Path) -> None:
    """GPT-3 13B's first MLP layer measured whole at 300 us forward: at T = 8 a rank computes an
    eighth of its GEMM, charged 300 us x the model's time for the shard / for the whole, so between
    300 / 8 and 300 / 8 x (the model's own shard-to-whole slowdown); phases nobody measured keep the
    model's times."""
    times = tmp_path / "times.csv"
    times.write_text("layer,phase,time_ns\ntransformer.h.*.mlp.c_fc,fwd,300000\n")
    plain, measured = tmp_path / "plain.txt", tmp_path / "measured.txt"
    assert run_cli("translate", "gpt3-13b", "--tp", "8", "-o", plain).exit_code == 0
    assert run_cli("translate", "gpt3-13b", "-o", tmp_path / "plain_whole.txt").exit_code == 0
    whole = run_cli("translate", "gpt3-13b", "--per-layer-times", times, "-o", tmp_path / "whole.txt")
    assert whole.exit_code == 0, whole.output
    # the line holds c_fc and the GELU folded into it, which keeps the model's time
    gelu = int(_lines(tmp_path / "plain_whole.txt")["transformer.h.3.mlp.c_fc"][0]) - _model(
        "transformer.h.3.mlp.c_fc"
    )
    assert int(_lines(tmp_path / "whole.txt")["transformer.h.3.mlp.c_fc"][0]) == 300_000 + gelu
    done = run_cli("translate", "gpt3-13b", "--tp", "8", "--per-layer-times", times, "-o", measured)
    assert done.exit_code == 0, done.output
    a, b = _lines(plain), _lines(measured)
    for block in (0, 39):
        shard = int(b[f"transformer.h.{block}.mlp.c_fc"][0])
        assert 300_000 / 8 <= shard <= 300_000 / 8 * 1.5
        assert b[f"transformer.h.{block}.mlp.c_fc"][1:] == a[f"transformer.h.{block}.mlp.c_fc"][1:]
    assert b["transformer.h.0.attn.c_attn"] == a["transformer.h.0.attn.c_attn"]


# AICB's computation profile, as its utils.extract_averages reads it (aliyun/aicb 23eec3c,
# workload/aiob_inputs/Example.txt has this layout): microseconds of one forward per section
AIOB = """train_iter:10
Emb:
    time_gpu_max: 900
    time_gpu_min: 700
    time_gpu_avg: 800
layernorm:
    time_gpu_avg: 70
atten_qkv:
    time_gpu_avg: 880
atten_flash:
    time_gpu_avg: 510
atten_linear:
    time_gpu_avg: 350
layernorm2:
    time_gpu_avg: 71
mlp_linear_1:
    time_gpu_avg: 1400
mlp_gelu:
    time_gpu_avg: 250
mlp_linear_2:
    time_gpu_avg: 740
layernorm_post:
    time_gpu_avg: 69
logit_time:
    time_gpu_avg: 12800
param_time:
    time_gpu_avg: 17000
"""


def test_an_aiob_profile_times_every_block_by_role(run_cli: Run, tmp_path: Path) -> None:
    """Each AIOB section's forward lands on the layers of its role in every block (layernorm: the
    block's first norm; atten_qkv: GPT's fused c_attn; atten_flash: the attention core, folded into
    c_attn's line; atten_linear: the output projection; mlp_linear_1 with mlp_gelu: c_fc and its
    GELU; mlp_linear_2: the second MLP layer); the backward is the model's ratio to its forward."""
    profile = tmp_path / "aiob.txt"
    profile.write_text(AIOB)
    out, plain = tmp_path / "a.txt", tmp_path / "p.txt"
    done = run_cli("translate", "gpt3-13b", "--per-layer-times", profile, "-o", out)
    assert done.exit_code == 0, done.output
    assert run_cli("translate", "gpt3-13b", "-o", plain).exit_code == 0
    lines, model = _lines(out), _lines(plain)

    def measured(line: str, owner: str) -> int:
        """The line's forward less what the layers folded into it keep of the model's time."""
        return int(lines[line][0]) - (int(model[line][0]) - _model(owner))

    for block in (0, 39):
        p = f"transformer.h.{block}"
        assert lines[f"{p}.ln_1"][0] == "70000"
        assert lines[f"{p}.ln_2"][0] == "71000"
        # the attention core (scores, softmax, context) is folded into c_attn's line
        assert int(lines[f"{p}.attn.c_attn"][0]) == 880_000 + 510_000
        assert measured(f"{p}.attn.c_proj", f"{p}.attn.c_proj") == 350_000  # + the residual add
        assert int(lines[f"{p}.mlp.c_fc"][0]) == 1_400_000 + 250_000  # with its GELU
        assert measured(f"{p}.mlp.c_proj", f"{p}.mlp.c_proj") == 740_000
    assert lines["transformer.ln_f"][0] == "69000"
    assert lines["lm_head"][0] == "12800000"
    # Emb over the two embeddings, in proportion to the model's times (each rounded up to a tick)
    assert int(lines["transformer.wte"][0]) + int(lines["transformer.wpe"][0]) - 800_000 in (0, 1, 2)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("layer,phase,time_ns\ntransformer.h.0.ln_1,forward,1\n", "phase of fwd, ig, wg, update"),
        ("transformer.h.0.ln_1,fwd,soon\n", "not a time in nanoseconds"),
        ("transformer.h.0.ln_1,fwd,-5\n", "is not a layer's time"),
    ],
)
def test_a_bad_row_is_a_usage_error_naming_its_line(
    run_cli: Run, tmp_path: Path, text: str, said: str
) -> None:
    times = tmp_path / "t.csv"
    times.write_text(text)
    done = run_cli("translate", "gpt2", "--per-layer-times", times, "-o", tmp_path / "g.txt")
    assert done.exit_code == 2, done.output
    assert said in done.output
    assert not (tmp_path / "g.txt").exists()


def test_a_name_no_layer_has_is_a_warning(run_cli: Run, tmp_path: Path) -> None:
    times = tmp_path / "t.csv"
    times.write_text("nothing.like.this,fwd,5\n")
    done = run_cli("translate", "gpt2", "--per-layer-times", times, "-o", tmp_path / "g.txt")
    assert done.exit_code == 0
    assert "X515" in done.output
    missing = run_cli(
        "translate", "gpt2", "--per-layer-times", tmp_path / "none.csv", "-o", tmp_path / "h.txt"
    )
    assert missing.exit_code == 2


ALPHABET = list("layer,phsfwdigu_:.*0123456789 -\n\t#eE+time_gpu_avg:")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(ALPHABET), max_size=300))
def test_any_text_is_a_table_or_one_line_refusal(text: str) -> None:
    """The reader of measured times is fed anything: a table, or a CostError, nothing else."""
    refusal = ""
    try:
        table, warnings = measured.parse(text, _ir(), cost.get("gpu"))
    except cost.CostError as error:
        refusal = str(error)
        table, warnings = {}, []
    assert "\n" not in refusal
    assert all(isinstance(w, str) for w in warnings)
    phases = [(phase, seconds) for t in table.values() for phase, seconds in t.items()]
    assert all(phase in measured.PHASES and seconds >= 0 for phase, seconds in phases)


@functools.cache
def _ir() -> ModelIR:
    ir, _ = pipeline.extract_checked("gpt2")
    assert ir is not None
    return ir


PROFILER = Path(__file__).resolve().parents[1] / "fixtures" / "profiler"


def _events(name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress((PROFILER / name).read_bytes()))["traceEvents"]
    return events


def test_a_profiler_trace_times_each_module_call_forward_and_backward(run_cli: Run, tmp_path: Path) -> None:
    """fixtures/profiler: one CPU training step of transformers' GPT2LMHeadModel (2 blocks). The
    profiler labels h.1's MLP input projection `nn.Module: Conv1D_6` (the 7th Conv1D called:
    c_attn, c_proj, c_fc, c_proj per block); its forward is that span, its backward the autograd
    nodes its ops created (the same `Sequence number`): the addmm's AddmmBackward0 and its views'."""
    events = _events("gpt2-tiny-step.json.gz")
    (call,) = [e for e in events if e.get("name") == "nn.Module: Conv1D_6"]
    inside = {
        e["args"]["Sequence number"]
        for e in events
        if e.get("cat") == "cpu_op"
        and "Sequence number" in e.get("args", {})
        and call["ts"] <= e["ts"] <= call["ts"] + call["dur"]
    }
    nodes = [
        (e["name"], e["dur"])
        for e in events
        if e.get("name", "").startswith("autograd::engine::evaluate_function: ")
        and e["args"].get("Sequence number") in inside
    ]
    assert "autograd::engine::evaluate_function: AddmmBackward0" in dict(nodes)
    ir, _ = pipeline.extract_checked(PROFILER / "gpt2-tiny.json", input_shapes={"input_ids": (2, 32)})
    assert ir is not None
    table, warnings = measured.parse(json.dumps({"traceEvents": events}), ir, cost.get("gpu"))
    assert not warnings
    fc = table["transformer.h.1.mlp.c_fc"]
    assert fc["fwd"] == pytest.approx(call["dur"] * 1e-6)
    assert fc["ig"] + fc["wg"] == pytest.approx(sum(d for _, d in nodes) * 1e-6)
    assert {"transformer.wte", "transformer.h.0.ln_1", "lm_head"} <= set(table)
    out = tmp_path / "g.txt"
    done = run_cli(
        "translate", PROFILER / "gpt2-tiny.json", "--seq-len", "32", "--micro-batch", "2",
        "--per-layer-times", PROFILER / "gpt2-tiny-step.json.gz", "-o", out,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    fc_line = next(
        line for line in out.read_text().splitlines() if line.startswith("transformer.h.1.mlp.c_fc")
    )
    # ns: the measured call, and the GeLU after it that the workload line folds in (modelled)
    gelu = cost.get("gpu").times(ir.layer("transformer.h.1.mlp.act")).forward
    assert int(fc_line.split()[2]) == round(call["dur"] * 1000) + gelu


def test_a_gpu_trace_charges_each_span_the_kernels_it_launched() -> None:
    """A real GPU trace (HolisticTraceAnalysis's AlexNet benchmark, fixtures/profiler): a span's
    time is the duration of the kernels whose launch (the runtime call of the same correlation)
    falls inside it on its thread, counted here kernel by kernel."""
    events = _events("hta-alexnet-gpu.json.gz")
    trace = profiler.Trace(events)
    kernels = {e["args"]["correlation"]: e["dur"] for e in events if e.get("cat") == "kernel"}
    launches = [
        e for e in events if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") in kernels
    ]
    spans = [s for s in trace.spans if s.cat == "user_annotation" and s.name.endswith("|measure|forward]")]
    assert spans
    for span in spans:
        expected = sum(
            kernels[e["args"]["correlation"]]
            for e in launches
            if span.start <= e["ts"] <= span.end and (e["pid"], e["tid"]) == span.thread
        )
        assert expected > 0
        assert trace.busy_us(span) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("trace", "said"),
    [
        ('{"traceEvents": []}', "names no layer of the model"),
        ('{"traceEvents": 5}', "traceEvents list"),
        ('{"traceEvents": [', "not a profiler trace"),
    ],
)
def test_an_unusable_profiler_trace_is_one_line(run_cli: Run, tmp_path: Path, trace: str, said: str) -> None:
    times = tmp_path / "t.json"
    times.write_text(trace)
    done = run_cli("translate", "gpt2", "--per-layer-times", times, "-o", tmp_path / "g.txt")
    assert done.exit_code == 2, done.output
    assert said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_trace_of_another_model_or_a_broken_gzip_is_refused(run_cli: Run, tmp_path: Path) -> None:
    other = run_cli(
        "translate",
        "gpt2",
        "--per-layer-times",
        PROFILER / "gpt2-tiny-step.json.gz",
        "-o",
        tmp_path / "g.txt",
    )
    assert other.exit_code == 2
    assert "not the same model" in other.stderr
    broken = tmp_path / "b.json.gz"
    broken.write_bytes(gzip.compress(b'{"traceEvents": []}')[:-9])
    done = run_cli("translate", "gpt2", "--per-layer-times", broken, "-o", tmp_path / "h.txt")
    assert done.exit_code == 2
    assert "gzip" in done.stderr


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(), st.text(max_size=12))
_EVENT = st.dictionaries(
    st.sampled_from(["ph", "ts", "dur", "name", "cat", "pid", "tid", "args"]),
    st.one_of(
        _VALUES,
        st.sampled_from(["X", "cpu_op", "kernel", "cuda_runtime", "nn.Module: Linear_0", "python_function"]),
        st.dictionaries(st.sampled_from(["correlation", "Sequence number"]), _VALUES),
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_EVENT, max_size=30))
def test_any_event_list_is_a_table_or_one_line_refusal(events: list[dict[str, Any]]) -> None:
    refusal = ""
    try:
        table, _ = measured.parse(json.dumps({"traceEvents": events}), _ir(), cost.get("gpu"))
    except cost.CostError as error:
        refusal, table = str(error), {}
    assert "\n" not in refusal
    assert all(s >= 0 for t in table.values() for s in t.values())
