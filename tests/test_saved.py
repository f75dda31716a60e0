"""Activation memory of a model the block formulas do not know (strategy/saved.py and
derivatives.py): the bytes of the tensors autograd saves, on the real exports in fixtures/onnx/,
held to hand counts from each architecture and PyTorch's derivative formulas
(tools/autograd/derivatives.yaml): convolution saves its input, native_batch_norm its input and
two fp32 statistics per channel (save_mean, save_invstd), relu its result,
max_pool2d_with_indices its input and int64 indices, addmm its input (mat1, for the weight's
gradient), native_layer_norm its input and two fp32 statistics per row, the tanh GELU's ops (pow
its input, tanh its result, mul both tensor operands), _softmax its result, bmm both operands,
where its condition; add, views and a scalar's mul nothing.

tests/test_saved_torch.py (marker hf) holds the model to the bytes torch itself saves."""

from __future__ import annotations

from pathlib import Path

from modtrans.api import run
from modtrans.extraction import extract
from modtrans.ir.document import ModelIR
from modtrans.request import Request, prepare
from modtrans.strategy import derivatives, saved

ONNX = Path(__file__).resolve().parent.parent / "fixtures" / "onnx"
F32 = 4


def _ir(name: str, batch: int | None, shapes: dict[str, tuple[int, ...]] | None = None) -> ModelIR:
    ir, _ = extract(ONNX / name, batch=batch, input_shapes=shapes)
    assert ir is not None
    return ir


def _resnet18(b: int) -> int:
    """ResNet-18 (He et al. 2016, table 1; torchvision's BasicBlock) at 224 x 224, fp32, by hand.
    Stem: the image (conv1), conv1's output (bn1), relu's output (maxpool's input too) and the
    max pool's int64 indices. A stage of two blocks at C channels and H x W: the first block's
    input (the max pool's output for layer1; for the others the last relu's output, counted
    already), per block conv1's output (bn1), relu's (conv2's input), conv2's (bn2) and the
    block's last relu's; the first block of layers 2-4 also its downsample conv's output (its
    BN's input). Every BN: 2 x C fp32 statistics. The head: the pooled 512 features (fc's input);
    the 1 x 1 average pool saves nothing (mean.dim: sizes only)."""
    stem = 3 * 224 * 224 + 2 * 64 * 112 * 112
    indices = 8 * b * 64 * 56 * 56
    stages = ((64, 56), (128, 28), (256, 14), (512, 7))
    elements = stem + 64 * 56 * 56  # the max pool's output: layer1's input
    statistics = 2 * 64  # bn1
    for i, (c, hw) in enumerate(stages):
        downsample = i > 0
        elements += (2 * 4 + downsample) * c * hw * hw
        statistics += (2 * 2 + downsample) * 2 * c
    elements += 512
    return F32 * (b * elements + statistics) + indices


def test_resnet18_saves_what_its_architecture_says() -> None:
    """The legacy export, in train mode (its BatchNormalization kept), at batch 2."""
    kept = saved.by_layer(_ir("resnet18_legacy.onnx", 2))
    assert kept is not None
    assert sum(kept.values()) == _resnet18(2)


def test_resnet18_translation_reports_the_saved_bytes_as_its_activations(tmp_path: Path) -> None:
    """The README's quick start on a CNN: the .meta.json memory is there, its activations the hand
    count (DATA on one rank: the whole model)."""
    model = str(ONNX / "resnet18_legacy.onnx")
    result = run(prepare(Request(model=model, batch=2, output=str(tmp_path / "r.txt"))))
    assert result.plan is not None
    assert [m.activations for m in result.plan.memory] == [_resnet18(2)]


def test_gpt2_blocks_save_what_the_exported_graph_computes() -> None:
    """GPT-2 tiny (n_embd 64, 2 heads, MLP 256, fp32) exported by torch.export, eval mode (no
    dropout), batch 2, 16 tokens. Per block, by hand: ln_1 its input and 2 fp32 statistics per
    token; c_attn its input; q k^T both operands (q, k: sbh each); softmax its output (a s^2 b);
    the exporter's scaled-dot-product decomposition a `where` whose bool condition guards the
    probabilities (a s^2 b bytes) and whose output the second matmul reads with v; c_proj its
    input; ln_2 as ln_1; c_fc its input; the tanh GELU 0.5 x (1 + tanh(...)): pow its input,
    tanh its output, the last mul its two operands (4 tensors of 4h); the MLP's c_proj its input
    (4h)."""
    b, s, h, a = 2, 16, 64, 2
    sbh, scores = s * b * h, a * s * s * b
    norm = F32 * sbh + 2 * F32 * s * b
    attention = F32 * (sbh + 2 * sbh + scores + scores + sbh + sbh) + scores
    mlp = F32 * (sbh + 4 * 4 * sbh + 4 * sbh)
    ir = _ir("gpt2_tiny_dynamo.onnx", b, {"input_ids": (b, s), "attention_mask": (b, s)})
    kept = saved.by_layer(ir)
    assert kept is not None
    starts = [i for i, x in enumerate(ir.layers) if x.op_type == "LayerNormalization"]
    # blocks: ln_1 .. (next ln_1); the embedding before, the final norm and head after
    block = sum(kept[x.name] for x in ir.layers[starts[0] : starts[2]])
    assert block == 2 * norm + attention + mlp
    embedding = sum(kept[x.name] for x in ir.layers[: starts[0]])
    assert embedding == 8 * b * s  # the token ids (int64); the position ids are a constant here
    head = sum(kept[x.name] for x in ir.layers[starts[-1] :])
    assert head == norm + F32 * sbh  # the final norm, and the LM head's input


