"""Nothing a user owns is destroyed by an output: devices and FIFOs are written through, links
followed, modes kept, inputs (built-in models too) refused, an output and its sidecar one result."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from modtrans import fileio, temporaries, zoo
from modtrans.cli import app

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    """A private character device equal to /dev/null (never the real one)."""
    device = tmp_path / "null"
    try:
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    return device


def test_a_character_device_is_written_through_not_replaced(null_device: Path) -> None:
    code, _ = _run("extract", "vgg16", "-o", str(null_device))
    assert code == 0
    assert stat.S_ISCHR(null_device.lstat().st_mode)
    code, _ = _run("translate", "resnet50", "-o", str(null_device))
    assert code == 0
    assert stat.S_ISCHR(null_device.lstat().st_mode)
    assert not Path(f"{null_device}.meta.json").exists()  # no sidecar beside a device
    assert sorted(p.name for p in null_device.parent.iterdir()) == ["null"]


def test_a_fifo_is_written_through_to_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    # daemon: were the FIFO replaced, its reader would wait forever on an inode nobody opens
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _ = _run("translate", "resnet50", "-o", str(fifo))
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    reader.join(timeout=30)
    assert code == 0
    assert received[0].startswith(b"DATA\n")
    assert received[0].count(b"\n") > 100


def test_a_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "workload.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    fileio.write_atomic(link, "new\n")
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert target.read_text() == "new\n"
    assert not [p for p in (tmp_path / "real").iterdir() if p.name.endswith(temporaries.PARTIAL)]


def test_new_files_get_the_umask_mode_and_existing_ones_keep_theirs(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        fresh = tmp_path / "fresh.txt"
        fileio.write_atomic(fresh, "x\n")
        assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # 0666 & ~0027, as the shell would
        kept = tmp_path / "kept.txt"
        kept.write_text("x\n")
        kept.chmod(0o604)
        fileio.write_atomic(kept, "y\n")
        assert stat.S_IMODE(kept.stat().st_mode) == 0o604
    finally:
        os.umask(old)


def test_a_trace_set_keeps_links_and_modes_as_a_single_file_does(tmp_path: Path) -> None:
    """A set's files are resolved a folder at a time (fileio._targets): each must end as
    write_atomic would leave that one file: through a linked folder, a trace that is a link
    followed and kept, an existing trace's mode kept, a new one's the umask's."""
    real, elsewhere = tmp_path / "real", tmp_path / "elsewhere"
    real.mkdir()
    elsewhere.mkdir()
    (tmp_path / "via").symlink_to(real)
    linked = elsewhere / "rank1.et"
    linked.write_bytes(b"old")
    linked.chmod(0o600)
    (real / "t.1.et").symlink_to(linked)
    (real / "t.0.et").write_bytes(b"old")
    (real / "t.0.et").chmod(0o604)
    old = os.umask(0o027)
    try:
        code, output = _run(
            "translate", "resnet50", "--format", "chakra-et", "--npus", "4", "-o", str(tmp_path / "via" / "t")
        )
    finally:
        os.umask(old)
    assert code == 0, output
    assert (real / "t.1.et").is_symlink()
    assert os.readlink(real / "t.1.et") == str(linked)
    assert linked.read_bytes() != b"old"
    assert stat.S_IMODE(linked.stat().st_mode) == 0o600
    assert stat.S_IMODE((real / "t.0.et").stat().st_mode) == 0o604
    assert stat.S_IMODE((real / "t.2.et").stat().st_mode) == 0o640  # 0666 & ~0027, as the shell would
    assert (real / "t.0.et").read_bytes()[:4] == (real / "t.2.et").read_bytes()[:4]
    assert not [p for p in [*real.iterdir(), *elsewhere.iterdir()] if p.name.endswith(temporaries.PARTIAL)]


