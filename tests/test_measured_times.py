"""--per-layer-times: measured compute times in (modtrans/cost/measured.py), projected onto a
rank's share by the cost model, from a CSV or an AICB/AIOB computation profile."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import Result

from modtrans import cost, pipeline
from modtrans.cost import measured
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
