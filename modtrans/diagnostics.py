"""Diagnostics: the one problem type every stage produces, and the catalog of stable codes."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Severity(enum.IntEnum):
    """How bad a finding is. The numbers are LSP's DiagnosticSeverity."""

    ERROR = 1
    WARNING = 2
    INFO = 3
    HINT = 4

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Span:
    """A 1-based region of a text file; end_column is exclusive (lark's Token convention)."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def at(cls, line: int, column: int, width: int = 1) -> Span:
        return cls(line, column, line, column + max(width, 1))


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding: what (code, severity, message), where (path, span) and how to fix it (hint)."""

    code: str
    severity: Severity
    message: str
    path: str | None = None
    span: Span | None = None
    hint: str | None = None

    def __str__(self) -> str:
        where = self.path or "<input>"
        if self.span is not None:
            where = f"{where}:{self.span.line}:{self.span.column}"
        return f"{where}: {self.severity.label} {self.code} {self.message}"


class DiagnosticError(Exception):
    """Raised by the convenience APIs that return a value or fail; carries every diagnostic."""

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        first = self.diagnostics[0] if self.diagnostics else None
        super().__init__(str(first) if first else "invalid input")


@dataclass(frozen=True, slots=True)
class CodeInfo:
    """A catalog entry: default severity, a short title and a paragraph with a bad/good example."""

    code: str
    severity: Severity
    title: str
    explanation: str


CATALOG: dict[str, CodeInfo] = {}


def _code(code: str, severity: Severity, title: str, explanation: str) -> None:
    CATALOG[code] = CodeInfo(code, severity, title, explanation.strip())


def diagnostic(
    code: str,
    message: str,
    *,
    path: str | None = None,
    span: Span | None = None,
    hint: str | None = None,
    severity: Severity | None = None,
) -> Diagnostic:
    """Build a Diagnostic for a catalogued code, with the catalog's severity unless overridden."""
    info = CATALOG[code]
    return Diagnostic(code, severity or info.severity, message, path, span, hint)


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.severity is Severity.ERROR for d in diagnostics)


UNUSABLE = frozenset({"M801", "X501", "X506", "X507", "X511"})
"""Codes, besides every F code, that say an input cannot be read or used as given (a model file or
configuration modtrans cannot read, an option that does not fit the model): a command exits 2 on
them, as on a usage error, where other errors are findings, exit 1 (report.exit_code)."""


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO

# ---- F0xx: the file itself -----------------------------------------------------------------
_code(
    "F001",
    E,
    "file cannot be read",
    """
The path does not exist, is a directory, or cannot be opened. Nothing else is checked.
""",
)
_code(
    "F002",
    E,
    "not a text file",
    """
The file contains NUL bytes, so it is binary (an ONNX model, an archive, a Chakra .et trace),
not a workload text file. Workload files are plain ASCII text.
""",
)
_code(
    "F003",
    E,
    "file cannot be written",
    """
The output could not be written (permission, missing folder, disk full, a directory or socket in
its place). The original file, if any, is left untouched: ModTrans writes every output of a command
(a workload and its .meta.json, every Chakra trace) to temporary files `.NAME.<pid>-<id>.modtrans-partial`
beside them, then renames them all; on failure, Ctrl-C, SIGTERM or SIGHUP it removes them, and a
later run writing in the same folder removes those a killed (SIGKILL) run left. A symlink is
followed and its target replaced; a character device or FIFO is written through, never replaced.
""",
)

_code(
    "F005",
    E,
    "canonical form refused",
    """
`modtrans fmt` leaves a file alone when its canonical form would have a finding the file does not
have (the writer would change what a consumer reads). This is a ModTrans bug: please report it with
the file. The file is not rewritten.
""",
)

_code(
    "F007",
    E,
    "empty file",
    """
The input holds nothing, or only white space: not an ONNX model, a configuration or a workload,
whatever its name. The message names what the command reads (translate and extract: an ONNX model
or a Hugging Face config.json; validate, fmt and convert: a workload; inspect and diff: any of
them). Nothing is read or written; exit status 2, as for every file that cannot be read.
""",
)
_code(
    "F006",
    W,
    "metadata describes another output",
    """
`modtrans translate -o FILE` writes FILE and FILE.meta.json, and the metadata records FILE's name
and the SHA-256 of its bytes. When the two no longer agree (FILE edited or copied over since, or a
run killed between the two renames that write them), the provenance beside FILE is another run's:
its model, options and compute model may not be FILE's. `validate` and `diff` warn; translate
again to write both, or delete the stale .meta.json.
""",
)