def test_each_output_and_each_link_target_is_looked_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fileio._targets reads an output's kind and the mode its replacement keeps from one system
    call on the file: a name's lstat, and for a link its target's stat, never a second stat of
    the same file (realpath's own lstats are the standard library's, not counted)."""
    (tmp_path / "plain").write_bytes(b"x")
    (tmp_path / "plain").chmod(0o604)
    (tmp_path / "target").write_bytes(b"x")
    (tmp_path / "target").chmod(0o600)
    (tmp_path / "link").symlink_to(tmp_path / "target")
    (tmp_path / "far").write_bytes(b"x")
    (tmp_path / "far").chmod(0o640)
    (tmp_path / "hop").symlink_to(tmp_path / "far")
    (tmp_path / "chain").symlink_to(tmp_path / "hop")
    (tmp_path / "dangling").symlink_to(tmp_path / "missing")
    names = ["plain", "link", "chain", "dangling", "new"]
    calls: list[tuple[str, str]] = []

    def counting(name: str) -> Callable[..., os.stat_result]:
        real: Callable[..., os.stat_result] = getattr(os, name)

        def counted(path: str | Path, *args: Any, **kwargs: Any) -> os.stat_result:
            if sys._getframe(1).f_globals.get("__name__") == "modtrans.fileio":
                calls.append((name, os.fspath(path)))
            return real(path, *args, **kwargs)

        return counted

    monkeypatch.setattr(os, "stat", counting("stat"))
    monkeypatch.setattr(os, "lstat", counting("lstat"))
    resolved = fileio._targets([tmp_path / name for name in names])
    monkeypatch.undo()
    assert [(real.name, through, mode) for real, through, mode in resolved] == [
        ("plain", False, 0o604),
        ("target", False, 0o600),
        ("far", False, 0o640),
        ("missing", False, None),
        ("new", False, None),
    ]
    links = 3
    assert len(calls) == len(names) + links, calls
    assert sorted(set(calls)) == sorted(calls), calls


def test_a_directory_where_a_trace_goes_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """A set's files resolved a folder at a time (fileio._targets) still refuse what is not a file
    to replace: F003 naming it, no trace or temporary left, the directory untouched."""
    (tmp_path / "t.2.et").mkdir()
    code, output = _run(
        "translate", "resnet50", "--format", "chakra-et", "--npus", "4", "-o", str(tmp_path / "t")
    )
    assert code == 2
    assert "F003" in output
    assert "t.2.et is a directory" in output
    assert [p.name for p in tmp_path.iterdir()] == ["t.2.et"]
    assert list((tmp_path / "t.2.et").iterdir()) == []


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        fileio.write_atomic(tmp_path, "x")


def test_a_built_in_model_is_an_input(tmp_path: Path) -> None:
    shipped = zoo.get("vgg16")
    assert shipped is not None
    before = shipped.path.read_bytes()
    code, output = _run("translate", "vgg16", "-o", str(shipped.path))
    assert code == 2
    assert "refusing to overwrite the input" in output
    link = tmp_path / "model-link.onnx"
    link.symlink_to(shipped.path)
    code, _ = _run("extract", "vgg16", "-o", str(link))
    assert code == 2
    assert shipped.path.read_bytes() == before


def test_output_and_sidecar_are_one_result(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    code, output = _run("translate", "resnet50", "-o", str(out), "--meta", str(tmp_path / "no" / "m.json"))
    assert code == 2
    assert "F003" in output
    assert "no/m.json" in output  # the file the user named, not a temporary
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []
    code, _ = _run("translate", "resnet50", "-o", str(out))
    assert code == 0
    assert json.loads(Path(f"{out}.meta.json").read_text())["model"]["file"] == "resnet50"


def test_chakra_traces_and_their_metadata_are_one_result(tmp_path: Path) -> None:
    pytest.importorskip("chakra")
    prefix = tmp_path / "t"
    code, _ = _run("translate", "resnet50", "--format", "chakra-et", "--npus", "2", "-o", str(prefix))
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "t.0.et",
        "t.1.et",
        "t.comm_groups.json",
        "t.et-meta.json",
    ]


def test_long_names_are_one_line_errors(tmp_path: Path) -> None:
    name = "a" * 300
    for args in (
        ("translate", "resnet50", "-o", str(tmp_path / name)),
        ("translate", name),
        ("inspect", f"{name}.onnx"),
        ("convert", str(tmp_path / name)),
        ("diff", name, name),
    ):
        code, output = _run(*args)
        assert code in (1, 2), args
        assert "Traceback" not in output


def test_fmt_keeps_json_json_and_never_rewrites_errors(tmp_path: Path) -> None:
    text = tmp_path / "w.txt"
    _run("translate", "resnet50", "-o", str(text))
    document = tmp_path / "w.json"
    assert _run("convert", str(text), "-o", str(document))[0] == 0
    assert _run("fmt", "--check", str(document)) == (0, "")
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads(document.read_text())))
    assert _run("fmt", str(compact))[0] == 0
    assert compact.read_text() == document.read_text()  # canonical JSON, not text
    broken = tmp_path / "broken.txt"
    broken.write_text("DATA\n3\nl1 -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n")  # V201
    before = broken.read_text()
    code, output = _run("fmt", str(broken))
    assert code == 1
    assert "V201" in output
    assert broken.read_text() == before


@pytest.mark.parametrize("token", ["foo", "7", "mode:"])
def test_fmt_never_lets_a_list_swallow_an_unknown_header_token(tmp_path: Path, token: str) -> None:
    path = tmp_path / "simai.txt"
    path.write_text(
        f"HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ep: 1 {token} pp: 1 vpp: 1 ga: 1 all_gpus: 2 "
        "checkpoints: 0 checkpoint_initiates: 0\n1\nl1 -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n"
    )
    before = _run("validate", str(path))
    assert _run("fmt", str(path))[0] == 0
    after = _run("validate", str(path))
    assert before[0] == after[0] == 0
    assert after[1].count("warning") == before[1].count("warning")
    assert _run("fmt", "--check", str(path))[0] == 0  # idempotent


_KILLED_BETWEEN_RENAMES = """
import os, sys
renames, replace = [], os.replace
def replace_then_die(*args, **kwargs):
    replace(*args, **kwargs)
    renames.append(args)
    if len(renames) == 1:  # the workload is in place, its metadata not yet: SIGKILL here
        os._exit(137)
