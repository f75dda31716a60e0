"""What a translation writes, checked before it is written, and the all-or-nothing write.

The workload text (validated as a consumer would read it) or workload JSON, with its .meta.json;
or one Chakra trace per rank, PREFIX.comm_groups.json and PREFIX.et-meta.json, the set checked
across ranks as `modtrans validate` checks it (SELF_CHECK). Nothing is written when an output
would overwrite one of the inputs (unless forced), and either every file is written or none.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modtrans.diagnostics import Diagnostic, diagnostic, has_errors
from modtrans.fileio import Content, file_ids, is_file_output, write_all
from modtrans.progress import task as progress_task
from modtrans.request import UsageError
from modtrans.sidecar import SET_SUFFIX, SUFFIX, describe

if TYPE_CHECKING:  # a text or JSON output never loads the trace writer (protobuf): 25 ms
    from modtrans.plan import Plan

Files = list[tuple[Path, Content]]

SELF_CHECK = 64
"""Up to this many ranks, every trace written is decoded and checked across ranks before it is
saved; above, the matching across ranks is decided on the plan itself (plan/check.py), which
decides the same for traces made from it, and the first rank of SAMPLE programs is checked node
by node."""

SAMPLE = 4
"""Programs whose first rank a set over SELF_CHECK ranks checks node by node: the first and the
last (a pipeline's embedding and its head) and those evenly between. Every program's trace is made
by the same encoder from the same kind of plan; checking all 35 of a 280-rank pipeline took as
long as making them (some 30 s of GPT 530B's 85 at TP 8 x PP 35, bench/bench_bigpipe.py)."""


def sample(programs: int) -> list[int]:
    """The SAMPLE programs, of `programs`, whose first rank a large set checks node by node."""
    if programs <= SAMPLE:
        return list(range(programs))
    return sorted({round(i * (programs - 1) / (SAMPLE - 1)) for i in range(SAMPLE)})


def text_files(
    text: str,
    output: str | None,
    metadata: dict[str, Any],
    meta: str | Path | None,
    found: Sequence[Diagnostic],
) -> tuple[Files, dict[str, Any]]:
    """The output file (none for standard output: None or "-") and its provenance, `meta` or
    OUTPUT.meta.json beside a file output, the pair naming each other (sidecar.py), the
    provenance only when nothing failed; and that provenance."""
    files: Files = []
    to_file = output not in (None, "-")
    if to_file:
        files.append((Path(str(output)), text))
    described = {**metadata, "output": describe(str(output), text)} if to_file else metadata
    beside = to_file and is_file_output(str(output))  # no /dev/null.meta.json
    target = Path(meta) if meta is not None else (Path(f"{output}{SUFFIX}") if beside else None)
    if target is not None and not has_errors(found):
        files.append((target, json.dumps(described, indent=1) + "\n"))
    return files, described


def trace_prefix(output: str, model: str) -> Path:
    """PREFIX of the traces PREFIX.<npu>.et: `output`, or in a folder (an existing one, or a
    name ending in /) the model's name: <folder>/<model>."""
    prefix = Path(output)
    if prefix.is_dir() or output.endswith("/"):
        prefix = prefix / model_stem(model)
    return prefix


def new_folder(output: str) -> Path | None:
    """The folder `output` names that does not exist yet, made when the traces are written: a
    name ending in / says it is a folder (`-o traces/`), which a user expects made, as `mkdir -p`
    would; None for an existing folder or a PREFIX (whose folder must exist: a typo is not made)."""
    folder = Path(output)
    return folder if output.endswith("/") and not folder.exists() else None


def model_stem(model: str) -> str:
    """The model's name for file names: a built-in's name, or the ONNX file's stem."""
    return Path(model).stem if model.lower().endswith(".onnx") else Path(model).name


def trace_files(
    plan: Plan,
    prefix: Path,
    metadata: dict[str, Any],
    *,
    passes: int = 1,
    dims: Sequence[int] | None = None,
    made: bool = False,
    full: bool = False,
) -> tuple[Files, dict[str, Any], list[Diagnostic]]:
    """The traces, PREFIX.comm_groups.json and PREFIX.et-meta.json (in that order), the provenance
    the last holds, and what the checks across ranks find in them (errors and warnings); `made`:
    PREFIX's folder is made when they are written (new_folder); `full`: --check full (checked).
    Raises UsageError for what the trace writer refuses (--passes, --network-dims)."""
    described = {
        **metadata,
        "duration_micros": "compute time in whole microseconds, the rounding carried from node to node "
        "(durations sum to the compute time within 1 us); ASTRA-sim 2.x multiplies by 1000",
        "passes": passes,
        "comm_groups": {str(g.id): g.purpose for g in plan.groups()},
    }
    from modtrans import chakra

    shape = None if dims is None else tuple(dims)
    try:
        files: Files = list(
            chakra.files(
                plan,
                prefix,
                passes=passes,
                metadata={**described, "network_dims": shape},
                dims=shape,
                tick_ns=1.0,  # translated in ns
                lazy=True,
                made=made,
            )
        )
    except chakra.ChakraError as error:
        raise UsageError(str(error)) from None
    found = checked(plan, files, full)  # what we write passes the checks users run
    files.append((Path(f"{prefix}{SET_SUFFIX}"), json.dumps(described, indent=1) + "\n"))
    return files, described, found


def checked(plan: Plan, outputs: list[tuple[Path, Any]], full: bool = False) -> list[Diagnostic]:
    """The trace-set checks of `modtrans validate` on `outputs` (the traces, then the group file)
    before they are written. Up to SELF_CHECK ranks every trace is made here and kept for the
    write; above, the first rank of SAMPLE programs is checked alone, by the process that will
    write its program (chakra.checked: decoded and its graph checked; with `full`, each node's
    attributes too, which the encoder writes alike for every node of a kind: tests/test_chakra*),
    and the plan's ranks matched on the plan."""
    from modtrans.chakra.validate import check_set
    from modtrans.plan.check import consistency

    group_path, groups = outputs[-1]
    traces = outputs[:-1]
    if len(traces) > SELF_CHECK:
        from modtrans.chakra import checked as sampled

        used = sorted(set(plan.program_of))
        firsts = [plan.program_of.index(used[i]) for i in sample(len(used))]
        with progress_task("checking a trace of some programs", total=1) as advance:
            found = sampled(traces, firsts, full=full)
            advance()
        found += [diagnostic(code, message, path=str(group_path)) for code, message in consistency(plan)]
        return [d for d in found if d.severity <= 2]
    with progress_task("encoding the traces checked", total=len(traces)) as advance:
        for rank, (path, data) in enumerate(traces):
            if callable(data):
                outputs[rank] = (path, joined(data()))
            advance()
    whole = {str(path): data for path, data in outputs[:-1]}
    return [d for d in check_set(whole, groups, str(group_path)) if d.severity <= 2]


def joined(made: bytes | Iterable[bytes]) -> bytes:
    """A trace whole, from what its maker gives (chakra.files(lazy=True): the pieces to write)."""
    return made if isinstance(made, bytes) else b"".join(made)


def said(written: Sequence[Path]) -> str:
    """What a translation wrote, every file named: `wrote 8 Chakra traces: P.0.et .. P.7.et,
    P.comm_groups.json (--comm-group-configuration), P.et-meta.json and t.svg`, or `wrote
    r50.txt, r50.txt.meta.json and t.svg`."""
    traces = [p for p in written if p.suffix == ".et"]
    rest = [
        f"{p} (--comm-group-configuration)" if p.name.endswith(".comm_groups.json") else str(p)
        for p in written
        if p.suffix != ".et"
    ]
    if traces:
        plural = "trace" if len(traces) == 1 else "traces"
        names = f"{traces[0]}" if len(traces) == 1 else f"{traces[0]} .. {traces[-1]}"
        rest.insert(0, f"{len(traces)} Chakra {plural}: {names}")
    return "wrote " + (f"{', '.join(rest[:-1])} and {rest[-1]}" if len(rest) > 1 else "".join(rest))


def refuse_inputs(targets: Sequence[Path], inputs: Sequence[str | Path], force: bool) -> None:
    """UsageError when an output is one of the inputs (a built-in model's packaged file too)."""
    if force:
        return
    files = file_ids(inputs)  # each input looked at once, each target once: 1,026 traces, 1,026 stats
    if not files:
        return
    for target in targets:
        if file_ids([target]) & files:
            raise UsageError(f"refusing to overwrite the input {target}; pass --force")


def save(outputs: Sequence[tuple[Path, Content]], folder: Path | None = None) -> list[Diagnostic]:
    """Write every output or none; a failure is the F003 naming the file. `folder` (new_folder)
    is made first, and removed again when nothing could be written in it."""
    if not outputs:
        return []
    try:
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
        write_all(outputs)
    except OSError as error:
        if folder is not None:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty: nothing of the user's is removed
        where = error.filename or outputs[0][0]
        reason = error.strerror or str(error)
        return [diagnostic("F003", f"cannot write {where}: {reason}", path=str(where))]
    return []
