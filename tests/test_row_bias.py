"""A row-parallel layer's bias is whole on every tensor-parallel rank (strategy/share.py, whole):
Megatron-LM's RowParallelLinear (megatron/core/tensor_parallel/layers.py at core_v0.14.0,
__init__: `self.bias = Parameter(torch.empty(self.output_size, ...))`, "Note that bias is not
parallelized"; forward: `output = (output_ + self.bias)` after the reduction), against a column-
parallel layer's, split with its output features (ColumnParallelLinear: output_size_per_partition).
Every expected value is counted from the configuration's numbers: a GPT-2 block holds
c_attn (h x 3h + 3h) and c_fc (h x 4h + 4h), column-parallel, c_proj (h x h + h) and the MLP's c_proj
(4h x h + h), row-parallel, and two LayerNorms (2h each), replicated; per rank at T, (12 h^2 + 7 h) / T
+ 2 h (the row biases) + 4 h (the norms). Megatron-Core's own layer at T = 2 is counted in
tests/test_row_bias_megatron.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modtrans.comm import CommType
from modtrans.plan import Collective, Compute, Place, Plan, Purpose, Step
from modtrans.strategy.llm import Layout
from tests import plans

H, FFN, VOCAB, POSITIONS, MICRO, SEQ = 64, 256, 96, 64, 2, 16
FP32 = 4
TENSOR = frozenset({Purpose.TENSOR})


def gpt2(layers: int) -> dict[str, Any]:
    """A GPT-2 of `layers` blocks in fp32 (transformers' GPT2Config keys: n_inner the MLP's width)."""
    return {
        "model_type": "gpt2", "vocab_size": VOCAB, "n_embd": H, "n_head": 4, "n_inner": FFN,
        "n_layer": layers, "n_positions": POSITIONS, "torch_dtype": "float32",
    }  # fmt: skip


def block_elements(t: int) -> int:
    """One GPT-2 block's parameters on one of t tensor ranks, from the configuration."""
    split = 3 * H * H + 3 * H + H * FFN + FFN + H * H + FFN * H  # column weights and biases, row weights
    return split // t + 2 * H + 4 * H  # the row-parallel layers' biases and the norms, whole


def _plan(tmp_path: Path, layers: int, **layout: Any) -> Plan:
    npus = layout.get("tp", 1) * layout.get("dp", 1)
    chosen = Layout(npus=npus, micro_batch=MICRO, vocab_divisor=1, **layout)
    return plans.plan(plans.config(tmp_path, gpt2(layers)), chosen, (MICRO, SEQ))


def _weights(plan: Plan) -> int:
    assert plan.layout is not None
    assert plan.layout.memory
    return plan.layout.memory[0].weights


@pytest.mark.parametrize("t", [1, 2, 4])
def test_a_block_holds_its_row_parallel_biases_whole(tmp_path: Path, t: int) -> None:
    """The weights one rank holds of each block (two blocks less one: the embeddings cancel)."""
    one, two = (_weights(_plan(tmp_path, n, tp=t, global_batch=MICRO)) for n in (1, 2))
    assert two - one == FP32 * block_elements(t)


