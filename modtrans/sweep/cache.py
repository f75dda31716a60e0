"""Results kept by the digest of what made them, so that a sweep interrupted or run again does
only what it has not done: an estimate by the model file's content, the training options, the
layout, the network and modtrans's source (code()); a simulation by the same and the simulator
binary's content. One SQLite file (the standard library's; each result its own transaction, so a run
stopped at any point leaves every finished result and no half of one). The file is in SQLite's
write-ahead mode where the file system allows it (https://sqlite.org/wal.html): a reader (another
sweep on the same cache, a user's query) neither waits for a put nor holds one up, and a put is
one append, synced at checkpoints only (synchronous=NORMAL: a power loss may drop the last
results, never leave half of one).

    with Cache(folder) as cache:          # None: keep nothing
        cache.get(key) / cache.put(key, value)
    key = digest({"model": content(path), "layout": {...}, ...})
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any

from modtrans.digest import Digest

FILE = "sweep.sqlite"


def default_folder() -> Path:
    """$XDG_CACHE_HOME/modtrans (~/.cache/modtrans): where the sweep keeps its results."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "modtrans"


def digest(what: Any) -> str:
    """The SHA-256 of `what` as canonical JSON (sorted keys; enums and paths as their text)."""
    text = json.dumps(what, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def code() -> str:
    """The digest of modtrans's own source (every .py file of the package, by path and bytes):
    a result made by other code is not taken for this code's, whatever the version says."""
    package = Path(__file__).resolve().parents[1]
    hashed = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        hashed.update(str(path.relative_to(package)).encode())
        hashed.update(path.read_bytes())
    return hashed.hexdigest()


def content(path: Path | None) -> str | None:
    """A file's content digest (digest.py: whole up to 64 MiB, sampled above), None unreadable."""
    if path is None:
        return None
    whole, sampled = Digest(path).result()
    return whole or sampled


class CacheError(ValueError):
    """A --cache folder that cannot hold the results: not a folder, not writable (one line)."""


class Cache:
    """Results by key; a folder of None keeps nothing (every get misses). CacheError where the
    folder cannot be made or its file opened."""

    def __init__(self, folder: Path | None) -> None:
        self._db: sqlite3.Connection | None = None
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(folder / FILE, timeout=30)
            if self._db.execute("pragma journal_mode=wal").fetchone()[0] == "wal":
                self._db.execute("pragma synchronous=normal")
            self._db.execute("create table if not exists result (key text primary key, value text)")
            self._db.commit()
        except (OSError, sqlite3.Error) as error:
            self.close()
            why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            why = "a file, not a folder" if isinstance(error, FileExistsError) else why
            raise CacheError(f"--cache {folder}: {why}") from None

    def get(self, key: str) -> Any:
        if self._db is None:
            return None
        row = self._db.execute("select value from result where key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        if self._db is None:
            return
        with self._db:  # one transaction: the result is there whole or not at all
            self._db.execute("insert or replace into result values (?, ?)", (key, json.dumps(value)))

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def __enter__(self) -> Cache:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
