"""--recompute full --recompute-method uniform|block --recompute-num-layers N: the segments
Megatron-Core checkpoints, held to its own loop (NVIDIA/Megatron-LM core_r0.14.0,
megatron/core/transformer/transformer_block.py, TransformerBlock._checkpointed_forward) run here
as written, and what a plan does with them: which blocks' forwards run again before which
backward, and what each stage keeps (Korthikanti et al. 2022, section 5: a checkpoint keeps its
input, 2 sbh in 16 bits; the segment being recomputed holds its full activations meanwhile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from modtrans.api import run
from modtrans.plan.model import Compute, Plan, Step
from modtrans.request import Request, prepare
from modtrans.strategy.llm import checkpoints
from tests.refusals import refused_in_one_line, text_formats_refuse

BLOCKS, STAGES, SEQ, H = 32, 2, 256, 4096  # Llama 3 8B's blocks and hidden width; two stages of 16


def _checkpointed_forward(
    method: str, recompute_num_layers: int, num_layers_per_pipeline_rank: int
) -> list[tuple[int, int, bool]]:
    """_checkpointed_forward's two loops as written (fp8 off: recompute_skip_num_layers stays 0),
    each call of checkpoint_handler(custom(start, end)) recorded as (start, end, True) and each
    plain custom(start, end)(...) as (start, end, False)."""
    calls: list[tuple[int, int, bool]] = []
    if method == "uniform":
        layer_idx = 0
        while layer_idx < num_layers_per_pipeline_rank:
            calls.append((layer_idx, layer_idx + recompute_num_layers, True))
            layer_idx += recompute_num_layers
    elif method == "block":
        recompute_skip_num_layers = 0
        for layer_idx in range(num_layers_per_pipeline_rank):
            if (
                layer_idx >= recompute_skip_num_layers
                and layer_idx < recompute_num_layers + recompute_skip_num_layers
            ):
                calls.append((layer_idx, layer_idx + 1, True))
            else:
                calls.append((layer_idx, layer_idx + 1, False))
    return calls


@pytest.mark.parametrize(
    ("method", "n", "layers"),
    [
        ("uniform", 1, 16),
        ("uniform", 4, 16),
        ("uniform", 2, 6),
        ("block", 4, 16),
        ("block", 1, 5),
        ("block", 9, 8),
    ],
)
def test_the_segments_are_those_megatron_checkpoints(method: str, n: int, layers: int) -> None:
    chunk = list(range(100, 100 + layers))  # a chunk's blocks, by their index in the model
    want = [tuple(chunk[s:e]) for s, e, kept in _checkpointed_forward(method, n, layers) if kept]
    assert list(checkpoints.segments(chunk, checkpoints.Placement(method, n))) == want


def test_uniform_segments_must_tile_the_chunk_as_megatrons_indexing_needs() -> None:
    """custom(12, 16) of a 14-layer chunk asks _get_layer(14): past the chunk's last layer."""
    with pytest.raises(checkpoints.PlacementError, match="does not divide a model chunk of 14 blocks"):
        checkpoints.segments(list(range(14)), checkpoints.Placement("uniform", 4))


def _plan(
    recompute: str, method: str | None = None, layers: int | None = None, vpp: int | None = None
) -> Plan:
    request = Request(
        model="llama-3-8b", npus=8, tp=2, pp=STAGES, seq_len=SEQ, device="h100", recompute=recompute,
        recompute_method=method, recompute_num_layers=layers, vpp=vpp,
    )  # fmt: skip
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result.plan


def _block(plan: Plan, layer: int) -> int | None:
    parts = plan.layers[layer].name.split(".")
    return int(parts[2]) if parts[:2] == ["model", "layers"] else None


def _reruns(plan: Plan, stage_rank: int) -> list[tuple[int, ...]]:
    """Each run of recomputed forwards in the rank's first micro-batch's backward, as the blocks
    they belong to, up to the backward they precede."""
    runs: list[list[int]] = []
    open_run = False
    for op in plan.program(stage_rank):
        if not isinstance(op, Compute) or op.step is Step.FWD:
            continue
        if op.step is Step.RECOMPUTE:
            if not open_run:
                runs.append([])
            open_run = True
            block = _block(plan, op.layer)
            if block is not None and block not in runs[-1]:
                runs[-1].append(block)
        else:
            open_run = False
    per_micro = len(runs) // plan.micro_batches
    return [tuple(r) for r in runs[:per_micro]]


