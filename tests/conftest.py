"""Shared fixtures: paths to the fixture corpus, the optional reference folder, and a CLI runner."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from typer.testing import CliRunner, Result

from modtrans import pipeline
from modtrans.cli import app
from modtrans.plan.model import Op, Plan
from modtrans.request import Prepared

if TYPE_CHECKING:
    from pytest_lsp import ClientServerConfig

    from modtrans.estimate import Estimate

F = TypeVar("F", bound=Callable[..., Any])

ROOT = Path(__file__).resolve().parent.parent

# Some shells (this project's machines among them) set PYTHONDONTWRITEBYTECODE: then every
# `python -m modtrans` a test starts compiles the package again (0.2-0.4 s each, hundreds of them).
# An installed copy has its bytecode; the tests' children may write and reuse theirs.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
FIXTURES = ROOT / "fixtures" / "workloads"
CORPUS = FIXTURES / "corpus"
INVALID = FIXTURES / "invalid"
# The full reference collection lives beside the repository for developers; users and CI on a
# fresh clone may not have it, so tests over it skip when it is absent.
REFERENCE = ROOT.parent / "shared" / "reference" / "workloads"


def planned(prepared: Prepared) -> Plan:
    """The plan `modtrans translate` builds for the request, without its outputs: api.run also
    encodes every trace and checks the set (outputs.trace_files), more than half its time on a
    large layout, which a test that walks or writes the plan itself does not use."""
    plan = pipeline.translate_checked(prepared.request.model, prepared.options).plan
    assert plan is not None, prepared.request
    return plan


def both_tiers(model: str, options: dict[str, Any]) -> tuple[Plan, Estimate, Estimate]:
    """`model` translated at `options` on dgx-a100: the plan, the exact tier's estimate of it and
    the fast tier's of its layout (given the request's sequence where `options` sets one)."""
    from modtrans import estimate
    from modtrans.request import prepare, request_of

    prepared = prepare(request_of(model, {**options, "format": "chakra-et", "output": "unused/"}))
    plan = planned(prepared)
    layout = prepared.options.parallel.layout
    assert layout is not None
    shared = {k: options[k] for k in ("seq_len",) if k in options}
    fast = estimate.layout(model, layout, network="dgx-a100", **shared)
    return plan, estimate.plan(plan, network="dgx-a100"), fast


def ancestors(ops: Sequence[Op], start: int) -> set[int]:
    """Every operation of a program `start` waits for, directly or through others."""
    seen: set[int] = set()
    todo = list(ops[start].deps)
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo.extend(ops[i].deps)
    return seen


def corpus_files() -> list[Path]:
    return sorted(CORPUS.rglob("*.txt"))


def reference_files() -> list[Path]:
    return sorted(REFERENCE.rglob("*.txt")) if REFERENCE.is_dir() else []


def ids(paths: list[Path], base: Path) -> list[str]:
    return [str(p.relative_to(base)) for p in paths]


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    runner = CliRunner()

    def run(*args: str | os.PathLike[str]) -> Result:
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return run


def lsp_fixture(config: ClientServerConfig) -> Callable[[F], F]:
    """pytest_lsp.fixture(config=...), typed: pytest-lsp 1.0 leaves its decorator unannotated, and
    strict mypy refuses an untyped decorator (it would make the fixture untyped)."""
    import pytest_lsp  # only the language-server tests need it

    decorator: Callable[[F], F] = pytest_lsp.fixture(config=config)
    return decorator


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="write the golden files (fixtures/diff/) from the code under test, and print each change",
    )


Golden = Callable[[Path, str], None]


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    """Compare `text` with the golden file at `path`; with --update-goldens, write it instead and
    print the unified diff of what changed (review it, then commit it):

        python -m pytest tests/test_diff.py --update-goldens -s -n 0 && git diff fixtures/diff/
    """
    update = bool(request.config.getoption("--update-goldens"))

    def check(path: Path, text: str) -> None:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        if update:
            if old != text:
                import difflib

                name = str(path.relative_to(ROOT))
                print("".join(difflib.unified_diff(old.splitlines(True), text.splitlines(True), name, name)))
                path.write_text(text, encoding="utf-8")
            return
        assert text == old, f"{path} differs: if the change is intended, run with --update-goldens"

    return check


@contextlib.contextmanager
def tcp_server(command: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], socket.socket]]:
    """`COMMAND --tcp 127.0.0.1:PORT` started on a free port (its stderr piped), and a client
    connected to it once it listens (tried for up to 10 s)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with subprocess.Popen([*command, "--tcp", f"127.0.0.1:{port}"], stderr=subprocess.PIPE) as process:
        for _ in range(200):
            try:
                client = socket.create_connection(("127.0.0.1", port))
                break
            except ConnectionRefusedError:
                time.sleep(0.05)
        else:
            raise AssertionError(f"nothing listens on port {port} after 10 s")
        with client:
            yield process, client


def fp16_gpt2(folder: Path) -> Path:
    """GPT-2 small's config.json in fp16, written in `folder` (its vocabulary padded to Megatron's
    multiple of 128 as a config is read): the fp16 Megatron runs' model in the bucket-kernel and
    clipping tests."""
    import json

    config = {
        "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
        "vocab_size": 50257, "torch_dtype": "float16",
    }  # fmt: skip
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return path