def test_the_22b_per_rank_parameters_at_tp_8(tmp_path: Path) -> None:
    """Korthikanti et al. 2022's GPT 22B (table 3: h 6,144, 48 layers, 64 heads, vocabulary 51,200,
    sequence 2,048, fp16) at TP 8 on one stage: the vocabulary-parallel word embedding / 8, the
    position embedding and final norm whole, and each block's (12 h^2 + 7 h) / 8 + 6 h."""
    h, layers = 6144, 48
    config = {"model_type": "gpt2", "n_embd": h, "n_layer": layers, "n_head": 64, "n_positions": 2048}
    path = plans.config(tmp_path, {**config, "vocab_size": 51200, "torch_dtype": "float16"})
    layout = Layout(npus=8, tp=8, micro_batch=1, global_batch=1, vocab_divisor=1)
    plan = plans.plan(path, layout, (1, 2048))
    block = (12 * h * h + 7 * h) // 8 + 6 * h
    assert _weights(plan) == 2 * (51200 * h // 8 + 2048 * h + 2 * h + layers * block)


def test_the_data_parallel_reduction_moves_the_whole_biases(tmp_path: Path) -> None:
    """Megatron's one gradient bucket (no --overlap-grad-reduce) all-reduced over the data ranks,
    fp32 gradients: every parameter the rank holds, the row biases whole."""
    plan = _plan(tmp_path, 2, tp=2, dp=2, global_batch=2 * MICRO)
    held = VOCAB * H // 2 + POSITIONS * H + 2 * H + 2 * block_elements(2)  # wte / T, wpe, ln_f
    reduced = [c for c in plan.program(0) if isinstance(c, Collective) and Purpose.DATA in c.over]
    assert [(c.comm, c.bytes) for c in reduced] == [(CommType.ALLREDUCE, FP32 * held)]


def test_zero_3_gathers_and_scatters_the_whole_bias(tmp_path: Path) -> None:
    """ZeRO-3's per-layer all-gathers and reduce-scatters move the rank's tensor-parallel share:
    c_proj's h x h / T weight and its whole bias of h, the MLP's 4h x h / T and h; c_attn's
    (3 h^2 + 3 h) / T."""
    plan = _plan(tmp_path, 1, tp=2, dp=2, zero=3, global_batch=2 * MICRO)
    sizes = {
        (plan.layers[c.layer].name, c.comm, c.place): c.bytes
        for c in plan.program(0)
        if isinstance(c, Collective) and Purpose.DATA in c.over
    }
    expected = {
        "transformer.h.0.attn.c_attn": (3 * H * H + 3 * H) // 2,
        "transformer.h.0.attn.c_proj": H * H // 2 + H,
        "transformer.h.0.mlp.c_fc": (H * FFN + FFN) // 2,
        "transformer.h.0.mlp.c_proj": FFN * H // 2 + H,
    }
    for name, elements in expected.items():
        assert sizes[(name, CommType.ALLGATHER, Place.BEFORE_FWD)] == FP32 * elements
        assert sizes[(name, CommType.REDUCESCATTER, Place.AFTER_WG)] == FP32 * elements


def test_sequence_parallelism_all_reduces_the_row_biases_partial_gradients(tmp_path: Path) -> None:
    """Under SP each rank adds the bias to its sequence shard, so its gradient is partial: Megatron
    marks it `sequence_parallel` (RowParallelLinear.__init__) and all-reduces it over the tensor
    group once per iteration with the norms' (finalize_model_grads.py at core_v0.14.0,
    _allreduce_non_tensor_model_parallel_grads: every such gradient of the rank in one flattened
    all-reduce, after the backward), fp32: a norm's 2 h, a row-parallel bias's h. A
    column-parallel bias sees every token of its features: not reduced. Without SP every rank's
    whole bias saw every token: nothing to reduce."""
    plan = _plan(tmp_path, 2, tp=2, sp=True, global_batch=MICRO)
    tail = [
        (plan.layers[c.layer].name, c.comm, c.bytes)
        for c in plan.program(0)
        if isinstance(c, Collective) and c.place is Place.TAIL and c.over == TENSOR
    ]
    # each block's two norms (2 h each) and two row-parallel biases (h each), and the final norm
    # (2 h), in one all-reduce with the first unit, whose gradient the backward finishes last
    blocks = 2 * (2 * 2 * H + 2 * H)
    assert tail == [("transformer.wte", CommType.ALLREDUCE, FP32 * (blocks + 2 * H))]
    plain = _plan(tmp_path, 2, tp=2, global_batch=MICRO)
    assert not [c for c in plain.program(0) if isinstance(c, Collective) and c.place is Place.TAIL]


def _flops(plan: Plan, name: str, step: Step) -> int:
    index = next(i for i, x in enumerate(plan.layers) if x.name == name)
    ops = plan.program(0)
    return next(c.flops for c in ops if isinstance(c, Compute) and c.layer == index and c.step is step)


@pytest.mark.parametrize(
    ("name", "k"), [("transformer.h.0.attn.c_proj", H), ("transformer.h.0.mlp.c_proj", FFN)]
)
def test_the_bias_add_runs_on_the_whole_reduced_output(tmp_path: Path, name: str, k: int) -> None:
    """A row-parallel layer's GEMM is halved at T = 2 (m k n of its 2 m k n), its bias add (m n,
    forward) and the bias gradient's sum over the tokens (m n, weight gradient) are not: they run
    on the reduced output (ir/flops.py's gemm). The layers folded into it are whole either way."""
    whole, split = (_plan(tmp_path, 1, tp=t, global_batch=MICRO) for t in (1, 2))
    m, n = MICRO * SEQ, H
    for step in (Step.FWD, Step.WEIGHT_GRAD):
        assert _flops(whole, name, step) - _flops(split, name, step) == m * k * n
