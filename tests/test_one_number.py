"""One number, the same everywhere: what `inspect`, `translate`'s traces, `estimate` (its three
tiers), `simulate`'s reading of a trace set and the sweep say of a model's FLOPs, MFU and memory
per stage, held to each other over real models and layouts, and each to an independent source
where there is one.

The sources: MFU is PaLM's (Chowdhery et al. 2022, appendix B: the model's FLOPs, no
rematerialisation, over the iteration's time and the peak), and TFLOP/s per GPU Megatron-LM's
(NVIDIA/Megatron-LM 001b00c, megatron/training/training.py, num_floating_point_operations: each
GEMM counted three times, forward, wgrad and dgrad, with no argument for --recompute-granularity),
so neither changes with what is recomputed. A first convolution computes no gradient for the image
it reads: torch's FlopCounterMode counts its convolution_backward by the output_mask autograd
passes, grad_input only where the input requires a gradient (torch/utils/flop_counter.py,
conv_backward_flop). OLMo 1's LayerNorm has no parameters (transformers' modeling_olmo.py,
OlmoLayerNorm: F.layer_norm(x, shape, None, None)), so no weight gradient, while its input gradient
is what the embedding's weight gradient waits for."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

import modtrans
import modtrans.estimate as estimate
from modtrans.chakra.read import Trace, read
from modtrans.chakra.summary import summarize
from modtrans.estimate import Layout
from modtrans.plan.model import Recompute, Schedule
from modtrans.strategy.frameworks import Framework

Run = Callable[..., Result]
NETWORK = "hgx-h100"


def _layout(npus: int, options: Mapping[str, Any]) -> Layout:
    """The fast tier's Layout of translate's layout options (the names both take)."""
    enums: dict[str, Any] = {"recompute": Recompute, "schedule": Schedule, "framework": Framework}
    made: dict[str, Any] = {k: enums[k](v) if k in enums else v for k, v in options.items()}
    return Layout(npus=npus, **made)


def _traces(prefix: Path) -> list[Trace]:
    paths = sorted(prefix.parent.glob(f"{prefix.name}.*.et"))
    return [read(p.read_bytes(), str(p)) for p in paths]


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("llama-3-8b", {"tp": 2, "pp": 2}),
        ("gpt3-13b", {"tp": 4, "pp": 2, "sp": True}),
        ("mixtral-8x7b", {"tp": 2, "pp": 2, "ep": 2, "sp": True}),
        ("fixtures/configs/olmo-1b-hf.json", {"tp": 2, "pp": 2}),
    ],
)
def test_mfu_leaves_recomputation_out(model: str, options: dict[str, Any]) -> None:
    """The model's FLOPs of an iteration are the same under no, selective and full recomputation,
    so that MFU x iteration is too, and the slower iteration of full recomputation has the lower
    MFU. Before, a recomputed forward's FLOPs were counted: Llama-3-8B at TP 2 PP 2 on H100s had
    MFU 24.2 % without recomputation and 26.3 % with full recomputation, 21 % slower."""
    found = {
        mode: estimate.layout(
            model, _layout(8, {**options, "recompute": mode}), device="h100", network=NETWORK, seq_len=512
        )
        for mode in ("none", "selective", "full")
    }
    assert len({e.flops for e in found.values()}) == 1
    work = {mode: (e.mfu or 0) * e.iteration_s for mode, e in found.items()}
    assert work["selective"] == pytest.approx(work["none"], rel=1e-9)
    assert work["full"] == pytest.approx(work["none"], rel=1e-9)
    assert found["full"].iteration_s > found["none"].iteration_s
    assert (found["full"].mfu or 0) < (found["none"].mfu or 0)


CASES = [
    ("llama-3-8b", 8, {"tp": 2, "pp": 2, "recompute": "selective"}),
    ("llama-3-8b", 8, {"tp": 2, "cp": 2, "sp": True, "recompute": "full", "zero": 1}),
    ("llama-3-8b", 16, {"tp": 2, "pp": 4, "vpp": 2, "schedule": "interleaved", "global_batch": 16}),
    ("gpt2", 4, {"tp": 2, "pp": 2, "recompute": "full"}),
    ("gpt2", 4, {"framework": "fsdp", "zero": 3, "micro_batch": 2}),
    ("mixtral-8x7b", 16, {"tp": 2, "pp": 2, "ep": 4, "sp": True}),
    ("deepseek-moe-16b", 8, {"pp": 2, "ep": 4, "recompute": "selective"}),
    ("fixtures/configs/olmo-1b-hf.json", 4, {"pp": 2, "recompute": "full"}),
]


@pytest.mark.parametrize(("model", "npus", "options"), CASES, ids=lambda c: str(c))
def test_every_reader_of_a_layout_counts_the_same_flops_and_memory(
    run_cli: Run, tmp_path: Path, model: str, npus: int, options: dict[str, Any]
) -> None:
    """One layout, read six ways: the plan walked (the exact tier), its traces on disk
    (`estimate PREFIX`, as the API and as the command's JSON), the traces' per-rank totals
    (`inspect PREFIX`, `simulate`'s FLOPs), the fast tier the sweep runs, and `inspect MODEL
    --tp ...`'s memory per stage: the same model FLOPs, the same TFLOP/s and MFU, the same memory
    per stage, to the byte."""
    seq = 128 if model == "gpt2" else 512
    prefix = tmp_path / "x"
    done = modtrans.translate(
        model, format="chakra-et", output=str(prefix), npus=npus, seq_len=seq, device="h100", **options
    )
    assert done.plan is not None
    exact = estimate.plan(done.plan, network=NETWORK, peak_flops=None)
    on_disk = estimate.trace_set(prefix, network=NETWORK)
    fast = estimate.layout(model, _layout(npus, options), device="h100", network=NETWORK, seq_len=seq)
    assert exact.flops == on_disk.flops == fast.flops
    # every rank's trace read: their model FLOPs together (inspect's and simulate's reading)
    assert sum(r.model_flops for r in summarize(_traces(prefix))) == on_disk.flops
    assert fast.tokens == on_disk.tokens
    assert fast.peak_flops == on_disk.peak_flops
    shown = json.loads(run_cli("estimate", prefix, "--network", NETWORK, "--format", "json").stdout)
    assert shown["tflops_per_gpu"] == pytest.approx(on_disk.tflops_per_gpu, rel=1e-12)
    assert shown["mfu"] == pytest.approx(on_disk.mfu, rel=1e-12)
    memory = [m.total for m in done.plan.memory]
    assert [s.memory_bytes for s in on_disk.stages] == memory
    assert [s.memory_bytes for s in fast.stages] == memory
    assert [s["memory_bytes"] for s in shown["stages"]] == memory
    data = npus // (options.get("tp", 1) * options.get("pp", 1) * options.get("cp", 1))
    given = [
        f"--{k.replace('_', '-')}" if v is True else f"--{k.replace('_', '-')}={v}"
        for k, v in options.items()
    ]
    asked = run_cli(
        "inspect", model, "--format", "json", "--seq-len", seq, "--device", "h100", "--dp", data, *given
    )
    assert asked.exit_code == 0, asked.output
    assert [s["total_bytes"] for s in json.loads(asked.stdout)] == memory


ONE_RANK = [
    ("gpt2", {}),
    ("bert-base", {}),
    ("llama-3-8b", {"seq_len": 128}),
    ("mixtral-8x7b", {"seq_len": 128}),
    ("fixtures/configs/olmo-1b-hf.json", {"seq_len": 128}),
    ("fixtures/configs/t5-base.json", {"seq_len": 128}),
    ("resnet50", {}),
    ("vgg16", {}),
    ("mobilenet_v2", {}),
    ("fixtures/onnx/resnet18_legacy.onnx", {"batch": 2}),
    ("fixtures/onnx/tf2onnx_cnn.onnx", {"batch": 2}),
    ("fixtures/onnx/jax_scan_classifier.onnx", {"batch": 2}),
]


@pytest.mark.parametrize(("model", "options"), ONE_RANK, ids=lambda c: str(c))
def test_a_ranks_traces_run_the_flops_inspect_totals(
    tmp_path: Path, model: str, options: dict[str, Any]
) -> None:
    """At one rank, one sequence or batch: the traces' model FLOPs are `inspect`'s totals, forward
    + input gradient + weight gradient. Before, the traces counted a FLOP for each node of none
    (the num_ops 1 roofline mode divides by), left out the input gradient of layers folded into the
    first unit (OLMo-1B's first LayerNorm: 2,097,152 FLOPs; VGG-16's first ReLU), and inspect
    counted input gradients autograd never computes (ResNet-50's first convolution: 0.95 % of
    its training FLOPs; GPT-2's causal mask)."""
    prefix = tmp_path / "x"
    done = modtrans.translate(model, format="chakra-et", output=str(prefix), npus=1, **options)
    assert done.ir is not None
    totals = done.ir.totals.flops
    ran = sum(r.model_flops for r in summarize(_traces(prefix)))
    assert ran == totals.forward + totals.input_grad + totals.weight_grad


def test_the_first_convolution_computes_no_input_gradient() -> None:
    """ResNet-50's `inspect` total of input-gradient FLOPs is every layer's but conv1's, whose
    gradient would be that of the image: 2 x 3 x 7 x 7 x 64 x 112 x 112 (torchvision's conv1, 3 to
    64 channels, 7 x 7, stride 2, onto 112 x 112), the FLOPs of its forward."""
    ir = modtrans.extract("resnet50")
    every = sum(x.flops.input_grad for x in ir.layers)
    assert every - ir.totals.flops.input_grad == 2 * 3 * 7 * 7 * 64 * 112 * 112


def test_the_first_units_folded_layers_run_their_backward(tmp_path: Path) -> None:
    """OLMo-1B's first LayerNorm, without parameters, is folded into the embedding's unit: its
    input gradient (8 FLOPs an element, flops.norm, of 128 x 2048) runs in the trace as the unit's
    BWD_IG node, and it has no weight gradient. VGG-16's first ReLU, folded into features.0: its
    input gradient (one an element of 64 x 224 x 224) runs as that unit's BWD_IG node, and the
    convolution's own does not."""
    olmo = modtrans.extract("fixtures/configs/olmo-1b-hf.json", input_shapes={"input_ids": (1, 128)})
    norm = olmo.layer("model.layers.0.input_layernorm")
    assert not norm.params
    assert (norm.flops.input_grad, norm.flops.weight_grad) == (8 * 128 * 2048, 0)
    for model, options, node, flops in (
        ("fixtures/configs/olmo-1b-hf.json", {"seq_len": 128}, "model.embed_tokens", 8 * 128 * 2048),
        ("vgg16", {}, "features.0", 64 * 224 * 224),
    ):
        prefix = tmp_path / model.replace("/", "_")
        modtrans.translate(model, format="chakra-et", output=str(prefix), npus=1, **options)
        (trace,) = _traces(prefix)
        ig = [n for n in trace.nodes if n.name == f"COMP_NODE_{node}_BWD_IG"]
        assert [n.value("num_ops", 0) for n in ig] == [flops]


OWN = [
    ("gpt2", "-p", "HYBRID_TRANSFORMER", "--npus", "8", "--model-parallel-group", "4"),
    ("gpt2", "-p", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "--npus", "8", "--model-parallel-group", "2"),
    ("gpt2", "-p", "MODEL", "--npus", "4"),
    ("gpt2", "-p", "HYBRID_DATA_MODEL", "--npus", "8", "--model-parallel-group", "4"),
    ("gpt2", "-p", "HYBRID_MODEL_DATA", "--npus", "8", "--model-parallel-group", "2"),
    ("vgg16", "-p", "HYBRID_CUSTOMIZED", "--npus", "4"),
    ("resnet50", "--params", "weights", "--npus", "16"),
    ("gpt2", "--tp", "2", "--dp", "2", "--sp", "--zero", "1"),
]


@pytest.mark.parametrize("dialect", ["astra-sim", "simai"])
@pytest.mark.parametrize("options", OWN, ids=" ".join)
def test_like_gives_modtrans_own_workload_again(
    run_cli: Run, tmp_path: Path, options: tuple[str, ...], dialect: str
) -> None:
    """A workload ModTrans wrote, as `--like` reads it: `translate MODEL --like FILE` writes it
    again byte for byte, and `diff MODEL FILE --like` (which takes no keyword, group or NPUs)
    calls the two equivalent. Before, a transformer keyword's file came back as the layout --tp G
    (GPT-2 under HYBRID_TRANSFORMER 8/4: 75 of 78 layers different, Megatron's one gradient bucket
    in place of the preset's per-layer all-reduces), the other keywords at one NPU and no group
    (HYBRID_DATA_MODEL refused, X501), and VGG-16's layers as bias-free (--params weights read off
    the sizes where the file was written with its biases)."""
    model, rest = options[0], options[1:]
    written = tmp_path / "w.txt"
    assert run_cli("translate", model, *rest, "--dialect", dialect, "-o", written).exit_code == 0
    again = tmp_path / "again.txt"
    done = run_cli("translate", model, "--like", written, "-o", again)
    assert done.exit_code == 0, done.output
    assert again.read_bytes() == written.read_bytes()
    compared = run_cli("diff", model, written, "--like")
    assert compared.exit_code == 0, compared.output
    assert "equivalent" in compared.stdout


@pytest.mark.parametrize(("model", "seq"), [("gpt2", 128), ("llama-3-8b", 256)])
def test_mfu_counts_a_part_every_tensor_rank_computes_once(model: str, seq: int, tmp_path: Path) -> None:
    """Without sequence parallelism every tensor rank runs the whole norm, residual add, dropout
        and row-parallel bias (Megatron-LM's layers outside the parallel regions); the model runs them
        once. MFU x iteration x GPUs x peak is the model's FLOPs of the iteration (PaLM's MFU; Megatron-
        LM's num_floating_point_operations counts the model, not the ranks' replicas) at TP 1, 2 and 4,
        with SP and without, read by the fast tier, the plan walked and the traces on disk (every
        rank's): the FLOPs one rank computes at TP 1 (`inspect` of the model). Before, each tensor
        rank's replicas were counted: at these sequences GPT-2 at TP 2 without SP 0.053 % over
        (96.918 against 96.866 GFLOP), Llama-3-8B 1.16 GFLOP over. The vocabulary is padded to a
        multiple of 1 (Megatron's --make-vocab-size-divisible-by 1; 128 x T by default
    changes Llama-3's model at TP 4, 128,256 to 128,512 rows)."""
    alone = estimate.layout(
        model, Layout(npus=1, vocab_divisor=1), device="h100", network=NETWORK, seq_len=seq
    )
    for tp, sp in [(1, False), (2, False), (2, True), (4, False), (4, True)]:
        layout = Layout(npus=tp, tp=tp, sp=sp, vocab_divisor=1)
        fast = estimate.layout(model, layout, device="h100", network=NETWORK, seq_len=seq)
        prefix = tmp_path / f"tp{tp}{'-sp' if sp else ''}" / "x"
        prefix.parent.mkdir()
        done = modtrans.translate(
            model,
            format="chakra-et",
            output=str(prefix),
            tp=tp,
            sp=sp,
            device="h100",
            seq_len=seq,
            make_vocab_size_divisible_by=1,
        )
        assert done.plan is not None
        exact = estimate.plan(done.plan, network=NETWORK, peak_flops=fast.peak_flops)
        on_disk = estimate.trace_set(prefix, network=NETWORK)
        for e in (fast, exact, on_disk):
            work = (e.mfu or 0) * e.iteration_s * e.npus * (e.peak_flops or 0)
            assert work == pytest.approx(alone.flops, rel=1e-12), (tp, sp, e)
        ranks = summarize(_traces(prefix))
        assert sum(r.model_flops for r in ranks) == alone.flops
        assert all(r.flops >= r.model_flops for r in ranks)


@pytest.mark.parametrize(
    ("preset", "group", "data"),
    [
        ("HYBRID_TRANSFORMER", 2, 2),
        ("HYBRID_TRANSFORMER", 4, 1),
        ("MODEL", None, 1),
        ("HYBRID_DATA_MODEL", 2, 2),
        ("HYBRID_MODEL_DATA", 2, 2),
    ],
)
def test_a_keyword_preset_counts_what_its_tensor_ranks_replicate_once(
    preset: str, group: int | None, data: int, tmp_path: Path
) -> None:
    """The keyword presets' tensor ranks (MODEL's every rank, a hybrid's model-parallel group; its
    data ranks each a micro-batch of their own) compute the norms, the residual adds and a split
    GEMM's folded layers whole on the same tokens: the model runs them once. MFU x iteration x
    GPUs x peak is the model's FLOPs (`alone`: GPT-2 at one rank) times the data ranks, read from
    the traces on disk. Before, each tensor rank's copy counted: GPT-2's -p HYBRID_TRANSFORMER at
    --model-parallel-group 2 on 2 NPUs 96.918 GFLOP against its 96.866, -p MODEL 98.838 (2.0 %
    over)."""
    alone = estimate.layout(
        "gpt2", Layout(npus=1, vocab_divisor=1), device="h100", network=NETWORK, seq_len=128
    )
    prefix = tmp_path / "x"
    extra = {} if group is None else {"model_parallel_group": group}
    done = modtrans.translate(
        "gpt2",
        format="chakra-et",
        output=str(prefix),
        parallel=preset,
        npus=4,
        device="h100",
        seq_len=128,
        **extra,
    )
    assert done.plan is not None
    on_disk = estimate.trace_set(prefix, network=NETWORK)
    work = (on_disk.mfu or 0) * on_disk.iteration_s * on_disk.npus * (on_disk.peak_flops or 0)
    assert work == pytest.approx(alone.flops * data, rel=1e-12)
    ranks = summarize(_traces(prefix))
    assert sum(r.model_flops for r in ranks) == alone.flops * data
