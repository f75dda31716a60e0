"""The table of compiled dataclass methods (modtrans/cli/methods.py): a run after the first compiles
none of the library's generated methods, each method it makes from the table is the one CPython's
dataclasses module makes without it, and a translation writes the same bytes either way. Every run
here is a real `python -m modtrans` (or the library imported) in a fresh process, its bytecode and
table under a temporary PYTHONPYCACHEPREFIX."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

TRANSLATE = ["translate", "llama-3-8b", "--tp", "2", "--pp", "2", "--sp", "--dialect", "simai", "-q"]
# the modules whose dataclasses a SimAI translation makes, imported directly (no modtrans.cli)
MODULES = [
    "modtrans.plan.model", "modtrans.ir.document", "modtrans.llm.config", "modtrans.workload.model",
    "modtrans.strategy.llm.unit", "modtrans.strategy.draft", "modtrans.cost.base", "modtrans.request",
]  # fmt: skip
_METHODS = ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__")

_DUMP = """
import dataclasses, importlib, inspect, json, sys
METHODS = sys.argv[2].split(",")
if sys.argv[1] == "table":
    from modtrans.cli import methods
def code(c):
    consts = [code(k) if hasattr(k, "co_code") else repr(k) for k in c.co_consts]
    return [c.co_code.hex(), consts, c.co_names, c.co_varnames, c.co_freevars, c.co_flags, c.co_filename]
out = {}
for name in sys.argv[3:]:
    for cls in vars(importlib.import_module(name)).values():
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == name):
            continue
        for method in METHODS:
            f = cls.__dict__.get(method)
            if inspect.isfunction(f):
                f = inspect.unwrap(f)
                out[f"{name}.{cls.__qualname__}.{method}"] = [code(f.__code__), repr(f.__defaults__),
                                                            repr(f.__kwdefaults__), repr(f.__annotations__)]
if sys.argv[1] == "table":
    out["compiled"] = bool(methods._new)
print(json.dumps(out))
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(tmp / "pycache"), **extra)
    if "PYTHONDONTWRITEBYTECODE" not in extra:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _table(env: dict[str, str]) -> Path:
    probe = "from modtrans.cli import methods; print(methods.table_path())"
    return Path(_run(["-c", probe], env).stdout.strip())


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A folder whose pycache prefix holds the table one translation wrote."""
    tmp = tmp_path_factory.mktemp("methods")
    env = _env(tmp)
    _run(["-m", "modtrans", *TRANSLATE, "-o", str(tmp / "first.txt")], env)
    return tmp, env


def test_the_first_run_writes_the_table_and_the_next_compiles_nothing(
    warm: tuple[Path, dict[str, str]],
) -> None:
    tmp, env = warm
    table = {m: marshal.loads(part) for m, part in marshal.loads(_table(env).read_bytes()).items()}
    assert "modtrans.plan.model" in table
    assert all(m.startswith(("modtrans.", "typer.")) for m in table)
    assert sum(map(len, table.values())) > 200  # about 100 classes, 2 to 6 methods each
    assert all(source.startswith("def __create_fn__(") for part in table.values() for source in part)
    probe = (
        "import sys\nfrom modtrans.cli import main, methods\nsys.argv = ['modtrans', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nprint(bool(methods._new))"
    )
    again = _run(["-c", probe, *TRANSLATE, "-o", str(tmp / "again.txt")], env)
    assert again.stdout.strip().splitlines()[-1] == "False"
    assert (tmp / "again.txt").read_bytes() == (tmp / "first.txt").read_bytes()


def test_each_method_from_the_table_is_the_one_cpython_makes(warm: tuple[Path, dict[str, str]]) -> None:
    """The same code, constants, names, defaults and annotations as the dataclasses module's own
    exec() of the same class in a process without the table."""
    _, env = warm
    with_table = json.loads(_run(["-c", _DUMP, "table", ",".join(_METHODS), *MODULES], env).stdout)
    without = json.loads(_run(["-c", _DUMP, "plain", ",".join(_METHODS), *MODULES], env).stdout)
    assert with_table.pop("compiled") is False  # every method came from the table
    assert len(without) > 150
    assert with_table == without


def test_an_unreadable_table_is_an_empty_one(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = _table(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not a marshal table\x00\xff")
    _run(["-m", "modtrans", *TRANSLATE, "-o", str(tmp_path / "w.txt")], env)
    assert isinstance(marshal.loads(path.read_bytes()), dict)  # rewritten whole
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".modtrans-partial")]


def test_no_table_is_written_where_bytecode_is_not(tmp_path: Path) -> None:
    env = _env(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    _run(["-m", "modtrans", *TRANSLATE, "-o", str(tmp_path / "w.txt")], env)
    assert not _table(env).exists()


def test_only_the_librarys_classes_are_looked_up(tmp_path: Path) -> None:
    """A dataclass of another module (here __main__) is compiled as CPython compiles it (its
    annotations objects, not the strings this module's __future__ import would make them), and
    kept out of the table."""
    probe = (
        "import dataclasses\nfrom modtrans.cli import methods\n"
        "@dataclasses.dataclass(frozen=True)\nclass Mine:\n    zq_unique_field: int\n"
        "assert Mine(1) == Mine(1) and hash(Mine(2)) == hash(Mine(2))\n"
        "assert Mine.__init__.__annotations__ == {'zq_unique_field': int, 'return': None}\n"
        "print(any('zq_unique_field' in s for part in methods._parts.values() for s in part))"
    )
    assert _run(["-c", probe], _env(tmp_path)).stdout.strip() == "False"
