"""File input and output: bounded, streaming reads that never raise, atomic writes.

Reading yields (content, line ending) pairs ready for the parser, or a one-line F0xx diagnostic
when the path is not a readable text file. A line longer than the parser's limit is cut at the
limit while reading, so a 1 GB line never enters memory.
"""

from __future__ import annotations

import errno
import operator
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from modtrans.diagnostics import Diagnostic, Span, diagnostic
from modtrans.stopping import held
from modtrans.temporaries import commit, create_partial, discard, name_partial, open_partial, sweep

MAX_LINE = 1 << 20  # characters; the reader reports longer lines and never hands them to the lexer


def split_lines(text: str) -> list[tuple[str, str]]:
    """Split on LF only (CR, VT, FF are not line breaks here); each line with its ending."""
    parts = text.split("\n")
    last = parts.pop()
    if "\r" in text:
        lines = [(part[:-1], "\r\n") if part.endswith("\r") else (part, "\n") for part in parts]
    else:
        lines = [(part, "\n") for part in parts]
    if last:
        lines.append((last, ""))
    return lines


_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class TextFile:
    """A file read as lines, or the reason it could not be read (`lines` is None then)."""

    path: str
    lines: list[tuple[str, str]] | None
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def text(self) -> str:
        return "".join(content + eol for content, eol in self.lines or ())


STDIN = "-"
STDIN_NAME = "<stdin>"


def read_lines(path: str | Path) -> TextFile:
    """Read a workload file line by line (`-`: standard input); never raises for a bad path or
    bad bytes."""
    name = str(path)
    if name == STDIN:
        import sys

        try:
            return _read(STDIN_NAME, sys.stdin.buffer)
        except (OSError, ValueError) as error:
            return _unreadable(STDIN_NAME, str(error))
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below in every branch
    except IsADirectoryError:
        return _unreadable(name, "is a directory")
    except FileNotFoundError:
        return _unreadable(name, "no such file")
    except OSError as error:
        return _unreadable(name, error.strerror or str(error))
    with handle:
        try:
            return _read_whole(name, handle) or _read(name, handle)
        except OSError as error:
            return _unreadable(name, error.strerror or str(error))


_WHOLE_LIMIT = 1 << 30  # bytes: a regular file up to this size is read in one piece


def _read_whole(name: str, handle: BinaryIO) -> TextFile | None:
    """The usual file, read in one piece and split in C: a regular file that is all UTF-8, has no
    NUL byte and no line over MAX_LINE // 4 characters (so none over MAX_LINE bytes). What _read
    line by line would give (the 3 M lines of a 100,000-layer JSON in 0.15 s, not 1.2 s). None for
    any other file, rewound: _read then reads it from the start and says what is wrong where."""
    info = os.fstat(handle.fileno())
    if not stat.S_ISREG(info.st_mode) or info.st_size > _WHOLE_LIMIT:
        return None
    lines = _plain_lines(handle.read(_WHOLE_LIMIT + 1))
    if lines is None:
        handle.seek(0)
        return None
    return TextFile(name, lines)


def _plain_lines(data: bytes) -> list[tuple[str, str]] | None:
    if b"\0" in data or len(data) > _WHOLE_LIMIT:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = split_lines(text)
    widest = MAX_LINE // 4  # UTF-8 takes at most 4 bytes a character
    if len(text) > widest and max(map(len, map(operator.itemgetter(0), lines))) > widest:
        return None
    return lines