# ---- P1xx: syntax ----------------------------------------------------------------------------
_code(
    "P101",
    E,
    "invalid UTF-8",
    """
The line holds bytes that are not UTF-8 (workload files are ASCII). Every consumer compares
keywords byte for byte, so a stray byte inside a keyword or number breaks the file.
  bad:  DATA\\xff          good: DATA
""",
)
_code(
    "P102",
    E,
    "line too long",
    """
The line is longer than 1 MiB. Real layer lines are under 200 characters; a line this long is
almost always a file that is not a workload (or two files concatenated without newlines).
""",
)
_code(
    "P103",
    E,
    "unexpected character",
    """
A control character (for example a lone carriage return, U+000D, not followed by a line feed)
appears inside a line. ASTRA-sim treats it as a blank, SimAI's getline does not, and Chakra
splits on it. Use spaces or tabs between fields and LF or CRLF line endings.
""",
)
_code(
    "P110",
    E,
    "unknown parallelism keyword",
    """
Line 1 must start with one of the 11 parallelism keywords (case-sensitive): DATA, MODEL,
HYBRID_DATA_MODEL, HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED, HYBRID_TRANSFORMER,
HYBRID_TRANSFORMER_FWD_IN_BCKWD, HYBRID_DLRM, HYBRID_DLRM_ENHANCED, MICRO,
DISTRIBUTED_INFERENCE. ASTRA-sim and SimAI exit with "unable to decode the workload
parallelization strategy"; Chakra raises "Unsupported parallelism type".
  bad:  data               good: DATA
""",
)
_code(
    "P111",
    E,
    "malformed header parameter",
    """
A header parameter is not written as separate `key:` and value tokens. Both C++ parsers read
tokens split on blanks, so `model_parallel_NPU_group:4` is one token: the key is never found
(SimAI) or the group size is read from the wrong token (ASTRA-sim 1.0).
  bad:  HYBRID_TRANSFORMER model_parallel_NPU_group:4
  good: HYBRID_TRANSFORMER model_parallel_NPU_group: 4
""",
)
_code(
    "P120",
    E,
    "layer count missing or malformed",
    """
Line 2 must hold the number of layer lines and nothing else. SimAI reads it with std::stoi and
Chakra with int(line.strip()); anything else aborts them.
  bad:  54 layers          good: 54
""",
)
_code(
    "P130",
    E,
    "wrong number of fields",
    """
A layer line has 12 fields (13 under HYBRID_CUSTOMIZED): name, reserved, then compute time,
comm type and comm size for forward, input gradient and weight gradient, then the update
time. ASTRA-sim and SimAI read tokens, not lines: a missing field makes them take the next
line's name as a number and every later layer is garbage. Chakra rejects the line.
  bad:  conv1 -1 13003 NONE 0 12864 NONE 0 32291 ALLREDUCE 37632
  good: conv1 -1 13003 NONE 0 12864 NONE 0 32291 ALLREDUCE 37632 3229
""",
)

# ---- V2xx: workload semantics ------------------------------------------------------------------
_code(
    "V201",
    E,
    "layer count differs from the layer lines present",
    """
Line 2 declares how many layer lines follow. ASTRA-sim 1.0 and SimAI read exactly that many
layers: with fewer lines they build the missing layers from uninitialised memory; with more
they silently ignore the surplus. Chakra ignores the count and converts every line.
  bad:  839 (followed by 33 layer lines)     good: 33
""",
)
_code(
    "V202",
    E,
    "malformed number",
    """
Numeric fields must be plain decimal integers. C++ `>>` stops at the first character that is
not a digit, so `3.5` is read as 3 and `.5` becomes the next field (every later field shifts);
`1e6` reads 1, `0x10` reads 0, `1_000` reads 1. Chakra's int() rejects `3.5`, `1e6` and `0x10`
but reads `1_000` as 1000, so the consumers disagree.
  bad:  13003.0   1e6   0x40   1_000         good: 13003   1000000   64   1000
""",
)
_code(
    "V203",
    E,
    "negative number",
    """
Compute times, comm sizes and update times are unsigned in ASTRA-sim 1.0 and SimAI
(unsigned long long / uint64_t): `-1` wraps around to 18446744073709551615, a collective of
16 EiB or a compute delay of 584 years. Only the reserved field (column 2) may be negative.
""",
)
_code(
    "V204",
    E,
    "number out of range",
    """
The value does not fit the type the consumer reads it into: the reserved field, the layer count
and header integers are C++ int (at most 2147483647); times and sizes are 64-bit unsigned
(at most 18446744073709551615) and Chakra stores sizes as int64 (at most 9223372036854775807).
A value that does not fit puts the C++ stream into a failed state and every later field is
garbage.
""",
)
_code(
    "V205",
    INFO,
    "non-canonical number",
    """
`+5` and `007` are read as 5 and 7 by every consumer, but canonical files write plain digits.
`modtrans fmt` rewrites them.
""",
)
_code(
    "V210",
    E,
    "unknown comm type",
    """
The comm type is not one of the spellings any consumer knows. ASTRA-sim and SimAI silently
treat it as "no collective"; Chakra silently turns it into an all-reduce. Either way the file
does not say what its author meant. Valid: NONE, ALLREDUCE, ALLGATHER, REDUCESCATTER,
ALLTOALL (plus ALLREDUCEALLTOALL, and _EP / _DP_EP suffixed forms for SimAI).
  bad:  AllReduce   ALL_REDUCE   ALLREDUSE     good: ALLREDUCE
""",
)
_code(
    "V211",
    W,
    "NONE with a non-zero comm size",
    """
The phase says there is no collective but gives a size. Every consumer ignores the size (or,
for Chakra, issues an all-reduce of that size). Write `NONE 0`, or name the collective.
""",
)
_code(
    "V212",
    W,
    "collective of size 0",
    """
The phase names a collective but moves 0 bytes. ASTRA-sim still schedules it (a zero-byte
collective still pays latency); write `NONE 0` if there is no communication.
""",
)
_code(
    "V220",
    E,
    "13th field without HYBRID_CUSTOMIZED",
    """
Only HYBRID_CUSTOMIZED layer lines carry a 13th field (the layer's own parallelism). Under any
other keyword ASTRA-sim and SimAI read that token as the next layer's name, the next name as a
number, and every later layer is garbage. (ASTRA-sim's own generator script writes this column
for every strategy: astra-sim issue #45.)
""",
)
_code(
    "V221",
    E,
    "13th field missing under HYBRID_CUSTOMIZED",
    """
Under HYBRID_CUSTOMIZED every layer line needs a 13th field naming that layer's parallelism
(DATA, MODEL, HYBRID_DATA_MODEL or HYBRID_MODEL_DATA). Without it ASTRA-sim reads the next
layer's name as this layer's policy and every later field shifts.
""",
)
_code(
    "V222",
    E,
    "unknown per-layer parallelism",
    """
The 13th field of a HYBRID_CUSTOMIZED layer must be a parallelism keyword; ASTRA-sim maps an
unknown one to no communication dimensions at all.
""",
)
_code(
    "V223",
    W,
    "per-layer parallelism without meaning",
    """
HYBRID_TRANSFORMER* as a per-layer policy makes ASTRA-sim call break_dimension(-1): no
model-parallel group is read for HYBRID_CUSTOMIZED. Use DATA, MODEL, HYBRID_DATA_MODEL or
HYBRID_MODEL_DATA.
""",
)
_code(
    "V230",
    W,
    "duplicate layer name",
    """
Two layers share a name. Every consumer accepts it (Chakra node names then repeat), but
reports and diffs cannot tell the layers apart. Real files do this (layernorm2 twice in
ASTRA-sim's Transformer_HybridParallel.txt; 1344 `mlp_moelayer` lines in SimAI's example).
""",
)
_code(
    "V240",
    W,
    "header parameter missing",
    """
The parallelism keyword needs a parameter that is not there: HYBRID_TRANSFORMER and
HYBRID_TRANSFORMER_FWD_IN_BCKWD need `model_parallel_NPU_group: <g>` (required by ASTRA-sim 1.0
since 2020-10-29; older files misparse), FWD_IN_BCKWD needs `checkpoints:` and
`checkpoint_initiates:` lists, HYBRID_DLRM needs the index of the last bottom-MLP layer.
""",
)
_code(
    "V241",
    E,
    "header parameter malformed",
    """
A header parameter has no value or a value that is not an integer. SimAI reads values with
std::stoi and aborts on a non-number; ASTRA-sim 1.0's stream fails and the layers are garbage.
  bad:  model_parallel_NPU_group: four     good: model_parallel_NPU_group: 4
""",
)
_code(
    "V242",
    E,
    "header parameter inconsistent",
    """
A header parameter contradicts itself or the layers: a checkpoint list whose count does not
match the indices that follow (`checkpoints: 3 2 11`), a checkpoint or DLRM layer index outside
0..layers-1, a parameter given twice, or a model-parallel group below 1.
""",
)
_code(
    "V243",
    W,
    "unknown header parameter",
    """
The header holds a token that no consumer reads as a parameter. SimAI ignores it; ASTRA-sim 1.0
reads header tokens by position, so an extra token shifts the layer count.
""",
)
_code(
    "V250",
    W,
    "blank line",
    """
A blank or whitespace-only line. ASTRA-sim and SimAI skip it; Chakra's converter rejects the
file ("Cannot parse the following layer"). Canonical files have none.
""",
)
_code(
    "V251",
    E,
    "byte order mark",
    """
The file starts with a UTF-8 byte order mark (U+FEFF). Every consumer then reads the keyword
as `\\ufeffDATA` and rejects it. Save the file as plain ASCII.
""",
)

