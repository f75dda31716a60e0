"""Compute-time models against independent numbers: ASTRA-sim's reference file, real SCALE-Sim runs
(recorded in ../shared/reference/compute-model.md section 6, and re-run here when the scalesim
extra is installed), and datasheet arithmetic."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from modtrans import cost
from modtrans.api import workload as translate
from modtrans.cost import Clock, CostError, Settings, Unit, scalesim
from modtrans.cost.gemm import phase_gemms
from modtrans.cost.roofline import builtin_devices, device
from modtrans.cost.systolic import read_cfg, reference_ws, scalesim_v3
from modtrans.diff import Options, compare
from modtrans.ir.document import Kind
from modtrans.pipeline import extract
from modtrans.schema import check
from modtrans.workload.parse import parse
from tests.conftest import CORPUS

Run = Callable[..., Result]
RESNET = CORPUS / "astra-sim" / "Resnet50_DataParallel.txt"

# The 25 cells of Resnet50_DataParallel.txt that no function of the GEMM shape reproduces
# (compute-model.md section 4, bold cells): (reference layer, phase).
QUIRKS = {
    ("conv1", "fwd_compute"),
    ("layer_128_4_conv3", "fwd_compute"),
    ("layer_256_1_conv1", "fwd_compute"),
    ("layer_256_1_conv1", "ig_compute"),
    ("layer_256_1_conv3", "ig_compute"),
    ("layer_256_6_conv3", "fwd_compute"),
    ("layer_512_1_conv1", "fwd_compute"),
    ("layer_512_1_conv1", "ig_compute"),
    ("layer_512_1_conv3", "ig_compute"),
    ("layer_512_3_conv3", "fwd_compute"),
    ("layer_512_2_conv3", "ig_compute"),
    ("layer_512_3_conv3", "ig_compute"),
    ("layer_512_2_conv1", "fwd_compute"),
    ("layer_512_3_conv1", "fwd_compute"),
    ("fc1000", "ig_compute"),
    *{(f"layer_256_{b}_conv1", "fwd_compute") for b in range(2, 7)},
    *{(f"layer_256_{b}_conv3", "ig_compute") for b in range(2, 7)},
}


def test_astra_sim_reference_reproduces_the_reference_resnet50() -> None:
    reference = parse(RESNET.read_bytes().decode()).workload
    assert reference is not None
    ours = translate("resnet50", params="weights", compute="astra-sim-reference")
    diff = compare(ours, reference, Options(ignore_names=True, ignore_order=True))
    assert (diff.counts.added, diff.counts.removed) == (0, 0)  # every layer found its partner
    misses = {(r.name_b, f.field) for r in diff.layers for f in r.fields}
    assert len(QUIRKS) == 25
    assert misses == QUIRKS  # no update time among them: all 54 are exact
    exact = 3 * len(reference.layers) - len(misses)
    assert exact == 137  # of the 162 forward / input-gradient / weight-gradient cells


@pytest.mark.parametrize(
    ("gemm", "cycles"),
    [  # compute-model.md section 4 (reference and model agree on these)
        ((3136, 576, 64), 10944),
        ((3136, 64, 576), 10368),
        ((576, 3136, 64), 14144),
        ((12544, 147, 64), 12947),
        ((1, 2048, 1000), 16416),
        ((2048, 1, 1000), 9220),
    ],
)
def test_reference_closed_form(gemm: tuple[int, int, int], cycles: int) -> None:
    assert reference_ws(*gemm) == cycles


# SCALE-Sim v3.0.0 "Total Cycles", WS 256x256, measured by real runs (compute-model.md section 6).
MEASURED_V3_WS = [
    ((3136, 64, 64), 3901),
    ((3136, 576, 64), 11705),
    ((784, 128, 512), 3099),
    ((196, 1024, 256), 3847),
    ((196, 2304, 256), 8657),
    ((49, 2048, 512), 13039),
    ((64, 3136, 64), 10789),
    ((1, 2048, 1000), 24543),
]


@pytest.mark.parametrize(("gemm", "cycles"), MEASURED_V3_WS)
def test_scalesim_v3_closed_form_matches_measured_runs(gemm: tuple[int, int, int], cycles: int) -> None:
    assert scalesim_v3(*gemm, 256, 256, "ws") == cycles


# A dozen GEMMs across the three dataflows and two array shapes, for the optional real run.
GRID = [
    (m, k, n, rows, cols, flow)
    for (m, k, n), (rows, cols) in [((37, 53, 29), (32, 32)), ((64, 64, 64), (16, 8))]
    for flow in ("ws", "is", "os")
    for m, k, n in [(m, k, n), (n + 5, m, k + 3)]
]


@pytest.mark.skipif(not scalesim.available(), reason="the scalesim extra is not installed")
@pytest.mark.parametrize(("m", "k", "n", "rows", "cols", "flow"), GRID)
def test_closed_forms_equal_real_scalesim(
    m: int, k: int, n: int, rows: int, cols: int, flow: str, tmp_path: Path
) -> None:
    from modtrans.cost.scalesim import run_gemm

    assert run_gemm(m, k, n, rows, cols, flow, cache=tmp_path) == scalesim_v3(m, k, n, rows, cols, flow)
    assert len(list(tmp_path.glob("*.json"))) == 1  # cached by content


def test_scalesim_v3_reads_a_scalesim_cfg(tmp_path: Path) -> None:
    cfg = tmp_path / "google.cfg"
    cfg.write_text(
        "[general]\nrun_name = GoogleTPU\n\n[architecture_presets]\nArrayHeight:    128\n"
        "ArrayWidth:     64\nIfmapSramSzkB:  8192\nDataflow : os\n"
    )
    assert read_cfg(cfg) == (128, 64, "os")
    model = cost.get("scalesim-v3", Settings(device=str(cfg)))
    assert model.describe()["array"] == "128x64"
    assert model.describe()["dataflow"] == "os"
    with pytest.raises(CostError, match="not a SCALE-Sim config"):
        read_cfg(RESNET)


def test_phase_mapping_follows_the_generator() -> None:
    ir = extract("resnet50")
    conv2 = ir.layer("layer1.0.conv2")  # 3x3, 64 -> 64 on 56x56: M 3136, K 576, N 64
    gemms = phase_gemms(conv2)
    assert gemms is not None
    assert [(s.m, s.k, s.n) for s in (*gemms.forward, *gemms.input_grad, *gemms.weight_grad)] == [
        (3136, 576, 64),
        (3136, 64, 576),
        (576, 3136, 64),
    ]
    bn = ir.layer("bn1")
    assert bn.kind is Kind.NORM
    assert phase_gemms(bn) is None  # costed by memory traffic


def test_layers_without_gemm_cost_their_traffic() -> None:
    ir = extract("resnet50")
    # 1x64x112x112 fp32 in and out: 3,211,264 bytes each; 4 x 64 fp32 parameters (1,024 bytes) read;
    # training-mode BatchNormalization also writes its two running statistics (2 x 64 x 4 bytes).
    bn = ir.layer("bn1")
    model = cost.get("scalesim-v3", Settings(bytes_per_cycle=64))
    t = model.times(bn)
    assert t.forward == (2 * 3_211_264 + 1024 + 512) // 64 == 100_376
    assert cost.get("astra-sim-reference").times(bn).forward == 0  # the reference's convention


def test_clock_and_units() -> None:
    assert Clock(Unit.NS, 2.0).from_cycles(1000) == 500
    assert Clock(Unit.US, 1.0).from_cycles(13003) == 14  # rounds up
    assert Clock(Unit.CYCLES, 1.5).from_seconds(2e-6) == 3000
    assert Clock(Unit.NS).from_cycles(0.1 + 0.2 + 2.7) == 3  # 3.0000000000000004: float noise, not a tick


def test_roofline_device_profiles_are_valid_and_cited() -> None:
    raw = json.loads((Path(cost.__file__).parent / "devices.json").read_text())
    for key, profile in raw.items():
        assert check(profile, "device") == [], key
        assert set(profile["sources"]) == {"peak_flops", "memory_bandwidth"}
    a100 = builtin_devices()["a100"]
    assert (a100.peak("float"), a100.peak("bfloat16"), a100.bandwidth) == (19.5e12, 312e12, 2039e9)
    assert builtin_devices()["tpu-v4"].peak("float") == 275e12  # the `default` entry


def test_roofline_time_is_the_larger_bound() -> None:
    ir = extract("vgg16")
    fc = ir.layer("classifier.0")  # 25088 x 4096 fp32 weights: 411 MB read per pass
    t = cost.get("roofline", Settings(device="a100")).times(fc)
    # memory bound: (inputs + weights + bias + outputs) / 2039 GB/s
    nbytes = 25088 * 4 + 411_041_792 + 16_384 + 4096 * 4
    assert t.forward == -(-nbytes * 10**9 // 2039 // 10**9)


def test_user_device_profile(tmp_path: Path) -> None:
    good = tmp_path / "npu.json"
    good.write_text(
        json.dumps(
            {
                "version": 1,
                "name": "my NPU",
                "peak_flops": {"float": 1e12},
                "memory_bandwidth": 1e11,
                "sources": {"peak_flops": "spec sheet"},
            }
        )
    )
    assert device(str(good)).name == "my NPU"
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"version": 1, "name": "x", "peak_flops": {"float": -1}, "memory_bandwidth": 1})
    )
    with pytest.raises(CostError, match="sources"):
        device(str(bad))
    with pytest.raises(CostError, match="unknown device"):
        device("tpu-v9")


def test_translate_with_each_model(run_cli: Run, tmp_path: Path) -> None:
    for model in ("astra-sim-reference", "scalesim-v3", "roofline"):
        out = tmp_path / f"{model}.txt"
        result = run_cli("translate", "resnet50", "--params", "weights", "--compute", model, "-o", out)
        assert result.exit_code == 0, result.stderr
        meta = json.loads(Path(f"{out}.meta.json").read_text())
        assert meta["compute"]["model"] == model
        assert meta["compute"]["unit"] == "ns"
    result = run_cli("translate", "resnet50", "--compute", "nonsense")
    assert result.exit_code == 2
    assert result.stderr.startswith("modtrans: --compute: 'nonsense' is not one of")
    assert "astra-sim-reference" in result.stderr


def test_chakra_output_warns_about_microseconds(run_cli: Run) -> None:
    """The Chakra dialect is written in us unless told otherwise (its converter's duration_micros,
    as the help says of traces), and warns only where a unit given is not us."""
    result = run_cli("translate", "vgg16", "--dialect", "chakra", "--time-unit", "ns")
    assert result.exit_code == 0
    assert "warning X508" in result.stderr
    told = run_cli("translate", "vgg16", "--dialect", "chakra", "--time-unit", "us")
    assert "X508" not in told.stderr
    default = run_cli("translate", "vgg16", "--dialect", "chakra")
    assert (default.exit_code, default.stderr, default.stdout) == (0, "", told.stdout)
    assert default.stdout != result.stdout
    ns = parse(run_cli("translate", "vgg16", "--compute", "scalesim-v3").stdout).workload
    us = parse(run_cli("translate", "vgg16", "--compute", "scalesim-v3", "--time-unit", "us").stdout).workload
    assert ns is not None
    assert us is not None
    assert us.layers[0].fwd.compute_time == -(-ns.layers[0].fwd.compute_time // 1000)


def test_cost_list(run_cli: Run) -> None:
    out = run_cli("cost", "list").stdout
    for name in ("astra-sim-reference", "scalesim-v3", "roofline", "a100", "h100", "tpu-v4"):
        assert name in out


def test_the_cli_offers_exactly_the_registered_models(run_cli: Run) -> None:
    """--compute's choices are the registry's names (cost.Model): each is registered by its module,
    nothing else can be, and `cost list` names the same ones."""
    from modtrans.table import BY_NAME

    assert BY_NAME["compute"].kind is cost.Model
    assert [e.name for e in cost.models()] == sorted(m.value for m in cost.Model)
    with pytest.raises(ValueError, match="not a valid Model"):
        cost.register("no-such-model", "")  # type: ignore[arg-type]
    listed = run_cli("cost", "list").output
    assert all(m.value in listed for m in cost.Model)


@pytest.mark.parametrize("model", list(cost.Model))
def test_get_imports_the_module_that_registers_the_model_and_no_other_model(model: cost.Model) -> None:
    """`get` imports one model's module (the gpu model's translation spares scalesim's, with
    tempfile and csv): that import alone, in a fresh process, registers the model asked for, and
    only the real SCALE-Sim's registers it."""
    probe = (
        "import sys; import modtrans.cost as c; c._load(c.Model(sys.argv[1])); "
        "print(' '.join(sorted(c.REGISTRY)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, model.value], capture_output=True, text=True, check=True
    )
    registered = done.stdout.split()
    assert model.value in registered
    assert ("scalesim" in registered) is (model is cost.Model.SCALESIM)
