"""--precision: the training dtype set on the IR once (modtrans/ir/precision.py), against the
independent construction: the same published configuration with its dtype written into the file
(what transformers and llm/config.checkpoint_dtype read), and ResNet-50's ONNX initializers."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans import api, pipeline, zoo
from modtrans.ir.document import ModelIR
from modtrans.plan.model import Collective, Compute, Plan
from modtrans.request import UsageError, prepare, request_of

Run = Callable[..., Result]
HF = Path(__file__).resolve().parent.parent / "fixtures" / "hf"
LAYOUT = {"tp": 2, "pp": 2, "dp": 2, "seq_len": 1024, "global_batch": 8, "device": "h100"}


def _edited(source: Path, dtype: str, folder: Path) -> Path:
    """`source` with `"torch_dtype": dtype` written into it: the checkpoint that states the dtype."""
    data = json.loads(source.read_text())
    data["torch_dtype"] = dtype
    edited = folder / source.name
    edited.write_text(json.dumps(data))
    return edited


def _computes(plan: Plan) -> list[list[tuple[int, int]]]:
    """Each program's compute operations, as (layer, ticks)."""
    return [[(op.layer, op.time) for op in program if isinstance(op, Compute)] for program in plan.programs]


def _collectives(plan: Plan) -> list[list[int]]:
    return [[op.bytes for op in program if isinstance(op, Collective)] for program in plan.programs]


def _translated(model: Path, **options: object) -> tuple[ModelIR, Plan]:
    given = {"format": "chakra-et", "output": "unwritten/t", **LAYOUT, **options}
    prepared = prepare(request_of(model, given))
    result = pipeline.translate_checked(model, prepared.options)  # the plan: nothing is written
    assert result.ir is not None, result.diagnostics
    assert result.plan is not None, result.diagnostics
    return result.ir, result.plan


def _same_training(given: Path, stated: Path, precision: str, own_dtype: str) -> None:
    """`given` under --precision equals `stated` (its file naming the dtype): every IR layer (each
    parameter's dtype and bytes, each activation's), each rank's compute times and collective bytes,
    and each stage's memory; and differs from `given` in its own dtype (`own_dtype`)."""
    ir, plan = _translated(given, precision=precision)
    ir_stated, plan_stated = _translated(stated)
    assert ir.layers == ir_stated.layers
    assert ir.totals == ir_stated.totals
    assert _computes(plan) == _computes(plan_stated)
    assert _collectives(plan) == _collectives(plan_stated)
    assert plan.memory == plan_stated.memory
    own_ir, own = _translated(given)
    assert {p.dtype for x in own_ir.layers for p in x.params} == {own_dtype}
    assert own_ir.layers != ir.layers
    if own_dtype == "float":  # fp32 GEMMs run at the device's fp32 rate, 4 bytes a parameter
        assert _computes(own) != _computes(plan)
        assert own_ir.totals.trainable_bytes == 2 * ir.totals.trainable_bytes


def test_llama2_bf16_is_the_file_stating_bfloat16(tmp_path: Path) -> None:
    """The torch-free path (llm/): Llama-2-7B's published file says float16."""
    source = HF / "llama-2-7b-hf.json"
    _same_training(source, _edited(source, "bfloat16", tmp_path), "bf16", "float16")


def test_gpt_j_bf16_is_the_file_stating_bfloat16(tmp_path: Path) -> None:
    """The transformers path (hf/): GPT-J-6B's published file states no dtype (float32, as
    transformers builds it); --precision bf16 costs its GEMMs at the H100's bf16 rate."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    source = HF / "gpt-j-6b.json"
    _same_training(source, _edited(source, "bfloat16", tmp_path), "bf16", "float")


def test_integer_tensors_keep_their_dtype() -> None:
    """Token ids (int64) stay integers: only floating tensors take the training dtype."""
    own, _ = pipeline.extract_checked(HF / "llama-2-7b-hf.json", input_shapes={"input_ids": (1, 128)})
    cast, _ = pipeline.extract_checked(
        HF / "llama-2-7b-hf.json", input_shapes={"input_ids": (1, 128)}, precision="fp32"
    )
    assert own is not None
    assert cast is not None
    integer = {a.dtype for x in own.layers for a in x.inputs if a.dtype.startswith(("int", "uint"))}
    assert integer  # the embedding's token ids
    assert {a.dtype for x in cast.layers for a in x.inputs if a.dtype.startswith(("int", "uint"))} == integer
    floating = {a.dtype for x in cast.layers for a in (*x.inputs, *x.outputs)} - integer
    assert floating == {"float"}


def _trainable_elements() -> dict[str, int]:
    """ResNet-50's trainable elements per ONNX node, read from its initializers with onnx: a Conv's
    and Gemm's weight and bias, a BatchNormalization's scale and shift (not its running statistics)."""
    onnx = pytest.importorskip("onnx")
    entry = zoo.get("resnet50")
    assert entry is not None
    graph = onnx.load(str(entry.path), load_external_data=False).graph
    sizes = {t.name: int(math.prod(t.dims)) for t in graph.initializer}
    trained = {"Conv": slice(1, None), "Gemm": slice(1, None), "BatchNormalization": slice(1, 3)}
    return {
        n.name: sum(sizes[i] for i in n.input[trained[n.op_type]] if i in sizes)
        for n in graph.node
        if n.op_type in trained
    }


def test_resnet50_fp16_halves_the_gradient_all_reduce() -> None:
    """Each layer's data-parallel all-reduce moves its trainable elements x 2 bytes under fp16,
    x 4 in the file's own float32."""
    elements = _trainable_elements()
    for precision, width in (("fp16", 2), (None, 4)):
        result = api.translate("resnet50", precision=precision)
        assert result.workload is not None
        assert result.ir is not None
        nodes = {x.name: x.node for x in result.ir.layers}
        sizes = {layer.name: layer.weight_grad.comm_size for layer in result.workload.layers}
        assert {name: size for name, size in sizes.items() if size} == {
            name: elements[nodes[name]] * width for name in sizes if elements.get(nodes[name])
        }
        assert sum(sizes.values()) == 25_557_032 * width  # ResNet-50's 25.6 M trainable parameters


