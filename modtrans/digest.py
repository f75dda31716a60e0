"""A model file's digest for the provenance, computed in a thread started as early as the
command knows the file (hashlib releases the GIL, so it runs while Python imports onnx).

Up to FULL_LIMIT (64 MiB: every built-in, every architecture-only file, most vision models) it is
the SHA-256 of the whole file, which costs nothing the user waits for. Above it, the whole file's
hash is most of what a translation costs (VGG16's 553 MB: 0.25 s of 0.73 s; a 3 GB language model
would wait seconds for it), so by default the digest is `sampled`: the SHA-256 of the file's size
and of 64 blocks of 64 KiB at evenly spaced offsets, the first at 0 and the last ending at the end
(4 MiB read, a few ms). It tells apart any two exports, checkpoints or fine-tunes of a model (their
weights differ throughout) and any two files of different size; it does not prove that no byte
between the samples changed. `full=True` (`--full-hash`) hashes the whole file at any size.

    digest = Digest(path)      # starts now
    ...
    digest.result()            # (sha256, sampled): one of them is set; both None if unreadable
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

_CHUNK = 8 << 20
FULL_LIMIT = 64 << 20
"""Files up to this size are hashed whole by default."""
SAMPLES = 64
SAMPLE = 64 << 10


def sha256(path: Path) -> str:
    """Read and hashed in 8 MB pieces: readinto and update release the GIL for each, long
    enough for the thread to keep pace while the main thread imports (file_digest's 256 kB pieces
    each waited for the GIL). Not a memory map: a file cut short under it would kill the process."""
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as handle:
        while True:
            n = handle.readinto(view)
            if not n:
                return digest.hexdigest()
            digest.update(view[:n])


def sampled(path: Path) -> str:
    """SHA-256 of the size (8 bytes, little-endian) and the SAMPLES blocks of SAMPLE bytes at
    offsets round(k * (size - SAMPLE) / (SAMPLES - 1)); a file no longer than SAMPLES * SAMPLE
    is taken whole after its size."""
    digest = hashlib.sha256()
    with path.open("rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        digest.update(size.to_bytes(8, "little"))
        if size <= SAMPLES * SAMPLE:
            digest.update(handle.read())
            return digest.hexdigest()
        for k in range(SAMPLES):
            handle.seek(round(k * (size - SAMPLE) / (SAMPLES - 1)))
            digest.update(handle.read(SAMPLE))
    return digest.hexdigest()


class Digest(threading.Thread):
    def __init__(self, path: Path, *, full: bool = False) -> None:
        super().__init__(name="modtrans-digest", daemon=True)
        self.path = path
        self.full = full
        self.value: tuple[str | None, str | None] = (None, None)
        self.start()

    def run(self) -> None:
        try:
            if self.full or self.path.stat().st_size <= FULL_LIMIT:
                self.value = (sha256(self.path), None)
            else:
                self.value = (None, sampled(self.path))
        except OSError:  # unreadable, or gone meanwhile: no digest (reading the model says why)
            self.value = (None, None)

    def result(self) -> tuple[str | None, str | None]:
        """(SHA-256 of the whole file, or None; the sampled digest, or None)."""
        self.join()
        return self.value
