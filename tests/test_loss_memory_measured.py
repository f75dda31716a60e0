"""The bytes a logit costs at torchtitan's loss (strategy/frameworks.py, logit_bytes) held to what
PyTorch allocates running it: torchtitan's cross-entropy (train.py at 9dec370: `cross_entropy(
pred.flatten(0, 1).float(), labels)`, `del pred` before the backward) over the bf16 logits of an
output layer, on the CPU, every storage an aten op makes tracked from its allocation to its last
reference (tests/livebytes.py), the peak of the live bytes per logit.

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from modtrans.strategy.frameworks import Framework  # noqa: E402
from tests.caching import SMALL_BUFFER, Allocator  # noqa: E402
from tests.livebytes import Live  # noqa: E402

pytestmark = pytest.mark.hf


def _loss_run(tokens: int, hidden: int, vocab: int, loss_of: Callable[[Any, Any], Any]) -> tuple[Live, int]:
    """`loss_of(logits, labels)` over an output layer's bf16 logits, forward and backward, under a
    tracker, the logits deleted before the backward (torchtitan's `del pred`, fms-fsdp's `del
    output`); and the forward's peak."""
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))
    live = Live()
    with live:
        logits = x @ weight.t()
        loss = loss_of(logits, labels)
        forward = live.peak
        del logits
        live.peak = live.live
        loss.backward()
    return live, forward


def _torchtitans_loss(tokens: int, hidden: int, vocab: int) -> tuple[Live, int]:
    """torchtitan's loss (train.py at 9dec370: `cross_entropy(pred.flatten(0, 1).float(), labels)`)."""
    return _loss_run(
        tokens, hidden, vocab, lambda pred, labels: torch.nn.functional.cross_entropy(pred.float(), labels)
    )


def test_torchtitans_loss_peaks_at_its_logit_bytes() -> None:
    """Forward: the bf16 logits, their fp32 copy and log_softmax's output, 10 B a logit; the
    backward's peak: log_softmax's output, its gradient and the input's gradient, 12 (the hidden
    state and the output weight's gradients, H / V and H / T of that, under 1 % here)."""
    tokens, vocab = 512, 4096
    live, forward = _torchtitans_loss(tokens, 8, vocab)
    logits = tokens * vocab
    assert forward / logits == pytest.approx(10, rel=0.01)
    assert live.peak / logits == pytest.approx(Framework.TORCHTITAN.logit_bytes(2), rel=0.01)


def test_torchtitans_loss_reserves_its_freed_bf16_logits_beside_the_peak() -> None:
    """The same loss's allocations and frees, in PyTorch's order, replayed through the caching
    allocator's policy (tests/caching.py): the bf16 logits `del pred` frees are too small for the
    backward's fp32 requests, so max_memory_reserved holds them beside the 12 B peak, 2 B a logit
    (frameworks.logit_cached), beside the small pool's one 2 MiB segment."""
    tokens, vocab = 4096, 8192
    live, _ = _torchtitans_loss(tokens, 8, vocab)
    replayed = Allocator().replay(live.events)
    logits = tokens * vocab
    titan = Framework.TORCHTITAN
    assert replayed.peak_allocated / logits == pytest.approx(titan.logit_bytes(2), rel=0.01)
    expected = (titan.logit_bytes(2) + titan.logit_cached(2)) * logits
    assert replayed.reserved == pytest.approx(expected, rel=0.005, abs=SMALL_BUFFER)  # + the small pool's