# ---- D3xx: dialect compatibility (what one consumer rejects or misreads) ----------------------------
_code(
    "D301",
    E,
    "keyword not supported by this consumer",
    """
Chakra's text converter accepts only MICRO, DATA, MODEL, HYBRID_DATA_MODEL, HYBRID_MODEL_DATA,
HYBRID_DLRM and HYBRID_DLRM_ENHANCED; every other keyword raises "Unsupported parallelism type"
(mlcommons/chakra text_converter.py; astra-sim issue #162).
""",
)
_code(
    "D302",
    E,
    "header the consumer misreads",
    """
The header is written for another consumer. ASTRA-sim 1.0 reads header parameters by position,
so SimAI's `ep: .. pp: .. vpp: ..` keys shift every later value (ep: is taken as the
checkpoints key); SimAI reads keys, so 1.0's `HYBRID_DLRM 4` leaves its last-bottom-layer
unset; Chakra needs `HYBRID_DLRM <int>`.
""",
)
_code(
    "D303",
    W,
    "comm type the consumer changes",
    """
The consumer silently reads this comm type as something else: Chakra turns NONE, BROADCAST and
any unknown type into an all-reduce when the phase emits a node; ASTRA-sim 1.0 treats the _EP /
_DP_EP forms and BROADCAST as no collective and panics on ALLREDUCEALLTOALL; SimAI reads
ALLREDUCEALLTOALL as an all-reduce and BROADCAST as no collective.
""",
)
_code(
    "D304",
    E,
    "blank line rejected by Chakra",
    """
Chakra's text converter treats every line after line 2 as a layer; a blank line (including an
empty last line) raises "Cannot parse the following layer".
""",
)
_code(
    "D305",
    W,
    "only the first layer is simulated",
    """
Under MICRO, ASTRA-sim 1.0 and SimAI simulate only the first layer's weight-gradient
collective; the other layers are read and ignored. Chakra converts every layer.
""",
)
_code(
    "D306",
    W,
    "SimAI keeps only the first checkpoint index",
    """
SimAI's header scanner re-reads the same token for every entry of a checkpoint list, so only
the first index is recorded (aliyun/SimAI Workload.cc). ASTRA-sim 1.0 reads the whole list.
""",
)
_code(
    "D307",
    W,
    "SimAI header parameters missing",
    """
SimAI expects model_parallel_NPU_group, ep, pp, vpp, ga and all_gpus in the header; missing ones
stay uninitialised and SimAI prints "Input workload format mismatch ... Please use the latest
AICB to generate".
""",
)
_code(
    "D308",
    E,
    "value out of the consumer's range",
    """
The value fits ASTRA-sim's 64-bit unsigned fields but not Chakra's int64 protobuf fields
(protobuf raises "Value out of range").
""",
)
_code(
    "D309",
    INFO,
    "layer count ignored by Chakra",
    """
Chakra ignores line 2 and converts every line that follows; ASTRA-sim and SimAI read exactly the
declared number of layers.
""",
)
_code(
    "D310",
    E,
    "construct the target dialect cannot express",
    """
The workload uses something the requested dialect has no way to write (for example SimAI's
`ep:` header keys or _EP comm types in an ASTRA-sim 1.0 file). Choose the dialect that can
express it, or change the workload.
""",
)
_code(
    "D311",
    W,
    "data-parallel all-reduce in every micro-batch copy",
    """
SimAI runs each line of its file once per iteration (Workload.cc: one forward sweep, one backward
sweep; `ga` only enters its pipeline-bubble formula), and frameworks all-reduce gradients once per
iteration, after the last micro-batch (Megatron-LM's no_sync; DeepSpeed's gradient accumulation
boundary). A weight-gradient ALLREDUCE over the data-parallel group written in each of the `ga`
micro-batch copies of a layer makes SimAI move `ga` times the bytes. AICB writes the copies with
no data-parallel collective and the data-parallel lines once, as modtrans does.
DeepSpeed's ZeRO-2 is the exception: it all-reduces gradients in every micro-batch
(stage_1_and_2.py), so `translate --framework deepspeed --zero 2` writes one per copy.
  bad:  ga: 4 ... layer.0 ... ALLREDUCE 4096 ... layer.0.mb1 ... ALLREDUCE 4096 (x4)
  good: the ALLREDUCE in one copy only
""",
)
_code(
    "D312",
    W,
    "parameter all-gather in a forward column",
    """
SimAI gives a forward-column collective without a suffix to the tensor-parallel group (Workload.cc
decodes fwd and ig types as TP, wg as DP). A line with a forward ALLGATHER and a weight-gradient
REDUCESCATTER is the distributed optimizer's pair, whose parameter all-gather runs over the
data-parallel group (Megatron-LM's start_param_sync); in the forward column SimAI runs it over the
tensor group instead. AICB writes its `grad_norm` line so.
  bad:  grad_norm -1 1 ALLGATHER 3248619520 1 NONE 0 1 REDUCESCATTER 6497239040 100
  good: the ALLGATHER in the weight-gradient column (of a line of its own)
""",
)
_code(
    "D313",
    E,
    "a collective's layer has no update time",
    """
ASTRA-sim 1.0 ends each of a layer's collectives by an event `update` ticks later (the last
field: Layer::call registers Fwd_, Input_Grad_ and Wight_Grad_Comm_Finished_After_Delay with the
layer's weight_grad_update_time). At 0 the event falls on the current tick, which its analytical
event queue refuses: `EventQueue.cc:20: Assertion compare_time_stamp(current_time, time_stamp) < 0
failed`, and the run aborts (found running ASTRA-sim-1.0 07d5d19 on such a file). Every reference
workload of ASTRA-sim has a positive update time. SimAI does not abort.
  bad:  lm_head -1 325 ALLREDUCE 8 296 NONE 0 338 ALLREDUCE 1024 0
  good: lm_head -1 325 ALLREDUCE 8 296 NONE 0 338 ALLREDUCE 1024 1
""",
)

