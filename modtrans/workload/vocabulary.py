"""The text format's vocabulary, one table each: the header keys and the columns of a layer line.

The parser, the writer, the JSON form, the checks, diff and the language server read their
spellings, names and positions from here (grammar/workload.lark states the same syntax; a test
holds its KEY_* terminals to HEADER_KEYS). No other module imports this one's users: it imports
nothing of the workload package, so model.py can use it too.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- line 1: header keys --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeaderKey:
    """A `key: value` header parameter.

    key        the spelling in the text (SimAI 2024-12 also wrote `pp_comm` without the colon)
    field      the Header attribute and the JSON form's member (workload.schema.json)
    diff       the name diff gives a difference in it
    kind       "int" (one value) or "list" (a count, then that many 0-based layer indices)
    keywords   the parallelism keywords (Policy values) that take it
    dialects   the consumers that read the key (Dialect values; ASTRA-sim and Chakra read the DLRM
               layer by position, `HYBRID_DLRM 4`, and Chakra's keywords take no key)
    written    its place in the canonical header line (the writer's order)
    detail     what the language server says of it in a completion
    required   SimAI's transformer header needs it (else "Input workload format mismatch", D307)
    """

    key: str
    field: str
    diff: str
    kind: str
    keywords: frozenset[str]
    dialects: frozenset[str]
    written: int
    detail: str = "SimAI"
    required: bool = False

    @property
    def simai_only(self) -> bool:
        """A SimAI parameter no other consumer has a place for (D302, D310): not the DLRM layer,
        which the others read by position."""
        return self.dialects == _SIMAI and self.keywords == _TRANSFORMER


_SIMAI = frozenset({"simai"})
_TEXT = frozenset({"astra-sim", "simai"})
_TRANSFORMER = frozenset({"HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD"})
_FWD_IN_BCKWD = frozenset({"HYBRID_TRANSFORMER_FWD_IN_BCKWD"})
_DLRM = frozenset({"HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"})

# In the reader's order (the language server completes keys in it); diff reports header
# differences in this order too, the DLRM layer before SimAI's keys.
HEADER_KEYS: tuple[HeaderKey, ...] = (
    HeaderKey(
        "model_parallel_NPU_group:",
        "model_parallel_group",
        "model_parallel_NPU_group",
        "int",
        _TRANSFORMER,
        _TEXT,
        1,
        "NPUs per model-parallel group",
        required=True,
    ),
    HeaderKey(
        "checkpoints:",
        "checkpoints",
        "checkpoints",
        "list",
        _FWD_IN_BCKWD,
        _TEXT,
        7,
        "count, then the 0-based layers checkpointed",
    ),
    HeaderKey(
        "checkpoint_initiates:",
        "checkpoint_initiates",
        "checkpoint_initiates",
        "list",
        _FWD_IN_BCKWD,
        _TEXT,
        8,
        "count, then the 0-based layers that start recomputation",
    ),
    HeaderKey(
        "DLRM_LAST_BOTTOM_LAYER:",
        "dlrm_last_bottom_layer",
        "dlrm_last_bottom_layer",
        "int",
        _DLRM,
        _SIMAI,
        0,
        "SimAI: the last bottom-MLP layer (0-based)",
    ),
    HeaderKey("ep:", "ep", "ep", "int", _TRANSFORMER, _SIMAI, 2, required=True),
    HeaderKey("pp:", "pp", "pp", "int", _TRANSFORMER, _SIMAI, 3, required=True),
    HeaderKey("vpp:", "vpp", "vpp", "int", _TRANSFORMER, _SIMAI, 4, required=True),
    HeaderKey("ga:", "ga", "ga", "int", _TRANSFORMER, _SIMAI, 5, required=True),
    HeaderKey("all_gpus:", "all_gpus", "all_gpus", "int", _TRANSFORMER, _SIMAI, 6, required=True),
    HeaderKey("pp_comm:", "pp_comm", "pp_comm", "int", _TRANSFORMER, _SIMAI, 9),
)
KEY = {k.key: k for k in HEADER_KEYS}
"""Spelling -> key (`pp_comm` without its colon is KEY["pp_comm:"])."""
BY_FIELD = {k.field: k for k in HEADER_KEYS}
GROUP = BY_FIELD["model_parallel_group"]
DLRM = BY_FIELD["dlrm_last_bottom_layer"]
LISTS = tuple(k for k in HEADER_KEYS if k.kind == "list")
SIMAI_ONLY = tuple(k for k in HEADER_KEYS if k.simai_only)
"""ep, pp, vpp, ga, all_gpus, pp_comm: what Header.simai_parameters holds."""
WRITTEN = tuple(sorted(HEADER_KEYS, key=lambda k: k.written))


# -- lines 3...: the columns of a layer line -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """One of the 13 fields of a layer line (the 13th only under HYBRID_CUSTOMIZED).

    index      0-based position in the line
    name       the name messages give it ("forward compute time")
    title      the language server's hover title
    kind       "name", "int32", "uint64", "comm" or "policy": what a consumer reads it into
    unit       "ticks", "bytes" or "" (numbers.Kind follows from kind)
    phase      the Layer attribute of its phase ("fwd", "input_grad", "weight_grad"), or None
    path       where it lives in the JSON form's layer object
    diff       diff's name for it (--fields), None for the layer name (compared apart)
    meaning    what the hover says it is
    """

    index: int
    name: str
    title: str
    kind: str
    unit: str
    phase: str | None
    path: tuple[str, ...]
    diff: str | None
    meaning: str


_COMM_SIZE = (
    "bytes: the collective's whole buffer; an ALLGATHER's is one rank's part for ASTRA-sim, "
    "the gathered output for SimAI"
)


def _phase(start: int, phase: str, words: str, short: str, payload: str) -> tuple[Column, ...]:
    return (
        Column(
            start,
            f"{words} compute time",
            f"{words} compute time",
            "uint64",
            "ticks",
            phase,
            (phase, "compute_time"),
            f"{short}_compute",
            "simulator ticks",
        ),
        Column(
            start + 1,
            f"{words} comm type",
            f"{words} comm type",
            "comm",
            "",
            phase,
            (phase, "comm_type"),
            f"{short}_comm",
            f"the collective issued after the {words} compute",
        ),
        Column(
            start + 2,
            f"{words} comm size",
            f"{words} comm size",
            "uint64",
            "bytes",
            phase,
            (phase, "comm_size"),
            f"{short}_size",
            payload,
        ),
    )


COLUMNS: tuple[Column, ...] = (
    Column(
        0,
        "layer name",
        "layer name",
        "name",
        "",
        None,
        ("name",),
        None,
        "a label; every consumer reads it as a string, and names may repeat",
    ),
    Column(
        1,
        "reserved field",
        "reserved",
        "int32",
        "",
        None,
        ("reserved",),
        "reserved",
        "unused by every consumer; -1 by convention (SimAI 'oxc' files use 0..2)",
    ),
    *_phase(
        2,
        "fwd",
        "forward",
        "fwd",
        _COMM_SIZE,
    ),
    *_phase(5, "input_grad", "input-gradient", "ig", _COMM_SIZE),
    *_phase(8, "weight_grad", "weight-gradient", "wg", _COMM_SIZE),
    Column(
        11,
        "update time",
        "weight-gradient update time",
        "uint64",
        "ticks",
        None,
        ("update_time",),
        "update",
        "simulator ticks; also the fwd/ig update delay in ASTRA-sim 1.0; "
        "not scaled by --compute-scale; Chakra ignores it",
    ),
    Column(
        12,
        "layer parallelism",
        "per-layer parallelism",
        "policy",
        "",
        None,
        ("policy",),
        "policy",
        "read only under HYBRID_CUSTOMIZED: DATA, MODEL, HYBRID_DATA_MODEL or HYBRID_MODEL_DATA",
    ),
)
REQUIRED = 12
"""Fields every layer line has; the 13th (the policy) only under HYBRID_CUSTOMIZED."""
POLICY = COLUMNS[12].index
NUMBERS = tuple(c.index for c in COLUMNS if c.kind in ("int32", "uint64"))
"""1, 2, 4, 5, 7, 8, 10, 11: the reserved field, the times and the sizes."""
COMMS = tuple(c.index for c in COLUMNS if c.kind == "comm")
"""3, 6, 9: the comm types."""
PHASE_COLUMNS = {
    phase: tuple(c.index for c in COLUMNS if c.phase == phase)
    for phase in ("fwd", "input_grad", "weight_grad")
}
"""Phase -> its (compute time, comm type, comm size) columns."""