def test_bert_s_exported_gelu_saves_its_input_once() -> None:
    """BERT tiny (hidden 64, 2 heads, MLP 256, fp32; the legacy export, eager attention, no
    dropout) at batch 2, 16 tokens. Its GELU is torch's F.gelu, which the opset-17 graph writes as
    x * (1 + erf(x / sqrt 2)) / 2: autograd runs gelu, which saves x alone (4h a token), not the
    five ops' operands. Per block by hand: q, k and v's shared input, q and k^T, softmax's output
    (which the second product reads too), v, the output projection's input; two post-norms (input
    and 2 fp32 statistics a token); the intermediate projection's input, GELU's input and the
    output projection's input (4h)."""
    b, s, h, a = 2, 16, 64, 2
    sbh, scores = s * b * h, a * s * s * b
    norm = F32 * sbh + 2 * F32 * s * b
    attention = F32 * (sbh + 2 * sbh + sbh + sbh) + F32 * scores
    mlp = F32 * (sbh + 4 * sbh + 4 * sbh)
    names = ("input_ids", "attention_mask", "token_type_ids")
    ir = _ir("bert_tiny_legacy.onnx", b, dict.fromkeys(names, (b, s)))
    kept = saved.by_layer(ir)
    assert kept is not None
    for block in (0, 1):
        inside = [x for x in ir.layers if x.block is not None and x.block.index == block]
        assert sum(kept[x.name] for x in inside) == 2 * norm + attention + mlp


def test_onnxruntime_s_fused_bert_saves_what_its_torch_ops_would() -> None:
    """The same BERT fused by onnxruntime's transformers optimizer (EmbedLayerNormalization,
    Attention with its packed q k v projection, SkipLayerNormalization, BiasGelu): each fused op
    counted as the torch ops it stands for. The embedding: its three int32 ids, the summed
    embeddings layer_norm keeps and 2 fp32 statistics a token; per block the attention under the
    flash kernel (its input for the projection's weight, q, k and v, its output, which the output
    projection reads, and the logsumexp), add + layer_norm (the sum, 2 statistics a token) twice,
    the intermediate projection's input, GELU's input x + bias, the output projection's input."""
    b, s, h = 2, 16, 64
    sbh = s * b * h
    norm = F32 * sbh + 2 * F32 * s * b
    names = ("input_ids", "attention_mask", "token_type_ids")
    ir = _ir("bert_tiny_ort_fused.onnx", b, dict.fromkeys(names, (b, s)))
    kept = saved.by_layer(ir)
    assert kept is not None
    by_op: dict[str, list[float]] = {}
    for x in ir.layers:
        by_op.setdefault(x.op_type, []).append(kept[x.name])
    assert by_op["EmbedLayerNormalization"] == [3 * 4 * b * s + norm]
    assert by_op["SkipLayerNormalization"] == [norm] * 4
    assert by_op["BiasGelu"] == [F32 * 4 * sbh] * 2
    # the output projection reads the attention's output, counted there (0)
    assert sorted(by_op["MatMul"]) == sorted([0, F32 * sbh, F32 * 4 * sbh] * 2)
    statistics = [total - F32 * (sbh + 3 * sbh + sbh) for total in by_op["Attention"]]
    # the logsumexp: fp32 per query row and head (the IR carries no head count for this op: one)
    assert statistics == [F32 * b * s] * 2


def test_tensor_parallel_keeps_the_inputs_of_column_layers_whole(tmp_path: Path) -> None:
    """HYBRID_TRANSFORMER at G 2 on the same GPT-2 (Megatron's tensor parallelism, Korthikanti et
    al. 2022 section 4.2.1: the norms' inputs and the column-parallel layers' inputs replicated,
    the attention core, the MLP's activation and the row-parallel layers' inputs split over t):
    per block the norms, c_attn's and c_fc's inputs whole, the rest halved; the embedding's ids
    and the LM head's input (a column-parallel layer) whole."""
    b, s, h, a, t = 2, 16, 64, 2, 2
    sbh, scores = s * b * h, a * s * s * b
    norm = F32 * sbh + 2 * F32 * s * b
    attention = F32 * sbh + (F32 * (2 * sbh + scores + scores + sbh + sbh) + scores) / t
    mlp = F32 * sbh + F32 * (4 * 4 * sbh + 4 * sbh) / t
    head = norm + F32 * sbh
    request = Request(
        model=str(ONNX / "gpt2_tiny_dynamo.onnx"),
        input_shape={"input_ids": (b, s), "attention_mask": (b, s)},
        parallel="HYBRID_TRANSFORMER",
        npus=t,
        model_parallel_group=t,
        output=str(tmp_path / "g.txt"),
    )
    result = run(prepare(request))
    assert result.plan is not None
    assert [m.activations for m in result.plan.memory] == [
        2 * (2 * norm + attention + mlp) + 8 * b * s + head
    ]


def test_a_symbolic_dimension_gives_no_count() -> None:
    """Without a batch the saved tensors' sizes are unknown: None, never a guess."""
    assert saved.by_layer(_ir("resnet18_legacy.onnx", None)) is None


def test_the_rules_cite_pytorch_s_derivative_formulas() -> None:
    """Every rule names its derivatives.yaml entry, and no op is both saving and in NOTHING."""
    assert all(rule.entry for rule in derivatives.RULES.values())
    assert not set(derivatives.RULES) & derivatives.NOTHING
