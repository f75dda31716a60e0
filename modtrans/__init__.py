"""ModTrans: read, write, validate and translate ASTRA-sim layer-wise workload files.

>>> import modtrans
>>> result = modtrans.parse(open("Resnet50_DataParallel.txt", newline="").read())
>>> text = modtrans.write(result.workload, dialect="chakra")
>>> problems = modtrans.validate(text, dialect="chakra")
>>> ir = modtrans.extract("resnet50")                  # an .onnx path, or a built-in architecture
>>> workload = modtrans.translate("resnet50", params="weights", batch=8).workload
>>> result = modtrans.translate("llama-3-8b", tp=2, pp=2, format="chakra-et", output="out/llama")
>>> rows = modtrans.sweep("llama-3-8b", gpus=16, global_batch=64, tp="1,2,4,8", output="out/sweep")

Each name is imported on first use (PEP 562): `import modtrans`, which every command of the
command line does, costs the package alone, not the translation pipeline behind `translate`
(about 100 modules; tests/test_startup.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modtrans._version import __version__

if TYPE_CHECKING:
    from modtrans.api import translate
    from modtrans.comm import CommType, Policy
    from modtrans.diagnostics import Diagnostic, DiagnosticError, Severity, Span
    from modtrans.pipeline import Translation, extract
    from modtrans.request import UsageError
    from modtrans.sweep import sweep
    from modtrans.workload.model import Dialect, Header, Layer, Phase, Workload
    from modtrans.workload.parse import ParseResult, parse, parse_workload
    from modtrans.workload.validate import validate
    from modtrans.workload.write import write

# name -> the module that defines it
_HOME = {
    "translate": "modtrans.api",
    "CommType": "modtrans.comm",
    "Policy": "modtrans.comm",
    "Diagnostic": "modtrans.diagnostics",
    "DiagnosticError": "modtrans.diagnostics",
    "Severity": "modtrans.diagnostics",
    "Span": "modtrans.diagnostics",
    "Translation": "modtrans.pipeline",
    "extract": "modtrans.pipeline",
    "UsageError": "modtrans.request",
    "Dialect": "modtrans.workload.model",
    "Header": "modtrans.workload.model",
    "Layer": "modtrans.workload.model",
    "Phase": "modtrans.workload.model",
    "Workload": "modtrans.workload.model",
    "ParseResult": "modtrans.workload.parse",
    "parse": "modtrans.workload.parse",
    "parse_workload": "modtrans.workload.parse",
    "validate": "modtrans.workload.validate",
    "write": "modtrans.workload.write",
    "sweep": "modtrans.sweep",  # the function; its package's module is callable too (modtrans/sweep/)
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'modtrans' has no attribute {name!r}")
    value = getattr(__import__(home, fromlist=[name]), name)  # -X importtime sees it, not importlib's
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


__all__ = [
    "CommType",
    "Diagnostic",
    "DiagnosticError",
    "Dialect",
    "Header",
    "Layer",
    "ParseResult",
    "Phase",
    "Policy",
    "Severity",
    "Span",
    "Translation",
    "UsageError",
    "Workload",
    "__version__",
    "extract",
    "parse",
    "parse_workload",
    "sweep",
    "translate",
    "validate",
    "write",
]
