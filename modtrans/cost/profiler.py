"""A PyTorch profiler trace of a training step, as measured per-layer times (`--per-layer-times`).

The trace is the Chrome/Kineto JSON `torch.profiler.profile(..., with_modules=True,
with_stack=True).export_chrome_trace(FILE)` writes (torch/profiler/profiler.py; the event fields
are Kineto's: `ph: X` spans with `ts` and `dur` in microseconds, `cat`, `pid`, `tid`, `args`).
Record it as

    with torch.profiler.profile(activities=[CPU, CUDA], with_modules=True, with_stack=True) as p:
        loss = model(**batch).loss; loss.backward()
    p.export_chrome_trace("step.json")

What is read:

  modules    `python_function` spans named `nn.Module: CLASS_N`, one per module call. A module
             with no module inside it that is an Embedding, a Linear (or transformers' Conv1D), or
             a norm (a class named *Norm*) is a layer the IR has; the k-th such call of a kind is
             the IR's k-th layer of that kind (EMBEDDING, LINEAR, NORM), in the order the model
             runs them (the LLM builder writes the IR in transformers' forward order; an ONNX
             export is in its trace order). Recorded names win: a `user_annotation` span named
             exactly as an IR layer (`record_function(name)` in a module hook) is that layer.
  forward    on a GPU trace, the `kernel` events whose launch (a `cuda_runtime` event of the same
             `correlation`) falls inside the module's span on its thread, summed; on a CPU-only
             trace, the span itself
  backward   the autograd nodes (`autograd::engine::evaluate_function: *Backward*` spans) whose
             `Sequence number` is one of the module's forward ops' (PyTorch records the forward
             op's sequence number on the node it creates: torch/csrc/autograd/function.h), their
             kernels or spans summed; split into input and weight gradient by the cost model's
             ratio for the layer (one backward kernel computes both for an addmm's node)

A trace of several steps repeats the module calls: n times the IR's layers of a kind are n steps,
averaged. Layers between modules (the attention core, activations, residual adds) keep the model's
times.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modtrans.cost.base import CostError, CostModel
from modtrans.ir.document import Kind, ModelIR

Table = dict[str, dict[str, float]]
_KINDS = (Kind.EMBEDDING, Kind.LINEAR, Kind.NORM)
_BACKWARD = "autograd::engine::evaluate_function: "


def looks_like(text: str) -> bool:
    """A Chrome trace JSON (an object with `traceEvents`), told from a CSV or an AIOB profile."""
    head = text.lstrip()[:4096]
    return head.startswith("{") and '"traceEvents"' in text[:1_000_000]


def _kind(module: str) -> Kind | None:
    """The IR kind of a module class as the profiler names it (`Conv1D_3` -> LINEAR)."""
    cls = module.rsplit("_", 1)[0]
    if "Embedding" in cls:
        return Kind.EMBEDDING
    if cls.endswith(("Linear", "Conv1D")):
        return Kind.LINEAR
    if "Norm" in cls:
        return Kind.NORM
    return None


@dataclass(order=True)
class Span:
    start: float
    end: float
    thread: tuple[Any, Any] = field(compare=False)
    name: str = field(compare=False)
    cat: str = field(compare=False)
    args: Mapping[str, Any] = field(compare=False)


def _spans(events: Iterable[Any]) -> list[Span]:
    out = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        ts, dur, name = e.get("ts"), e.get("dur"), e.get("name")
        if not isinstance(ts, int | float) or not isinstance(dur, int | float) or not isinstance(name, str):
            continue
        raw = e.get("args")
        args: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        out.append(
            Span(
                float(ts),
                float(ts) + max(float(dur), 0.0),
                (e.get("pid"), e.get("tid")),
                name,
                str(e.get("cat")),
                args,
            )
        )
    out.sort()
    return out


class Trace:
    """A profiler trace's spans, and the time spent in each: its kernels' on a GPU trace (the
    kernels whose launch falls inside the span on its thread), the span itself on a CPU trace."""

    def __init__(self, events: Iterable[Any]) -> None:
        self.spans = spans = _spans(events)
        kernels: dict[Any, float] = {}
        for s in spans:
            if s.cat == "kernel" and "correlation" in s.args:
                key = s.args["correlation"]
                kernels[key] = kernels.get(key, 0.0) + (s.end - s.start)
        self.gpu = bool(kernels)
        self.launches: dict[tuple[Any, Any], tuple[list[float], list[float]]] = {}
        for s in spans:
            if s.cat in ("cuda_runtime", "cuda_driver") and s.args.get("correlation") in kernels:
                starts, times = self.launches.setdefault(s.thread, ([], []))
                starts.append(s.start)
                times.append(kernels[s.args["correlation"]])

    @classmethod
    def from_text(cls, text: str) -> Trace:
        try:
            document = json.loads(text)
        except ValueError as error:
            raise CostError(f"not a profiler trace: {error}") from None
        events = document.get("traceEvents") if isinstance(document, dict) else None
        if not isinstance(events, list):
            raise CostError("a profiler trace is a JSON object with a traceEvents list")
        return cls(events)

    def busy_us(self, span: Span) -> float:
        """Microseconds of work in the span."""
        if not self.gpu:
            return span.end - span.start
        starts, times = self.launches.get(span.thread, ([], []))
        return sum(times[bisect.bisect_left(starts, span.start) : bisect.bisect_right(starts, span.end)])


def _leaf_modules(spans: Sequence[Span]) -> list[Span]:
    """The module calls with no module call inside them, in the order they started."""
    modules = [s for s in spans if s.cat == "python_function" and s.name.startswith("nn.Module: ")]
    leaves = []
    for i, m in enumerate(modules):
        later = (o for o in modules[i + 1 :] if o.start < m.end)
        if not any(o.thread == m.thread for o in later):
            leaves.append(m)
    return leaves


def _sequence_numbers(spans: Sequence[Span], module: Span) -> set[int]:
    lo = bisect.bisect_left(spans, Span(module.start, module.start, module.thread, "", "", {}))
    found = set()
    for s in spans[lo:]:
        if s.start > module.end:
            break
        number = s.args.get("Sequence number")
        if (
            s.cat == "cpu_op"
            and s.thread == module.thread
            and s.end <= module.end
            and isinstance(number, int)
        ):
            found.add(number)
    return found


def parse(text: str, ir: ModelIR, model: CostModel) -> tuple[Table, list[str]]:
    """The measured seconds per IR layer and phase, and warnings."""
    trace = Trace.from_text(text)
    spans, clock = trace.spans, trace.busy_us
    backward: dict[int, list[Span]] = {}
    for s in spans:
        number = s.args.get("Sequence number")
        if s.cat == "cpu_op" and s.name.startswith(_BACKWARD) and isinstance(number, int):
            backward.setdefault(number, []).append(s)
    measured = _by_name(spans, ir) or _by_order(_leaf_modules(spans), ir)
    if not measured:
        raise CostError(
            "the profiler trace names no layer of the model: record it with with_modules=True "
            "(nn.Module spans) or record_function(layer name)"
        )
    totals: dict[str, list[float]] = {}
    for name, calls in measured.items():
        forward = sum(clock(c) for c in calls)
        numbers = set().union(*(_sequence_numbers(spans, c) for c in calls))
        back = sum(clock(b) for n in numbers for b in backward.get(n, ()))
        totals[name] = [forward / len(calls), back / len(calls)]
    return _phases(totals, ir, model), []


def _by_name(spans: Sequence[Span], ir: ModelIR) -> dict[str, list[Span]]:
    names = {x.name for x in ir.layers}
    found: dict[str, list[Span]] = {}
    for s in spans:
        if s.cat == "user_annotation" and s.name in names:
            found.setdefault(s.name, []).append(s)
    return found


def _by_order(leaves: Sequence[Span], ir: ModelIR) -> dict[str, list[Span]]:
    """The k-th module call of a kind is the IR's k-th layer of that kind (n steps: n x as many)."""
    found: dict[str, list[Span]] = {}
    for kind in _KINDS:
        layers = [x.name for x in ir.layers if x.kind is kind]
        calls = [m for m in leaves if _kind(m.name.removeprefix("nn.Module: ")) is kind]
        if not calls and not layers:
            continue
        if not layers or len(calls) % len(layers):
            raise CostError(
                f"the profiler trace has {len(calls)} {kind.value.lower()} module calls and the model "
                f"{len(layers)} {kind.value.lower()} layers: not the same model, or not whole steps"
            )
        for i, call in enumerate(calls):
            found.setdefault(layers[i % len(layers)], []).append(call)
    return found


def _phases(totals: Mapping[str, Sequence[float]], ir: ModelIR, model: CostModel) -> Table:
    """Microseconds forward and backward -> seconds per phase, the backward split as the model
    splits the layer's into input and weight gradient."""
    table: Table = {}
    for name, (forward, back) in totals.items():
        t = model.times(ir.layer(name))
        grads = t.input_grad + t.weight_grad
        entry = table.setdefault(name, {"fwd": forward * 1e-6})
        if back:
            share = t.input_grad / grads if grads else 1.0
            entry["ig"] = back * share * 1e-6
            entry["wg"] = back * (1 - share) * 1e-6
    return table
