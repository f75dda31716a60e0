"""The tensor-parallel keywords and the layout's --tp are one implementation
(strategy/llm/tensor.py), tested here against what Megatron-LM sends; DATA is its layout's --dp.

    -p HYBRID_TRANSFORMER --npus N --model-parallel-group G   the tensor part of --tp G --dp N/G
    -p DATA --npus N                                          ==  --dp N

Megatron-LM's source (NVIDIA/Megatron-LM, megatron/core) says per layer class what a tensor-
parallel rank sends over its tensor group, without sequence parallelism:
    ColumnParallelLinear (linear_qkv, linear_fc1, the output layer): nothing in the forward; the
        input gradient all-reduced (tensor_parallel/layers.py, ColumnParallelLinear.__init__:
        allreduce_dgrad = world_size > 1 and not sequence_parallel;
        LinearWithGradAccumulationAndAsyncCommunication.backward: all_reduce(grad_input))
    RowParallelLinear (linear_proj, linear_fc2): the output all-reduced in the forward, nothing in
        the backward (layers.py, RowParallelLinear.forward: reduce_from_tensor_model_parallel_region;
        allreduce_dgrad = False)
    VocabParallelEmbedding (the word embedding): the output all-reduced in the forward (layers.py,
        VocabParallelEmbedding.forward: reduce_from_tensor_model_parallel_region); position
        embeddings are a torch.nn.Embedding (models/common/embeddings/language_model_embedding.py,
        LanguageModelEmbedding.__init__) and norms are whole: nothing
    the loss on vocabulary-parallel logits: three all-reduces of one fp32 value per token in the
        forward (tensor_parallel/cross_entropy.py, _VocabParallelCrossEntropy.forward: logits_max,
        predicted_logits, sum_exp_logits)
The GPT layer spec builds Q, K and V as one linear_qkv and a gated MLP's gate and up as one
linear_fc1 (models/gpt/gpt_layer_specs.py; models/gpt/gpt_model.py, GPTModel.__init__: the
output_layer a ColumnParallelLinear), so their input gradient is one all-reduce per block.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans import pipeline, zoo
from modtrans.comm import Policy
from modtrans.plan import Collective, Compute, Plan, Transfer, project
from modtrans.plan.model import Purpose, Step
from modtrans.strategy import Folded, Parallelism
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import Layout

Key = tuple[object, ...]
Run = Callable[..., Result]


def _plan(model: str, parallel: Parallelism) -> Plan:
    """The plan on the roofline (the times below were measured with it before the GPU kernel
    model became the default; what is compared, keyword against layout, holds for any model)."""
    options = pipeline.Options(parallel=parallel, format="chakra-et", compute="roofline")
    result = pipeline.translate_checked(model, options)
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    return result.plan


def _canonical(plan: Plan, rank: int) -> tuple[list[Key], list[Key]]:
    """The rank's computes in order, and its collectives (sorted) with what each waits for."""
    program = plan.program(rank)
    names = [info.name for info in plan.layers]

    def key(i: int) -> Key:
        op = program[i]
        if isinstance(op, Compute):
            return ("compute", names[op.layer], op.step.value, op.time, op.flops)
        if isinstance(op, Collective):
            ranks = plan.group(rank, op.over).ranks
            return ("collective", names[op.layer], op.step.value, op.comm.value, op.bytes, ranks)
        assert isinstance(op, Transfer)
        return ("transfer", names[op.layer], op.step.value, op.direction.value, op.bytes)

    computes = [key(i) for i, op in enumerate(program) if isinstance(op, Compute)]
    collectives = sorted(
        (key(i), tuple(key(d) for d in op.deps)) for i, op in enumerate(program) if isinstance(op, Collective)
    )
    return computes, [(*k, deps) for k, deps in collectives]


@cache
def _no_hook(framework: Framework) -> bool:
    return False


@cache
def _fp16(model: str) -> bool:
    """Whether the model's parameters are fp16, as its file declares them (the IR's dtypes)."""
    ir, _ = pipeline.extract_checked(model)
    assert ir is not None
    return any(p.dtype == "float16" for layer in ir.layers for p in layer.params)


