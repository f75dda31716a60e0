"""FSDP2's copies on the compute stream (strategy/llm/fsdp.py, copy_bytes), held to its own code
transcribed: torch/distributed/_composable/fsdp/_fsdp_collectives.py at 01d66d2 (2024; torch
2.13's torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py the same), foreach_all_gather_copy_out's
split_with_sizes_copy (the all-gather output read, each unsharded parameter written: 2 + 2 B a bf16
element) after every gather, and foreach_reduce_scatter_copy_in's chunk_cat of the bf16 gradients
into the fp32 reduce-scatter input torchtitan's MixedPrecisionPolicy(reduce_dtype=float32) asks for
(2 read + 4 written). tests/test_fsdp2_kernels_hf.py counts the same ops as torch runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from modtrans import pipeline
from modtrans.plan.model import Compute
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.groups import Params
from modtrans.strategy.llm import Layout, Recompute
from modtrans.strategy.llm.build import rank_units
from modtrans.strategy.llm.fsdp import copy_bytes
from modtrans.strategy.llm.gqa import repeats
from modtrans.strategy.llm.projections import repeated
from tests import plans
from tests.plans import TOY, config

# the toy Llama's block (tests/plans.py): hidden 64, 4 heads of 16 in 2 key/value groups, MLP 128
H, KV, FFN, VOCAB = 64, 32, 128, 96
BLOCK = H * (H + KV + KV + H) + 3 * H * FFN + 2 * H  # q, k, v, o; gate, up, down; two RMSNorms
BF16, FP32 = 2, 4
COPY_OUT = BF16 + BF16  # split_with_sizes_copy: read the all-gather output, write the parameter
COPY_IN = BF16 + FP32  # chunk_cat: read the bf16 gradient, write the fp32 reduce-scatter input


def _units(tmp_path: Path, zero: int, framework: Framework) -> list[tuple[int | None, tuple[int, int, int]]]:
    ir, found = pipeline.extract_checked(config(tmp_path, TOY), input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    layout = Layout(npus=8, zero=zero, framework=framework)
    return [(u.block, copy_bytes(u)) for u in rank_units(ir, layout, Params.TRAINABLE, None)]


@pytest.mark.parametrize(("zero", "gathers"), [(3, 2), (2, 1)])
def test_a_blocks_copies_are_its_parameters_bytes_as_fsdp2_copies_them(
    tmp_path: Path, zero: int, gathers: int
) -> None:
    """Under torchtitan a block copies its parameters out once a gather (twice resharded after the
    forward, --zero 3; once at --zero 2) and its gradients in once; the last block (the toy's
    second) is never resharded after its forward (parallelize_llama.py at 9dec370, apply_fsdp:
    `reshard_after_forward = int(layer_id) < len(model.layers) - 1`), so gathered and copied out
    once, and the root's group (the embedding, final norm and output layer) once, on the first
    unit, and its gradients copied in once there, after the whole backward (fsdp.rooted)."""
    per_block: dict[int | None, list[int]] = {}
    for block, moved in _units(tmp_path, zero, Framework.TORCHTITAN):
        sums = per_block.setdefault(block, [0, 0, 0])
        per_block[block] = [a + b for a, b in zip(sums, moved, strict=True)]
    assert sorted(per_block, key=str) == [0, 1, None]
    assert per_block[0] == [COPY_OUT * BLOCK, (gathers - 1) * COPY_OUT * BLOCK, COPY_IN * BLOCK]
    assert per_block[1] == [COPY_OUT * BLOCK, 0, COPY_IN * BLOCK]
    root = 2 * VOCAB * H + H  # embed_tokens, lm_head (untied), the final RMSNorm
    assert per_block[None] == [COPY_OUT * root, 0, COPY_IN * root]


def test_a_bf16_reduction_copies_its_gradients_in_at_their_own_width(tmp_path: Path) -> None:
    """FSDP's own reduce_dtype, the parameters' (FSDP2 with no MixedPrecisionPolicy's
    reduce_dtype): the chunk_cat copies bf16 into bf16."""
    for block, moved in _units(tmp_path, 3, Framework.FSDP):
        if block == 0 and moved[2]:
            assert moved[2] % (BF16 + BF16) == 0
            assert moved[0] == moved[2]
    assert not Framework.FSDP.fsdp2  # FSDP1's flat parameter: no copies
    assert Framework.TORCHTITAN.fsdp2


def _times(tmp_path: Path, recompute: Recompute) -> dict[tuple[int, str], int]:
    """Rank 0's compute ticks by unit and step over one iteration (one micro-batch)."""
    layout = Layout(npus=8, zero=3, framework=Framework.TORCHTITAN, recompute=recompute)
    made = plans.plan(config(tmp_path, TOY), layout, (1, 64))
    out: dict[tuple[int, str], int] = {}
    for op in made.programs[0]:
        if isinstance(op, Compute):
            out[(op.layer, op.step.name)] = out.get((op.layer, op.step.name), 0) + op.time
    return out


