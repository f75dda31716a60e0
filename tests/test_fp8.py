"""--precision fp8: Transformer Engine's FP8 linears under Megatron-Core (modtrans/cost/fp8.py,
modtrans/strategy/llm/fp8.py), each number against its independent source: the published cuBLASLt
FP8 sweep of the H100 and its BabelStream bandwidth (Azure/AI-benchmarking-guide 8fd0c6e,
Azure_Results/ND_H100_v5_results.md), the bytes TE's kernels move and the tensors its modules save
as TE v1.8's source writes them (NVIDIA/TransformerEngine 3ec998e, transformer_engine/pytorch/
module/linear.py, layernorm_linear.py, base.py), and Llama 3 8B's published configuration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans import cost, pipeline
from modtrans.comm import CommType
from modtrans.cost.gpu import Gpu
from modtrans.ir.document import Activation, Block, Flops, Gemm, Kind, Layer, Part
from modtrans.plan.model import Collective, Compute, Plan, Step
from modtrans.request import prepare, request_of
from tests.refusals import refused_in_one_line

Run = Callable[..., Result]

# Azure/AI-benchmarking-guide 8fd0c6e, Azure_Results/ND_H100_v5_results.md: "GEMM CuBLASLt ... FP8,
# and 10,000 warmup iterations", m = n = k = 8192: 1290.1 TFLOPS; "HBM Bandwidth": Add 2.97 TB/s
H100_FP8_8192 = 1290.1e12
H100_STREAM = 2.97e12

# Llama 3 8B's published configuration (meta-llama/Meta-Llama-3-8B config.json, the zoo's copy)
H, F, LAYERS, HEADS, KV, HEAD = 4096, 14336, 32, 32, 8, 128


def _gpu(fp8: bool) -> Gpu:
    model = cost.get("gpu", cost.Settings(device="h100", fp8=fp8))
    assert isinstance(model, Gpu)
    return model


def _linear(m: int, k: int, n: int, block: int | None = 0) -> Layer:
    x = Activation("x", (m, k), "bfloat16", 2 * m * k)
    y = Activation("y", (m, n), "bfloat16", 2 * m * n)
    macs = m * k * n
    return Layer(
        "proj", "", "MatMul", Kind.LINEAR, inputs=(x,), outputs=(y,), flops=Flops(2 * macs, 4 * macs, 0),
        gemm=Gemm(m, k, n), block=Block(block, Part.MLP if block is not None else Part.HEAD),
    )  # fmt: skip


def test_a_te_linear_runs_at_the_cublaslt_fp8_rate() -> None:
    """An 8192^3 linear of a block: its forward within 5 % of the published cuBLASLt FP8 rate; its
    input gradient that GEMM and TE's cast and transpose of the output gradient (base.py,
    grad_output_preprocess: fp8_cast_transpose_fused reads the bf16 gradient, 2 B an element, and
    writes it cast and transposed, 1 + 1) at the published streaming bandwidth."""
    n = 8192
    times = _gpu(True).times(_linear(n, n, n))
    gemm = 2 * n**3 / H100_FP8_8192
    assert times.forward * 1e-9 == pytest.approx(gemm, rel=0.05)
    assert times.weight_grad * 1e-9 == pytest.approx(gemm, rel=0.05)
    assert times.input_grad * 1e-9 == pytest.approx(gemm + 4 * n * n / H100_STREAM, rel=0.05)
    bf16 = _gpu(False).times(_linear(n, n, n))
    assert bf16.forward > 1.5 * times.forward  # the BF16 rate is about half


def test_the_output_layer_stays_bf16() -> None:
    """Megatron-Core's fp8_autocast covers the transformer blocks only (transformer_block.py,
    TransformerBlock.forward): the output layer outside them runs as without --precision fp8."""
    head = _linear(8192, 4096, 32000, block=None)
    assert _gpu(True).times(head) == _gpu(False).times(head)


@pytest.mark.parametrize("framework", ["fsdp", "torchtitan", "deepspeed", "megatron-2022", "llm-foundry"])
def test_fp8_is_refused_where_transformer_engine_does_not_run(run_cli: Run, framework: str) -> None:
    result = run_cli(
        "translate", "llama-3-8b", "--precision", "fp8", "--device", "h100", "--seq-len", "1024",
        "--npus", "8", "--zero", "3" if framework != "megatron-2022" else "0",
        "--framework", framework, "-o", "unwritten.txt",
    )  # fmt: skip
    refused_in_one_line(result, "only --framework megatron")


@pytest.mark.parametrize("device", ["a100", "v100"])
def test_fp8_is_refused_on_devices_without_fp8_tensor_cores(run_cli: Run, device: str) -> None:
    """The A100 and V100 datasheets list no FP8 Tensor Core rate (FP8 came with Hopper)."""
    result = run_cli(
        "translate", "llama-3-8b", "--precision", "fp8", "--device", device, "--seq-len", "1024",
        "--npus", "8", "-o", "unwritten.txt",
    )  # fmt: skip
    refused_in_one_line(result, "no FP8 tensor cores")


def test_fp8_is_refused_off_the_gpu_model(run_cli: Run) -> None:
    result = run_cli(
        "translate", "llama-3-8b", "--precision", "fp8", "--device", "h100", "--compute", "roofline",
        "--seq-len", "1024", "--npus", "8", "-o", "unwritten.txt",
    )  # fmt: skip
    refused_in_one_line(result, "the gpu model's")


def _plan(precision: str, **layout: object) -> Plan:
    given = {
        "format": "chakra-et", "output": "unwritten/t", "npus": 8, "seq_len": 8192, "micro_batch": 1,
        "global_batch": 8, "device": "h100", "zero": 1, "attention": "cudnn", "precision": precision,
        **layout,
    }  # fmt: skip
    prepared = prepare(request_of("llama-3-8b", given))
    result = pipeline.translate_checked("llama-3-8b", prepared.options)
    assert result.plan is not None, result.diagnostics
    return result.plan


LINEAR = LAYERS * (H * (HEADS + 2 * KV) * HEAD + H * H + 3 * H * F)  # q, k, v, o, gate, up, down


@pytest.mark.parametrize(("tp", "sp"), [(1, False), (2, True)])
def test_fp8_weight_copies_and_saved_inputs(tp: int, sp: bool) -> None:
    """Llama 3 8B, 8,192 tokens a micro-batch, one in flight. Weights: each TE linear's FP8 copy
    and its transpose (linear.py, Linear.forward: get_fp8_workspace(cache_name="weight",
    with_transpose=True)), 2 B an element of the blocks' linears, 1/T of them a rank.
    Activations: the QKV's and fc1's inputs (the norms' outputs, ln_out in _LayerNormLinear) and
    fc2's input (_Linear's saved_inputmat_t) saved at 1 B instead of 2; the output projection's
    input 1 B more, an FP8 copy beside the bf16 output the fused attention kernel saves itself."""
    bf16, fp8 = (_plan(p, tp=tp, sp=sp).memory[0] for p in ("bf16", "fp8"))
    assert fp8.weights - bf16.weights == pytest.approx(2 * LINEAR / tp, rel=1e-3)
    s = 8192
    saved = LAYERS * s * (2 * H + F - H) / tp  # each term 1/T: split, or sequence-split under SP
    assert bf16.activations - fp8.activations == pytest.approx(saved, rel=1e-3)
    assert (fp8.gradients, fp8.optimizer) == (bf16.gradients, bf16.optimizer)


def test_selective_recomputation_saves_the_context_once() -> None:
    """Under selective recomputation the attention kernel reruns in the backward and saves
    nothing: the output projection's input is saved once, FP8 (1 B instead of 2)."""
    bf16, fp8 = (_plan(p, recompute="selective").memory[0] for p in ("bf16", "fp8"))
    assert bf16.activations - fp8.activations == pytest.approx(LAYERS * 8192 * (3 * H + F), rel=1e-3)


