"""The README and the manual (docs/) run as shown: every command of their `sh` blocks exits as the
page says, every option of their `synopsis` blocks exists, the Python blocks run and pass ruff, and
the paths and import claims they make are true.

The pages' convention, for `sh` blocks (docs/index.md states it for writers):
- each command (a line and its `\\` continuations) runs in order, in one fresh folder per page, where
  `fixtures/` is the repository's (the pages say "from the repository root");
- a comment on a command may say `exit: N` (the status it must end with, else 0), `needs: WHAT`
  (a simulator binary or network: not run) or `slow` (run by `-m slow` only);
- the fast suite runs them in this process (the app, as `modtrans` runs it); `-m slow` runs each
  through bash, as a reader does;
- of a chain `A && B`, `pip ...` and `python -m pytest ...` are the installation this test runs in,
  not run again; `modtrans` and `mkdir` run; any other program must say what it `needs:`.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modtrans.cli import app
from tests.test_module_maps import held, named

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = frozenset({"modtrans", "mkdir"})
INSTALLED = frozenset({"pip", "python"})  # the environment this test runs in is that installation


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _blocks(language: str, page: Path) -> list[tuple[int, str]]:
    """Each fenced block of that language in the page: the line its body starts on, its body."""
    text = _text(page)
    return [
        (text.count("\n", 0, m.start(1)) + 1, m.group(1))
        for m in re.finditer(rf"^```{language}\n(.*?)^```", text, re.S | re.M)
    ]


@dataclass(frozen=True)
class Command:
    where: str  # page:line
    shell: str  # the parts this test runs, joined by &&
    exit: int
    needs: str | None
    slow: bool


def _commands(page: Path) -> list[Command]:
    commands = []
    for start, body in _blocks("sh", page):
        lines = body.splitlines()
        index = 0
        while index < len(lines):
            first = index
            joined = lines[index]
            while joined.rstrip().endswith("\\") and index + 1 < len(lines):
                index += 1
                joined = joined.rstrip()[:-1] + " " + lines[index].strip()
            index += 1
            words = shlex.split(joined, comments=True) if joined.strip() else []
            if not words or words[0].startswith("#"):
                continue
            code, _, comment = joined.partition(" #")
            needs = re.search(r"\bneeds: ([\w.-]+)", comment)
            status = re.search(r"\bexit: (\d+)", comment)
            parts = [p.strip() for p in code.split("&&")]
            run = [p for p in parts if p.split()[0] not in INSTALLED]
            if not run:
                continue
            strangers = [p.split()[0] for p in run if p.split()[0] not in RUN]
            where = f"{page.relative_to(ROOT)}:{start + first}"
            assert not strangers or needs, f"{where}: say what `{strangers[0]}` needs (# needs: ...)"
            commands.append(
                Command(
                    where,
                    " && ".join(run),
                    int(status.group(1)) if status else 0,
                    needs.group(1) if needs else None,
                    re.search(r"\bslow\b", comment) is not None,
                )
            )
    return commands


def _folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh folder holding the repository's fixtures, and an environment whose `modtrans` is this
    checkout's."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "fixtures").symlink_to(ROOT / "fixtures")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    shim = bin_ / "modtrans"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m modtrans "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "CI")}
    env |= {
        "PATH": f"{bin_}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
        "COLUMNS": "100",
    }
    return work, env


def _in_process(shell: str, work: Path, runner: CliRunner) -> tuple[int, str]:
    """A command's `&&` chain run in this process, as bash would run it: `mkdir -p`, and `modtrans`
    through its app, with globs expanded and `> FILE` written from its standard output."""
    for part in shell.split("&&"):
        words = shlex.split(part)
        if words[0] == "mkdir":
            for folder in words[1:]:
                if folder != "-p":
                    (work / folder).mkdir(parents=True, exist_ok=True)
            continue
        target = None
        if ">" in words:
            target, words = words[words.index(">") + 1], words[: words.index(">")]
        args = [w2 for w in words[1:] for w2 in (sorted(glob.glob(w, root_dir=work)) if "*" in w else [w])]
        result = runner.invoke(app, args, env={"NO_COLOR": "1", "COLUMNS": "100"})
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        if target is not None:
            (work / target).write_text(result.stdout)
        if result.exit_code != 0:
            return result.exit_code, result.output
    return 0, ""


def _run_page(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, slow: bool) -> int:
    """Run the page's commands in order in a fresh folder: in this process (the fast suite), or each
    through bash and a `modtrans` on the PATH, slow ones included (`-m slow`)."""
    work, env = _folder(tmp_path)
    monkeypatch.chdir(work)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    runner = CliRunner()
    ran = 0
    for command in _commands(page):
        if command.needs or (command.slow and not slow):
            continue
        if slow:
            done = subprocess.run(
                ["bash", "-c", command.shell], cwd=work, env=env, capture_output=True, text=True, check=False
            )
            status, output = done.returncode, done.stdout[-2000:] + done.stderr[-2000:]
        else:
            status, output = _in_process(command.shell, work, runner)
        assert status == command.exit, (
            f"{command.where}: `{command.shell}` exited {status}, the page says {command.exit}\n{output}"
        )
        ran += 1
    return ran


def _ids(pages: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in pages]


RUNNABLE = [p for p in PAGES if any(not c.needs and not c.slow for c in _commands(p))]
SHOWN = [p for p in PAGES if any(not c.needs for c in _commands(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=_ids(RUNNABLE))
def test_every_command_a_page_shows_runs_as_shown(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _run_page(page, tmp_path, monkeypatch, slow=False) > 0


@pytest.mark.slow
@pytest.mark.parametrize("page", SHOWN, ids=_ids(SHOWN))
def test_every_command_a_page_shows_runs_in_a_shell_as_shown(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a reader runs them: bash, an installed `modtrans`, the slow commands too."""
    assert _run_page(page, tmp_path, monkeypatch, slow=True) > 0


