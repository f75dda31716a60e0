"""A built transformers model's IR, the one way every reader makes it: the model's inputs
(inputs.py), one forward recorded (library.record), its layers (layers.py) under a provenance, and
the model's tensor-parallel plan anchored at its own module paths (library.anchored).

extract() reads a configuration's model through it; the tests and the tools/hf_*.py reports read
the models they build themselves through it, so that what they check is what a translation reads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from modtrans._version import __version__
from modtrans.hf import blocks, classes, layers, library
from modtrans.ir.document import ModelIR, Provenance

PRODUCER = "transformers configuration (meta device)"


@dataclass(frozen=True, slots=True)
class Read:
    """A built model read: its IR, the inputs its forward ran on, the recording the IR came from,
    and its tensor-parallel plan ({} where the configuration has none)."""

    ir: ModelIR
    given: dict[str, Any]
    recorded: library.Recorded
    plan: dict[str, str]


def read(
    model: Any,
    batch: int,
    sequence: int,
    targets: int | None = None,
    *,
    file: str = "",
    sha256: str | None = None,
    size: int = 0,
) -> Read:
    """`model` (library.build's, on meta) read at `batch` x `sequence` tokens (`targets`: a decoder's
    length where it differs): one forward recorded, its IR's provenance naming `file`, its
    SHA-256 and `size` in bytes (a configuration's; empty for a model built in code)."""
    given = library.inputs(model, batch, sequence, targets)
    recorded = library.record(model, given)
    provenance = Provenance(
        file=file,
        sha256=sha256,
        size=size,
        producer=PRODUCER,
        producer_version=classes.VERSION,
        ir_version=0,
        opset={},
        graph=recorded.cls,
        batch=batch,
        input_shapes=dict(recorded.inputs),
        tool=f"modtrans {__version__}",
        architecture_only=True,
    )
    shape = blocks.shape_of(model.config, masks=recorded.masks)
    shape = replace(shape, eager=blocks.eager_only(type(model)))
    ir = ModelIR(provenance, tuple(layers.layers(recorded, shape)))
    plan = library.anchored(library.tp_plan(model.config), model)
    return Read(ir, given, recorded, plan)
