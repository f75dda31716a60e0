"""Megatron's add of the word embedding's gradient into its main_grad, every micro-batch,
held to Megatron-LM's source and the devices' published streaming bandwidth.

Transcribed from Megatron-LM core_r0.8.0, megatron/core/distributed/distributed_data_parallel.py,
DistributedDataParallel._make_param_hook (on each parameter's gradient accumulator):

    if param.grad is not None and (not param.grad_added_to_main_grad or ...):
        param.main_grad.add_(param.grad.data)      # reads main_grad and grad, writes main_grad
    param.grad = None

grad_added_to_main_grad is set only by a linear's fused weight-gradient GEMM (tensor_parallel/
layers.py, LinearWithGradAccumulationAndAsyncCommunication.backward) and cleared by
zero_grad_buffer, so VocabParallelEmbedding's weight, whose gradient torch's
embedding_dense_backward writes whole (V / T x h, the parameter's dtype), is added every
micro-batch. main_grad is the gradient buffer's view: fp32 for bf16 parameters
(accumulate_allreduce_grads_in_fp32), the parameters' own dtype for fp16 ones. Megatron-LM 2022
(fc7f4f0), megatron/model/distributed.py, _make_param_hook: `param.main_grad.add_(param.grad.data)`
the same. So 4 + 2 + 4 = 10 bytes an element for bf16, 2 + 2 + 2 = 6 for fp16.

The A100's streaming bandwidth: BabelStream's Triad as Azure published it (Azure/AI-benchmarking-
guide 8fd0c6e, Azure_Results/ND_A100_v4_results.md): 1.70 TB/s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modtrans import estimate
from modtrans.plan import Compute, Plan, Step
from modtrans.request import prepare, request_of
from tests.conftest import planned

A100_TRIAD = 1.70e12  # B/s (the module docstring)
VOCAB, HIDDEN = 50304, 768  # GPT-2 small's, padded to a multiple of 128 as Megatron pads it at T 1


def _config(tmp_path: Path, dtype: str) -> Path:
    config = {
        "model_type": "gpt2", "n_embd": HIDDEN, "n_layer": 2, "n_head": 12, "n_positions": 1024,
        "vocab_size": VOCAB, "torch_dtype": dtype,
    }  # fmt: skip
    path = tmp_path / f"{dtype}.json"
    path.write_text(json.dumps(config))
    return path


def _wte_weight_grad(plan: Plan) -> int:
    """Rank 0's word embedding's weight-gradient compute of micro-batch 0, in ns."""
    (op,) = [
        op
        for op in plan.programs[0]
        if isinstance(op, Compute)
        and op.step is Step.WEIGHT_GRAD
        and plan.layers[op.layer].name == "transformer.wte"
        and any(t.name.endswith("#m0") for t in op.outputs)
    ]
    return op.time


def _plan(path: Path, framework: str, **options: object) -> Plan:
    return planned(
        prepare(request_of(str(path), {"framework": framework, "zero": 1, "global_batch": 2, **options}))
    )


@pytest.mark.parametrize(
    ("framework", "dtype", "tp", "per_element"),
    [
        ("megatron", "bfloat16", 1, 4 + 2 + 4),
        ("megatron", "bfloat16", 2, 10),
        ("megatron-2022", "float16", 1, 6),
    ],
)
def test_the_hook_adds_the_embedding_s_gradient_into_main_grad_each_micro_batch(
    tmp_path: Path, framework: str, dtype: str, tp: int, per_element: int
) -> None:
    """The word embedding's weight gradient under Megatron takes the hook's add longer than under
    NeMo, whose Apex buckets run no such hook (the same layer, device and layout otherwise), at
    the A100's Triad rate over this rank's V / T x h elements."""
    path = _config(tmp_path, dtype)
    ours = _wte_weight_grad(_plan(path, framework, tp=tp))
    theirs = _wte_weight_grad(_plan(path, "nemo", tp=tp))
    # Megatron pads the vocabulary to a multiple of 128 x T (megatron/training/tokenizer/tokenizer.py,
    # _vocab_size_with_padding: make_vocab_size_divisible_by * tensor_model_parallel_size)
    padded = -(-VOCAB // (128 * tp)) * 128 * tp
    added = per_element * padded // tp * HIDDEN / A100_TRIAD
    assert (ours - theirs) * 1e-9 == pytest.approx(added, rel=2e-3)


def test_the_fast_tier_charges_the_add_as_the_traces_do(tmp_path: Path) -> None:
    """Both tiers take the add (the fast tier reads the embedding's weight-gradient step off its
    reduced plan): the same iteration within 0.02 % on a bf16 model at T 2, P 2, D 2."""
    path = _config(tmp_path, "bfloat16")
    options = {"tp": 2, "pp": 2, "dp": 2, "global_batch": 8, "format": "chakra-et", "output": "unused/"}
    prepared = prepare(request_of(str(path), options))
    exact = estimate.plan(planned(prepared), network="dgx-a100")
    layout = prepared.options.parallel.layout
    assert layout is not None
    fast = estimate.layout(str(path), layout, network="dgx-a100")
    assert fast.iteration_s == pytest.approx(exact.iteration_s, rel=2e-4)
