"""Layering (issue 23): generic utilities never import a domain module, and no module imports
itself through others (no cycles). Read from the source with ast, every import at any depth (a function's lazy
import and a TYPE_CHECKING one count too)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "modtrans"

GENERIC = frozenset(
    {
        "modtrans._version",
        "modtrans.diagnostics",
        "modtrans.digest",
        "modtrans.dtypes",
        "modtrans.fileio",
        "modtrans.heap",
        "modtrans.integers",
        "modtrans.jsonsource",
        "modtrans.limits",
        "modtrans.progress",
        "modtrans.resources",
        "modtrans.stopping",
        "modtrans.temporaries",
    }
)
"""Modules that know nothing of workloads, models, plans or the command line."""


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _statements(path: Path, modules: set[str]) -> list[tuple[str, list[str], bool]]:
    """Each import statement of `path`, at any depth (lazy and TYPE_CHECKING ones too), as the
    module it names (relative imports resolved), those of its names that are modules themselves,
    and whether it names anything else (a function, a class: `import x` always does)."""
    here = _module(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    statements: list[tuple[str, list[str], bool]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            statements += [(a.name, [], True) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            named = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules]
            statements.append((base, named, len(named) < len(node.names)))
    return statements


@functools.cache
def _imports() -> dict[str, frozenset[str]]:
    """Each module under modtrans/ -> the modtrans modules it imports (`from modtrans import x`
    is modtrans.x; `from modtrans.a import b` is modtrans.a, or modtrans.a.b where that is a
    module; relative imports resolved)."""
    table: dict[str, frozenset[str]] = {}
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        found = {n for base, named, _ in _statements(path, modules) for n in (base, *named)}
        table[_module(path)] = frozenset(n for n in found if n == "modtrans" or n.startswith("modtrans."))
    return table


@pytest.mark.parametrize("module", sorted(GENERIC))
def test_a_generic_module_imports_only_generic_modules(module: str) -> None:
    imported = _imports().get(module)
    if imported is None:
        pytest.skip(f"{module} does not exist")
    assert imported <= GENERIC, f"{module} imports {sorted(imported - GENERIC)}"


def test_the_table_of_imports_sees_lazy_and_relative_imports() -> None:
    """The test's own reading: report's lazy `from modtrans._version import ...` is seen."""
    assert "modtrans._version" in _imports()["modtrans.report"]
    assert "modtrans.diagnostics" in _imports()["modtrans.fileio"]


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("modtrans.report", "modtrans"),  # the root package imports the whole library
        ("modtrans.cost.scalesim", "modtrans.fetch"),  # the cache folder is resources.cache_dir
    ],
)
def test_a_module_does_not_import_what_sits_above_it(module: str, forbidden: str) -> None:
    assert forbidden not in _imports()[module]


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines, its docstring left out (a signature of typed options is a table)."""
    body = node.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno
    assert end is not None
    return end - body[0].lineno + 1


def test_no_function_is_over_60_lines() -> None:
    """Issue 23's bound: a function that does one thing fits on a screen."""
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({_body_lines(node)} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _body_lines(node) > 60
    ]
    assert long == []


def test_the_command_line_is_thin() -> None:
    """The CLI parses and prints: no module of it over 300 lines (issue 23)."""
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (PACKAGE / "cli").glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 300} == {}


