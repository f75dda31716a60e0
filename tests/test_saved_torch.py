"""The activation model (strategy/saved.py) against the bytes PyTorch's autograd really saves.

Each test builds a real torch model on the CPU, runs one training forward under
torch.autograd.graph.saved_tensors_hooks and sums the storages the hooks see (each once, by its
data pointer; the model's parameters and buffers left out), then exports the same model with
torch.onnx.export (the TorchScript exporter, opset 17, as fixtures/onnx/ were made), translates
the file with ModTrans and compares the .meta.json's activations. Every difference is explained:

- dropout: on the CPU, PyTorch multiplies by a float noise tensor (aten/src/ATen/native/
  Dropout.cpp, _dropout_impl: 4 bytes an element); on CUDA native_dropout saves a bool mask
  (derivatives.yaml, native_dropout: result1), 1 byte, which the model counts. The test counts
  the elements every training-mode dropout draws (torch.nn.functional.dropout, which nn.Dropout
  and transformers' eager attention both call) and takes 3 bytes each off the measurement.
- position ids: GPT-2 builds them with arange; embedding saves them (int64, 8 s bytes), but the
  exported graph folds them into a constant, which is no activation.

Marker hf: needs torch and transformers (the extra `hf`) and onnx.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("onnx")

from modtrans.api import run  # noqa: E402
from modtrans.request import Request, prepare  # noqa: E402

pytestmark = pytest.mark.hf

F32 = 4
CPU_NOISE = 4 - 1  # bytes an element the CPU's float dropout noise holds beyond CUDA's bool mask


def _autograd_saved(
    model: Any, forward: Callable[[], Any], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, int]:
    """(bytes autograd saves in one forward, elements drawn by training-mode dropouts)."""
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    storages: dict[int, int] = {}
    drawn = [0]
    plain = torch.nn.functional.dropout

    def dropout(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
        if training and p > 0:
            drawn[0] += x.numel()
        return plain(x, p, training, inplace)

    def pack(t: Any) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in own:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    monkeypatch.setattr(torch.nn.functional, "dropout", dropout)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    monkeypatch.undo()
    return sum(storages.values()), drawn[0]


def _export(
    model: Any, args: tuple[Any, ...], path: Path, names: list[str], mode: Any, axes: Any = None
) -> None:
    """The TorchScript exporter as tools/build_onnx_fixtures.py runs it (its deprecation and
    tracer warnings are the exporter's, not this test's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, args, str(path), dynamo=False, opset_version=17, input_names=names, training=mode,
            do_constant_folding=False, dynamic_axes=axes,
        )  # fmt: skip


def _translated(path: Path, tmp_path: Path, shapes: Mapping[str, tuple[int, ...]] | None = None) -> int:
    """The activations ModTrans reports for one rank (DATA on one rank) of the exported file."""
    result = run(prepare(Request(model=str(path), input_shape=shapes, output=str(tmp_path / "out.txt"))))
    assert result.plan is not None
    (memory,) = result.plan.memory
    return memory.activations


def _block(cin: int, cout: int, stride: int) -> Any:
    """torchvision's BasicBlock (He et al. 2016): conv-BN-ReLU, conv-BN, the shortcut (a 1 x 1
    conv and BN where the shape changes), add, ReLU; in-place ReLUs as torchvision has them."""
    nn = torch.nn

    class Block(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            same = stride == 1 and cin == cout
            self.down = (
                None
                if same
                else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            )

        def forward(self, x: Any) -> Any:
            y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(y + (x if self.down is None else self.down(x)))

    return Block()


def _resnet() -> Any:
    """A ResNet-style stack: torchvision's stem (7 x 7 conv, BN, ReLU, 3 x 3 max pool), two
    BasicBlocks (the second with a downsample), global average pool, a linear head."""
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 7, 2, 3, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
        _block(16, 16, 1),
        _block(16, 32, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


def test_a_resnet_saves_what_autograd_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No dropout, no folded constant: equal to the byte."""
    torch.manual_seed(0)
    model = _resnet().train()
    x = torch.randn(2, 3, 64, 64)
    measured, drawn = _autograd_saved(model, lambda: model(x).sum(), monkeypatch)
    assert drawn == 0
    path = tmp_path / "resnet.onnx"
    _export(model, (x,), path, ["input"], torch.onnx.TrainingMode.TRAINING)
    assert _translated(path, tmp_path) == measured


def test_gpt2_saves_what_autograd_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' GPT2LMHeadModel (2 layers, 2 heads, n_embd 64, its default dropouts 0.1,
    eager attention: the graph the exporter writes is the one autograd runs), batch 2, 16
    tokens: the measurement less the CPU's dropout noise beyond a bool mask and the position
    ids (the module's docstring)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_head=2, n_embd=64, vocab_size=1000, n_positions=128, bos_token_id=0, eos_token_id=0
    )
    config.use_cache = False
    model = transformers.GPT2LMHeadModel._from_config(config, attn_implementation="eager").train()
    b, s = 2, 16
    ids, mask = torch.randint(0, 1000, (b, s)), torch.ones(b, s, dtype=torch.int64)

    class Logits(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: Any, mask: Any) -> Any:
            return self.model(input_ids=ids, attention_mask=mask).logits

    wrapped = Logits().train()
    measured, drawn = _autograd_saved(model, lambda: wrapped(ids, mask).sum(), monkeypatch)
    assert drawn == b * s * (
        64 + 2 * (64 + 64 + 2 * s)
    )  # the embedding's; per block residual x 2, probabilities
    path = tmp_path / "gpt2.onnx"
    _export(wrapped, (ids, mask), path, ["input_ids", "attention_mask"], torch.onnx.TrainingMode.PRESERVE)
    assert _translated(path, tmp_path) == measured - CPU_NOISE * drawn - 8 * s


def _logits(model: Any, names: list[str]) -> Any:
    """The model's forward from its inputs by position to its logits (what the export traces)."""

    class Logits(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args: Any) -> Any:
            return self.model(**dict(zip(names, args, strict=True))).logits

    return Logits().train()


def test_bert_saves_what_autograd_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' BertForMaskedLM (2 layers, 2 heads, hidden 64, its default dropouts 0.1,
    eager attention), batch 2, 16 tokens. Its GELU is torch's F.gelu, one op that saves its
    input; the opset-17 graph writes it as x * (1 + erf(x / sqrt 2)) / 2, which saved.fused reads
    back as the one op. The position ids are a buffer (not counted by either side)."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256, vocab_size=1000
    )
    model = transformers.BertForMaskedLM._from_config(config, attn_implementation="eager").train()
    b, s = 2, 16
    names = ["input_ids", "attention_mask", "token_type_ids"]
    args = (
        torch.randint(0, 1000, (b, s)),
        torch.ones(b, s, dtype=torch.int64),
        torch.zeros(b, s, dtype=torch.int64),
    )
    wrapped = _logits(model, names)
    measured, drawn = _autograd_saved(model, lambda: wrapped(*args).sum(), monkeypatch)
    path = tmp_path / "bert.onnx"
    _export(wrapped, args, path, names, torch.onnx.TrainingMode.PRESERVE)
    assert _translated(path, tmp_path) == measured - CPU_NOISE * drawn


