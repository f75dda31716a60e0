"""The shipped schemas are valid 2020-12 schemas; the wheel carries grammar/, schemas/ and the zoo."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import jsonschema
import pytest

from modtrans import resources
from tests.conftest import ROOT


@pytest.mark.parametrize("name", ["workload", "model-ir"])
def test_schemas_are_valid_2020_12(name: str) -> None:
    schema = resources.schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://modtrans.invalid/schemas/{name}/1.schema.json"


@pytest.mark.slow
def test_wheel_installs_and_parses_in_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
    )
    (wheel,) = dist.glob("modtrans-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    # The wheel's dependencies come from this interpreter's site-packages (no network here);
    # modtrans itself must come from the wheel, which the venv's own site-packages puts first.
    site_dir = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages")]
    Path(site_dir, "_outer_dependencies.pth").write_text("\n".join(ours) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True
    )
    probe = (
        "import modtrans, modtrans.resources as r, sys;"
        "assert 'site-packages' in modtrans.__file__, modtrans.__file__;"
        "assert '_data' in str(r.grammar_path()), r.grammar_path();"
        "res = modtrans.parse(open(sys.argv[1], newline='').read());"
        "assert res.ok and len(res.workload.layers) == 54;"
        "r.schema('workload'); r.schema('model-ir');"
        "w = modtrans.translate('resnet50', params='weights').workload;"  # the zoo ships in the wheel
        "assert len(w.layers) == 54, len(w.layers);"
        "modtrans.ir.document.dumps(modtrans.extract('gpt2'));print('ok')"
    )
    resnet = ROOT / "fixtures" / "workloads" / "corpus" / "astra-sim" / "Resnet50_DataParallel.txt"
    out = subprocess.run(
        [str(python), "-c", probe, str(resnet)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert out.stdout.strip() == "ok"