_code(
    "D314",
    W,
    "SimAI runs only the transformer keywords",
    """
SimAI reads its header's keys (model_parallel_NPU_group, ep, pp, vpp, ga, all_gpus) only under
HYBRID_TRANSFORMER and HYBRID_TRANSFORMER_FWD_IN_BCKWD (aliyun/SimAI Workload::initialize_workload);
under any other keyword they stay uninitialised, and its analytical report divides by them after
the pass (Layer::report: `DP_size = all_gpus / (TP_size * PP_size)`): SIGFPE, no EndToEnd.csv.
Found running SimAI 1.6 (f5efb5a9, SimAI_analytical) on DATA, MODEL, HYBRID_DATA_MODEL,
HYBRID_MODEL_DATA, HYBRID_CUSTOMIZED and AICB's own MICRO micro_test files. `modtrans simulate`
refuses such a file before it runs SimAI.
  bad:  DATA model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 8
  good: the ASTRA-sim 1.0 dialect (--dialect astra-sim) for that keyword
""",
)

_code(
    "D315",
    W,
    "a collective too large for ASTRA-sim 1.0's int",
    """
ASTRA-sim 1.0 reads a line's collective sizes as uint64 (Workload::initialize_workload) but hands
them to its streams as an int (astra-sim/system/BaseStream.hh `int initial_data_size`,
PacketBundle.hh `int size`): a size over 2^31 - 1 bytes wraps. Measured on ASTRA-sim-1.0 07d5d19
(`AnalyticalAstra`, one DATA line on `switch:8:300`, 2026-12-07): an all-reduce of 2,147,483,647 B
took 11.678 ms, of 2,147,483,648 B the run aborted (`EventQueue.cc:20: Assertion
compare_time_stamp(current_time, time_stamp) < 0 failed`), of 4,294,967,296 B it finished with no
communication at all. A Megatron-LM gradient all-reduce written as one line passes the limit from
about 0.54 G parameters a rank in fp32 (GPT-3 13B at TP 8: 3,235,072,000 B). SimAI 1.6 holds the
size as uint64 (10.211 ms at 2^31 - 1 and 2^31, 20.420 ms at 2^32). `modtrans simulate` refuses
such a file before it runs ASTRA-sim 1.0.
  bad:  transformer.wte -1 24675 NONE 0 0 NONE 0 1014348 ALLREDUCE 3235072000 1
  good: Chakra traces (--format chakra-et) or the SimAI dialect for this layout
""",
)