def test_uniform_reruns_each_segment_whole_before_its_last_blocks_backward() -> None:
    """Uniform 4 on a stage of 16 blocks: 4 segments, each's 4 forwards run again together when
    the backward reaches it, the last segment first; every block one segment of its own without
    the options (Megatron-LM's --recompute-method uniform --recompute-num-layers 1)."""
    last = 4  # the rank of stage 1 (T = 2, P = 2: ranks 0-3 stage 0; the mesh numbers TP fastest)
    uniform = _plan("full", "uniform", 4)
    assert _reruns(uniform, 0) == [(12, 13, 14, 15), (8, 9, 10, 11), (4, 5, 6, 7), (0, 1, 2, 3)]
    assert _reruns(uniform, last) == [(28, 29, 30, 31), (24, 25, 26, 27), (20, 21, 22, 23), (16, 17, 18, 19)]
    every = _plan("full")
    assert _reruns(every, 0) == [(b,) for b in range(15, -1, -1)]
    assert _reruns(_plan("full", "uniform", 1), 0) == _reruns(every, 0)


def test_block_reruns_the_first_n_blocks_of_each_stage_alone() -> None:
    block = _plan("full", "block", 3)
    assert _reruns(block, 0) == [(2,), (1,), (0,)]
    assert _reruns(block, 4) == [(18,), (17,), (16,)]


def test_block_counts_the_first_n_of_each_interleaved_chunk() -> None:
    """Under the interleaved schedule each of a stage's V model chunks is a TransformerBlock of its
    own (num_layers_per_pipeline_rank its layers): V = 2 chunks of 8 blocks a stage, stage 0
    holding blocks 0-7 and 16-23; block 2 checkpoints 0, 1, 16 and 17 there."""
    plan = _plan("full", "block", 2, vpp=2)
    reran = {
        _block(plan, op.layer)
        for op in plan.program(0)
        if isinstance(op, Compute) and op.step is Step.RECOMPUTE
    }
    assert reran == {0, 1, 16, 17}


def test_each_stage_keeps_its_checkpoints_inputs_and_one_segments_activations() -> None:
    """Stage 0 (no output layer) in flight: 1F1B's P = 2 micro-batches. Per micro-batch a block
    without recomputation keeps F bytes (the plain plan's, over its 16 blocks and 2 micro-batches,
    the embedding's int64 ids and dropout mask 8 sb + sbh aside), a checkpoint its input I = 2 sbh
    (bf16, T = 2 without SP: whole on each rank). At the peak, beside them, the segment whose
    backward runs holds its blocks' F less the input already counted."""
    sb = SEQ * 1
    embedding = (8 * sb + sb * H) * 2  # the int64 ids and 1-byte dropout mask, P micro-batches in flight
    plain = _plan("none").memory[0].activations
    f = (plain - embedding) / (16 * 2)
    i = 2 * sb * H
    expected = {
        ("uniform", 1): 16 * i * 2 + (f - i),
        ("uniform", 4): 4 * i * 2 + (4 * f - i),
        ("uniform", 16): 1 * i * 2 + (16 * f - i),
        ("block", 4): (4 * i + 12 * f) * 2 + (f - i),
        ("block", 16): 16 * i * 2 + (f - i),
    }
    for (method, n), bytes_ in expected.items():
        got = _plan("full", method, n).memory[0].activations
        assert got - embedding == pytest.approx(bytes_, rel=1e-9), (method, n)


