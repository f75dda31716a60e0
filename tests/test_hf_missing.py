"""Without the extra `hf` (no torch, no transformers: the default test environment), a family
outside the hand-written list is refused in one line that names it and the install command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modtrans import hf

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(hf.available(), reason="torch and transformers are installed here (test_hf.py)")
@pytest.mark.parametrize("name", ["opt-default", "olmoe-default"])
def test_a_further_family_without_the_extra_is_one_line_naming_it_and_the_install(name: str) -> None:
    config = ROOT / "fixtures" / "hf" / f"{name}.json"
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "inspect", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2  # M801, as the hand-written path refuses a configuration it cannot read
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    family = name.split("-")[0]
    assert f"M801 model_type '{family}'" in lines[0]
    assert "[hf]" in lines[0]
    assert "pip install" in lines[0]
    assert "Traceback" not in done.stderr + done.stdout