def _read(name: str, handle: BinaryIO) -> TextFile:
    lines: list[tuple[str, str]] = []
    found: list[Diagnostic] = []
    lineno = 0
    while True:
        raw = handle.readline(MAX_LINE + 2)
        if not raw:
            break
        lineno += 1
        if not raw.endswith(b"\n") and len(raw) > MAX_LINE:
            length = len(raw)
            while (rest := handle.readline(_CHUNK)) and not rest.endswith(b"\n"):
                length += len(rest)
            length += len(rest.rstrip(b"\r\n"))
            message = f"line {lineno} is {length:,} bytes long (limit {MAX_LINE:,}); the rest is not read"
            found.append(diagnostic("P102", message, path=name, span=Span.at(lineno, 1)))
            raw = raw[: MAX_LINE + 1] + b"\n"
        if b"\0" in raw:
            column = raw.index(b"\0") + 1
            return TextFile(
                name,
                None,
                (
                    diagnostic(
                        "F002",
                        f"NUL byte at line {lineno}, column {column}: not a workload text file",
                        path=name,
                    ),
                ),
            )
        body, eol = (
            (raw[:-2], "\r\n")
            if raw.endswith(b"\r\n")
            else ((raw[:-1], "\n") if raw.endswith(b"\n") else (raw, ""))
        )
        try:
            content = body.decode("utf-8")
        except UnicodeDecodeError as error:
            column = len(body[: error.start].decode("utf-8", "replace")) + 1
            found.append(
                diagnostic(
                    "P101",
                    f"byte 0x{body[error.start]:02X} is not UTF-8 (workload files are ASCII)",
                    path=name,
                    span=Span.at(lineno, column),
                )
            )
            content = body.decode("utf-8", "replace")
        lines.append((content, eol))
    return TextFile(name, lines, tuple(found))


