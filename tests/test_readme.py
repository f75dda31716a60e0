"""The README's own examples: the Python block runs and passes the project's ruff settings; every
command line in a shell block names only options the command has."""

from __future__ import annotations

import functools
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modtrans.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_the_python_examples_run_from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    for block in _blocks("python"):
        exec(compile(block, "README.md", "exec"), {})


def test_the_python_examples_pass_ruff(tmp_path: Path) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    for index, block in enumerate(_blocks("python")):
        example = tmp_path / f"example_{index}.py"
        example.write_text(block)
        done = subprocess.run(
            [ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(example)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout


def _command_lines() -> list[list[str]]:
    """Each `modtrans ...` line of the shell blocks, with its indented `[--option]` continuations."""
    commands: list[list[str]] = []
    for block in _blocks("sh"):
        for line in block.splitlines():
            body = line.split("#", 1)[0].replace("&&", " ")
            if line.startswith("modtrans "):
                commands.append(shlex.split(body))
            elif line.startswith(" ") and line.strip().startswith("[") and commands:
                commands[-1] += shlex.split(body)
    return commands


def test_every_documented_option_exists() -> None:
    runner = CliRunner()
    helps: dict[str, str] = {}
    checked = 0
    for words in _command_lines():
        if len(words) < 2 or words[1] in ("zoo", "cost"):
            continue
        command = words[1]
        if command not in helps:
            helps[command] = runner.invoke(app, [command, "--help"]).output
        for word in words[2:]:
            for option in re.findall(r"--[a-z][a-z-]*", word.split("=", 1)[0]):
                checked += 1
                assert option in helps[command], f"README: `modtrans {command} {option}` does not exist"
    assert checked > 40  # the synopses and examples: 47 options when this was written


def _layout() -> dict[str, str]:
    """The README's layout block: each module's path (modtrans/...) and what its line says."""
    found = re.search(r"## Layout\n\n```\n(.*?)```", README, re.S)
    assert found is not None
    block = found.group(1)
    entries: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = re.match(r"( *)(\S+)(?:\s+(.*))?$", line)
        if match is None:
            if entries and line.strip():
                entries[next(reversed(entries))] += " " + line.strip()  # a folded description
            continue
        indent, name, said = len(match.group(1)), match.group(2), match.group(3) or ""
        if not name.endswith(("/", ".py")):
            if entries:
                entries[next(reversed(entries))] += " " + line.strip()
            continue
        parents = [(i, p) for i, p in parents if i < indent]
        path = "".join(p for _, p in parents) + name
        entries[path] = said
        if name.endswith("/"):
            parents.append((indent, name))
    return entries


@functools.cache
def _imports() -> dict[str, frozenset[str]]:
    """Each module under modtrans/ and the absolute names it imports (at any depth, type-checking
    only too)."""
    import ast

    table = {}
    for path in (ROOT / "modtrans").rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        table[str(path.relative_to(ROOT))] = frozenset(names)
    return table


def _importers(library: str) -> set[str]:
    return {
        module
        for module, names in _imports().items()
        if any(n == library or n.startswith(library + ".") for n in names)
    }


def test_the_layouts_only_importer_claims_are_true() -> None:
    """`(only importer of onnx)` beside a module or package, `(rich: here, ...)`: the modules that
    import each library are exactly those the README names (it once said rich was in two)."""
    claims: dict[str, set[str]] = {}
    for path, said in _layout().items():
        where = path  # modtrans/... : the block nests the package's modules under `modtrans/`
        for libraries in re.findall(r"only importer of ([\w /]+?)\)", said):
            for library in libraries.split(" / "):
                claims.setdefault(library.strip(), set()).add(where)
        if found := re.search(r"\((\w+): here(?:, ([^)]*?))? only\)", said):
            folder = where.rsplit("/", 1)[0]
            also = re.split(r", | and ", found.group(2) or "")
            claims[found.group(1)] = {where, *(f"{folder}/{a.strip()}" for a in also if a.strip())}
    assert {"onnx", "lark", "typer", "jsonschema", "pygls", "lsprotocol", "rich"} <= set(claims)
    for library, claimed in claims.items():
        actual = _importers(library)
        inside = {a for a in actual if any(a == c or (c.endswith("/") and a.startswith(c)) for c in claimed)}
        assert inside == actual, f"README: {library} is imported by {sorted(actual - inside)} too"
        assert all(any(a == c or a.startswith(c) for a in actual) for c in claimed), (library, claimed)


def _helps() -> str:
    runner = CliRunner()
    commands = ("translate", "extract", "inspect", "diff", "validate", "fmt", "convert", "lsp", "fetch")
    return "\n".join(runner.invoke(app, [c, "--help"], env={"COLUMNS": "300"}).output for c in commands)


def test_every_path_the_readme_or_help_names_exists() -> None:
    """Every repository path the README or a command's help names is there: a module moved or
    renamed fails here, not with a reader following the text."""
    named = set(
        re.findall(
            r"(?<![/\w.])((?:modtrans|tests|bench|tools|schemas|grammar|fixtures)/[\w./-]*\w/?)", README
        )
    )
    named |= set(re.findall(r"\b(modtrans/[\w./-]*\w/?)", _helps()))
    assert len(named) > 20
    missing = sorted(p for p in named if not (ROOT / p).exists() and "*" not in p)
    assert missing == []


def test_the_help_asks_for_no_extra_that_adds_nothing() -> None:
    """`--format chakra-et` once said it needed modtrans[chakra], an extra kept empty: an extra
    the help names must bring something."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in re.findall(r"modtrans\[(\w+)\]", _helps()):
        assert extras.get(extra), f"--help asks for modtrans[{extra}], which installs nothing"


@pytest.mark.parametrize(
    ("options", "written"),
    [
        (("--tp", "2"), True),
        (("--tp", "2", "--sp"), True),
        (("--pp", "2"), False),
        (("--tp", "2", "--global-batch", "4"), False),
        (("--dp", "2"), True),
        (("--tp", "2", "--dp", "2"), True),
        (("--dp", "2", "--zero", "1"), True),
        (("--dp", "2", "--zero", "3"), False),
        (("--tp", "2", "--sp", "--dp", "2", "--zero", "2"), True),
    ],
)
def test_the_llm_layouts_astra_sim_text_takes_are_those_the_readme_lists(
    options: tuple[str, ...], written: bool
) -> None:
    """The README: ASTRA-sim 1.0 text is refused for pipelines, micro-batches, ZeRO-3 and expert
    parallelism; tensor, sequence and data parallelism with ZeRO-1/2 it takes (`--dp 2` was refused
    before issue 23; `--sp` and ZeRO-1/2 until a column's further collectives got lines of their
    own, plan/lines.py)."""
    listed = "refused (D310) for pipelines, micro-batches,\n  ZeRO-3 and expert parallelism"
    assert listed in README
    result = CliRunner().invoke(app, ["translate", "gpt2", *options])
    assert (result.exit_code == 0) is written, result.output
    assert written or "D310" in result.output
