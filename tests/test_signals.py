"""No temporary outlives its command: SIGTERM, SIGHUP and SIGINT stop a 1,024-rank translation with
every temporary removed and the process dead of the signal; what a SIGKILL left, the next run in
the folder removes, whatever output it was for; nothing that is not a dead run's temporary is
touched (a live process's, a link, a folder, a FIFO, a file named almost so)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modtrans import fileio, temporaries

LLAMA_1024 = ["translate", "llama-3-70b", "--tp", "8", "--pp", "8", "--dp", "16", "--format", "chakra-et"]

_LAUNCH = """
import signal, sys
# Whatever the test runner ignores (nohup, a background job), this run starts as from a terminal.
for number in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)
from modtrans.cli import run
sys.argv = ["modtrans", *sys.argv[1:]]
run()
"""


def _partials(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(temporaries.PARTIAL))


def _start_and_wait_for_partials(folder: Path, least: int = 20) -> subprocess.Popen[bytes]:
    """The 1,024-rank translation into `folder`, once `least` temporaries are there (it is then
    writing its traces: seconds from its end on any machine)."""
    process = subprocess.Popen(
        [sys.executable, "-c", _LAUNCH, *LLAMA_1024, "-o", str(folder / "l70")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300
    while len(_partials(folder)) < least:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            _, err = process.communicate()
            pytest.fail(f"no temporaries appeared: exit {process.returncode}, {err.decode()[-2000:]}")
        time.sleep(0.02)
    return process


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_stopped_translation_leaves_no_file_behind(tmp_path: Path, number: signal.Signals) -> None:
    process = _start_and_wait_for_partials(tmp_path)
    process.send_signal(number)
    out, err = process.communicate(timeout=120)
    assert process.returncode == -number, err.decode()[-2000:]  # dead of the signal: a shell says 128+N
    assert os.listdir(tmp_path) == []
    assert out == b""
    assert b"Traceback" not in err, err.decode()[-2000:]


def test_the_next_run_removes_what_a_sigkill_left(tmp_path: Path) -> None:
    """Another output in the same folder: the dead run's temporaries go, whatever their names."""
    process = _start_and_wait_for_partials(tmp_path)
    process.kill()
    process.communicate(timeout=60)
    left = _partials(tmp_path)
    assert len(left) >= 20
    assert all(f".{process.pid}-" in name for name in left)
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "translate", "resnet50", "-o", str(tmp_path / "r50.txt")],
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["r50.txt", "r50.txt.meta.json"]


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process of this user that is alive while the test runs (not this one)."""
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as child:
        yield child.pid
        child.kill()


@pytest.fixture
def dead_pid() -> int:
    """A process of this user that has ended and been reaped."""
    with subprocess.Popen([sys.executable, "-c", "pass"]) as ended:
        ended.wait()
    return ended.pid


def test_only_dead_runs_temporaries_are_swept(tmp_path: Path, live_pid: int, dead_pid: int) -> None:
    real = tmp_path / "real.txt"
    real.write_text("mine\n")
    dead = [
        f".other.et.{dead_pid}-0a1b2c3d{temporaries.PARTIAL}",
        f".a.b c.{dead_pid}-ff{temporaries.PARTIAL}",
    ]
    for name in dead:
        (tmp_path / name).write_text("half")
    kept = {
        f".out.txt.{live_pid}-0a1b2c3d{temporaries.PARTIAL}": "file",  # a concurrent run's
        f"out.txt.{dead_pid}-0a1b2c3d{temporaries.PARTIAL}": "file",  # not hidden: not our name
        f".out.txt.{dead_pid}-xyz{temporaries.PARTIAL}": "file",  # not hex
        f".out.txt{temporaries.PARTIAL}": "file",  # no pid
        f".out.txt.{dead_pid}-0a1b2c3d{temporaries.PARTIAL}.bak": "file",
        f".link.{dead_pid}-0a1b2c3d{temporaries.PARTIAL}": "link",
        f".folder.{dead_pid}-0a1b2c3d{temporaries.PARTIAL}": "folder",
        f".fifo.{dead_pid}-0a1b2c3d{temporaries.PARTIAL}": "fifo",
    }
    for name, kind in kept.items():
        path = tmp_path / name
        if kind == "file":
            path.write_text("someone's")
        elif kind == "link":
            path.symlink_to(real)
        elif kind == "folder":
            path.mkdir()
        else:
            os.mkfifo(path)
    fileio.write_atomic(tmp_path / "new.txt", "x")
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, "real.txt", "new.txt"])
    assert real.read_text() == "mine\n"


def test_a_dead_run_with_this_runs_pid_is_swept(tmp_path: Path) -> None:
    """A container starts every run with the same few pids: a temporary named with ours that we
    did not make is a dead run's."""
    script = textwrap.dedent(
        """
        import os, sys
        from pathlib import Path
        from modtrans import fileio, temporaries
        folder = Path(sys.argv[1])
        (folder / f".old.et.{os.getpid()}-0a1b2c3d{temporaries.PARTIAL}").write_text("half")
        fileio.write_atomic(folder / "new.txt", "x")
        """
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert os.listdir(tmp_path) == ["new.txt"]


_RENAMES_THEN_SIGNAL = """
import os, signal, sys
from modtrans import fileio, stopping
stopping.catch()
replace = os.replace
def replace_then_signal(source, target):
    replace(source, target)
    if str(target).endswith("a.txt"):
        os.kill(os.getpid(), signal.SIGTERM)  # between the two renames
os.replace = replace_then_signal
folder = sys.argv[1]
try:
    fileio.write_all([(f"{folder}/a.txt", "new a\\n"), (f"{folder}/b.txt", "new b\\n")])
except KeyboardInterrupt:
    sys.exit(stopping.die())
sys.exit(3)  # the signal was lost
"""


def test_a_signal_between_renames_waits_for_the_last(tmp_path: Path) -> None:
    """A set of outputs is one result: a signal during its renames stops the command after them."""
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text(f"old {name[0]}\n")
    done = subprocess.run(
        [sys.executable, "-c", _RENAMES_THEN_SIGNAL, str(tmp_path)], capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]
    assert [(tmp_path / n).read_text() for n in ("a.txt", "b.txt")] == ["new a\n", "new b\n"]


def test_an_ignored_signal_stays_ignored() -> None:
    """`nohup modtrans ...` ignores SIGHUP; a background job of a script ignores SIGINT."""
    script = textwrap.dedent(
        """
        import signal
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        from modtrans import stopping
        stopping.catch()
        print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN,
              signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
              signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, text=True)
    assert done.stdout.split() == ["True", "True", "False"]