def read_binary(path: str | Path, size: int = -1) -> tuple[bytes | None, Diagnostic | None]:
    """A regular file's bytes (a Chakra trace, a group file; the first `size` when given), or the
    F001 saying why not; a FIFO or device is refused at once instead of blocking or reading forever."""
    name = str(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        reason = "no such file" if isinstance(error, FileNotFoundError) else error.strerror or str(error)
        return None, _unreadable(name, reason).diagnostics[0]
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which raises for a directory
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        return None, _unreadable(name, kind).diagnostics[0]
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read(size), None
        except OSError as error:
            return None, _unreadable(name, error.strerror or str(error)).diagnostics[0]


def read_head(path: str | Path, size: int) -> bytes | None:
    """The first `size` bytes of a regular file (None for anything else, or when unreadable)."""
    return read_binary(path, size)[0]


def _unreadable(name: str, reason: str) -> TextFile:
    return TextFile(name, None, (diagnostic("F001", f"cannot read {name}: {reason}", path=name),))


def what_is(head: bytes) -> str | None:
    """What a file that starts with `head` is, in words, when it is a kind ModTrans knows that
    is not an ONNX model: said instead of a protobuf or schema error."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"{"):
        if b'"modtrans-workload"' in text[:400]:
            return "a workload JSON file"
        if b'"modtrans-translation"' in text[:400]:
            return "translation metadata (a .meta.json)"
        if b'"provenance"' in text[:400]:
            return "a ModTrans IR document (`modtrans extract` output)"
        if b'"_diffusers_version"' in text:  # a diffusion pipeline's UNet, transformer or VAE
            return "a diffusers model's configuration (its _class_name's: no transformers class)"
        return "a JSON file"
    words = text.split(maxsplit=1)
    keywords = (b"DATA", b"MODEL", b"HYBRID_", b"MICRO", b"DISTRIBUTED_INFERENCE")
    if words and words[0].startswith(keywords):
        return "a workload text file"
    return None


def write_atomic(path: str | Path, text: str | bytes) -> None:
    """Write one file, all or nothing (see `write_all`). Raises OSError."""
    write_all([(path, text)])


class Batch(Protocol):
    """Outputs that write themselves, many at once (a Chakra set's traces, written by forked
    workers each into its share of the temporaries: no bytes pass back to this process)."""

    def pieces(self, key: Any) -> bytes | Iterable[bytes]:
        """One output's bytes, made here (a device or FIFO is written through)."""

    def write(self, places: Sequence[tuple[Any, Slot]], advance: Callable[[int], None]) -> None:
        """Each output's bytes written (Slot.write), by its key, `advance` told how many as they
        are. Raises OSError."""


@dataclass(frozen=True)
class Slot:
    """Where a Batch's output goes: its temporary (named, not yet made: any process may make it),
    its output, and the output's mode where it replaces a file."""

    temporary: str
    real: Path
    mode: int | None

    def write(self, pieces: Sequence[bytes]) -> None:
        """The temporary made and the pieces written in order. Raises OSError naming the output."""
        handle = create_partial(self.temporary, self.real)
        try:
            _gather(handle, pieces)
            if self.mode is not None:
                os.fchmod(handle, self.mode)
        finally:
            os.close(handle)


@dataclass(frozen=True, slots=True)
class Part:
    """An output one of `batch`'s, by its `key`; a call makes its bytes here."""

    batch: Batch
    key: Any

    def __call__(self) -> bytes | Iterable[bytes]:
        return self.batch.pieces(self.key)


Content = str | bytes | Callable[[], bytes | Iterable[bytes]]
"""What an output holds: text, bytes, or a function making the bytes when the file is written (so
a thousand traces, or a 100,000-layer JSON, never sit in memory whole): whole, as a list of pieces
all made (written with writev, no joined copy: a Chakra trace patched per rank), or as any other
iterable, a stream written as its pieces are made; a Part's batch writes its own, all at once."""


FSYNC = "MODTRANS_FSYNC"
"""The environment variable that, set to 1, has every output fsynced before the renames, a new
file too (`durable`)."""


def durable(replaces: bool) -> bool:
    """Whether an output's temporary is fsynced before its rename: when it replaces a file the
    user has (a crash after the rename must not leave neither the old bytes nor the new), or
    everywhere under MODTRANS_FSYNC=1. A new file is not: all or nothing needs the rename alone,
    and a power cut before the kernel's write-back loses only a file that did not exist (an fsync
    of each of a 1,024-rank set's traces made the write 4-5x the page cache's speed:
    bench/bench_floor.py)."""
    return replaces or os.environ.get(FSYNC, "") == "1"


def write_all(outputs: Sequence[tuple[str | Path, Content]]) -> None:
    """Write every output or none: each to a temporary (fsynced when it replaces a file:
    `durable`), then the renames; on failure the temporaries are removed and every existing file
    is as it was. Raises OSError.

    A regular file (or a new one) is replaced through a temporary in its folder and a rename;
    it keeps its mode, and a new file gets 0666 less the umask, as the shell would make it. A
    symlink is followed and its target replaced, the link kept. A character device or a FIFO is
    written through (after every regular file is in place), never replaced. Anything else (a
    directory, a socket, a block device) is refused.
    """
    from modtrans.progress import task as progress_task

    resolved = _targets([Path(path) for path, _ in outputs])
    modes = {real: mode for real, _, mode in resolved}  # read once: _Stager stats nothing again
    targets = [
        ((real, through), data) for (real, through, _), (_, data) in zip(resolved, outputs, strict=True)
    ]
    for folder in {real.parent for (real, through), _ in targets if not through}:
        sweep(folder)  # what dead runs left, whatever output it was for
    # a text output and its .meta.json: two waits, not a thread pool (15 ms of CPU to import); nor
    # a trace set's group file and .meta.json beside the traces its batch writes (fileio.Part)
    made_here = sum(not through and not isinstance(data, Part) for (_, through), data in targets)
    stager = _Stager(threaded=made_here > 2, modes=modes)
    try:
        with progress_task("writing", total=len(targets)) as advance:
            for (real, through), data in targets:
                if not through:
                    stager.add(real, data)
                if through or not isinstance(data, Part):
                    advance()
            staged = stager.wait(advance)  # a batch's parts counted as they are written
        with held():  # a signal stops the command before the renames or after them all
            for temporary, real in staged:
                commit(temporary, real)
    except BaseException:
        stager.stop()
        for temporary, _ in stager.made.values():
            discard(temporary)
        raise
    for (real, through), data in targets:
        if through:
            with open(real, "wb") as out:  # a device or FIFO: no truncation, no rename
                for piece in _pieces(data):
                    out.write(piece)


_SYNCS = 4
"""Files written (and fsynced, where `durable`) at once, in threads, while the next outputs are
made (a write and an fsync release the GIL): the kernel copies each file, and the disk takes a
durable one, while the later ones are encoded. Below the kernel's dirty_background_ratio (10 % of
memory) nothing is written back until an fsync asks, so fsyncs left until the last file was made
waited for the whole set's write-back then (1.3 GB for Llama-3-70B's 1,024 ranks:
bench/bench_floor.py)."""


class _Stager:
    """Outputs written to temporaries, fsynced where `durable`. Threaded, made bytes go to _SYNCS threads, at
    most 2 x _SYNCS files waiting (a set's traces never sit in memory together); a stream (pieces
    made as they are written) is written here, as its maker may not run beside the next one, and
    fsynced in a thread. Unthreaded, each is written in `wait`, after the batches (whose writes
    stop the workers they started, a failure's too). `made` holds every temporary made, by the
    output's place, for the caller to discard on failure."""

    def __init__(self, threaded: bool, modes: dict[Path, int | None] | None = None) -> None:
        self.modes = modes or {}  # an output's mode where it replaces a file, None where it is new
        self.made: dict[int, tuple[str, Path]] = {}
        self.added = 0
        self.futures: list[Any] = []
        self.later: list[tuple[int, Path, Iterable[bytes]]] = []  # unthreaded: staged in wait()
        self.parts: dict[Batch, list[tuple[int, Path, Any]]] = {}
        self.pool: Any = None
        if threaded:
            # Imported here: 20-55 ms (python -X importtime, 2 loaded cores) that a text output spares.
            import threading
            from concurrent.futures import ThreadPoolExecutor

            self.pool = ThreadPoolExecutor(max_workers=_SYNCS, thread_name_prefix="modtrans-write")
            self.room = threading.BoundedSemaphore(2 * _SYNCS)

    def add(self, real: Path, data: Content) -> None:
        place = self.added
        self.added += 1
        if isinstance(data, Part):
            self.parts.setdefault(data.batch, []).append((place, real, data.key))
            return
        pieces = _pieces(data)
        if self.pool is None:  # after the batches (wait): a batch's workers are stopped by its write
            self.later.append((place, real, pieces))
        elif isinstance(pieces, (tuple, list)):
            self.room.acquire()
            self.futures.append(self.pool.submit(self._stage, place, real, pieces, self.room))
        else:
            temporary, replaces = _stage(real, pieces)
            self.made[place] = (temporary, real)
            if durable(replaces):
                self.futures.append(self.pool.submit(_fsync, temporary))

    def _stage(self, place: int, real: Path, pieces: Iterable[bytes], room: Any = None) -> None:
        try:
            temporary, replaces = _stage(real, pieces)
            self.made[place] = (temporary, real)  # one step under the GIL
            if durable(replaces):
                _fsync(temporary)
        finally:
            if room is not None:
                room.release()

    def wait(self, advance: Callable[[int], None]) -> list[tuple[str, Path]]:
        """Every temporary and its output, in the order they were added, once all are written
        (and fsynced where `durable`); each batch writes its parts here, counted by `advance`.
        Raises the first OSError."""
        try:
            for batch, parts in self.parts.items():
                self._batch(batch, parts, advance)
            for place, real, pieces in self.later:
                self._stage(place, real, pieces)
            for future in self.futures:
                future.result()
        finally:
            self.stop()
        return [self.made[place] for place in sorted(self.made)]

    def _batch(
        self, batch: Batch, parts: Sequence[tuple[int, Path, Any]], advance: Callable[[int], None]
    ) -> None:
        """The parts written by their batch, each into a temporary named here (made where it is
        written: Slot); fsynced where `durable`."""
        slots = []
        synced = []
        for place, real, key in parts:
            mode = self.modes[real] if real in self.modes else _kept_mode(real)
            temporary = name_partial(real)
            self.made[place] = (temporary, real)
            slots.append((key, Slot(temporary, real, mode)))
            if durable(mode is not None):
                synced.append(temporary)
        batch.write(slots, advance)
        for temporary in synced:
            if self.pool is None:
                _fsync(temporary)
            else:
                self.futures.append(self.pool.submit(_fsync, temporary))

    def stop(self) -> None:
        """Wait for the threads at work; those not started are not (a failure or a signal)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _fsync(temporary: str) -> None:
    """fsync a file through a descriptor of its own: Linux's and macOS's fsync flush the file
    whichever descriptor names it, a read-only one too."""
    handle = os.open(temporary, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def _pieces(data: Content) -> Iterable[bytes]:
    if isinstance(data, str):
        return (data.encode(),)
    if isinstance(data, bytes):
        return (data,)
    made = data()
    return (made,) if isinstance(made, bytes) else made


def _targets(paths: Sequence[Path]) -> list[tuple[Path, bool, int | None]]:
    """_target of each path: the file written, whether through, and the mode its replacement
    keeps (None for a new file), all three from one look at it (its lstat, or a link's target's
    stat). A folder is resolved once (realpath) and each name in it looked at once (lstat), not
    each path's every component: a 1,024-rank set's files cost 1,026 system calls here, not 7,000
    (a link is followed whole, as _target follows it)."""
    folders: dict[Path, str] = {}
    out: list[tuple[Path, bool, int | None]] = []
    for path in paths:
        folder = folders.get(path.parent)
        if folder is None:
            folder = folders[path.parent] = os.path.realpath(path.parent)
        info = None
        if path.name not in ("", ".", ".."):
            try:
                info = os.lstat(os.path.join(folder, path.name))
            except FileNotFoundError:
                out.append((Path(folder, path.name), False, None))
                continue
            except OSError:
                info = None
        if info is None or stat.S_ISLNK(info.st_mode):  # a link, or a name to resolve whole
            out.append(_target(path))
            continue
        out.append(_kind(Path(folder, path.name), info, path))
    return out


def _target(path: Path) -> tuple[Path, bool, int | None]:
    """The file to write (a symlink's target), whether it is written through, and the mode its
    replacement keeps (None for a new file): one stat of the target says all three."""
    real = Path(os.path.realpath(path))
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return real, False, None
    return _kind(real, info, path)


def _kind(real: Path, info: os.stat_result, path: Path) -> tuple[Path, bool, int | None]:
    """The file to write, whether it is written through, and the mode its replacement keeps (None
    for a device or FIFO, which is written through), from what stat says of it; OSError for what
    is not written (`path` as the user named it)."""
    if stat.S_ISREG(info.st_mode):
        return real, False, stat.S_IMODE(info.st_mode)
    if stat.S_ISCHR(info.st_mode) or stat.S_ISFIFO(info.st_mode):
        return real, True, None
    kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
    raise OSError(
        errno.EISDIR if stat.S_ISDIR(info.st_mode) else errno.EINVAL, f"{path} is {kind}", str(path)
    )


def _kept_mode(real: Path) -> int | None:
    """The permission bits a replacement of `real` keeps: its own, or None where there is no file
    (a new one gets 0666 less the umask)."""
    try:
        return stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        return None


def _stage(real: Path, data: Iterable[bytes]) -> tuple[str, bool]:
    """A temporary holding `data` beside `real`, with `real`'s mode, and whether it replaces a
    file (`real` exists)."""
    mode = _kept_mode(real)
    handle, temporary = open_partial(real)
    try:
        if isinstance(data, (tuple, list)):
            try:
                _gather(handle, data)
            finally:
                os.close(handle)
        else:
            with os.fdopen(handle, "wb") as out:
                for piece in data:
                    out.write(piece)
        if mode is not None:
            os.chmod(temporary, mode)
    except BaseException:
        discard(temporary)
        raise
    return temporary, mode is not None


_IOV = os.sysconf("SC_IOV_MAX") if hasattr(os, "writev") else 0
"""Buffers one writev takes (IOV_MAX: 1,024 on Linux); 0 where there is no writev (Windows)."""


def _gather(handle: int, pieces: Sequence[bytes]) -> None:
    """Write the pieces in order with writev, IOV_MAX at a time (the kernel copies them from where
    they lie: no joined copy of a trace made here), finishing a short write. Raises OSError."""
    if not _IOV:
        pieces = [b"".join(pieces)]
    for start in range(0, len(pieces), _IOV or 1):
        chunk = pieces[start : start + (_IOV or 1)]
        size = sum(map(len, chunk))
        done = os.writev(handle, chunk) if _IOV else os.write(handle, chunk[0])
        if done < size:
            rest = memoryview(b"".join(chunk))[done:]
            while rest:
                rest = rest[os.write(handle, rest) :]


def utf8(data: bytes) -> tuple[str | None, str | None]:
    """`data` as UTF-8 text, or None and the reason in words (the byte and its offset), never the
    decoder's own message (`'utf-8' codec can't decode byte ...`)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as error:
        return None, f"not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start})"


def is_file_output(path: str | Path) -> bool:
    """Whether writing `path` makes a file (new, regular, or a link to one), not a device or FIFO:
    only such an output gets a sidecar beside it."""
    try:
        return _target(Path(path))[1] is False
    except OSError:
        return False


def file_ids(paths: Iterable[str | Path]) -> set[tuple[int, int]]:
    """The files the paths name, through links, as (device, inode): two paths name one file when
    they share one (os.path.samefile's test); a missing or unreadable path names none."""
    found: set[tuple[int, int]] = set()
    for path in paths:
        try:
            info = os.stat(path)
        except (OSError, ValueError):
            continue
        found.add((info.st_dev, info.st_ino))
    return found
