"""The registry of outputs: each format or dialect a module that registers what it writes.

An `Output` says its name (the --format and the --dialect it answers to), which plans it accepts
(`refuse`: the reason it cannot say a plan, or None), how a plan becomes the workload it holds
(`project`) and how that workload becomes text (`render`) checked (`check`). An
output written from the plan itself (Chakra traces) has neither: the pipeline projects nothing
for it. The pipeline and `modtrans.translate` ask the registry; none of them names a format.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from modtrans.cost import Unit
from modtrans.diagnostics import Diagnostic
from modtrans.plan import Plan
from modtrans.strategy import Parallelism
from modtrans.workload.model import Dialect, Workload


class Format(enum.StrEnum):
    """The shipped formats (--format); a format registered elsewhere is a name of its own."""

    TEXT = "text"  # the workload file, in the dialect's text
    JSON = "json"  # workload JSON (schemas/workload.schema.json)
    CHAKRA_ET = "chakra-et"  # one Chakra execution trace per NPU (ASTRA-sim 2.x)


Project = Callable[[Plan, Parallelism], Workload]
"""A plan as the workload a file holds; raises plan.ProjectionError for what it cannot say."""

Render = Callable[[Workload, Dialect, list[Diagnostic], str | None], str | None]
"""A workload as text for a dialect; None says it cannot be written, what the writer refuses
added to the list, located at the last argument (the model: no text exists to point into)."""

Check = Callable[[str, Workload, Dialect, bool], list[Diagnostic]]
"""The findings on text `render` wrote from the workload, as its consumer would read it: a quick
check of what the text can get wrong, or (the last argument, --check full) the text read back."""


def _accepts_all(plan: Plan) -> str | None:
    return None


@dataclass(frozen=True)
class Ticks:
    """The unit an output's consumer reads compute times in, why, and what to do about another:
    the default tick of the output, and X508 where another is given."""

    unit: Unit
    why: str  # completes "compute times are in ns ticks; ..."
    hint: str


@dataclass(frozen=True)
class Output:
    """One output: its format, the dialect it writes for (None: any dialect, the same bytes),
    its acceptance rule, its projection, its writer and its checker."""

    format: str
    dialect: Dialect | None
    summary: str
    project: Project | None = None  # None: written from the plan (traces), no workload projected
    render: Render | None = None
    refuse: Callable[[Plan], str | None] = _accepts_all
    traces: bool = False  # one file per rank, from the plan (outputs.trace_files)
    ticks: Ticks | None = None  # None: compute times are in the tick asked for (default ns)
    check: Check | None = None  # None: nothing in the text to check (JSON holds every field)

    @property
    def name(self) -> str:
        return self.format if self.dialect is None else f"{self.format}/{self.dialect.value}"


class UnknownOutput(ValueError):
    """A --format, or a --format and --dialect pair, that no output registers."""


REGISTRY: dict[tuple[str, Dialect | None], Output] = {}


def register(output: Output) -> Output:
    """Add `output` to the registry (a format of its own, or a dialect of a format); a second
    output of the same name replaces the first."""
    REGISTRY[(output.format, output.dialect)] = output
    return output


def unregister(output: Output) -> None:
    """Remove `output` (a test's own format, registered for the test's length)."""
    REGISTRY.pop((output.format, output.dialect), None)


def get(format: str, dialect: Dialect | str | None = None) -> Output:
    """The output that writes `format` for `dialect` (default ASTRA-sim 1.0's): the dialect's
    own, else the format's for any dialect. UnknownOutput names those there are."""
    wanted = Dialect(dialect) if dialect is not None else Dialect.ASTRA_SIM
    found = REGISTRY.get((format, wanted)) or REGISTRY.get((format, None))
    if found is not None:
        return found
    if any(f == format for f, _ in REGISTRY):
        known = ", ".join(
            sorted(o.dialect.value for o in REGISTRY.values() if o.format == format and o.dialect)
        )
        raise UnknownOutput(f"--format {format} has no --dialect {wanted.value} (it has {known})")
    raise UnknownOutput(f"no --format {format} (there are {', '.join(formats())})")


def formats() -> list[str]:
    """Every --format registered, the shipped ones first, in their order."""
    names = list(dict.fromkeys(f for f, _ in REGISTRY))
    shipped = [f.value for f in Format if f.value in names]
    return shipped + sorted(n for n in names if n not in shipped)


def outputs() -> list[Output]:
    """Every registered output, by format then dialect."""
    order = {name: i for i, name in enumerate(formats())}
    return sorted(REGISTRY.values(), key=lambda o: (order[o.format], o.dialect or ""))
