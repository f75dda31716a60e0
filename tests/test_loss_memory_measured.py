"""The bytes a logit costs at torchtitan's loss (strategy/frameworks.py, logit_bytes) held to what
PyTorch allocates running it: torchtitan's cross-entropy (train.py at 9dec370: `cross_entropy(
pred.flatten(0, 1).float(), labels)`, `del pred` before the backward) over the bf16 logits of an
output layer, on the CPU, every storage an aten op makes tracked from its allocation to its last
reference (tests/livebytes.py), the peak of the live bytes per logit.

Marker hf: needs torch (the extra `hf`)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from modtrans.strategy.frameworks import Framework  # noqa: E402
from tests.livebytes import Live  # noqa: E402

pytestmark = pytest.mark.hf


def test_torchtitans_loss_peaks_at_its_logit_bytes() -> None:
    """Forward: the bf16 logits, their fp32 copy and log_softmax's output, 10 B a logit; the
    backward's peak: log_softmax's output, its gradient and the input's gradient, 12 (the hidden
    state and the output weight's gradients, H / V and H / T of that, under 1 % here)."""
    tokens, hidden, vocab = 512, 8, 4096
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))
    peak = Live()
    with peak:
        pred = x @ weight.t()
        loss = torch.nn.functional.cross_entropy(pred.float(), labels)
        forward = peak.peak
        del pred
        peak.peak = peak.live
        loss.backward()
    logits = tokens * vocab
    assert forward / logits == pytest.approx(10, rel=0.01)
    assert peak.peak / logits == pytest.approx(Framework.TORCHTITAN.logit_bytes, rel=0.01)
