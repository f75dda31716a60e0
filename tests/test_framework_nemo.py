"""`--framework nemo`: NeMo 24.07 as the NeMo-Framework-Launcher's published performance commands
run it (strategy/frameworks.py), each convention against the source that sets it:
NVIDIA/NeMo-Framework-Launcher 24.07 (8325688) for the commands and configs, NVIDIA/NeMo
r2.0.0rc1 for its optimizer wrapper (nemo/core/optim/distributed_adam.py) and setup_optimization
(nemo/collections/nlp/models/language_modeling/megatron_base_model.py), NVIDIA/apex 810ffae (NeMo
r2.0.0rc1's Dockerfile.ci APEX_TAG) for DistributedFusedAdam
(apex/contrib/optimizers/distributed_fused_adam.py)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans.comm import CommType
from modtrans.plan import Collective, Step
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import Layout, LayoutError
from modtrans.strategy.llm.memory import Held, unit_state
from tests import plans
from tests.refusals import refused_in_one_line

Run = Callable[..., Result]
MICRO, SEQ = 2, 16

# The toy Llama's numbers (tests/plans.py, TOY), untied: the word embedding and the output layer
V, H, F, KV, LAYERS = 96, 64, 128, 32, 2  # KV: 2 key-value heads of 64 / 4 = 16
BLOCK = H * H + 2 * H * KV + H * H + 3 * H * F + 2 * H  # q, k, v, o; gate, up, down; two RMSNorms
PARAMS = 2 * V * H + LAYERS * BLOCK + H  # embedding, output layer, final norm

# Bytes of the dtypes the optimizer's tensors are allocated in (torch.int16, bfloat16, float32)
INT16, BF16, FP32 = 2, 2, 4


def _layout(framework: Framework, dp: int = 2) -> Layout:
    return Layout(
        npus=dp,
        dp=dp,
        zero=1,
        framework=framework,
        micro_batch=MICRO,
        global_batch=dp * MICRO,
        vocab_divisor=1,
    )


def test_nemo_reduce_scatters_bf16_gradients_and_gathers_bf16_parameters(tmp_path: Path) -> None:
    """Every FP8 command NeMo published for its 24.07 performance table sets
    `+training.model.optim.grad_sync_dtype=bf16` (examples/training/gpt/h100/5b_fp8_8node.sh,
    llama/h100/llama3_8b_fp8.sh, ...): Apex reduce-scatters its grad buckets in that dtype
    (_start_bucket_grad_sync: reduce_scatter_tensor of grads_bucket, allocated in grad_sync_dtype),
    but the word embedding's in fp32 (megatron_gpt_model.py, configure_optimizers:
    `_with_fp32_optimizer = with_fp32_embedding_grads`, default True; distributed_adam.py,
    init_params_bucket: grad_sync_dtype=torch.float32 for those), and all-gathers parameters in
    param_sync_dtype, which setup_optimization sets to the model's dtype ("Match param allgather
    with model dtype"): 2 bytes a parameter. Megatron's distributed optimizer reduces a bf16
    model's gradients in fp32. The toy's one bucket ends padded to lcm(D, 128) elements, as the
    megatron family pads it, the padding charged at the bucket's mean width (buckets.py)."""
    path = plans.config(tmp_path, {**plans.TOY, "num_hidden_layers": LAYERS})
    padded = -(-PARAMS // math.lcm(2, 128)) * math.lcm(2, 128)
    embedding = V * H
    nemo = (embedding * FP32 + (PARAMS - embedding) * BF16) * padded / PARAMS
    for framework, grads in ((Framework.NEMO, round(nemo)), (Framework.MEGATRON, padded * FP32)):
        plan = plans.plan(path, _layout(framework), (MICRO, SEQ))
        ops = plan.programs[0]  # not Megatron's all-reduce of its gradient norm (clipping.py)
        sent = sorted(
            (op.comm, op.bytes) for op in ops if isinstance(op, Collective) and op.step is not Step.UPDATE
        )
        assert sent == [(CommType.ALLGATHER, padded * BF16), (CommType.REDUCESCATTER, grads)]


def test_nemo_keeps_what_distributed_fused_adam_allocates() -> None:
    """A bf16 parameter under NeMo's distributed_fused_adam at D data ranks, each tensor as Apex
    allocates it: the grad buffer whole in grad_sync_dtype (_init_grad_buffer: torch.zeros(
    [buffer_size], dtype=grad_sync_dtype)), the bucket's reduced shard beside it until the step
    (_start_bucket_grad_sync: torch.empty([bucket_size // distributed_size], dtype=
    grads_bucket.dtype)), and in StateBucket.__init__ over a shard of 1/D: param_remainders_shard
    (torch.int16: setup_optimization's store_param_remainders for fp32 state over bf16
    parameters), exp_avg_shard and exp_avg_sq_shard (dtype, fp32: setup_optimization's default).
    Megatron's distributed optimizer keeps an fp32 gradient buffer and fp32 master, m and v."""
    n, d = 1_000_000, 8
    unit = Held(elements=n, weights=n * BF16, grads=n * BF16, expert=False, block=0, bf16=True)
    _, weights, grads, optimizer = unit_state(unit, _layout(Framework.NEMO, d), d)
    assert weights == n * BF16
    assert grads == n * BF16 + n * BF16 / d
    assert optimizer == n * (INT16 + FP32 + FP32) / d
    megatron = Held(elements=n, weights=n * BF16, grads=n * FP32, expert=False, block=0, bf16=True)
    _, _, grads, optimizer = unit_state(megatron, _layout(Framework.MEGATRON, d), d)
    assert (grads, optimizer) == (n * FP32, n * (FP32 + FP32 + FP32) / d)


def test_nemo_on_one_rank_reduces_nothing_into_a_shard() -> None:
    """At D = 1 Apex reduces nothing (_start_bucket_grad_sync: `if self.distributed_size == 1:
    bucket.sync_grads_shard = bucket.grads_bucket`): the grad buffer alone."""
    n = 4096
    unit = Held(elements=n, weights=n * BF16, grads=n * BF16, expert=False, block=0, bf16=True)
    layout = Layout(npus=1, zero=1, framework=Framework.NEMO, micro_batch=MICRO)
    assert unit_state(unit, layout, 1)[2] == n * BF16


@pytest.mark.parametrize("zero", [0, 2, 3])
def test_nemo_is_refused_at_other_zero_stages(zero: int) -> None:
    """NeMo's distributed_fused_adam shards the state over the data ranks and keeps the whole grad
    buffer (contiguous_grad_buffer, required under megatron_amp_O2: setup_optimization's
    ValueError): Megatron's --zero 1, and no other stage."""
    with pytest.raises(LayoutError, match="give --zero 1"):
        dataclasses.replace(_layout(Framework.NEMO), zero=zero)


def test_nemo_without_zero_1_is_refused_in_one_line(run_cli: Run) -> None:
    result = run_cli(
        "translate", "llama-3-8b", "--npus", "8", "--dp", "8", "--framework", "nemo", "-o", "w.txt"
    )
    refused_in_one_line(result, "--framework nemo --zero 0")


def test_nemo_runs_transformer_engine_and_its_flash_attention(run_cli: Run, tmp_path: Path) -> None:
    """NeMo's GPT and Llama are Megatron-Core's with Transformer Engine (the launcher's yamls:
    mcore_gpt and transformer_engine true), so --precision fp8 and --tp-comm-overlap run under it;
    its attention is TE's FlashAttention-2 backend, the launcher turning cuDNN's off
    (launcher_scripts/conf/config.yaml, env_vars: `NVTE_FUSED_ATTN: 0`; TE 7d576ed, attention.py:
    use_fused_attention = int(os.getenv("NVTE_FUSED_ATTN", "1")))."""
    nemo = Framework.NEMO
    assert nemo.family is Framework.MEGATRON
    assert nemo.transformer_engine
    assert nemo.attention == "flash2"
    result = run_cli(
        "translate", "llama-3-8b", "--precision", "fp8", "--device", "h100", "--seq-len", "1024",
        "--npus", "4", "--tp", "2", "--sp", "--tp-comm-overlap", "--zero", "1", "--framework", "nemo",
        "-o", str(tmp_path / "w.txt"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def test_nemo_buckets_one_transformer_layer_each_on_every_stage(tmp_path: Path) -> None:
    """NeMo r2.0.0rc1, megatron_gpt_model.py, configure_optimizers: with distributed_fused_adam,
    `buckets.extend(make_parameter_bucket(layer) for layer in layers)` for each model chunk, then
    `buckets.reverse()` and `buckets[-1].extend(p for p in self.parameters() if p not in
    used_params)`: one bucket a transformer layer, the embedding, final norm and output layer in
    the first layer's; megatron_base_model.py init_params_bucket's each (Apex: "configured so
    they all perform communication together"). So with overlap_grad_sync three layers reduce in
    three reduce-scatters, the first layer's with the rest, its embedding in fp32, each when the
    backward has reached the bucket's first unit; each ends padded to lcm(D, 128). Megatron buckets 40M
    parameters (the toy: one bucket), and only pipeline rank 0's first chunk; NeMo every stage's."""
    path = plans.config(tmp_path, {**plans.TOY, "num_hidden_layers": 3})
    layout = dataclasses.replace(_layout(Framework.NEMO), overlap_grad_reduce=True, overlap_param_gather=True)
    plan = plans.plan(path, layout, (MICRO, SEQ))
    names = [info.name for info in plan.layers]
    sent = {
        names[op.layer]: op.bytes
        for op in plan.programs[0]
        if isinstance(op, Collective) and op.comm is CommType.REDUCESCATTER and op.layer is not None
    }
    pad = math.lcm(2, 128)
    filled = BLOCK + V * H + H + V * H  # the first layer's, the embedding, final norm and output layer
    first = (V * H * FP32 + (filled - V * H) * BF16) * (-(-filled // pad) * pad) / filled
    block = -(-BLOCK // pad) * pad * BF16
    # each bucket reduced after the weight gradient of its first unit in forward order
    assert sent == {
        "model.embed_tokens": round(first),
        "model.layers.1.input_layernorm": block,
        "model.layers.2.input_layernorm": block,
    }
    path = plans.config(tmp_path, {**plans.TOY, "num_hidden_layers": 4})
    for framework, buckets in ((Framework.NEMO, 2), (Framework.MEGATRON, 1)):
        staged = dataclasses.replace(layout, framework=framework, npus=4, pp=2, global_batch=4 * MICRO)
        plan = plans.plan(path, staged, (MICRO, SEQ))
        for program in plan.programs:
            ops = [op for op in program if isinstance(op, Collective) and op.comm is CommType.REDUCESCATTER]
            assert len(ops) == buckets
