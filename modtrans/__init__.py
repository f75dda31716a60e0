"""ModTrans: read, write, validate and translate ASTRA-sim layer-wise workload files.

>>> import modtrans
>>> result = modtrans.parse(open("Resnet50_DataParallel.txt", newline="").read())
>>> text = modtrans.write(result.workload, dialect="chakra")
>>> problems = modtrans.validate(text, dialect="chakra")
>>> ir = modtrans.extract("resnet50")                  # an .onnx path, or a built-in architecture
>>> workload = modtrans.translate("resnet50", params="weights", batch=8).workload
>>> result = modtrans.translate("llama-3-8b", tp=2, pp=2, format="chakra-et", output="out/llama")
>>> rows = modtrans.sweep("llama-3-8b", gpus=16, global_batch=64, tp="1,2,4,8", output="out/sweep")
"""

from modtrans._version import __version__
from modtrans.api import translate
from modtrans.comm import CommType, Policy
from modtrans.diagnostics import Diagnostic, DiagnosticError, Severity, Span
from modtrans.pipeline import Translation, extract
from modtrans.request import UsageError
from modtrans.workload.model import Dialect, Header, Layer, Phase, Workload
from modtrans.workload.parse import ParseResult, parse, parse_workload
from modtrans.workload.validate import validate
from modtrans.workload.write import write

# isort: split
from modtrans.sweep import sweep  # the function, bound over the package's name (modtrans/sweep/)

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