def test_the_pages_show_commands_and_mark_those_not_run() -> None:
    """The convention is in use: many commands run, and each one not run says why."""
    commands = [c for page in PAGES for c in _commands(page)]
    assert sum(1 for c in commands if not c.needs and not c.slow) >= 30
    assert {c.needs for c in commands if c.needs} <= {"astra-sim", "astra-sim-1", "simai", "network"}


def test_the_quick_start_is_what_ci_runs() -> None:
    """The README's second quick-start command is the one .ci/run runs, byte for byte."""
    quick = [body.strip() for _, body in _blocks("sh", ROOT / "README.md")][:2]
    assert quick[0] == "pip install -e . && modtrans translate resnet50"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert quick[1] in ci


def test_the_real_model_suite_is_described_as_its_manifest_holds() -> None:
    """The README and docs/development.md give the real-model suite's size; the manifest
    (fixtures/real/models.json) decides it, so a model added or removed there fails here."""
    manifest = json.loads((ROOT / "fixtures" / "real" / "models.json").read_text(encoding="utf-8"))
    files, wheels = len(manifest["models"]), len(manifest["packages"])
    development = " ".join(_text(ROOT / "docs" / "development.md").split())
    assert f"translates {files} ONNX files that {wheels} pinned PyPI wheels ship" in development
    assert f"{files} ONNX files from pinned PyPI wheels" in " ".join(_text(ROOT / "README.md").split())
    assert "python -m pytest -m real -n 0" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_is_a_front_page() -> None:
    readme = _text(ROOT / "README.md")
    assert len(readme.splitlines()) < 200
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme))
    assert linked >= {str(p.relative_to(ROOT)) for p in PAGES[1:]}


