"""Under sequence parallelism Megatron all-reduces the gradients every tensor rank holds partial
(the norms', a row-parallel layer's bias) ONCE per rank, after the backward, over the tensor
group: megatron/core/distributed/finalize_model_grads.py at core_v0.14.0, finalize_model_grads
-> _allreduce_non_tensor_model_parallel_grads, which walks every model chunk of the rank
(`for model_chunk in model`), collects the main_grad (fp32) of each parameter with
`sequence_parallel` set, flattens them (`_flatten_dense_tensors`) and issues one
torch.distributed.all_reduce over tp_group, after finish_grad_sync. The expected bytes here are
that rule transcribed onto the models' Megatron layers, the layers split evenly over the stages
as Megatron splits them (num_layers / (P x V) a model chunk; chunk v on stage v mod P):

    Llama-3-8B (32 layers, h 4096; RMSNorm, no biases): input_layernorm and pre_mlp_layernorm
        (h each) a layer, the final_layernorm (h) on the last stage
    GPT-2 (12 layers, h 768; LayerNorm with bias, biased linears): two LayerNorms (2 h each) and
        the row-parallel biases of linear_proj and linear_fc2 (h each: RowParallelLinear.__init__,
        `setattr(self.bias, "sequence_parallel", self.sequence_parallel)`) a layer, the final
        LayerNorm (2 h) on the last stage

Before, ModTrans issued one all-reduce a block and one for the final norm: 17 on Llama-3-8B's
last stage at P 2 where Megatron issues 1 (the same bytes, 16 latencies more).
"""

from __future__ import annotations

from typing import Any

import pytest

import modtrans
from modtrans.comm import CommType
from modtrans.plan.model import Collective, Compute, Place, Plan, Purpose, Step

TENSOR = frozenset({Purpose.TENSOR})
FP32 = 4  # main_grad: the gradient buffer's fp32 (grad_reduce_in_fp32 for bf16)

# per model: layers, h, a layer's sequence_parallel elements, the final norm's
MODELS = {
    "llama-3-8b": (32, 4096, 2 * 4096, 4096),
    "gpt2": (12, 768, 2 * 2 * 768 + 2 * 768, 2 * 768),
}


def _plan(model: str, **layout: Any) -> Plan:
    plan = modtrans.translate(model, dialect="simai", seq_len=128, **layout).plan
    assert plan is not None
    return plan


def _expected(model: str, pp: int, vpp: int) -> list[int]:
    """Per stage, Megatron's one all-reduce's bytes: the rule above on the stage's chunks."""
    layers, _, per_layer, final = MODELS[model]
    chunks = pp * vpp
    per_chunk = layers // chunks
    out = []
    for stage in range(pp):
        held = [v for v in range(chunks) if v % pp == stage]
        elements = sum(per_chunk * per_layer for _ in held) + (final if chunks - 1 in held else 0)
        out.append(FP32 * elements)
    return out


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize(("pp", "vpp"), [(1, 1), (2, 1), (2, 2)])
def test_one_all_reduce_a_rank_after_the_backward(model: str, pp: int, vpp: int) -> None:
    layout: dict[str, Any] = {"tp": 2, "sp": True, "pp": pp, "global_batch": 4}
    if vpp > 1:
        layout |= {"vpp": vpp, "schedule": "interleaved"}
    plan = _plan(model, **layout)
    for stage, size in enumerate(_expected(model, pp, vpp)):
        ops = plan.programs[stage]
        tails = [
            (i, op)
            for i, op in enumerate(ops)
            if isinstance(op, Collective) and op.place is Place.TAIL and op.over == TENSOR
        ]
        assert [(op.comm, op.bytes) for _, op in tails] == [(CommType.ALLREDUCE, size)]
        at, op = tails[0]
        backward = (Step.INPUT_GRAD, Step.WEIGHT_GRAD)
        last = max(i for i, x in enumerate(ops) if isinstance(x, Compute) and x.step in backward)
        update = next(i for i, x in enumerate(ops) if isinstance(x, Compute) and x.step is Step.UPDATE)
        assert last < at < update  # after every backward compute, before the optimizer step
        # issued with the rank's first unit, whose weight gradient the backward finishes last
        first = min(x.layer for x in ops if isinstance(x, Compute))
        assert op.layer == first