os.replace = replace_then_die
from modtrans.cli import run
sys.argv = ["modtrans", *sys.argv[1:]]
run()
"""


def test_a_run_killed_between_its_two_renames_is_told_apart(tmp_path: Path) -> None:
    """Two renames are never one: a run killed after the workload's rename and before its
    metadata's leaves the new workload beside the old run's .meta.json. Killed there on purpose
    (not at a random moment, which a fast or slow machine may never hit): `validate` and `diff`
    say F006, a warning naming the stale sidecar, and the next run leaves the pair and nothing else."""
    import subprocess
    import sys

    out = tmp_path / "out.txt"
    meta = Path(f"{out}.meta.json")
    assert _run("translate", "resnet50", "-o", str(out))[0] == 0
    assert _run("validate", str(out)) == (0, "1 file checked: no problems\n")
    old_meta = meta.read_text()
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_RENAMES, "translate", "mobilenet_v2", "-o", str(out)],
        capture_output=True,
        check=False,
    )
    assert killed.returncode == 137, killed.stderr
    assert meta.read_text() == old_meta  # the old run's, beside the new run's workload
    assert "resnet50" in json.loads(old_meta)["model"]["file"]
    code, output = _run("validate", str(out))
    assert code == 0  # a warning: the workload itself is fine
    assert "warning F006 out.txt.meta.json describes another output" in output
    code, output = _run("diff", str(out), str(out))
    assert "F006" in output
    assert _run("translate", "mobilenet_v2", "-o", str(out))[0] == 0
    assert "F006" not in _run("validate", str(out))[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "out.txt.meta.json"]


@pytest.mark.slow  # strace of a whole translation: 2-5 s
def test_the_onnx_checker_looks_nothing_up_outside_the_model(tmp_path: Path) -> None:
    """External-data locations are never stat'ed (onnx's checker resolves them against the
    working directory); traced with strace where it is installed."""
    import shutil
    import subprocess
    import sys

    from tests import fuzzing

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    model = tmp_path / "model" / "m.onnx"
    model.parent.mkdir()
    model.write_bytes(fuzzing._external("weights-elsewhere.bin"))
    trace = tmp_path / "trace.txt"
    command = [sys.executable, "-m", "modtrans", "inspect", str(model)]
    subprocess.run(
        ["strace", "-f", "-e", "trace=file", "-o", str(trace), *command], cwd=tmp_path, check=False
    )
    assert "weights-elsewhere.bin" not in trace.read_text()


def test_an_output_written_in_pieces_is_all_or_nothing(tmp_path: Path) -> None:
    """A streamed output (convert's JSON, layer by layer) that fails half-way leaves the file as
    it was and no temporary; one that completes is the pieces in order."""
    target = tmp_path / "w.json"
    target.write_text("before\n")

    def failing() -> Iterator[bytes]:
        yield b'{"layers": [\n'
        raise OSError(28, "No space left on device", str(target))

    with pytest.raises(OSError, match="No space left"):
        fileio.write_all([(target, failing)])
    assert target.read_text() == "before\n"
    assert os.listdir(tmp_path) == ["w.json"]
    fileio.write_all([(target, lambda: iter([b"a", b"b", b"c\n"]))])
    assert target.read_text() == "abc\n"


def test_outputs_given_as_pieces_are_written_in_order(tmp_path: Path) -> None:
    """A list of pieces (a Chakra trace patched per rank) is written with writev, IOV_MAX buffers
    at a time: more pieces than one call takes, of every length, come out joined in order."""
    limit = os.sysconf("SC_IOV_MAX")
    pieces = [bytes([i % 251]) * (i % 7) for i in range(3 * limit + 5)]
    outputs = [(tmp_path / f"t.{i}.et", lambda: pieces) for i in range(3)]
    fileio.write_all([*outputs, (tmp_path / "groups.json", "{}\n")])
    assert all(path.read_bytes() == b"".join(pieces) for path, _ in outputs)
    assert sorted(os.listdir(tmp_path)) == ["groups.json", "t.0.et", "t.1.et", "t.2.et"]


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every fsync and rename from here on, in order, with the inode it was given."""
    events: list[tuple[str, int]] = []
    fsync, replace = os.fsync, os.replace

    def synced(fd: int) -> None:
        events.append(("fsync", os.fstat(fd).st_ino))
        fsync(fd)

    def renamed(source: str, target: str | Path) -> None:
        events.append(("rename", os.stat(source).st_ino))
        replace(source, target)

    monkeypatch.setattr(os, "fsync", synced)
    monkeypatch.setattr(os, "replace", renamed)
    return events


def test_a_replaced_file_is_on_disk_before_the_first_rename_and_a_new_one_is_not_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All or nothing needs the temporary and the rename; durability is asked where a file is
    replaced: each temporary that replaces an existing output (a symlink's target too) is fsynced
    before any output is renamed, and one that makes a new file is not fsynced at all (a power cut
    can lose only what did not exist). A failed fsync leaves every file as it was and no
    temporary."""
    monkeypatch.delenv(fileio.FSYNC, raising=False)
    events = _recorded(monkeypatch)
    (tmp_path / "target").write_bytes(b"old")
    (tmp_path / "t.8.et").symlink_to("target")
    existing = [tmp_path / f"t.{i}.et" for i in (1, 4, 7)]
    for path in existing:
        path.write_bytes(b"old")
    outputs = [(tmp_path / f"t.{i}.et", bytes([i]) * 5000) for i in range(9)]
    fileio.write_all(outputs)
    renames = [inode for kind, inode in events if kind == "rename"]
    first = [kind for kind, _ in events].index("rename")
    synced = sorted(inode for kind, inode in events if kind == "fsync")
    assert sorted(inode for kind, inode in events[:first] if kind == "fsync") == synced
    replaced = [*existing, tmp_path / "target"]
    assert synced == sorted(path.stat().st_ino for path in replaced)
    assert len(renames) == 9
    assert all(path.read_bytes() == data for path, data in outputs)
    assert (tmp_path / "t.8.et").is_symlink()

    events.clear()
    for path, _ in outputs:
        path.unlink()
    fileio.write_all(outputs)
    assert [kind for kind, _ in events] == ["rename"] * 9  # every output new: no fsync

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match="Input/output"):
        fileio.write_all([(path, b"new") for path, _ in outputs])
    assert all(path.read_bytes() == data for path, data in outputs)
    assert sorted(os.listdir(tmp_path)) == sorted([*(path.name for path, _ in outputs), "target"])


@pytest.mark.parametrize("streamed", [False, True])
def test_modtrans_fsync_makes_every_output_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """MODTRANS_FSYNC=1: every temporary, a new file's too, made as a whole or as a stream, is
    fsynced before the first rename."""
    monkeypatch.setenv(fileio.FSYNC, "1")
    events = _recorded(monkeypatch)

    def content(i: int) -> fileio.Content:
        return (lambda: iter([bytes([i]) * 5000])) if streamed else bytes([i]) * 5000

    outputs = [(tmp_path / f"t.{i}.et", content(i)) for i in range(5)]
    fileio.write_all(outputs)
    first = [kind for kind, _ in events].index("rename")
    before = sorted(inode for kind, inode in events[:first] if kind == "fsync")
    assert before == sorted(path.stat().st_ino for path, _ in outputs)
    assert [kind for kind, _ in events[first:]] == ["rename"] * 5
