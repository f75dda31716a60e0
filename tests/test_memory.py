"""Memory per rank (strategy/llm/memory.py) against Megatron-LM's own estimate,
megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM d98e8a6), transcribed below for
the settings it covers: bf16 training, sequence parallelism with selective recomputation. Its
activation formula is GPT's (dropout, a 4h GeLU MLP); for Llama and Mixtral the activations are
Korthikanti et al. 2022's terms for what their blocks store (_gated_block)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

Run = Callable[..., Result]
PARTS = ("total", "weights", "gradients", "optimizer", "activations")  # .meta.json memory: {part}_bytes

# Llama-3-8B's config.json (the built-in): hidden 4096, MLP 14336 (SwiGLU), 32 layers, 32 heads, 8
# key/value heads, vocabulary 128,256 (a multiple of 128 x 2: no padding at T = 2), RMSNorm, untied
H, F, L, A, KV, V = 4096, 14336, 32, 32, 8, 128256


def _megatron(tp: int, dp: int, seq: int, micro: int, distributed: bool) -> tuple[float, float]:
    """compute_weight_and_optimizer_memory and compute_activation_memory for P = 1, no experts."""
    attention = 2 * H * H * (1 + KV / A)  # self_attn_term, kv_channels x heads = hidden
    mlp = 2 * H * F * 3 / 2  # dense_mlp_params, swiglu
    norms = 2 * H * 1  # layernorm_params, RMSNorm: norm_size 1
    embedding = H * V
    tp_sharded = ((attention + mlp) * L + embedding) / tp + embedding / tp  # untied, P = 1
    replicated = norms * L + H  # the blocks' norms and the final norm
    per_parameter = 6 + 12 / dp if distributed else 18
    weights_and_optimizer = (tp_sharded + replicated) * per_parameter
    activations: float = _gated_block(seq * micro, H, F, A, KV) * L
    activations += 8 * seq * micro * 1 + seq * micro * H * 1  # input ids, embedding dropout (P = 1)
    activations += seq * micro * H * 4 * (1 + V / H)  # the output layer's input and the loss (P = 1)
    activations += seq * micro * V * 2  # the bf16 logits beside the loss's fp32 copy (logit_bytes)
    return weights_and_optimizer, activations / tp


def _gated_block(sb: int, h: int, f: int, a: int, kv: int, *, experts: int = 0, e: int = 0) -> int:
    """One block's bytes under selective recomputation and sequence parallelism (before / t), by
    Korthikanti et al. 2022 section 4.1's terms for a block without dropout: the two norms' inputs
    4 sbh, the QKV input 2 sbh, the MLP input 2 sbh, Q K V 2 sb (h + 2 h kv / a), the output
    projection's input 2 sbh, a gated MLP's gate, up and down inputs 6 sbf. Megatron's
    compute_activation_memory charges sbh (18 + 4 f / h) for every block, dropout and GeLU's 2 f
    included. A MoE's `experts` = top_k of `e`: its k routed copies of the input (2 k sbh), the
    experts' k outputs Megatron-Core's unpermute multiplies by the probabilities (2 k sbh:
    moe_utils.py at core_r0.10.0, `permuted_tokens * permuted_probs.unsqueeze(-1)`), for each of the e
    experts the router's fp32 softmax for the load-balancing loss (router.py,
    aux_loss_load_balancing), the dense probabilities unpermute's masked_select keeps and its bool
    routing map (7 sbe), and the experts' 6 sbf for each copy in place of the dense MLP's."""
    hkv = h * kv // a
    block = 8 * sb * h + 2 * sb * (h + 2 * hkv) + 2 * sb * h
    if not experts:
        return block + 6 * sb * f
    return block + 4 * experts * sb * h + 7 * sb * e + 6 * experts * sb * f


@pytest.mark.parametrize(("tp", "dp", "zero"), [(2, 4, 1), (4, 2, 0), (8, 1, 1)])
def test_memory_per_rank_is_megatrons_estimate(
    tp: int, dp: int, zero: int, run_cli: Run, tmp_path: Path
) -> None:
    out = tmp_path / "t"
    args = ("--tp", str(tp), "--dp", str(dp), "--zero", str(zero), "--sp", "--recompute", "selective")
    done = run_cli("translate", "llama-3-8b", *args, "--seq-len", "1024", "--format", "chakra-et", "-o", out)
    assert done.exit_code == 0, done.output
    stage = json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"][0]
    total, weights, grads, optimizer, activations = (stage[f"{k}_bytes"] for k in PARTS)
    expected_state, expected_activations = _megatron(tp, dp, 1024, 1, distributed=zero == 1)
    assert weights + grads + optimizer == pytest.approx(expected_state, rel=1e-3)
    assert activations == pytest.approx(expected_activations, rel=1e-3)
    assert total == weights + grads + optimizer + activations


def test_a_rank_that_does_not_fit_is_a_warning(run_cli: Run, tmp_path: Path) -> None:
    """Llama-3-70B on 8 A100s at TP 2 without ZeRO: 18 B per parameter of a 35 B-parameter shard
    alone is over 80 GiB (Megatron's 18 B: bf16 weight, fp32 gradient, fp32 master and Adam)."""
    out = tmp_path / "t"
    done = run_cli(
        "translate",
        "llama-3-70b",
        "--tp",
        "2",
        "--dp",
        "4",
        "--seq-len",
        "512",
        "--format",
        "chakra-et",
        "-o",
        out,
    )
    assert done.exit_code == 0
    assert "X516" in done.output
    # the default device, an A100 SXM4 80GB: 81,158 MiB that CUDA gives the allocator (deviceQuery's
    # totalGlobalMem, thamada/nvidia-smi b09ef13 gls/A100SXMx4_deviceQuery.py), 79.3 GiB
    assert "more than the device's 79.3 GiB" in done.output
    small = run_cli(
        "translate",
        "llama-3-8b",
        "--tp",
        "8",
        "--seq-len",
        "512",
        "--format",
        "chakra-et",
        "-o",
        tmp_path / "s",
    )
    assert "X516" not in small.output


def test_inspect_shows_each_stages_memory(run_cli: Run, tmp_path: Path) -> None:
    """1F1B on two stages: stage 0 holds two micro-batches' activations, stage 1 one (P - p), so
    with the same layers per stage stage 0 needs more; inspect shows what the metadata holds."""
    out = tmp_path / "p"
    args = ("--tp", "2", "--pp", "2", "--dp", "2", "--seq-len", "1024", "--format", "chakra-et")
    assert run_cli("translate", "llama-3-8b", *args, "-o", out).exit_code == 0
    stages = json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"]
    totals = [s["total_bytes"] for s in stages]
    activations = [s["activations_bytes"] for s in stages]
    assert len(totals) == 2
    assert activations[0] > activations[1]
    shown = run_cli("inspect", out).stdout
    for stage, total in enumerate(totals):
        assert f"memory per rank, stage {stage}: {total / 2**30:,.1f} GiB" in shown


def _shard_state(
    attention: float,
    mlp: float,
    norms: float,
    embedding: float,
    layers: int,
    tp: int,
    pp: int,
    dp: int,
    *,
    router: float = 0,
    experts: float = 0,
    expert_shards: int = 1,
    expert_dp: int = 1,
) -> float:
    """compute_weight_and_optimizer_memory's most loaded shard (stage 0) with the distributed
    optimizer: 6 + 12 / D bytes per parameter (6 + 12 / expert D for experts)."""
    tp_sharded = ((attention + mlp) * layers / pp + embedding) / tp
    if pp == 1:
        tp_sharded += embedding / tp  # untie_embeddings_and_output_weights and P = 1
    replicated = (norms + router) * layers / pp
    expert = experts * layers / pp / expert_shards
    return (tp_sharded + replicated) * (6 + 12 / dp) + expert * (6 + 12 / expert_dp)


def _state_of(run_cli: Run, tmp_path: Path, model: str, *args: str) -> tuple[int, int]:
    out = tmp_path / "t"
    done = run_cli("translate", model, *args, "--zero", "1", "--sp", "--recompute", "selective",
                   "--seq-len", "1024", "--format", "chakra-et", "-o", out)  # fmt: skip
    assert done.exit_code == 0, done.output
    stage = json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"][0]
    _, weights, grads, optimizer, activations = (stage[f"{k}_bytes"] for k in PARTS)
    return weights + grads + optimizer, activations


def test_a_pipelines_first_stage_is_megatrons_most_loaded_shard(run_cli: Run, tmp_path: Path) -> None:
    """Llama-3-70B (hidden 8192, MLP 28672, 80 layers, 64 heads, 8 key/value heads; the vocabulary
    128,256 padded to 129,024, a multiple of 128 x 8) at TP 8 x PP 8 x DP 2: stage 0 holds 10 blocks
    and the embedding; 8 micro-batches in flight (GA = P). Megatron counts the final norm over P
    stages (8,192 / 8 elements here too many: under 1e-6 of the total)."""
    h, f, layers, a, kv, v = 8192, 28672, 80, 64, 8, 129024
    state, activations = _state_of(run_cli, tmp_path, "llama-3-70b", "--tp", "8", "--pp", "8", "--dp", "2")
    expected = _shard_state(2 * h * h * (1 + kv / a), 3 * h * f, 2 * h, h * v, layers, 8, 8, 2)
    assert state == pytest.approx(expected, rel=1e-5)
    s, b = 1024, 1
    expected = (_gated_block(s * b, h, f, a, kv) * layers + (8 * s * b + s * b * h) * 8) * min(1, 8 / 8) / 8
    assert activations == pytest.approx(expected, rel=1e-6)


def test_a_mixture_of_experts_is_megatrons_estimate(run_cli: Run, tmp_path: Path) -> None:
    """Mixtral-8x7B (hidden 4096, expert MLP 14336, 32 layers, 32 heads, 8 key/value heads, 8
    experts, vocabulary 32,000) at TP 2 (experts split over the 2 tensor ranks: ETP = T) x EP 4 x
    DP 4: routed experts / (ETP x EP) per rank, their optimizer state over the expert data ranks,
    8 / (2 x 4 x 1) = 1; the router replicated."""
    h, f, layers, a, kv, v, e = 4096, 14336, 32, 32, 8, 32000, 8
    state, activations = _state_of(run_cli, tmp_path, "mixtral-8x7b", "--tp", "2", "--dp", "4", "--ep", "4")
    attention = 2 * h * h * (1 + kv / a)
    expected = _shard_state(
        attention, 0, 2 * h, h * v, layers, 2, 1, 4, router=h * e, experts=3 * h * f * e, expert_shards=2 * 4
    )
    assert state == pytest.approx(expected, rel=1e-5)
    # each token's top 2 experts: the experts' terms for 2 x s b tokens, split over ETP = T = 2
    s, b = 1024, 1
    expected = _gated_block(s * b, h, f, a, kv, experts=2, e=e) * layers + 8 * s * b + s * b * h
    expected += s * b * h * 4 * (1 + v / h) + 2 * s * b * v  # the bf16 logits, as above
    assert activations == pytest.approx(expected / 2, rel=1e-6)


def test_gpt3_175b_is_megatrons_estimate_with_the_position_embedding(run_cli: Run, tmp_path: Path) -> None:
    """GPT-3 175B (Brown et al. 2020, table 2.1: 96 layers, hidden 12288, 96 heads; GPT-2's
    vocabulary of 50,257, padded to 50,688 at T = 8) at TP 8 x PP 8 x DP 2, bf16. Megatron's
    formula leaves out the learned position embedding (2,048 x 12,288, replicated on stage 0's
    ranks: 0.9 % of their state), added here, and the linear layers' biases (under 5e-4)."""
    config = tmp_path / "config.json"
    gpt3 = {"model_type": "gpt2", "n_embd": 12288, "n_layer": 96, "n_head": 96, "n_positions": 2048}
    config.write_text(json.dumps({**gpt3, "vocab_size": 50257, "torch_dtype": "bfloat16"}))
    h, layers, v = 12288, 96, 50688
    state, activations = _state_of(run_cli, tmp_path, str(config), "--tp", "8", "--pp", "8", "--dp", "2")
    positions = 2048 * h * (6 + 12 / 2)
    expected = _shard_state(4 * h * h, 8 * h * h, 2 * 2 * h, h * v, layers, 8, 8, 2) + positions
    assert state == pytest.approx(expected, rel=5e-4)
    s, b, f = 1024, 1, 4 * h
    megatron = (s * b * h * (18 + 4 * f / h) * layers + (8 * s * b + s * b * h) * 8) / 8
    assert activations == pytest.approx(megatron, rel=1e-6)


def test_torchtitans_loss_holds_its_fp32_logits_at_the_peak() -> None:
    """torchtitan's cross-entropy runs over an fp32 copy of the whole logits (train.py at 9dec370:
    `cross_entropy(pred.flatten(0, 1).float(), ...)`, `del pred` after the loss): its backward
    holds log_softmax's fp32 output, that output's gradient and the input's gradient, 3 x 4 bytes
    a logit, where Megatron's estimate counts one fp32 copy (4 sbV). Full recomputation, so the
    blocks keep the same under both."""
    from modtrans.api import run
    from modtrans.request import Request, prepare

    seq, micro = 2048, 1
    held = {}
    for framework in ("torchtitan", "fsdp"):
        request = Request(
            model="llama-3-8b", npus=8, micro_batch=micro, global_batch=8, seq_len=seq, device="h100",
            framework=framework, zero=3, recompute="full",
        )  # fmt: skip
        plan = run(prepare(request)).plan
        assert plan is not None
        held[framework] = plan.memory[0].activations
    assert held["torchtitan"] - held["fsdp"] == pytest.approx((12 - 4) * seq * micro * V, rel=1e-9)


# Llama-3-8B's parameters as its checkpoint counts them (meta-llama/Meta-Llama-3-8B's
# model.safetensors.index.json: total_size 16,060,522,496 bytes of bf16), and those outside its
# blocks: the embedding and output layer, V x H each (untied), and the final norm's H
PSI = 16_060_522_496 // 2
OUTSIDE = 2 * V * H + H
BLOCK = (PSI - OUTSIDE) // L


def _state(framework: str, zero: int, dp: int) -> tuple[float, float, float]:
    """The weights, gradients and optimizer bytes of one rank of llama-3-8b in bf16 at DP `dp`."""
    from modtrans.api import run
    from modtrans.request import Request, prepare

    request = Request(
        model="llama-3-8b", npus=dp, micro_batch=1, global_batch=dp, seq_len=512, framework=framework,
        zero=zero,
    )  # fmt: skip
    plan = run(prepare(request)).plan
    assert plan is not None
    m = plan.memory[0]
    assert m.parameters == PSI
    return m.weights, m.gradients, m.optimizer


@pytest.mark.parametrize("dp", [8, 64])
def test_zero_shards_state_as_the_zero_paper_counts_it(dp: int) -> None:
    """DeepSpeed's ZeRO in mixed precision (Rajbhandari et al. 2020, section 5.1 and figure 1: 2 B
    of 16-bit parameters, 2 of gradients, K = 12 of fp32 master copy and Adam moments per
    parameter): stage 2 keeps (2 + (2 + 12) / D) psi, stage 3 16 psi / D, each class sharded once;
    Megatron's fully sharded state the same with its fp32 main gradient (theoretical_memory_usage's
    18 B, all / D)."""
    assert sum(_state("deepspeed", 3, dp)) == pytest.approx(16 * PSI / dp, rel=1e-9)
    assert sum(_state("megatron", 3, dp)) == pytest.approx(18 * PSI / dp, rel=1e-9)
    weights, grads, optimizer = _state("deepspeed", 2, dp)
    assert (weights, grads + optimizer) == pytest.approx((2 * PSI, 14 * PSI / dp), rel=1e-9)


@pytest.mark.parametrize("dp", [1, 8])
def test_deepspeeds_bf16_optimizer_shards_its_fp32_state_but_not_its_fp32_gradients(dp: int) -> None:
    """DeepSpeed at ZeRO 0 in bf16 runs BF16_Optimizer, "its own zero stage 1 equivalent"
    (BigScience's tr11-176B-ml.slurm), as its source holds the state (microsoft/DeepSpeed
    deepspeed/runtime/bf16_optimizer.py): the bf16 parameters (2 B) and the bf16 gradients autograd
    writes (2 B), an fp32 gradient buffer of every parameter (fp32_groups_gradients_flat, 4 B; the
    tr11 README: "It doesn't shard the static fp32 buffer it reuses, which consumes `4 bytes *
    params` of additional memory"), and the fp32 master partition with Adam's two moments on it
    (fp32_groups_flat_partition over the data ranks: 12 B / D)."""
    weights, grads, optimizer = _state("deepspeed", 0, dp)
    assert (weights, grads, optimizer) == pytest.approx((2 * PSI, 6 * PSI, 12 * PSI / dp), rel=1e-9)


@pytest.mark.parametrize("framework", ["torchtitan", "llm-foundry", "fsdp"])
def test_fsdp_keeps_fp32_shards_and_gathers_the_root_and_a_block(framework: str) -> None:
    """PyTorch FSDP in mixed precision shards the fp32 parameter (the optimizer's own: no master
    copy beside it), its fp32 gradient (FSDP1 _cast_grad_to_param_dtype, FSDP2 foreach_reduce's
    orig_dtype) and Adam's 8 B: 16 psi / D under FULL_SHARD, plus the bf16 gathered parameters at
    the backward's start: the root's (FSDP never reshards it after the forward) and one block's.
    SHARD_GRAD_OP keeps every bf16 parameter from the forward to the backward."""
    dp = 8
    weights, grads, optimizer = _state(framework, 3, dp)
    assert (grads, optimizer) == pytest.approx((4 * PSI / dp, 8 * PSI / dp), rel=1e-9)
    assert weights == pytest.approx(4 * PSI / dp + 2 * (OUTSIDE + BLOCK), rel=1e-9)
    weights, grads, optimizer = _state(framework, 2, dp)
    assert weights == pytest.approx(4 * PSI / dp + 2 * PSI, rel=1e-9)
    assert grads + optimizer == pytest.approx(12 * PSI / dp, rel=1e-9)


def test_a_fused_gate_and_up_projection_stores_a_gated_mlps_3f() -> None:
    """Phi-3's MLP is one gate_up_proj of width 2 f, SiLU of its gate half times its up half, and
    the down projection (transformers' Phi3MLP): it keeps what a gated MLP of two projections
    keeps, the 2 f of the fused output and the f product the down projection reads
    (Korthikanti's terms, activations.py), not a GeLU MLP's 2 x 2 f."""
    from modtrans import pipeline
    from modtrans.strategy.llm import activations

    config = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "phi-3-mini-4k-instruct.json"
    f = json.loads(config.read_text(encoding="utf-8"))["intermediate_size"]
    ir, found = pipeline.extract_checked(config, input_shapes={"input_ids": (1, 256)})
    assert ir is not None, [d.message for d in found]
    d = activations.dims(ir, 1)
    assert d is not None
    assert {m.inner for m in d.mlps.values()} == {3 * f}


def test_grad_reduce_in_bf16_keeps_a_bf16_gradient_buffer(run_cli: Run, tmp_path: Path) -> None:
    """Megatron-Core allocates its gradient buffer in the dtype it reduces in
    (distributed_data_parallel.py at core_r0.14.0: `grad_dtype = torch.float if
    grad_reduce_in_fp32 else param.dtype`; arguments.py: --grad-reduce-in-bf16 turns
    accumulate_allreduce_grads_in_fp32 off). --dtype-bytes 2 is that flag: a bf16 model's
    gradients take 2 B a parameter where they take 4 without it; the rest of the rank as it was."""
    params = (2 * H * H * (1 + KV / A) + 2 * H * F * 3 / 2 + 2 * H) * L + 2 * H * V + H  # untied, final norm
    stages = []
    for name, extra in (("fp32", []), ("bf16", ["--dtype-bytes", "2"])):
        out = tmp_path / name
        done = run_cli(
            "translate", "llama-3-8b", "--dp", "2", "--zero", "1", "--seq-len", "256", *extra,
            "--format", "chakra-et", "-o", out,
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        stages.append(json.loads(Path(f"{out}.et-meta.json").read_text())["parallel"]["llm"]["memory"][0])
    assert stages[0]["gradients_bytes"] == 4 * params
    assert stages[1]["gradients_bytes"] == 2 * params
    for part in ("weights", "optimizer", "activations"):
        assert stages[0][f"{part}_bytes"] == stages[1][f"{part}_bytes"]


@pytest.mark.parametrize(
    ("device", "size"),
    [
        # deviceQuery's "Total amount of global memory" (cudaGetDeviceProperties totalGlobalMem,
        # what torch.cuda.get_device_properties().total_memory reads), thamada/nvidia-smi:
        ("h100", 85_045_477_376),  # 03fbe6e nvsim/H100SXMx8_deviceQuery.py: 81,106 MBytes
        ("a100", 85_100_068_864),  # b09ef13 gls/A100SXMx4_deviceQuery.py: 81,158 MBytes
    ],
)
def test_a_rank_is_held_to_what_cuda_gives_the_allocator(device: str, size: int) -> None:
    """An 80GB card is not 80 GiB: the H100's nvidia-smi totals 81,559 MiB, of which the driver
    reserves 454 (the same machine's nvidia-smi -q, nvsim/H100SXMx8_smi.py: Free 81,106 MiB), the
    A100's 81,920 MiB, of which CUDA gives 81,158. A rank of 79.5 GiB does not fit either (X516);
    before, both profiles held 80 GiB and it fitted."""
    from modtrans.cost.roofline import device as profile
    from modtrans.plan.model import StageMemory
    from modtrans.strategy.llm.memory import fits

    found = profile(device)
    assert found.kernels is not None
    capacity = found.kernels["memory_bytes"]
    assert capacity == size
    rank = StageMemory(0, int(79.5 * 2**30), 0, 0, 0)
    assert fits([rank], capacity) == [
        f"pipeline stage 0: 79.5 GiB per rank (weights 79.5, gradients 0.0, optimizer 0.0, activations "
        f"0.0) is more than the device's {size / 2**30:.1f} GiB"
    ]
