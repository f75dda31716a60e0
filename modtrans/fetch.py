"""`modtrans fetch NAME`: download a real model from the ONNX Model Zoo into a local cache.

The shipped manifest (modtrans/zoo/remote.json) pins each model's URL to a commit and records the
SHA-256 and size of its bytes. A download streams into a temporary file beside its destination,
hashing as it goes; only a file whose size and SHA-256 match is renamed into place. A failed or
interrupted download leaves nothing behind and is never resumed: the next fetch starts over.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modtrans.resources import cache_dir as cache_dir  # where fetched models are kept

_MANIFEST = Path(__file__).resolve().parent / "zoo" / "remote.json"
_CHUNK = 1 << 20


class FetchError(Exception):
    """A one-line reason the model could not be fetched."""


@dataclass(frozen=True)
class Remote:
    name: str
    url: str
    sha256: str
    bytes: int
    description: str


@functools.cache
def _manifest() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_MANIFEST.read_text(encoding="utf-8"))
    return loaded


def remotes() -> list[Remote]:
    return [Remote(name, **data) for name, data in sorted(_manifest()["models"].items())]


def remote(name: str) -> Remote | None:
    return next((r for r in remotes() if r.name == name), None)


def cached(name: str, cache: Path | None = None) -> Path | None:
    """The cached file of a fetched model, if it was fetched (checked when it was written)."""
    item = remote(name)
    if item is None:
        return None
    path = (cache or cache_dir()) / f"{item.name}.onnx"
    return path if path.is_file() and path.stat().st_size == item.bytes else None


def fetch(name: str, *, cache: Path | None = None, mirror: str | None = None, timeout: float = 60) -> Path:
    """Download `name` unless cached; returns the verified file. `mirror` replaces the URL's origin
    (everything before the path): a local copy of the zoo, or a test server."""
    item = remote(name)
    if item is None:
        known = ", ".join(r.name for r in remotes())
        raise FetchError(f"unknown model {name!r}; fetchable: {known}")
    folder = cache or cache_dir()
    target = folder / f"{item.name}.onnx"
    if target.is_file() and _sha256(target) == item.sha256:
        return target
    url = item.url
    mirror = mirror or os.environ.get("MODTRANS_ZOO_MIRROR")
    if mirror:
        url = mirror.rstrip("/") + "/" + url.split("/", 3)[3]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FetchError(f"cannot create the cache folder {folder}: {error.strerror or error}") from None
    _download(url, target, item, timeout)
    return target


def _download(url: str, target: Path, item: Remote, timeout: float) -> None:
    import urllib.error  # 20 ms with http.client and email: only when something is downloaded
    import urllib.request

    from modtrans.temporaries import commit, discard, open_partial, sweep

    digest = hashlib.sha256()
    size = 0
    sweep(target.parent)
    try:
        handle, temp = open_partial(target)  # 0666 less the umask, like every output
    except OSError as error:
        raise FetchError(f"cannot download {url}: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
            while chunk := response.read(_CHUNK):
                size += len(chunk)
                if size > item.bytes:
                    raise FetchError(f"{url} sent more than the expected {item.bytes:,} bytes")
                digest.update(chunk)
                out.write(chunk)
        if size != item.bytes:
            raise FetchError(f"{url} sent {size:,} bytes, expected {item.bytes:,}")
        if digest.hexdigest() != item.sha256:
            raise FetchError(
                f"{url}: SHA-256 {digest.hexdigest()} does not match the manifest's {item.sha256}"
            )
        commit(temp, target)
    except (urllib.error.URLError, OSError, ValueError) as error:
        discard(temp)
        raise FetchError(f"cannot download {url}: {_reason(error)}") from None
    except BaseException:
        discard(temp)
        raise


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _reason(error: BaseException) -> str:
    """Why a download failed, in words: `Connection refused`, not `<urlopen error [Errno 111]
    Connection refused>` (a URLError's reason is often an OSError of its own)."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, BaseException):
        error = reason
    elif isinstance(reason, str) and reason:
        return reason
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__
