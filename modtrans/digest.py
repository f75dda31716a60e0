"""A file's SHA-256 computed in a thread, started as early as the command knows the file.

hashlib releases the GIL while it hashes, so the digest of a 553 MB model is made while Python
imports onnx and extracts the graph: the provenance still identifies the file byte for byte, and
the whole process waits only for whichever of the two is longer.

    digest = Digest(path)      # starts hashing now
    ...
    digest.result()            # the hex digest (None when the file could not be read)
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

_CHUNK = 8 << 20


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


class Digest(threading.Thread):
    def __init__(self, path: Path) -> None:
        super().__init__(name="modtrans-sha256", daemon=True)
        self.path = path
        self.value: str | None = None
        self.start()

    def run(self) -> None:
        try:
            self.value = sha256(self.path)
        except OSError:  # unreadable, or gone meanwhile: no digest (reading the model says why)
            self.value = None

    def result(self) -> str | None:
        self.join()
        return self.value
