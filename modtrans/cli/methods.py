"""The compiled code of the methods dataclasses generate, kept between runs as Python keeps a
module's bytecode.

`@dataclass` writes each class's __init__, __repr__, __eq__, __hash__ and (frozen) __setattr__ and
__delattr__ as source text and compiles it with exec() when the class is created, in every process:
a `translate` imports about 100 of the library's dataclasses, and parsing and compiling their
methods was 379 M of the 873 M instructions its imports cost (43 %; callgrind, CPython 3.11; 3.12
and 3.13 compile the same way). This module gives the dataclasses module an exec() that looks the
text up in a table of code objects first (what compile() made of that exact text, so the method is
the one exec() would have made) and compiles only what the table lacks. The table is one marshal
file beside the package's bytecode (importlib's cache_from_source: its __pycache__, or
PYTHONPYCACHEPREFIX), named for the interpreter's cache tag and optimization level; the program
writes it back (save()) when a run compiled something new, unless bytecode is not written
(PYTHONDONTWRITEBYTECODE, -B). Only the library's classes are looked up; an unreadable or foreign
file is an empty table, an unwritable folder a table not kept.
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

from modtrans import temporaries

LIMIT = 4096
"""The most methods the table keeps: past it (the library's sources changed often, as in
development) a save keeps only what this run used."""

_table: dict[str, CodeType] = {}
_used: set[str] = set()
_compiled = False  # whether this run compiled a method the table lacked


def table_path() -> Path:
    """The table's file: beside the package's bytecode, for this interpreter and -O level."""
    package = Path(__file__).resolve().parent.parent / "__init__.py"
    folder = Path(cache_from_source(str(package))).parent
    return folder / f"dataclass-methods.{sys.implementation.cache_tag}.opt{sys.flags.optimize}.marshal"


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    """exec() for the dataclasses module: the library's generated methods from the table."""
    global _compiled
    if not isinstance(source, str) or not isinstance(globals, dict):
        builtins.exec(source, globals, locals)
        return
    if not str(globals.get("__name__", "")).startswith("modtrans."):
        builtins.exec(source, globals, locals)
        return
    code = _table.get(source)
    if code is None:
        # the flags exec() would compile with: the dataclasses module's, which has no __future__
        code = _table[source] = compile(source, "<string>", "exec", dont_inherit=True)
        _compiled = True
    _used.add(source)
    builtins.exec(code, globals, locals)


def install() -> None:
    """Read the table and give the dataclasses module the exec() that reads it."""
    try:
        loaded = marshal.loads(table_path().read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        loaded = None
    if isinstance(loaded, dict):
        _table.update((k, v) for k, v in loaded.items() if isinstance(k, str) and isinstance(v, CodeType))
    dataclasses.exec = _exec  # type: ignore[attr-defined]  # its module global shadows the builtin


def save() -> None:
    """Write the table back when this run compiled a method it lacked (atomically; a folder that
    cannot be written keeps no table)."""
    if not _compiled or sys.dont_write_bytecode:
        return
    keep = _table if len(_table) <= LIMIT else {k: v for k, v in _table.items() if k in _used}
    path = table_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = temporaries.open_partial(path)
    except OSError:
        return
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(marshal.dumps(keep))
        temporaries.commit(temporary, path)
    except OSError:
        temporaries.discard(temporary)