def test_full_recomputation_copies_the_parameters_out_twice_not_three_times(tmp_path: Path) -> None:
    """FSDP2 under torchtitan's full activation checkpointing (checkpoint_wrapper inside
    fully_shard: parallelize_llama.py at 9dec370, apply_ac before apply_fsdp) gathers a block
    before its backward and the recomputation runs on those parameters: one copy-out in the
    forward, one in the backward. The rerun forward carries it; the backward's is not charged
    again: each block unit's weight gradient is the one without recomputation less the copy-out
    its forward already holds, which the rerun repeats. The last block, never resharded after its
    forward (apply_fsdp at 9dec370), has no backward gather to stand for: its weight gradients
    the same either way (its rerun's copy-out, which FSDP2 skips where the parameters are
    unsharded already, is left in: fsdp.py)."""
    plain, full = _times(tmp_path, Recompute.NONE), _times(tmp_path, Recompute.FULL)
    rerun = [u for (u, step) in full if step == "RECOMPUTE"]
    assert len(rerun) == 2 * 9
    last = set(sorted(rerun)[9:])
    for u in rerun:
        assert full[(u, "RECOMPUTE")] == plain[(u, "FWD")]
        held = plain[(u, "WEIGHT_GRAD")] - full[(u, "WEIGHT_GRAD")]
        assert (held == 0) if u in last else (held > 0)


def test_the_projections_whose_input_gradients_autograd_sums(tmp_path: Path) -> None:
    """torchtitan's Attention.forward (`self.wq(x), self.wk(x), self.wv(x)`) and FeedForward.forward
    (`self.w1(x)`, `self.w3(x)`) at 9dec370: per block, the second and third of q, k, v and the
    second of gate, up add their input gradient into the first's (strategy/llm/projections.py)."""
    ir, found = pipeline.extract_checked(config(tmp_path, TOY), input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    units = rank_units(ir, Layout(npus=8, zero=3, framework=Framework.TORCHTITAN), Params.TRAINABLE, None)
    names = sorted(units[i].name.split(".", 2)[-1] for i in repeated(units))
    second = ("self_attn.k_proj", "self_attn.v_proj", "mlp.up_proj")
    assert names == sorted(f"{b}.{name}" for b in (0, 1) for name in second)


@pytest.mark.parametrize("framework", [Framework.FSDP, Framework.DEEPSPEED])
def test_transformers_modules_sum_their_projections_input_gradients(
    tmp_path: Path, framework: Framework
) -> None:
    """--framework fsdp and deepspeed train transformers' own modules (Framework.wraps_module):
    LlamaAttention's separate q_proj, k_proj, v_proj and LlamaMLP's gate_proj, up_proj on one input,
    whose input gradients autograd sums as under torchtitan (tests/test_fsdp2_kernels_hf.py counts
    torch's adds in those modules): the k, v and up projections' input gradients carry an add of
    ADD x their input's bytes (the toy's 64 tokens of 64 bf16), the others none."""
    assert framework.separate_projections
    ir, found = pipeline.extract_checked(config(tmp_path, TOY), input_shapes={"input_ids": (1, 64)})
    assert ir is not None, [d.message for d in found]
    layout = Layout(npus=8, zero=3, framework=framework)
    units = rank_units(ir, layout, Params.TRAINABLE, None)
    names = sorted(units[i].name.split(".", 2)[-1] for i in repeated(units))
    second = ("self_attn.k_proj", "self_attn.v_proj", "mlp.up_proj")
    assert names == sorted(f"{b}.{name}" for b in (0, 1) for name in second)


@pytest.mark.parametrize(("kv_heads", "n_rep"), [(2, 2), (1, 4), (4, 0)])
def test_the_projections_repeat_kv_copies(tmp_path: Path, kv_heads: int, n_rep: int) -> None:
    """torchtitan's repeat_kv (model.py at 9dec370) copies xk and xv, each n_heads / n_kv_heads
    times, and nothing under multi-head attention (n_rep 1: `return x`): the toy's 4 query heads
    over 2 and 1 key/value heads, and 4."""
    ir, found = pipeline.extract_checked(
        config(tmp_path, {**TOY, "num_key_value_heads": kv_heads}), input_shapes={"input_ids": (1, 64)}
    )
    assert ir is not None, [d.message for d in found]
    copied = {
        x.name.rsplit(".", 1)[-1]: repeats(x) for x in ir.layers if x.block is not None and x.block.index == 0
    }
    assert {name: n for name, n in copied.items() if n} == (
        {"k_proj": n_rep, "v_proj": n_rep} if n_rep else {}
    )
