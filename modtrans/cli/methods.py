"""The compiled code of the methods dataclasses generate, kept between runs as Python keeps a
module's bytecode.

`@dataclass` writes each class's __init__, __repr__, __eq__, __hash__ and (frozen) __setattr__ and
__delattr__ as source text and compiles it with exec() when the class is created, in every process:
a `translate` imports about 100 of the library's dataclasses, and exec() of source text, nearly all
of it their methods, was 379 M of the 873 M instructions its imports cost (43 %; callgrind, CPython
3.11; 3.12 and 3.13 compile them the same way, 3.9-4.5 M instructions a frozen class). This module
gives the dataclasses module an exec() that looks the text up in a table of code objects first (what
compile() made of that exact text, so the method is the one exec() would have made) and compiles
only what the table lacks. The table is one marshal file beside the package's bytecode (importlib's
cache_from_source: its __pycache__, or PYTHONPYCACHEPREFIX), named for the interpreter's cache tag
and optimization level, with a part per module read when that module makes its first class. The
program writes it back (save()) when a run compiled something new, unless bytecode is not written
(PYTHONDONTWRITEBYTECODE, -B). Only the program's classes are looked up (PROGRAM); an unreadable or
foreign file is an empty table, an unwritable folder a table not kept.
"""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import sys
from importlib.util import cache_from_source
from pathlib import Path
from types import CodeType
from typing import Any

PROGRAM = ("modtrans.", "typer.")
"""The modules whose classes are looked up: the library's and the command line's (typer makes 5 in
every command, 7 % of `modtrans --help`)."""

_raw: dict[str, bytes] | None = None  # the table's file: module -> its methods, marshalled
_parts: dict[str, dict[str, CodeType]] = {}  # the modules' methods read so far: source -> code
_used: dict[str, set[str]] = {}  # per module, the methods this run made
_new: set[str] = set()  # the modules one of whose methods this run compiled


def table_path() -> Path:
    """The table's file: beside the package's bytecode, for this interpreter and -O level."""
    package = Path(__file__).resolve().parent.parent / "__init__.py"
    folder = Path(cache_from_source(str(package))).parent
    return folder / f"dataclass-methods.{sys.implementation.cache_tag}.opt{sys.flags.optimize}.marshal"


def install() -> None:
    """Give the dataclasses module the exec() that reads the table."""
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # its module global shadows the builtin


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    """exec() for the dataclasses module: the program's generated methods from the table."""
    if not isinstance(source, str):
        builtins.exec(source, globals, locals)
        return
    module = globals.get("__name__") if isinstance(globals, dict) else None
    if not isinstance(module, str) or not module.startswith(PROGRAM):
        builtins.exec(_compiled(source), globals, locals)  # not exec(source): it would take our flags
        return
    part = _part(module)
    code = part.get(source)
    if code is None:
        code = part[source] = _compiled(source)
        _new.add(module)
    _used.setdefault(module, set()).add(source)
    builtins.exec(code, globals, locals)


def _compiled(source: str) -> CodeType:
    """What exec() compiles `source` to in the dataclasses module, whose code has no __future__
    flag to pass on (this module's `annotations` would make every annotation a string)."""
    return compile(source, "<string>", "exec", dont_inherit=True)


def _part(module: str) -> dict[str, CodeType]:
    """A module's methods, read from the table when first asked for (`modtrans --help` reads
    none; a command, those of the modules it imports)."""
    global _raw
    part = _parts.get(module)
    if part is not None:
        return part
    if _raw is None:
        _raw = _read()
    part = _parts[module] = {}
    if module not in _raw:
        return part
    try:
        loaded = marshal.loads(_raw[module])
    except (ValueError, EOFError, TypeError):
        return part
    if isinstance(loaded, dict):
        part.update((k, v) for k, v in loaded.items() if isinstance(k, str) and isinstance(v, CodeType))
    return part


def _read() -> dict[str, bytes]:
    try:
        table = marshal.loads(table_path().read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return {}
    if not isinstance(table, dict):
        return {}
    return {k: v for k, v in table.items() if isinstance(k, str) and isinstance(v, bytes)}


def save() -> None:
    """Write the table back when this run compiled a method it lacked (atomically; a folder that
    cannot be written keeps no table). A module whose methods changed keeps those this run made:
    importing a module makes every one of its classes, so the others are of its older sources."""
    if not _new or sys.dont_write_bytecode:
        return
    from modtrans import temporaries  # a run that compiled nothing writes nothing

    table = dict(_raw or {})
    for module in _new:
        used = _used[module]
        table[module] = marshal.dumps({k: v for k, v in _parts[module].items() if k in used})
    path = table_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = temporaries.open_partial(path)
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(marshal.dumps(table))
        temporaries.commit(temporary, path)
    except OSError:
        temporaries.discard(temporary)