def _both(model: str, npus: int, group: int) -> tuple[Plan, Plan]:
    """The keyword's plan and its layout's; the layout's vocabulary unpadded, as the keyword's
    (Megatron's padding to 128 x T is test_llm_parallel's), and without Megatron's gradient hook's
    add of the embeddings' gradients into main_grad, which the keywords do not run
    (strategy/llm/maingrad.py: tests/test_megatron_main_grad.py)."""
    if group == 0:
        preset = Parallelism(Policy.DATA, npus)
        layout = Layout(npus=npus, dp=npus, vocab_divisor=1)
    else:
        preset = Parallelism(Policy.HYBRID_TRANSFORMER, npus, group)
        layout = Layout(npus=npus, tp=group, dp=npus // group, vocab_divisor=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Framework, "main_grad_hook", property(_no_hook))
        ours = _plan(model, Parallelism(Policy.HYBRID_TRANSFORMER, npus, layout=layout))
    return _plan(model, preset), ours


COLUMN, ROW, VOCAB, WHOLE = "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding", "whole"
# each built-in's layers -> the Megatron-LM module each is (part of) and that module's class
# (gpt_layer_specs.py: linear_qkv, linear_proj, linear_fc1, linear_fc2; gpt_model.py: output_layer)
MODULES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "gpt2": (
        (r"transformer\.wte", "word_embeddings", VOCAB),
        (r"transformer\.wpe", "position_embeddings", WHOLE),
        (r"transformer\.(h\.(\d+)\.ln_[12]|ln_f)", "norm", WHOLE),
        (r"transformer\.h\.(\d+)\.attn\.c_attn", "linear_qkv", COLUMN),
        (r"transformer\.h\.(\d+)\.attn\.c_proj", "linear_proj", ROW),
        (r"transformer\.h\.(\d+)\.mlp\.c_fc", "linear_fc1", COLUMN),
        (r"transformer\.h\.(\d+)\.mlp\.c_proj", "linear_fc2", ROW),
        (r"lm_head", "output_layer", COLUMN),
    ),
    "llama-3-8b": (
        (r"model\.embed_tokens", "word_embeddings", VOCAB),
        (r"model\.(layers\.(\d+)\.(input|post_attention)_layernorm|norm)", "norm", WHOLE),
        (r"model\.layers\.(\d+)\.self_attn\.[qkv]_proj", "linear_qkv", COLUMN),
        (r"model\.layers\.(\d+)\.self_attn\.o_proj", "linear_proj", ROW),
        (r"model\.layers\.(\d+)\.mlp\.(gate|up)_proj", "linear_fc1", COLUMN),
        (r"model\.layers\.(\d+)\.mlp\.down_proj", "linear_fc2", ROW),
        (r"lm_head", "output_layer", COLUMN),
    ),
}
# tokens per micro-batch (the input asked for below), hidden size and activation bytes from each
# model's published configuration: openai-community/gpt2 n_embd 768, no torch_dtype (fp32);
# meta-llama/Meta-Llama-3-8B hidden_size 4096, torch_dtype bfloat16
SHAPES = {"gpt2": (128, 768, 4), "llama-3-8b": (256, 4096, 2)}
FP32 = 4  # the loss's logits are cast to fp32 (cross_entropy.py, calculate_logits_max)


def _module(model: str, name: str) -> tuple[str | None, str, str]:
    """(block, Megatron module, its class) of one of the model's layers."""
    found = [
        (m, module, cls) for pattern, module, cls in MODULES[model] if (m := re.fullmatch(pattern, name))
    ]
    assert len(found) == 1, f"{name}: the table names no Megatron module for it"
    match, module, cls = found[0]
    blocks = [g for g in match.groups() if g is not None and g.isdigit()]
    return (blocks[0] if blocks else None), module, cls


def _megatron(model: str, names: list[str]) -> Counter[Key]:
    """What Megatron-LM sends over the tensor group per micro-batch (module docstring)."""
    tokens, hidden, width = SHAPES[model]
    activation = tokens * hidden * width
    expected: Counter[Key] = Counter()
    for block, module, cls in {_module(model, n) for n in names}:
        if cls == COLUMN:  # once per fused module: linear_qkv's Q, K and V read one input
            expected[(block, module, "input_grad", "ALLREDUCE", activation)] += 1
        if cls in (ROW, VOCAB):
            expected[(block, module, "fwd", "ALLREDUCE", activation)] += 1
        if module == "output_layer":
            expected[(block, module, "fwd", "ALLREDUCE", tokens * FP32)] += 3
    return expected


TENSOR_GROUP = frozenset({Purpose.TENSOR})