def test_uniform_and_block_rerun_what_they_checkpoint() -> None:
    """Recomputed FLOPs per iteration: every block's forward once under uniform (any N), the first
    N blocks' of each stage under block: N / 16 of it."""

    def rerun_flops(plan: Plan) -> int:
        return sum(
            op.flops for op in plan.program(0) if isinstance(op, Compute) and op.step is Step.RECOMPUTE
        )

    every = rerun_flops(_plan("full"))
    assert rerun_flops(_plan("full", "uniform", 8)) == every
    assert rerun_flops(_plan("full", "block", 4)) * 4 == every


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        (
            ["--recompute-method", "uniform", "--recompute-num-layers", "2"],
            "they need --recompute full, not none",
        ),
        (
            ["--recompute", "selective", "--recompute-method", "block", "--recompute-num-layers", "2"],
            "they need --recompute full, not selective",
        ),
        (["--recompute", "full", "--recompute-method", "block"], "--recompute-num-layers N >= 1 together"),
        (["--recompute", "full", "--recompute-num-layers", "2"], "--recompute-num-layers N >= 1 together"),
        (
            ["--recompute", "full", "--recompute-fraction", "0.5", "--recompute-method", "block",
             "--recompute-num-layers", "2"],
            "give one",
        ),
        (
            ["--recompute", "full", "--recompute-method", "uniform", "--recompute-num-layers", "5"],
            "does not divide a model chunk of 16 blocks",
        ),
        (
            ["--recompute", "full", "--recompute-method", "block", "--recompute-num-layers", "2",
             "--framework", "torchtitan"],
            "it needs --framework megatron",
        ),
    ],
)  # fmt: skip
def test_the_command_line_refuses_what_megatron_refuses(
    run_cli: Any, tmp_path: Path, options: list[str], rule: str
) -> None:
    result: Result = run_cli(
        "translate", "llama-3-8b", "--tp", "2", "--pp", "2", "--dp", "2", *options, "-o", tmp_path / "x"
    )
    refused_in_one_line(result, rule)


def test_traces_carry_the_placement_and_the_text_formats_refuse_it(run_cli: Any, tmp_path: Path) -> None:
    """A Chakra set validates and its metadata says the placement; an ASTRA-sim 1.0 or SimAI file,
    whose FWD_IN_BCKWD recomputes every layer alike, is refused (D310)."""
    options = ["--tp", "2", "--pp", "2", "--dp", "2", "--seq-len", "128", "--recompute", "full"]
    options += ["--recompute-method", "uniform", "--recompute-num-layers", "4"]
    prefix = tmp_path / "u"
    made: Result = run_cli("translate", "llama-3-8b", *options, "--format", "chakra-et", "-o", prefix)
    assert made.exit_code == 0, made.output
    checked: Result = run_cli("validate", prefix)
    assert checked.exit_code == 0, checked.output
    llm = json.loads(prefix.with_name("u.et-meta.json").read_text(encoding="utf-8"))["parallel"]["llm"]
    assert (llm["recompute_method"], llm["recompute_num_layers"]) == ("uniform", 4)
    one_stage = ["--tp", "2", "--dp", "4", *options[6:]]  # ASTRA-sim 1.0's one program for every NPU
    text_formats_refuse(run_cli, one_stage, tmp_path, "--recompute-method uniform --recompute-num-layers 4")


def test_block_over_every_block_of_a_chunk_is_full_recomputation_in_the_text_formats(
    run_cli: Any, tmp_path: Path
) -> None:
    """Megatron's block method checkpoints the first N blocks of a chunk, each alone
    (TransformerBlock._checkpointed_forward, `if layer_idx < recompute_num_layers`): at N >= the
    chunk's 32 blocks that is every block, what FWD_IN_BCKWD says, so the files are --recompute
    full's byte for byte rather than a D310 refusal."""
    options = ["--tp", "2", "--dp", "4", "--seq-len", "128", "--recompute", "full"]
    for dialect in ("astra-sim", "simai"):
        files = []
        for name, extra in (
            ("full", []),
            ("block", ["--recompute-method", "block", "--recompute-num-layers", "40"]),
        ):
            out = tmp_path / f"{dialect}-{name}.txt"
            made: Result = run_cli(
                "translate", "llama-3-8b", *options, *extra, "--dialect", dialect, "-o", out
            )
            assert made.exit_code == 0, made.output
            files.append(out.read_bytes())
        assert files[0] == files[1]
    text_formats_refuse(
        run_cli, [*options, "--recompute-method", "block", "--recompute-num-layers", "31"], tmp_path,
        "--recompute-method block --recompute-num-layers 31",
    )  # fmt: skip