# ---- S4xx: workload JSON ---------------------------------------------------------------------------
_code(
    "S401",
    E,
    "invalid JSON",
    """
The file is not valid JSON.
""",
)
_code(
    "S402",
    E,
    "workload JSON does not match the schema",
    """
The JSON document does not match schemas/workload.schema.json; the message names the place in
workload terms (header, layer index and field).
""",
)
_code(
    "S403",
    E,
    "model IR does not match its schema",
    """
The intermediate document (schemas/model-ir.schema.json) is invalid. When ModTrans itself wrote
it, this is a ModTrans bug: please report it with the JSON path in the message. ModTrans validates
every IR before writing it, so a bad document is never written.
""",
)

# ---- F1xx / X5xx: ONNX models ----------------------------------------------------------------------
_code(
    "F004",
    E,
    "not an ONNX model",
    """
The file could not be read as an ONNX ModelProto: it is truncated, is another protobuf message, or
is not protobuf at all (a workload text file, a PyTorch checkpoint, an archive). Nothing is written.
""",
)
_code(
    "X501",
    E,
    "unusable model option",
    """
An option does not fit the model: `--input-shape NAME=...` names an input the graph does not have
or gives a different rank (the message lists the graph's inputs), a model-parallel group does not
divide the NPUs, a device profile's rates are absurd, or the array and clock give compute times no
simulator can hold. A usage error: exit status 2, as for every other bad option value.
""",
)
_code(
    "X502",
    W,
    "ONNX checker finding",
    """
onnx.checker.check_model rejected the graph's structure (weights are not checked: ModTrans never
reads them). Extraction carries on with what it can read; the finding is the checker's own message.
""",
)
_code(
    "X503",
    E,
    "shape inference failed",
    """
ONNX shape inference raised an error on the graph (usually an op whose inputs do not fit it, or a
shape that contradicts the model's declared one). Shapes after the failing node stay unknown.
""",
)
_code(
    "X504",
    W,
    "dimension still unknown",
    """
A tensor's dimension is symbolic after shape inference, so FLOPs and activation sizes that depend
on it are unknown. Resolve it with `--batch N` (dim 0 of every input) or
`--input-shape NAME=1x3x224x224`. An error for `translate`, whose compute times would be wrong.
""",
)
_code(
    "X505",
    W,
    "op without a model",
    """
ModTrans has no FLOP model for this op (a custom domain, or an op added to ONNX recently). The layer
is still listed with its parameters and activations; its FLOPs are 0.
""",
)
_code(
    "X506",
    E,
    "external data outside the model's folder",
    """
A tensor's external-data location is absolute or climbs out of the model's folder with `..`. The
ONNX specification requires a relative path inside it; ModTrans refuses the model rather than trust
such a path (it never opens external data anyway: translation needs only dims and dtypes).
Exit status 2, as for a model that cannot be read (F004).
""",
)
_code(
    "X507",
    E,
    "absurd tensor dimension",
    """
A dimension is negative or a tensor's size overflows 2^63 bytes: the file is corrupt or hostile.
Nothing is written; exit status 2, as for a model that cannot be read (F004).
""",
)

# ---- C6xx: differences found by `modtrans diff` (the second file is the reference) -----------------
_code(
    "C601",
    E,
    "layer differs from the reference",
    """
A compared field of the layer differs from its partner in the reference beyond --rtol/--atol
(|first - reference| > atol + rtol * |reference|, as numpy.isclose). Choose what is compared with
--fields comm|compute|update|all or a list of field names.
""",
)
_code(
    "C602",
    E,
    "layer not in the reference",
    """
The layer has no partner in the reference: no layer of that name, none with the same compared
fields, and no unpaired layer at the same place in the sequence.
""",
)
_code(
    "C603",
    E,
    "reference layer missing",
    """
A layer of the reference has no partner in the first file.
""",
)
_code(
    "C604",
    E,
    "layer moved",
    """
The layer is paired with a reference layer at another place in the order: it is outside the longest
run of layers that appear in the same order in both files. --ignore-order accepts moves.
""",
)
_code(
    "C605",
    E,
    "layer renamed",
    """
The layer is paired with a reference layer (by content or position) that has another name.
--ignore-names compares layers by content and position only.
""",
)
_code(
    "C606",
    E,
    "header differs from the reference",
    """
The parallelism keyword or a header parameter (model_parallel_NPU_group, checkpoints, ep, pp, vpp,
ga, all_gpus, pp_comm ...) differs from the reference's.
""",
)
_code(
    "S404",
    E,
    "device profile does not match its schema",
    """
A `--device FILE.json` profile for the roofline model does not match schemas/device.schema.json:
it needs version 1, a name, peak_flops by dtype (FLOP/s), memory_bandwidth (bytes/s) and a source
for each number.
""",
)
_code(
    "X508",
    W,
    "compute times will be read 1000x too long",
    """
Chakra's text converter copies each compute time into a field named duration_micros, and ASTRA-sim
2.x multiplies it by 1000 (astra-sim commit f7bd62c). Times written in nanosecond ticks (the
ASTRA-sim 1.0 and SimAI unit) then run 1000 times too long. The Chakra dialect is therefore written
in microseconds unless `--time-unit` says otherwise; give `ns` only for ASTRA-sim 2.0.0-2.2.0,
which used the value as ticks.
""",
)