@pytest.mark.parametrize("how", ["keyword", "layout"])
@pytest.mark.parametrize("model", ["gpt2", pytest.param("llama-3-8b", marks=pytest.mark.slow)])
def test_tensor_parallelism_sends_what_megatron_lm_sends(model: str, how: str) -> None:
    """-p HYBRID_TRANSFORMER --npus 8 --model-parallel-group 4 and --tp 4 --dp 2: per Megatron
    module, rank 0's and rank 7's collectives over their tensor group are those of its class."""
    parallel = (
        Parallelism(Policy.HYBRID_TRANSFORMER, 8, 4)
        if how == "keyword"
        else Parallelism(Policy.HYBRID_TRANSFORMER, 8, layout=Layout(npus=8, tp=4, dp=2))
    )
    tokens = SHAPES[model][0]
    options = pipeline.Options(parallel=parallel, format="chakra-et", input_shapes={"input_ids": (1, tokens)})
    plan = pipeline.translate_checked(model, options).plan
    assert plan is not None
    names = [info.name for info in plan.layers]
    for rank in (0, 7):
        sent = Counter(
            (*_module(model, names[op.layer])[:2], op.step.value, op.comm.value, op.bytes)
            for op in plan.program(rank)
            if isinstance(op, Collective) and op.over == TENSOR_GROUP
        )
        assert sent == _megatron(model, names)
        tensor_ranks = {
            plan.group(rank, op.over).ranks
            for op in plan.program(rank)
            if isinstance(op, Collective) and op.over == TENSOR_GROUP
        }
        assert tensor_ranks == {tuple(range(rank // 4 * 4, rank // 4 * 4 + 4))}


CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


@pytest.mark.parametrize(
    ("model", "group", "rule"),
    [
        # megatron/core/transformer/attention.py, Attention.__init__:
        # divide(num_attention_heads, world_size), divide(num_query_groups, world_size)
        (CONFIGS / "gpt2.json", 8, "--model-parallel-group 8: the 12 attention heads must divide by it"),
        (CONFIGS / "gemma-2b.json", 2, "--model-parallel-group 2: the 1 key/value heads must divide by it"),
        # megatron/core/transformer/moe/moe_layer.py, MoELayer.forward: a ValueError in training
        # when the tensor group has more than one rank and sequence parallelism is off
        ("mixtral-8x7b", 2, "a mixture of experts over tensor ranks needs --sp"),
        # megatron/core/ssm/mamba_mixer.py, MambaMixer: its own tensor-parallel collectives
        (CONFIGS / "mamba-130m-hf.json", 2, "(Mamba) mixer split over tensor ranks is not modelled"),
    ],
    ids=["heads", "key-value-heads", "moe-without-sp", "mamba"],
)
def test_the_keyword_refuses_what_megatron_core_refuses(
    model: str | Path, group: int, rule: str, run_cli: Run, tmp_path: Path
) -> None:
    """The keyword runs the layout's checks (strategy/llm/tensor.py, check): one line, no file."""
    out = tmp_path / "w.txt"
    done = run_cli(
        "translate",
        model,
        "-p",
        "HYBRID_TRANSFORMER",
        "--npus",
        "8",
        "--model-parallel-group",
        str(group),
        "-o",
        out,
    )
    assert done.exit_code != 0
    errors = [line for line in done.output.splitlines() if " error " in line]
    assert errors == [errors[0]], done.output
    assert errors[0].startswith(f"{model}: error X501 ")
    assert rule in errors[0]
    assert "Traceback" not in done.output
    assert not out.exists()


# The fast run keeps one of each family (CNN, encoder, decoder); the LLM-sized ones are -m slow.
FAST = {"resnet50", "bert-base", "gpt2"}


@pytest.mark.parametrize(
    "model", [pytest.param(m, marks=() if m in FAST else pytest.mark.slow) for m in zoo.names()]
)
def test_data_is_its_layouts_dp(model: str) -> None:
    """-p DATA --npus 2 == --dp 2: per rank, the computes in program order (layer, step, ticks,
    FLOPs), and every collective (layer, step, type, bytes, its group's ranks) with the operation it
    waits for, but the gradients: one all-reduce per layer in the keyword's, Megatron-LM's gradient
    buffer in the layout's (one bucket, all-reduced at the first layer, the backward's last:
    strategy/llm/buckets.py), of the same bytes, after Megatron's kernels over that bucket (its
    NaN check and 1/D scale, Bucket.start_grad_sync: tests/test_megatron_bucket_kernels.py), one
    compute the keyword's DATA does not run; and each one's last compute, its optimizer step (a
    keyword's traces end with it as a layout's do)."""
    preset, layout = _both(model, 2, 0)
    assert [i.name for i in preset.layers] == [i.name for i in layout.layers]
    assert {g.ranks for g in preset.groups()} == {g.ranks for g in layout.groups()}
    first = preset.layers[0].name
    for rank in (0, 1):
        computes, collectives = _canonical(layout, rank)
        (sync,) = [c for c in computes if c[2] == "grad_sync"]
        computes.remove(sync)
        assert sync[1] == first
        # the steps apart: Megatron's runs its gradient norm as a kernel of its own before Adam,
        # the keyword's keeps it in its step (strategy/llm/clipping.py; tests/test_megatron_clip.py)
        steps = [c for c in computes if c[2] == "update"]
        keyword = _canonical(preset, rank)
        (step,) = [c for c in keyword[0] if c[2] == "update"]
        ours = sum(int(str(c[3])) for c in steps)
        assert (
            preset.compute_time(rank) - int(str(step[3]))
            == layout.compute_time(rank) - int(str(sync[3])) - ours
        )
        # the norm and Adam; an fp16 model's grad scaler unscales first (Megatron builds one for
        # fp16 alone: MixedPrecisionOptimizer._unscale_main_grads_and_check_for_nan)
        kernels = 3 if _fp16(model) else 2
        assert [c[2] for c in computes[-len(steps) :]] == ["update"] * len(steps) == ["update"] * kernels
        del computes[-len(steps) :]
        assert keyword[0].pop()[2] == "update"
        bucket = [c for c in collectives if c[2] == "weight_grad"]
        layered = [c for c in keyword[1] if c[2] == "weight_grad"]
        assert [c[1:4] for c in bucket] == [(first, "weight_grad", "ALLREDUCE")]
        assert bucket[0][4] == sum(int(str(c[4])) for c in layered)
        assert computes == keyword[0]
        assert [c for c in collectives if c not in bucket] == [c for c in keyword[1] if c not in layered]
    # the layout's ASTRA-sim 1.0 text is the preset's, the bucket's all-reduce on the first line,
    # the bucket's kernels in its update column; a line with no collective has its optimizer step in
    # its weight-gradient compute, since ASTRA-sim 1.0 waits the update column only after a line's
    # collectives (plan/lines.py, settle).
    text, words = project(layout), project(preset)
    assert len(text.layers) == len(words.layers)
    whole = sum(z.weight_grad.comm_size for z in words.layers)
    # The update columns differ: the layout's Adam leaves out the gradient norm, which its first
    # line's column carries as a kernel of its own (strategy/llm/clipping.py), beside the bucket's
    for x, y in zip(text.layers, words.layers, strict=True):
        assert x.weight_grad.comm_size == (whole if x.name == first else 0)
        if x.name == first:
            assert x.update_time > int(str(sync[3]))
        assert dataclasses.replace(x, weight_grad=y.weight_grad, update_time=y.update_time) == y
        assert x.weight_grad.compute_time >= y.weight_grad.compute_time


def _passes(plan: Plan, rank: int = 0) -> int:
    """The rank's compute but its optimizer step and a layout's bucket kernels (Step.GRAD_SYNC)."""
    once = (Step.UPDATE, Step.GRAD_SYNC)
    update = sum(o.time for o in plan.program(rank) if isinstance(o, Compute) and o.step in once)
    return plan.compute_time(rank) - update


def test_gpt2_rank_0_computes_megatrons_share_and_the_old_convention_stays_an_option() -> None:
    # issue 23, measured before the fix: -p HYBRID_TRANSFORMER --npus 8 --model-parallel-group 4
    # computed 1,904,785 ns on rank 0 (only the GEMM of c_attn / c_fc divided: Folded.GEMM_ONLY),
    # --tp 4 --dp 2 1,464,097 ns (their folded attention core and GELU 1/4 too: Megatron-LM's
    # heads / T and ffn_hidden_size / T, Folded.MEGATRON). Both + 1,157 ns since issue 24: the
    # position embedding (wpe) is replicated, a torch.nn.Embedding in Megatron-LM, not a
    # vocabulary-parallel shard (its lookup whole on every rank: 1,399 + 1,736 + 1,013 ns)
    # (the passes' compute: the layout's optimizer step after them, issue 37, is left out). Both
    # + 168 ns since the row-parallel biases are whole: each block's two c_proj add their bias to,
    # and sum its gradient over, the whole reduced 128 x 768 output, 3/4 x 128 x 768 = 73,728 FLOPs
    # more in the forward and in the weight gradient, 3.8 ns each at the A100's 19.5 TFLOP/s fp32
    # (24 layers x 2 passes, each rounded to its ns: 3 + 3 + 4 + 4 a block). Both - 132 ns since
    # the causal mask's Where (a 1 x 1 x 128 x 128 additive mask made from the bool mask and
    # constants, folded into c_attn) computes no input gradient (ir/document.needs_input_grad):
    # 11 ns a block (41 ns a block, 492 ns, where the folded layers are whole: GEMM_ONLY)
    preset, layout = _both("gpt2", 8, 4)
    assert _passes(preset) == _passes(layout) == 1_465_290
    assert layout.compute_time(0) > _passes(layout)
    old = _plan("gpt2", Parallelism(Policy.HYBRID_TRANSFORMER, 8, 4, folded=Folded.GEMM_ONLY))
    assert _passes(old) == 1_905_618

    def c_attn_forward(plan: Plan) -> int:
        layer = next(i for i, x in enumerate(plan.layers) if x.name == "transformer.h.0.attn.c_attn")
        return next(o.time for o in plan.program(0) if isinstance(o, Compute) and o.layer == layer)

    assert (c_attn_forward(old), c_attn_forward(preset)) == (15_125, 8_145)