def test_metadata_records_the_precision(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "w.txt"
    assert run_cli("translate", "resnet50", "--precision", "bf16", "-o", out).exit_code == 0
    assert json.loads(out.with_name("w.txt.meta.json").read_text())["precision"] == "bf16"
    plain = tmp_path / "p.txt"
    assert run_cli("translate", "resnet50", "-o", plain).exit_code == 0
    assert "precision" not in json.loads(plain.with_name("p.txt.meta.json").read_text())


def test_a_bad_precision_is_one_line_exit_2(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "w.txt"
    result = run_cli("translate", "resnet50", "--precision", "fp64", "-o", out)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "fp32" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    with pytest.raises(UsageError, match="fp64"):
        api.translate("resnet50", precision="fp64")


def test_inspects_memory_per_stage_takes_the_precision(run_cli: Run, tmp_path: Path) -> None:
    """`inspect MODEL --tp ... --precision fp32`: the memory of the file stating float32 (4-byte
    weights, no fp32 master copy), not of its own float16."""
    source = HF / "llama-2-7b-hf.json"
    layout = ("--tp", "2", "--pp", "2", "--seq-len", "1024", "--global-batch", "8", "--format", "json")
    cast = run_cli("inspect", source, *layout, "--precision", "fp32")
    stated = run_cli("inspect", _edited(source, "float32", tmp_path), *layout)
    own = run_cli("inspect", source, *layout)
    assert cast.exit_code == stated.exit_code == own.exit_code == 0
    assert json.loads(cast.stdout) == json.loads(stated.stdout)
    assert json.loads(cast.stdout) != json.loads(own.stdout)


def test_extract_writes_the_ir_at_the_precision(run_cli: Run, tmp_path: Path) -> None:
    """`extract --precision fp16`: each parameter float16, 2 bytes per element of its ONNX
    initializer (read with onnx); a precision nobody knows is a diagnostic, exit 2."""
    onnx = pytest.importorskip("onnx")
    entry = zoo.get("resnet50")
    assert entry is not None
    graph = onnx.load(str(entry.path), load_external_data=False).graph
    sizes = {t.name: math.prod(t.dims) for t in graph.initializer}
    out = tmp_path / "r.ir.json"
    assert run_cli("extract", "resnet50", "--precision", "fp16", "-o", out).exit_code == 0
    params = [p for layer in json.loads(out.read_text())["layers"] for p in layer["params"]]
    assert params
    assert {p["dtype"] for p in params} == {"float16"}
    assert {p["name"]: p["bytes"] for p in params} == {p["name"]: 2 * sizes[p["name"]] for p in params}
    bad = run_cli("extract", "resnet50", "--precision", "fp9", "-o", tmp_path / "bad.json")
    assert bad.exit_code == 2
    assert "X501" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert not (tmp_path / "bad.json").exists()


@pytest.mark.parametrize(
    ("framework", "zero", "trained"),
    [
        # each framework's own configuration, as Framework.precision cites it: torchtitan's
        # mixed_precision_param "bfloat16", llm-foundry's yamls' amp_bf16, fms-fsdp's bfSixteen
        # policy, NeMo's launcher yamls' `precision: bf16`
        ("torchtitan", 3, "bf16"),
        ("llm-foundry", 3, "bf16"),
        ("fms-fsdp", 3, "bf16"),
        ("nemo", 1, "bf16"),
        # Megatron-LM trains in fp32 without --bf16 (megatron/training/arguments.py: bf16 and fp16
        # default False), DeepSpeed without its bf16 section, FSDP without a MixedPrecision
        ("megatron", 1, None),
        ("deepspeed", 1, None),
        ("fsdp", 3, None),
    ],
)
def test_a_framework_with_a_training_precision_of_its_own_runs_it(
    framework: str, zero: int, trained: str | None, tmp_path: Path
) -> None:
    """distilgpt2's published file states no dtype (float32). A framework whose own configuration
    trains in bf16 trains it as --precision bf16 does, to every compute time, collective and byte of
    memory; the others keep the checkpoint's float32; --precision, given, stands over either."""
    source = HF / "distilgpt2.json"
    options = {"framework": framework, "zero": zero}
    ir, plan = _translated(source, **options)
    expected = trained or "fp32"
    ir_given, plan_given = _translated(source, **options, precision=expected)
    assert ir.layers == ir_given.layers
    assert _computes(plan) == _computes(plan_given)
    assert _collectives(plan) == _collectives(plan_given)
    assert plan.memory == plan_given.memory
    assert {p.dtype for x in ir.layers for p in x.params} == {"bfloat16" if trained else "float"}
    full, _ = _translated(source, **options, precision="fp32")
    assert {p.dtype for x in full.layers for p in x.params} == {"float"}