def test_a_mobilenet_block_saves_what_autograd_saves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MobileNetV3's pieces (Howard et al. 2019; torchvision's InvertedResidual): a HardSwish
    stem, a depthwise conv, squeeze-and-excitation (global pool, 1 x 1 convs, ReLU, HardSigmoid,
    the product with its input), a pointwise conv and the classifier's HardSwish and dropout."""
    nn = torch.nn

    class Excite(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, c: int) -> None:
            super().__init__()
            self.scale = nn.Sequential(
                nn.AdaptiveAvgPool2d(1),
                nn.Conv2d(c, c // 4, 1),
                nn.ReLU(),
                nn.Conv2d(c // 4, c, 1),
                nn.Hardsigmoid(),
            )

        def forward(self, x: Any) -> Any:
            return x * self.scale(x)

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
        nn.Conv2d(16, 16, 3, 1, 1, groups=16, bias=False), nn.BatchNorm2d(16), nn.Hardswish(),
        Excite(16), nn.Conv2d(16, 24, 1, bias=False), nn.BatchNorm2d(24),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(24, 32), nn.Hardswish(), nn.Dropout(0.2),
        nn.Linear(32, 10),
    ).train()  # fmt: skip
    x = torch.randn(2, 3, 32, 32)
    measured, drawn = _autograd_saved(model, lambda: model(x).sum(), monkeypatch)
    path = tmp_path / "mobilenet.onnx"
    _export(model, (x,), path, ["input"], torch.onnx.TrainingMode.TRAINING)
    assert _translated(path, tmp_path) == measured - CPU_NOISE * drawn


def test_llama_differs_from_autograd_by_what_the_graph_hides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """transformers' LlamaForCausalLM (2 layers, 4 query and 2 key/value heads, hidden 64, MLP 128,
    SiLU: F.silu, which saved.fused reads back from x * sigmoid(x)), eager attention, dropout 0
    (the export's Dropout at ratio 0 is a re-view), batch 2, 24 tokens, exported with dynamic axes
    as models are. Three differences, each counted here:
    - RoPE: extraction holds the rotary tables' inv_freq as a parameter of the four rotary
      products, so each keeps its other operand (q, rotate_half(q), k, rotate_half(k)); torch keeps
      cos and sin, once (s x head_dim fp32 each), which are constants to the IR;
    - RMSNorm: opset 17 has no Rsqrt, so 1 / sqrt(v) is Sqrt then Div, and both outputs are kept
      (sqrt: its result; the product: the reciprocal), where torch's rsqrt keeps one: b s x 4 more
      per norm (2 per block and the final one)."""
    torch.manual_seed(0)
    b, s, h, heads, kv, layers = 2, 24, 64, 4, 2, 2
    config = transformers.LlamaConfig(
        hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
        intermediate_size=128, vocab_size=1000, max_position_embeddings=128,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="eager").train()
    names = ["input_ids", "attention_mask"]
    args = (torch.randint(0, 1000, (b, s)), torch.ones(b, s, dtype=torch.int64))
    wrapped = _logits(model, names)
    measured, drawn = _autograd_saved(model, lambda: wrapped(*args).sum(), monkeypatch)
    assert drawn == 0
    path = tmp_path / "llama.onnx"
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    _export(wrapped, args, path, names, torch.onnx.TrainingMode.PRESERVE, axes)
    hd = h // heads
    rotary = layers * 2 * F32 * b * s * hd * (heads + kv)
    tables = 2 * F32 * s * hd
    norms = (2 * layers + 1) * F32 * b * s
    shapes = dict.fromkeys(names, (b, s))
    assert _translated(path, tmp_path, shapes) == measured - tables + rotary + norms