# ---- T7xx: Chakra trace sets (modtrans validate run.*.et) -------------------------------------------
_code(
    "T701",
    E,
    "rank file missing from the trace set",
    """
ASTRA-sim 2.x opens PREFIX.<rank>.et for every rank 0..N-1 of the network and stops with
`workload file: PREFIX.N.et does not exist` when one is missing. The set given has a gap.
""",
)
_code(
    "T702",
    E,
    "not a Chakra trace, or truncated",
    """
A trace is a length-delimited GlobalMetadata message followed by length-delimited Node messages
(Chakra's et_def.proto). The bytes at the position given do not decode as one: the file is of
another kind, or ends inside a message (a copy cut short).
""",
)
_code(
    "T703",
    E,
    "duplicate node id",
    """
Two nodes of one trace share an id; the feeder keeps one of them and the dependencies on that id
mean whichever it kept.
""",
)
_code(
    "T704",
    E,
    "dependency on a node that does not exist",
    """
A data or control dependency names an id no node of the trace has. ASTRA-sim aborts:
`Node 99 in data_dep graph, but not found in index, file might be corrupted`.
""",
)
_code(
    "T705",
    E,
    "dependency cycle",
    """
The nodes named wait for each other in a cycle, so none of them ever runs. When every node is in
or behind a cycle ASTRA-sim aborts with `No dependancy free nodes found, there might be deadlocks`;
otherwise the run hangs at the cycle.
""",
)
_code(
    "T706",
    E,
    "send or receive without its partner",
    """
ASTRA-sim's analytical backend pairs a COMM_SEND_NODE with a COMM_RECV_NODE on (tag, source,
destination, size). A send whose receive is missing, or differs in any of the four, waits forever
with no error: the simulation hangs. Both ends must carry identical comm_src, comm_dst, comm_tag
and comm_size.
""",
)
_code(
    "T707",
    E,
    "collective participants disagree",
    """
Every rank of a communicator group must issue the group's collectives in the same order, with the
same type and size (an unmerged ASTRA-sim branch matches them by a hash of exactly these). The
ranks named issue a different sequence, or one rank has fewer collectives than the others.
""",
)
_code(
    "T708",
    E,
    "communicator group problem",
    """
A collective's pg_name is not in the group file (ASTRA-sim aborts: `communicator group N not
found`), there is no group file for traces that name groups, the group file lists ranks that have
no trace, or a rank issues a collective in a group it is not a member of. Pass the file with
`--comm-groups FILE` (modtrans looks for PREFIX.comm_groups.json beside the traces).
""",
)
_code(
    "T709",
    W,
    "attribute a shipped configuration needs is missing",
    """
ASTRA-sim's HGX-H100 system configurations (inputs/system/analytical/hgx_h100_*gpu.json) set
`roofline-enabled: 1`, which times every compute node from num_ops and tensor_size, and
`track-local-mem: 1`, which reads the inputs and outputs string lists of every node. A node
without them aborts the run (`Attribute num_ops not found in node N`). Replay-mode configurations
read duration_micros only.
""",
)
_code(
    "T710",
    W,
    "sizes look like element counts, not bytes",
    """
comm_size and tensor_size are bytes. The node's own inputs/outputs lists give its tensors in
bytes, and the size is exactly a half or a quarter of theirs: the size of a fp16 or fp32 tensor
counted in elements (a known bug class in other generators, astra-sim/stage#29).
""",
)
_code(
    "T711",
    W,
    "every compute duration is zero",
    """
In replay mode (roofline off) ASTRA-sim times a compute node by duration_micros; every one is 0, so
the simulated compute takes no time. Generators that write nanoseconds into an integer field of
microseconds, rounded down, produce this.
""",
)
_code(
    "T712",
    E,
    "collective ASTRA-sim cannot run",
    """
ASTRA-sim 2.x runs ALL_REDUCE, ALL_TO_ALL, ALL_GATHER, REDUCE_SCATTER and BROADCAST; any other
comm_type (or none) throws `Unsupported collective comm type`.
""",
)
_code(
    "T713",
    E,
    "send or receive without its required attributes",
    """
A COMM_SEND_NODE needs comm_dst and comm_tag, a COMM_RECV_NODE comm_src and comm_tag (Workload.cc
reads them without a default); every point-to-point node needs comm_size.
""",
)
_code(
    "T714",
    E,
    "group file unreadable",
    """
The communicator-group file is JSON of the form {"1": [0, 1, 2, 3], ...}: keys are group ids
(decimal integers > 0), values lists of distinct rank numbers.
""",
)

_code(
    "T715",
    W,
    "all-gather size is the gathered result",
    """
ASTRA-sim 2.x reads an ALL_GATHER's comm_size as what each rank contributes (Ring.cc:
final_data_size = data_size * nodes_in_ring): 100 MiB on 8 NPUs of a 300 GB/s switch takes
7 x 100 MiB / 300 GB/s. A comm_size equal to the node's gathered output (its outputs list, a
multiple of its input) makes the simulator move that many times the bytes. Write the input's size.
""",
)