def test_every_link_between_pages_resolves() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", _text(page)):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)}: {target} does not exist"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation but `-` and `_`
    dropped, spaces as `-`; a repeated one numbered (`-1`, `-2`)."""
    text = re.sub(r"^```.*?^```", "", _text(page), flags=re.S | re.M)  # no headings inside code
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found, n = slug, 0
        while found in anchors:
            n += 1
            found = f"{slug}-{n}"
        anchors.add(found)
    return anchors


def test_every_link_to_a_section_finds_it() -> None:
    """A link's `#anchor` names a heading of the page it points to: a section renamed or moved
    fails here, not with a reader landing at the top of a page."""
    checked = 0
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([^)#:\s]*)#([^)\s]+)\)", _text(page)):
            linked = (page.parent / target) if target else page
            assert anchor in _anchors(linked), f"{page.relative_to(ROOT)}: {target}#{anchor} names no heading"
            checked += 1
    assert checked > 20


def test_the_python_examples_run_from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    blocks = [(page, body) for page in PAGES for _, body in _blocks("python", page)]
    assert blocks
    for page, body in blocks:
        exec(compile(body, str(page), "exec"), {})


def test_the_python_examples_pass_ruff(tmp_path: Path) -> None:
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    for index, (_, body) in enumerate(b for page in PAGES for b in _blocks("python", page)):
        example = tmp_path / f"example_{index}.py"
        example.write_text(body)
        done = subprocess.run(
            [ruff, "check", "--config", str(ROOT / "pyproject.toml"), str(example)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout


def _synopses() -> list[list[str]]:
    """Each `modtrans ...` line of the synopsis blocks, with its indented `[--option]` continuations,
    and each command the sh blocks run."""
    commands: list[list[str]] = []
    for page in PAGES:
        for _, body in _blocks("synopsis", page):
            for line in body.splitlines():
                words = line.split("#", 1)[0].replace("&&", " ")
                if line.startswith("modtrans "):
                    commands.append(shlex.split(words))
                elif line.startswith(" ") and line.strip().startswith("[") and commands:
                    commands[-1] += shlex.split(words)
        for command in _commands(page):
            for part in command.shell.split("&&"):
                if part.split()[0] == "modtrans":
                    commands.append(shlex.split(part))
    return commands


def test_every_documented_option_exists() -> None:
    runner = CliRunner()
    helps: dict[str, str] = {}
    checked = 0
    for words in _synopses():
        if len(words) < 2 or words[1] in ("zoo", "cost"):
            continue
        command = words[1]
        if command not in helps:
            helps[command] = runner.invoke(app, [command, "--help"], env={"COLUMNS": "300"}).output
        for word in words[2:]:
            for option in re.findall(r"--[a-z][a-z-]*", word.split("=", 1)[0]):
                checked += 1
                assert option in helps[command], f"docs: `modtrans {command} {option}` does not exist"
    assert checked > 40  # the synopses and examples: 47 options in the README's when this was written


def _layout() -> dict[str, str]:
    """The source layout block (docs/development.md): each module's path and what its line says."""
    found = re.search(r"## Source layout\n\n```\n(.*?)```", _text(ROOT / "docs" / "development.md"), re.S)
    assert found is not None
    entries: dict[str, str] = {}
    parents: list[tuple[int, str]] = []
    for line in found.group(1).splitlines():
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
    import each library are exactly those the source layout names."""
    claims: dict[str, set[str]] = {}
    for path, said in _layout().items():
        for libraries in re.findall(r"only importer of ([\w /]+?)\)", said):
            for library in libraries.split(" / "):
                claims.setdefault(library.strip(), set()).add(path)
        if found := re.search(r"\((\w+): here(?:, ([^)]*?))? only\)", said):
            folder = path.rsplit("/", 1)[0]
            also = re.split(r", | and ", found.group(2) or "")
            claims[found.group(1)] = {path, *(f"{folder}/{a.strip()}" for a in also if a.strip())}
    assert {"onnx", "lark", "typer", "jsonschema", "pygls", "lsprotocol", "rich"} <= set(claims)
    for library, claimed in claims.items():
        actual = _importers(library)
        inside = {a for a in actual if any(a == c or (c.endswith("/") and a.startswith(c)) for c in claimed)}
        assert inside == actual, f"docs: {library} is imported by {sorted(actual - inside)} too"
        assert all(any(a == c or a.startswith(c) for a in actual) for c in claimed), (library, claimed)


def test_the_source_layout_names_every_module() -> None:
    """Each package of modtrans/ in the source layout: its entries and what its own line names
    bare (`cli/  ... common.py (...), values.py ...`) are exactly the modules it holds."""
    entries, wrong = _layout(), {}
    for folder in sorted({p.parent for p in (ROOT / "modtrans").rglob("__init__.py")}):
        prefix = str(folder.relative_to(ROOT)) + "/"
        said = {path[len(prefix) :] for path in entries if path.startswith(prefix) and path != prefix}
        said = {name for name in said if name.count("/") == name.endswith("/")}  # children only
        said |= named(entries.get(prefix, ""))
        if said != (there := held(folder)):
            wrong[prefix] = {"not named": sorted(there - said), "gone": sorted(said - there)}
    assert wrong == {}, f"docs/development.md's source layout: {wrong}"


def _helps() -> str:
    runner = CliRunner()
    commands = ("translate", "extract", "inspect", "diff", "validate", "fmt", "convert", "lsp", "fetch")
    return "\n".join(runner.invoke(app, [c, "--help"], env={"COLUMNS": "300"}).output for c in commands)


def test_every_path_the_pages_or_help_name_exists() -> None:
    """Every repository path the pages or a command's help name is there: a module moved or renamed
    fails here, not with a reader following the text."""
    pattern = r"(?<![/\w.])((?:modtrans|tests|bench|tools|schemas|grammar|fixtures|docs)/[\w./-]*\w/?)"
    named = {p for page in PAGES for p in re.findall(pattern, _text(page))}
    named |= set(re.findall(r"\b(modtrans/[\w./-]*\w/?)", _helps()))
    assert len(named) > 20
    missing = sorted(p for p in named if not (ROOT / p).exists() and "*" not in p)
    assert missing == []


def test_the_help_asks_for_no_extra_that_adds_nothing() -> None:
    """An extra the help names must bring something (`chakra` is kept empty)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in re.findall(r"modtrans\[(\w+)\]", _helps()):
        assert extras.get(extra), f"--help asks for modtrans[{extra}], which installs nothing"


LAYOUTS = ROOT / "docs" / "llm-layouts.md"


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
        (("--tp", "2", "--recompute", "full"), True),
        (("--tp", "2", "--recompute", "selective"), False),
    ],
)
def test_the_llm_layouts_astra_sim_text_takes_are_those_the_manual_lists(
    options: tuple[str, ...], written: bool
) -> None:
    """docs/llm-layouts.md: ASTRA-sim 1.0 text is refused for pipelines, micro-batches, ZeRO-3,
    expert parallelism and selective recomputation; tensor, sequence and data parallelism with
    ZeRO-1/2, and full recomputation, it takes."""
    listed = (
        "refused (D310) for pipelines, micro-batches, ZeRO-3, expert parallelism and selective recomputation"
    )
    assert listed in " ".join(_text(LAYOUTS).split())
    result = CliRunner().invoke(app, ["translate", "gpt2", *options])
    assert (result.exit_code == 0) is written, result.output
    assert written or "D310" in result.output
