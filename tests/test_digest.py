"""The provenance's digest: the whole file's SHA-256 up to 64 MiB (or with --full-hash), above it
a sampled SHA-256 whose definition (modtrans/digest.py, README) is recomputed here independently."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from modtrans import digest, pipeline
from modtrans.ir import document
from tests.conftest import ROOT


def _by_definition(path: Path) -> str:
    """SHA-256 of the size (8 bytes, little-endian) and 64 blocks of 64 KiB at
    round(k * (size - 65536) / 63), k = 0..63, as the README states it (a file of at most 4 MiB:
    its size and all of it)."""
    data = path.read_bytes()
    size, block = len(data), 64 * 1024
    h = hashlib.sha256(size.to_bytes(8, "little"))
    if size <= 64 * block:
        h.update(data)
        return h.hexdigest()
    for k in range(64):
        start = round(k * (size - block) / 63)
        h.update(data[start : start + block])
    return h.hexdigest()


def test_the_sampled_digest_is_the_documented_one(tmp_path: Path) -> None:
    path = tmp_path / "m.bin"
    path.write_bytes(bytes(range(256)) * (5 * 4096 + 7))  # 5 MiB and a bit: more than 64 blocks
    assert digest.sampled(path) == _by_definition(path)


def test_the_sampled_digest_sees_a_changed_sample_and_a_changed_size(tmp_path: Path) -> None:
    path = tmp_path / "m.bin"
    data = bytearray(b"\x01" * (6 << 20))
    path.write_bytes(data)
    first = digest.sampled(path)
    data[-1] ^= 0xFF  # the last block ends at the end
    path.write_bytes(data)
    assert digest.sampled(path) != first
    changed = digest.sampled(path)
    path.write_bytes(data + b"\x00")
    assert digest.sampled(path) not in (first, changed)


def test_files_up_to_the_limit_get_their_sha256_and_larger_ones_the_sample(tmp_path: Path) -> None:
    small = tmp_path / "small.bin"
    small.write_bytes(b"model" * 1000)
    assert digest.Digest(small).result() == (hashlib.sha256(small.read_bytes()).hexdigest(), None)
    large = tmp_path / "large.bin"
    with large.open("wb") as handle:  # sparse: 65 MiB without writing them
        handle.truncate(digest.FULL_LIMIT + (1 << 20))
    whole, sampled = digest.Digest(large).result()
    assert whole is None
    assert sampled == _by_definition(large)
    whole, sampled = digest.Digest(large, full=True).result()
    assert (whole, sampled) == (hashlib.sha256(large.read_bytes()).hexdigest(), None)


def test_a_large_models_provenance_carries_the_sample_unless_full_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "r18.onnx"
    model.write_bytes((ROOT / "fixtures" / "onnx" / "resnet18_legacy.onnx").read_bytes())
    monkeypatch.setattr(digest, "FULL_LIMIT", 1000)  # the 24 kB fixture counts as large
    ir, _ = pipeline.extract_checked(model, batch=1)
    assert ir is not None
    assert ir.provenance.sha256 is None
    assert ir.provenance.sampled_sha256 == _by_definition(model)
    saved = json.loads(document.dumps(ir))["provenance"]  # and the IR schema accepts it
    assert saved["sampled_sha256"] == ir.provenance.sampled_sha256
    assert document.from_dict(json.loads(document.dumps(ir))).provenance == ir.provenance
    ir, _ = pipeline.extract_checked(model, batch=1, full_hash=True)
    assert ir is not None
    assert ir.provenance.sha256 == hashlib.sha256(model.read_bytes()).hexdigest()
    assert ir.provenance.sampled_sha256 is None