@functools.cache
def _module_graph() -> dict[str, frozenset[str]]:
    """Each module -> the modules it names in an import at any depth: `from a import b` is a.b
    where that is a module, else a. The package a submodule sits in is not an edge of its own
    (Python loads it first whatever the order), so a package that loads its submodules to fill a
    registry is a cycle only when a submodule imports a name from the package."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, frozenset[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        here = _module(path)
        found = {n for base, named, rest in _statements(path, modules) for n in (*named, *([base] * rest))}
        graph[here] = frozenset(n for n in found if n in modules and n != here)
    return graph


def _cycles(graph: dict[str, frozenset[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_no_import_cycles() -> None:
    """No module imports, through others, itself: every layer sits on the ones below it."""
    assert [sorted(c) for c in _cycles(_module_graph())] == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The finder on a graph drawn by hand: a two-module cycle, a three-module one, a chain."""
    graph = {
        "a": frozenset({"b"}),
        "b": frozenset({"a", "c"}),
        "c": frozenset({"d"}),
        "d": frozenset({"e"}),
        "e": frozenset({"c"}),
        "f": frozenset({"a"}),
    }
    assert sorted(sorted(c) for c in _cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


def test_the_module_graph_reads_type_checking_and_lazy_imports() -> None:
    """A TYPE_CHECKING import and a function's import are edges (outputs.py has both)."""
    assert {"modtrans.plan", "modtrans.chakra"} <= _module_graph()["modtrans.outputs"]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package(module: str, modules: set[str]) -> str:
    """The package a module sits in (a package's own __init__ sits in itself)."""
    return module if module in _packages(frozenset(modules)) else module.rpartition(".")[0]


@functools.cache
def _packages(modules: frozenset[str]) -> frozenset[str]:
    return frozenset(_module(p) for p in PACKAGE.rglob("__init__.py"))


def _private_uses(source: str, here: str, modules: set[str]) -> list[str]:
    """Each private name module `here` (its text `source`) takes from a module of another package:
    `from a.b import _c`, or `b._c` where b names a module imported from elsewhere (`from a import
    b`, `import a.b as b`)."""
    mine = _package(here, modules)
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in modules:
                    aliases[a.asname or a.name] = full
                elif _private(a.name) and node.module in modules and _package(node.module, modules) != mine:
                    found.append(f"{here}:{node.lineno} imports {full}")
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and _private(node.attr):
            source_module = aliases.get(node.value.id)
            if source_module is not None and _package(source_module, modules) != mine:
                found.append(f"{here}:{node.lineno} uses {source_module}.{node.attr}")
    return found


def test_no_module_takes_a_private_name_from_another_package() -> None:
    """A name with a leading underscore is its package's own: another package calls a public,
    documented function instead (issue 38: estimate/ took strategy/llm's helpers by their private
    names). Within a package, its modules share what they like."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    found = [
        use
        for path in sorted(PACKAGE.rglob("*.py"))
        for use in _private_uses(path.read_text(encoding="utf-8"), _module(path), modules)
    ]
    assert found == []


def test_the_private_name_finder_finds_both_forms() -> None:
    """The finder on a text written for it, read as estimate/units.py: a private name imported
    from another package, one used through a module of another package; the same package's and
    a public name pass."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    source = (
        "from modtrans.strategy.llm import build\n"
        "from modtrans.strategy.llm.buckets import _pad, Shard\n"
        "from modtrans.estimate.context import _same_package\n"
        "def f():\n"
        "    build._units(1)\n"
        "    build.plan(1)\n"
    )
    uses = _private_uses(source, "modtrans.estimate.units", modules)
    assert uses == [
        "modtrans.estimate.units:2 imports modtrans.strategy.llm.buckets._pad",
        "modtrans.estimate.units:5 uses modtrans.strategy.llm.build._units",
    ]


def _importers(library: str) -> set[str]:
    """The modules under modtrans/ that import the third-party `library` (at any depth)."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    return {
        _module(path)
        for path in PACKAGE.rglob("*.py")
        if any(base.split(".")[0] == library for base, _, _ in _statements(path, modules))
    }


def test_transformers_is_imported_where_the_hf_map_says() -> None:
    """hf/__init__.py's map: transformers in classes.py (its loader hook runs at that import,
    before any model class loads), inputs.py's processors and audio.py's feature extractors alone;
    torch inside hf/ alone."""
    assert _importers("transformers") == {"modtrans.hf.classes", "modtrans.hf.inputs", "modtrans.hf.audio"}
    assert {m for m in _importers("torch") if not m.startswith("modtrans.hf.")} == set()
