"""Selective recomputation by framework (strategy/llm/selective.py) against a structural reading of
the policies' sources.

torchtitan's 'op' policy (pytorch/torchtitan 9dec370, torchtitan/parallelisms/parallelize_llama.py,
_apply_ac_to_transformer_block): a block's aten.mm outputs are saved "except every second mm"
(`meta[mm_count_key] % 2 == 0`), SDPA's outputs are saved, every other op is recomputed. Its Llama
block runs its mms as wq, wk, wv, wo, w1, w3, w2 (torchtitan/models/llama/model.py: Attention.
forward `self.wq(x), self.wk(x), self.wv(x)` ... `self.wo(output)`; FeedForward.forward
`self.w2(F.silu(self.w1(x)) * self.w3(x))`), transformers' q_proj, k_proj, v_proj, o_proj,
gate_proj, up_proj, down_proj. Megatron-LM's selective (Korthikanti et al. 2022): the attention core.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from modtrans.api import run
from modtrans.pipeline import Translation
from modtrans.plan.model import Compute, Plan, Step
from modtrans.request import Request, prepare
from modtrans.strategy.llm.selective import op_reruns

TITAN_MMS = ("wq", "wk", "wv", "wo", "w1", "w3", "w2")
HF_NAME = dict(
    zip(TITAN_MMS, ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"), strict=True)
)
# Llama-3-8B's config.json: hidden 4096, MLP 14336, 32 heads of 128, 8 key/value heads, vocabulary
H, F, A, KV, D, V = 4096, 14336, 32, 8, 128, 128256
S, B = 2048, 1


def _translated(framework: str) -> Translation:
    request = Request(
        model="llama-3-8b", npus=8, micro_batch=B, global_batch=8, seq_len=S, device="h100",
        framework=framework, zero=3, attention="flash2", recompute="selective",
    )  # fmt: skip
    result = run(prepare(request))
    assert result.plan is not None, result.diagnostics
    return result


def _plan(framework: str) -> Plan:
    plan = _translated(framework).plan
    assert plan is not None
    return plan


def _recomputed(plan: Plan, block: int = 3) -> dict[str, int]:
    """FLOPs each recompute node of rank 0 carries in one block (by its unit's owner)."""
    out: dict[str, int] = defaultdict(int)
    for op in plan.programs[0]:
        if isinstance(op, Compute) and op.step is Step.RECOMPUTE:
            name = plan.layers[op.layer].name
            if f".layers.{block}." in name:
                out[name.rsplit(".", 1)[-1]] += op.flops
    return dict(out)


def test_torchtitans_op_policy_reruns_every_second_matmul_of_a_block() -> None:
    """k, o and w3 (the 2nd, 4th and 6th mm) rerun, three matmuls a block, 2 s b k n FLOPs each,
    and the ops up to the product w2 reads (torch.utils.checkpoint's early stop): both norms, the
    rotary embedding, the first residual add, SiLU x product; SDPA's flash kernel is saved (no
    attention core), w2 is saved and the last residual add comes after it."""
    rerun = {HF_NAME[mm] for i, mm in enumerate(TITAN_MMS, start=1) if i % 2 == 0}
    assert rerun == {"k_proj", "o_proj", "up_proj"}
    result = _translated("torchtitan")
    assert result.ir is not None
    names = {n.rsplit(".", 1)[-1] for n in op_reruns(result.ir, fused_attention=True) if ".layers.3." in n}
    between = {"input_layernorm", "rotary", "residual_attn", "post_attention_layernorm", "act"}
    assert names == rerun | between
    assert result.plan is not None
    done = _recomputed(result.plan)
    mms = sum(2 * S * B * H * n for n in (KV * D, H, F))  # k_proj, o_proj, up_proj
    assert sum(done.values()) == pytest.approx(mms, rel=0.01)  # the elementwise ops' few FLOPs beside
    assert {name for name, flops in done.items() if flops > 0.1 * 2 * S * B * H * KV * D} == rerun


def test_megatrons_selective_reruns_the_attention_core_alone() -> None:
    """Under another framework (FSDP's, as Megatron's) the rerun is the scores and context
    products, 2 x 2 s^2 b h FLOPs (the model's count, causal or not), and no linear."""
    done = _recomputed(_plan("fsdp"))
    assert sum(done.values()) == pytest.approx(2 * 2 * S * S * B * A * D, rel=0.02)  # and the softmax
    assert not {"k_proj", "o_proj", "up_proj"} & set(done)


def test_torchtitans_op_policy_keeps_what_it_saves() -> None:
    """Per block, the checkpoint's input (h), the odd mms' outputs (wq: a d, wv: kv d, w1: f,
    w2: h) and SDPA's output (a d) in bf16, and its logsumexp in fp32 (a per token); Megatron's
    selective keeps Korthikanti's terms for the gated block. The embedding's terms are the same
    under both."""
    titan, megatron = (_plan(f).memory[0].activations for f in ("torchtitan", "fsdp"))
    blocks = 32
    kept = 2 * S * B * (H + A * D + KV * D + F + H + A * D) + 4 * A * S * B
    korthikanti = 2 * S * B * (4 * H + A * D + 2 * KV * D + A * D + 3 * F)
    loss = (12 - 4) * S * B * V  # torchtitan's fp32 logits at the loss's peak (test_memory.py)
    assert megatron - titan == pytest.approx(blocks * (korthikanti - kept) - loss, rel=1e-9)