def _bytes(plan: Plan) -> list[list[int]]:
    return [[op.bytes for op in program if isinstance(op, Collective)] for program in plan.programs]


def test_fp8_leaves_the_collectives_and_speeds_the_compute() -> None:
    """Without sequence parallelism nothing changes: Megatron-Core gathers the distributed
    optimizer's bf16 parameters unless --fp8-param-gather (distributed_data_parallel_config.py at
    core_r0.9.0, fp8_param_gather False) and reduces fp32 gradients; the tensor-parallel
    all-reduces move bf16 outputs and gradients. The compute is
    shorter (the linears at about twice the rate) but not half (attention, norms, casts)."""
    bf16, fp8 = _plan("bf16", tp=2), _plan("fp8", tp=2)
    assert _bytes(fp8) == _bytes(bf16)
    compute = [sum(op.time for op in p.programs[0] if isinstance(op, Compute)) for p in (bf16, fp8)]
    assert 0.5 * compute[0] < compute[1] < 0.9 * compute[0]


def test_fp8_is_recorded_and_written(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "w.txt"
    result = run_cli(
        "translate", "llama-3-8b", "--precision", "fp8", "--device", "h100", "--seq-len", "1024",
        "--tp", "2", "--dialect", "simai", "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"precision": "fp8"' in out.with_name("w.txt.meta.json").read_text()


def _block_times(plan: Plan, block: int = 3) -> dict[tuple[str, str], int]:
    """A block's compute ticks (ns) on rank 0 by layer's last name and step, its first micro-batch."""
    found: dict[tuple[str, str], int] = {}
    for op in plan.programs[0]:
        name = plan.layers[op.layer].name if isinstance(op, Compute) else ""
        if isinstance(op, Compute) and f".layers.{block}." in name:
            found.setdefault((name.rsplit(".", 1)[-1], op.step.value), op.time)
    return found


def test_the_input_casts_follow_the_module() -> None:
    """At TP 1, q_proj and o_proj are the same 8192 x 4096 x 4096 GEMM. o_proj, a
    TERowParallelLinear, casts and transposes its input in the forward (linear.py, _Linear.forward:
    fp8_cast_transpose_fused, 2 B read, 1 + 1 written an element); q_proj, part of a
    TELayerNormColumnParallelLinear, has its input cast by the norm and transposes it for its
    weight gradient (layernorm_linear.py: tex.fp8_transpose(ln_out_total), 1 B read and 1 written),
    once for q, k and v together: q's share is its 4,096 of the module's 6,144 output columns."""
    bf16, fp8 = (_block_times(_plan(p)) for p in ("bf16", "fp8"))
    m = 8192
    folded = bf16[("o_proj", "fwd")] - bf16[("q_proj", "fwd")]  # the residual add o_proj holds
    cast = 4 * m * H / H100_STREAM * 1e9
    assert fp8[("o_proj", "fwd")] - fp8[("q_proj", "fwd")] - folded == pytest.approx(cast, rel=0.01)
    assert bf16[("q_proj", "weight_grad")] == bf16[("o_proj", "weight_grad")]
    transpose = 2 * m * H * HEADS / (HEADS + 2 * KV) / H100_STREAM * 1e9
    assert fp8[("q_proj", "weight_grad")] - fp8[("o_proj", "weight_grad")] == pytest.approx(
        transpose, rel=0.01
    )


def test_sequence_parallel_all_gathers_move_fp8() -> None:
    """Under SP, TE 1.8 casts before it gathers: a column-parallel linear's input (linear.py,
    _Linear.forward: cast_to_fp8, then gather_along_first_dim; layernorm_linear.py its FP8 ln_out),
    forward and again backward, and a row-parallel linear's output gradient (base.py,
    grad_output_preprocess: "FP8 case with gather"). Half a bf16 all-gather's bytes, six a block
    and micro-batch (q, k and v's input twice, gate and up's twice, o's and down's gradients); the
    reduce-scatters, and the embedding's and output layer's collectives, as in bf16."""
    bf16, fp8 = _plan("bf16", tp=2, sp=True), _plan("fp8", tp=2, sp=True)
    names = [x.name for x in bf16.layers]
    ops = [[op for op in p.programs[0] if isinstance(op, Collective)] for p in (bf16, fp8)]
    pairs = list(zip(*ops, strict=True))
    halved = [b.bytes == 2 * f.bytes for b, f in pairs]
    gathers = [".layers." in names[b.layer] and b.comm is CommType.ALLGATHER for b, _ in pairs]
    assert halved == gathers
    assert all(b.bytes == f.bytes for (b, f), g in zip(pairs, gathers, strict=True) if not g)
    micro_batches = 8 // (1 * 4)  # global batch 8, D = 8 / T
    assert sum(gathers) == LAYERS * 6 * micro_batches


def _step(plan: Plan) -> int:
    return sum(op.time for op in plan.programs[0] if isinstance(op, Compute) and op.step is Step.UPDATE)


@pytest.mark.parametrize("tp", [1, 2])
def test_the_weights_are_cast_once_an_iteration(tp: int) -> None:
    """Each TE linear casts its bf16 weight to FP8 and transposes it on the first micro-batch
    (linear.py, Linear.forward: get_fp8_workspace(update_workspace=is_first_microbatch,
    with_transpose=True); base.py: cast_transpose_), 2 B read and 1 + 1 written a weight
    element, once an iteration however many micro-batches: the iteration's step grows by the
    blocks' linear weights a rank holds (1/T of them) at the published streaming bandwidth, not
    divided by the distributed optimizer's D as its own share of the step is."""
    bf16, fp8 = (_plan(p, tp=tp, global_batch=32) for p in ("bf16", "fp8"))
    added = (_step(fp8) - _step(bf16)) * 1e-9
    assert added == pytest.approx(4 * LINEAR / tp / H100_STREAM, rel=1e-3)
