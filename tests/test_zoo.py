"""The built-in architectures against numbers published elsewhere (papers, library docs, reference files).

Sources of the expected values:
- ModTrans paper, Tables 1-2: VGG16 / VGG19 weight tensors per layer (elements and fp32 bytes);
  the rows are the canonical configurations D and E of Simonyan & Zisserman (arXiv 1409.1556).
- torchvision model docs (the `num_params` and `_ops` GFLOPS fields of each weights enum):
  resnet50 25,557,032 / 4.09; vgg16 138,357,544 / 15.47; vgg19 143,667,240 / 19.63;
  mobilenet_v2 3,504,872 / 0.30 (their "GFLOPS" are multiply-accumulates).
- Hugging Face model cards: gpt2 124,439,808 parameters (tied LM head); bert-base-uncased
  109,482,240 including the pooler (768x768 + 768 = 590,592), which our export drops.
- ASTRA-sim's Resnet50_DataParallel.txt (fixtures/workloads/corpus/astra-sim): 54 weight-gradient
  all-reduce sizes.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from modtrans.ir.document import Kind, ModelIR
from modtrans.pipeline import Options, extract, translate_checked
from modtrans.strategy import Params
from modtrans.workload.parse import parse
from tests.conftest import CORPUS

# Convolution widths of configurations D (VGG16) and E (VGG19), "M" = max-pool; arXiv 1409.1556 Table 1.
_VGG_CFG = {
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [
        64,
        64,
        "M",
        128,
        128,
        "M",
        256,
        256,
        256,
        256,
        "M",
        512,
        512,
        512,
        512,
        "M",
        512,
        512,
        512,
        512,
        "M",
    ],
}


def _vgg_convs(name: str) -> list[tuple[int, int]]:
    widths = [3] + [w for w in _VGG_CFG[name] if isinstance(w, int)]
    return list(itertools.pairwise(widths))


_VGG_DENSE = [102_760_448, 16_777_216, 4_096_000]  # 25088x4096, 4096x4096, 4096x1000


@pytest.fixture(scope="module")
def irs() -> dict[str, ModelIR]:
    return {
        name: extract(name) for name in ("resnet50", "vgg16", "vgg19", "mobilenet_v2", "bert-base", "gpt2")
    }


@pytest.mark.parametrize("name", ["vgg16", "vgg19"])
def test_vgg_weight_tables_match_the_paper(name: str) -> None:
    result = translate_checked(name, Options(params=Params.WEIGHTS))
    assert result.workload is not None
    sizes = [layer.weight_grad.comm_size for layer in result.workload.layers]
    expected_elements = [cin * cout * 9 for cin, cout in _vgg_convs(name)] + _VGG_DENSE
    assert len(sizes) == {"vgg16": 16, "vgg19": 19}[name]
    assert sizes == [4 * e for e in expected_elements]
    # the two rows the paper's text quotes
    assert expected_elements[0] == 1_728
    assert sizes[0] == 6_912
    assert sizes[-3] == 411_041_792


def test_resnet50_weight_sizes_equal_astra_sims_reference_as_a_multiset() -> None:
    reference = parse((CORPUS / "astra-sim" / "Resnet50_DataParallel.txt").read_text()).workload
    assert reference is not None
    result = translate_checked("resnet50", Options(params=Params.WEIGHTS))
    assert result.workload is not None
    ours = Counter(layer.weight_grad.comm_size for layer in result.workload.layers)
    theirs = Counter(layer.weight_grad.comm_size for layer in reference.layers)
    assert len(result.workload.layers) == len(reference.layers) == 54
    assert ours == theirs


@pytest.mark.parametrize(
    ("name", "trainable"),
    [
        ("resnet50", 25_557_032),
        ("vgg16", 138_357_544),
        ("vgg19", 143_667_240),
        ("mobilenet_v2", 3_504_872),
        ("gpt2", 124_439_808),
        ("bert-base", 109_482_240 - 590_592),
    ],
)
def test_trainable_parameter_counts_match_the_published_ones(
    irs: dict[str, ModelIR], name: str, trainable: int
) -> None:
    assert irs[name].totals.trainable_params == trainable


@pytest.mark.parametrize(
    ("name", "gmacs", "digits"),
    [("resnet50", 4.09, 2), ("vgg16", 15.47, 2), ("vgg19", 19.63, 2), ("mobilenet_v2", 0.30, 2)],
)
def test_gemm_work_matches_torchvisions_published_ops(
    irs: dict[str, ModelIR], name: str, gmacs: float, digits: int
) -> None:
    macs = sum(
        x.gemm.m * x.gemm.k * x.gemm.n * x.gemm.groups
        for x in irs[name].layers
        if x.gemm is not None and x.kind in (Kind.CONV, Kind.LINEAR)
    )
    assert round(macs / 1e9, digits) == gmacs


def test_bert_linear_and_attention_work_follow_the_architecture(irs: dict[str, ModelIR]) -> None:
    # Per encoder layer and token: Q, K, V, output projections (4 x 768 x 768) and the MLP
    # (2 x 768 x 3072); attention scores and context: 2 x 128 x 768 per token. 12 layers, 128 tokens.
    ir = irs["bert-base"]
    linear = sum(x.gemm.m * x.gemm.k * x.gemm.n for x in ir.layers if x.kind is Kind.LINEAR and x.gemm)
    attention = sum(
        x.gemm.m * x.gemm.k * x.gemm.n * x.gemm.groups for x in ir.layers if x.kind is Kind.MATMUL and x.gemm
    )
    assert linear == 12 * 128 * (4 * 768 * 768 + 2 * 768 * 3072)
    assert attention == 12 * 2 * 128 * 128 * 768


def test_gpt2_tied_embedding_is_counted_once(irs: dict[str, ModelIR]) -> None:
    ir = irs["gpt2"]
    head = next(x for x in ir.layers if x.name == "lm_head")
    (weight,) = head.params
    assert weight.name == "transformer.wte.weight"
    assert weight.shared_with == "transformer.wte"
    assert weight.elements == 50257 * 768
    result = translate_checked("gpt2", Options(params=Params.TRAINABLE))
    assert result.workload is not None
    total = sum(layer.weight_grad.comm_size for layer in result.workload.layers)
    assert total == 4 * 124_439_808  # every trainable fp32 byte all-reduced exactly once


def test_batch_scales_activations_and_flops_not_parameters() -> None:
    one, eight = extract("resnet50", batch=1), extract("resnet50", batch=8)
    assert eight.totals.params == one.totals.params
    assert eight.totals.flops.forward == 8 * one.totals.flops.forward
    assert eight.layers[0].outputs[0].shape == (8, 64, 112, 112)


def test_mobilenet_depthwise_convolutions_are_grouped(irs: dict[str, ModelIR]) -> None:
    depthwise = [x for x in irs["mobilenet_v2"].layers if x.gemm and x.gemm.groups > 1]
    assert len(depthwise) == 17  # one 3x3 depthwise conv per inverted-residual block
    first = depthwise[0]
    assert first.gemm is not None
    assert (first.gemm.k, first.gemm.n, first.gemm.groups) == (9, 1, 32)  # 32 channels, 3x3, one per group


def test_builtin_files_carry_no_weight_bytes() -> None:
    from modtrans import zoo

    for name in zoo.names():
        entry = zoo.get(name)
        assert entry is not None
        assert entry.path.stat().st_size < 600_000
        ir = extract(name)
        assert ir.provenance.architecture_only
        assert ir.totals.param_bytes > 50 * entry.path.stat().st_size