# ---- M8xx: transformer configurations (config.json) ------------------------------------------------
_code(
    "M801",
    E,
    "not a transformer configuration modtrans reads",
    """
A configuration file is a Hugging Face `config.json`: a JSON object whose `model_type` is a family
modtrans builds (llama, mistral, qwen2, qwen3, mixtral, qwen2_moe, qwen3_moe, deepseek,
deepseek_v2, deepseek_v3, gpt2, bert) with the keys that family's transformers configuration class
defines (hidden_size, num_hidden_layers, ...). The message names the key that is missing or wrong.
Any other family transformers defines is read by transformers itself with the extra `hf`
(`pip install 'modtrans[hf]'`); without it, or where transformers cannot build or run the model on
the meta device (or it needs code of its own: `auto_map`), the message says so.
Nothing is written; exit status 2, as for a file that cannot be read (F001) or is not an ONNX
model (F004).
  bad:  {"model_type": "llama", "hidden_size": 4096}
  good: {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, ...}
""",
)
_code(
    "M802",
    W,
    "sequence longer than the model's context",
    """
The sequence length given (`--seq-len S` or `--input-shape input_ids=BxS`; by default 2,048, or the
context where that is shorter, which never warns) is longer than the longest the configuration
says the model was made for (`max_position_embeddings`; GPT-2's `n_positions`). The workload is
still written, with the costs of that length, but no training run of this model uses
it: its rotary positions were never trained that far, and a model with learned positions (GPT-2,
BERT) has no embedding for them.
  bad:  --input-shape input_ids=1x32768 for a context of 2,048
  good: --input-shape input_ids=1x2048
""",
)
_code(
    "M803",
    W,
    "micro-batch whose activations fit no device",
    """
One activation tensor of one micro-batch (the output the message names; usually the logits, micro
x sequence x vocabulary) is over 1 TiB: nearly four times what the largest accelerator holds (288
GB), for one tensor of the many a training step keeps. The workload is still written; the
micro-batch is almost surely a typo, or the global batch given as `--micro-batch`.
  bad:  --micro-batch 70000
  good: --micro-batch 1 --global-batch 70000
""",
)
_code(
    "M804",
    W,
    "parameters the traced forward did not run",
    """
A configuration read through transformers (the extra `hf`) is traced with its token ids alone: the
modules the forward did not reach (a vision-language model's image tower and projector, with no
images given) keep their parameters in the IR, counted and all-reduced, but compute nothing. The
message names them. The workload is written; its compute leaves those modules out.
  bad:  a vision-language configuration traced on input_ids alone
  good: a text model, every module of which the forward runs
""",
)
_code(
    "M805",
    W,
    "configuration field the meta build does not follow",
    """
A published configuration read through transformers (the extra `hf`) said something the build on
the meta device reads otherwise, and the message says what was built instead:
- an `auto_map` (code beside the file) on a model_type transformers defines itself (MPT-7B's
  `MPTForCausalLM`): transformers' own class is built, as from_pretrained builds it without
  trust_remote_code; `--trust-remote-code` runs that code instead;
- a `quantization_config` (gpt-oss's mxfp4, DeepSeek-V3's fp8, GPTQ, AWQ): the model is built
  unquantized, its parameters the weights' logical elements, as training holds them (transformers
  dequantizes mxfp4 and fp8 checkpoints to train them; QLoRA trains adapters beside them).
The workload is written.
  bad:  {"model_type": "mpt", "auto_map": {"AutoConfig": "configuration_mpt.MPTConfig"}, ...}
  good: {"model_type": "mpt", ...} (the same file without the code it names)
""",
)
_code(
    "M806",
    W,
    "tensor-parallel plan derived from the forward",
    """
A configuration read through transformers (the extra `hf`) whose family publishes no
base_model_tp_plan (BLOOM, OPT, MPT, GPT-Neo) split over `--tp` ranks as
Megatron-LM splits a transformer block: the linear layers that read the block's normed input
column-parallel (ColumnParallelLinear), the one whose output returns to the residual stream
row-parallel (RowParallelLinear), read from the recorded forward. The message lists the plan. The
derivation agrees with every plan transformers does publish on the blocks' linear layers; where
the blocks are not ones it understands, --tp stays refused (X501, with the reason).
A family whose published plan names no layer of its blocks (transformers 5.25: HunYuan dense's
and GPT-OSS's `embed_tokens` alone, which tp_plan="auto" applies to that module alone, every block
whole on each rank) has its blocks split by the derived plan beside the published styles, said in
the same warning; where none derives, the published plan is followed, the blocks whole on every
tensor rank, and the warning gives the reason.
  bad:  a plan taken for the family's own where transformers publishes none
  good: the listed split checked against the framework that trained the model
""",
)
_code(
    "M807",
    W,
    "attention charged op by op: the model's implementation has no fused kernel",
    """
Under a framework that trains the module it is handed (`--framework fsdp` or `deepspeed`: PyTorch
FSDP and DeepSpeed as transformers' Trainer and accelerate apply them), a configuration read
through transformers runs its family's own attention code, in the implementation transformers
picks when none is asked for: SDPA, or eager where the class has no SDPA (its _supports_sdpa
False: BLOOM, MPT, XGLM, OpenAI GPT, DeBERTa, Switch Transformers, Gemma 2, whose FlashAttention
and flex attention run only when asked for). Eager runs the attention op by op: its two
products as batched GEMMs over the whole s x s, the softmax (and dropout) over the s x s scores,
stored for the backward. The translation charges that (`--attention eager`) and says so here.
  bad:  a fused kernel's time and memory for a model whose code cannot run one
  good: --attention flash (or another kernel) where the run uses another implementation
""",
)
_code(
    "M808",
    W,
    "attention charged as SDPA's memory-efficient kernel: transformers hands it a mask or a bias",
    """
Under `--framework fsdp` or `deepspeed` a configuration read through transformers runs its own
attention through PyTorch's SDPA, whose first GPU backend, FlashAttention-2, takes no attn_mask.
Where transformers passes one (a sliding-window layer's [b, 1, q, k] mask: Mistral, Qwen2 under
use_sliding_window, Gemma 3's local layers; T5's [1, heads, q, k] position bias), SDPA runs its
memory-efficient kernel (xformers' cutlass kernel) instead: dense over the whole s x s (the
window's zeros computed), reading the mask, and for T5 writing the bias's gradient. The
translation charges those attentions so (`--attention sdpa`: the others as FlashAttention-2) and
says so here.
  bad:  a sliding window charged as FlashAttention's local mode, which SDPA never runs
  good: --attention flash2 where the run uses flash_attention_2, which takes the window itself
""",
)
_code(
    "X510",
    W,
    "layer whose FLOPs are unknown",
    """
The layer's cost depends on a tensor whose shape shape inference left unknown (a dimension no
input fixes, an op with no shape rule such as a custom op before it), so its FLOPs would be 0.
`extract` warns; `translate` refuses, since a 0 would be written silently into the workload.
Give the inputs' shapes (`--input-shape NAME=AxBxC`, `--batch N`), or pass `--allow-unknown` to
keep the zeros (the layers are listed in the output's metadata).
""",
)
_code(
    "X511",
    E,
    "input shape contradicts the weights",
    """
A layer's input does not fit its weight: a convolution's input channels are not its weight's, a
GEMM's reduction dimension differs; or a Reshape's target holds another number of elements than
its input, because the model fixes a size there (a text recogniser exported for lines 48 pixels
high reshapes to a height of 1). The input shape given (`--input-shape`) is not the model's:
usually the wrong layout (NHWC for an NCHW model, 1x224x224x3 for 1x3x224x224) or a size the model
was not exported for. A usage error: exit status 2, as for every other option that does not fit
the model (X501).
""",
)
_code(
    "X512",
    INFO,
    "--batch set a dimension other than the first",
    """
`--batch N` fixes an input's batch dimension: a symbolic dimension named like a batch (batch,
batch_size, N, B), else dimension 1 when dimension 0 is a sequence (named like one: seq, time,
len, ...; or the input of a sequence-first LSTM / GRU / RNN, ONNX's default layout), else
dimension 0. This note says when it was not dimension 0; `--input-shape NAME=AxBxC` sets a whole
shape instead.
""",
)
_code(
    "X513",
    W,
    "both branches of an If are costed",
    """
An If's condition depends on the values of the model's inputs (a sample rate, a flag), not on
their shapes, so nothing fixes which branch runs: both branches' layers are in the IR and costed,
which overstates the work of one inference. An If whose condition follows from the input shapes
is folded to the branch it takes.
""",
)
_code(
    "X517",
    W,
    "the branches of an If give an output different shapes",
    """
An If that stays (X513: input values decide it) has an output whose shape differs between its
branches (a sample rate's model makes more frames than the other's). Both branches are costed with
the shapes they see; what follows the If is costed with the larger of the two shapes (more
elements; then_branch's on a tie), an upper bound on one inference. The message names the If
(after the branches that hold it, for a nested one), the output and both shapes.
""",
)
_code(
    "X518",
    W,
    "shape folding did not settle",
    """
Extraction folds a model's shape arithmetic in rounds (constants computed, If branches taken, shape
inference run again) until a round changes nothing; every real model settles within a few. One
still changing after 64 rounds is a ModTrans bug: the shapes it has by then are used (some may stay
unknown: X510), and the message names the steps that kept changing it. Please report the model.
""",
)
_code(
    "X515",
    W,
    "measured time for no layer",
    """
A row of `--per-layer-times` names a layer the model does not have (a CSV row's layer name or
pattern), or an AIOB section whose role no layer of the model plays: that measurement is not
used, and those layers keep the cost model's times. Names are the IR's (`modtrans inspect MODEL`).
""",
)
_code(
    "X516",
    W,
    "a rank needs more memory than the device has",
    """
The layout's estimate of one rank's memory on a pipeline stage (weights, gradients, optimizer
state, the activations of the micro-batches in flight: strategy/llm/memory.py, after Megatron-LM's
theoretical_memory_usage.py) is more than the device profile's memory: the run would not fit.
More tensor or pipeline ranks, ZeRO / the distributed optimizer, sequence parallelism or
recomputation lower it. The workload is still written.
""",
)
_code(
    "X514",
    W,
    "loop whose trip count is unknown",
    """
A Loop's or Scan's body runs once per iteration, and its layers are costed for that many: a
constant trip count (PyTorch's `for t in range(x.size(0))` once the input shapes are fixed,
jax2onnx's `lax.scan`) multiplies their FLOPs. A while loop (tf2onnx's `tf.while_loop`: no trip
count, a condition the body computes) or a count that depends on input values runs a number of
times nobody knows before it runs, so the body is costed once and its layers' FLOPs are marked
unknown: `extract` warns, `translate` refuses unless `--allow-unknown`, as for X510.
""",
)