class _MegatronCrossEntropy(torch.autograd.Function):  # type: ignore[misc,name-defined]
    """Megatron-Core's _VocabParallelCrossEntropy (megatron/core/tensor_parallel/cross_entropy.py
    at core_r0.8.0) on one tensor rank, its ops in its order: the all-reduces over one rank are
    the identity, the vocabulary range the whole."""

    @staticmethod
    def forward(ctx: Any, vocab_parallel_logits: Any, target: Any) -> Any:
        vocab_parallel_logits = vocab_parallel_logits.float()  # calculate_logits_max
        logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
        vocab_parallel_logits -= logits_max.unsqueeze(dim=-1)  # calculate_predicted_logits
        target_mask = (target < 0) | (target >= vocab_parallel_logits.size(-1))
        masked_target = target.clone()
        masked_target[target_mask] = 0
        logits_2d = vocab_parallel_logits.view(-1, vocab_parallel_logits.size(-1))
        masked_target_1d = masked_target.view(-1)
        arange_1d = torch.arange(start=0, end=logits_2d.size()[0])
        predicted_logits = logits_2d[arange_1d, masked_target_1d].clone().contiguous().view_as(target)
        predicted_logits[target_mask] = 0.0
        exp_logits = vocab_parallel_logits
        torch.exp(vocab_parallel_logits, out=exp_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp_logits) - predicted_logits  # calculate_cross_entropy_loss
        exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_input = softmax  # prepare_gradient_calculation_operands
        grad_2d = grad_input.view(-1, softmax.size()[-1])
        arange_1d = torch.arange(start=0, end=grad_2d.size()[0])
        softmax_update = 1.0 - target_mask.view(-1).float()
        grad_2d[arange_1d, masked_target_1d] -= softmax_update  # calculate_gradients
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None


@pytest.mark.parametrize(("dtype", "width"), [(torch.bfloat16, 2), (torch.float32, 4)])
def test_megatrons_loss_holds_the_logits_beside_their_fp32_copy(dtype: Any, width: int) -> None:
    """Megatron-Core's loss on the output layer's logits [s, b, V] (GPTModel.forward holds them
    across compute_language_model_loss, then returns): 16-bit logits and their fp32 copy, 6 B a
    logit, in the forward and again in the backward (the fp32 gradient cast to the logits' dtype);
    fp32 logits are their own copy, 4. Nothing freed before the peak is left over: the backward's
    16-bit gradient reuses the logits' block, so what the allocator reserves is the peak."""
    s, b, hidden, vocab = 2048, 2, 8, 8192  # 32 M logits: the small tensors under 1 %
    x = torch.randn(s, b, hidden, dtype=dtype, requires_grad=True)
    weight = torch.randn(vocab, hidden, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, vocab, (s, b))
    live = Live()
    with live:
        logits = x @ weight.t()
        loss = _MegatronCrossEntropy.apply(logits, labels)
        forward = live.peak
        del logits
        live.peak = live.live
        loss.sum().backward()
    count = s * b * vocab
    megatron = Framework.MEGATRON
    assert forward / count == pytest.approx(megatron.logit_bytes(width), rel=0.01)
    assert live.peak / count == pytest.approx(megatron.logit_bytes(width), rel=0.01)
    replayed = Allocator().replay(live.events)
    expected = (megatron.logit_bytes(width) + megatron.logit_cached(width)) * count
    assert replayed.reserved == pytest.approx(expected, rel=0.005, abs=SMALL_BUFFER)  # + the small pool's


def test_fms_fsdps_loss_peaks_at_its_logit_bytes() -> None:
    """fms-fsdp's loss (fms_fsdp/utils/train_utils.py, train: CrossEntropyLoss on the model's bf16
    output as it comes, `del output` before the backward): log_softmax's bf16 output is all the
    forward adds; the backward holds it, its gradient and the input's, 3 x 2 B a logit; the
    logits freed before it are reused by the backward's same-sized requests, so nothing is
    reserved beside the peak (frameworks.logit_cached)."""
    tokens, hidden, vocab = 4096, 8, 8192

    def fms_loss(output: Any, label: Any) -> Any:  # train_utils.py, train
        return torch.nn.CrossEntropyLoss()(output.view(-1, output.size(-1)), label.view(-1).long())

    live, forward = _loss_run(tokens, hidden, vocab, fms_loss)
    logits = tokens * vocab
    fms = Framework.FMS_FSDP
    assert forward / logits == pytest.approx(4, rel=0.01)
    assert live.peak / logits == pytest.approx(fms.logit_bytes(2), rel=0.01)
    replayed = Allocator().replay(live.events)
    expected = (fms.logit_bytes(2) + fms.logit_cached(2)) * logits
    assert replayed.reserved == pytest.approx(expected, rel=0.005, abs=SMALL_BUFFER)  # + the small pool's
