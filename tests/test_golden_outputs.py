"""Every format's output of a handful of translations, pinned by hash (issue 23's format-neutral plan).

The plan once carried the text format's header and string notes that the writers parsed back; it
now carries typed, format-neutral facts from which the text, SimAI and Chakra writers derive what
they write. `GOLDEN` was recorded on commit 4cf7148, before that refactor, by this module's own
`_digest` (no reference files, no git): the same translations must write the same bytes.

Each entry is "CONFIGURATION | FORMAT": a SHA-256 prefix over every file the translation makes
(the workload text or JSON, or the traces and their group file), with of the .meta.json only its
`parallel` section (the part the plan feeds; the rest names the tool's version), or the codes of
the errors that refuse it ("refused: D310"). The configurations cover every keyword preset and
the layout's --tp/--pp/--dp/--ep/--sp/--zero/--recompute, the interleaved and GPipe schedules;
the formats, the three text dialects, JSON (ASTRA-sim and SimAI) and Chakra traces.

A deliberate change of an output changes its hash: re-record it (`_digest`) and say why in the
commit. Re-recorded so far: the keyword presets' Chakra traces when the presets moved onto the
layout's program builder (issue 23; strategy/program.py): their tensors took the builder's names
(the micro-batch suffix `#m0`, a collective's payload `LABEL.in`); operations, sizes, groups,
dependencies and times were compared op by op before and after and are unchanged. Issue 24
(Megatron-LM's collectives): GPT-2's position embedding replicated (no tensor-parallel all-reduce);
under sequence parallelism the backward all-gathers of a column-parallel layer's input and of the
word embedding's output gradient; SimAI text with the data-parallel and ZeRO collectives once per
iteration (first micro-batch copy) and each further collective of a column on a line of its own
(ZeRO in SimAI text was refused before); every all-gather written for ASTRA-sim (its text,
Chakra's text dialect, the traces) as one rank's part, as ASTRA-sim reads it (plan/sizes.py), not
the gathered output (SimAI's text keeps the output, as SimAI reads it); bf16 gradients reduced in
fp32 as Megatron-LM reduces them (strategy/frameworks.py), and under SP the norms' gradients
all-reduced over the tensor group once per iteration; pipelines cut as Megatron-LM cuts them
(equal blocks per chunk, where the balanced cut gave Llama-3-8B at P 2 17 and 15); experts split
over the tensor ranks (Megatron-Core's default expert tensor parallelism) with their tokens
gathered and scattered over them; the vocabulary-parallel loss's three all-reduces of one fp32
value per token after the LM head (tensor_parallel/cross_entropy.py), and in ASTRA-sim 1.0 text a
layout's further collectives of one column on lines of their own as in SimAI text (plan/lines.py;
`gpt2 --tp 2 --dp 2 --sp --zero 1` was refused there before); the data-parallel reduction by
Megatron-LM's gradient buffer (one bucket per model chunk by default, the distributed optimizer's
padded: strategy/llm/buckets.py) where each layer had its own all-reduce. Issue 25: every
compute time, when the default compute model became the GPU kernel model (cost/gpu.py) in place
of the roofline at peak. Issue 27: a layout's .meta.json `parallel.llm` gained `memory_bytes`, one
rank's memory per stage. Issue 34: the .meta.json's version 2 (typed `parallel.llm`, its chunks and
memory as objects, `parallel.policy` the written workload's or none for a layout's traces) and a
trace set's sidecar named PREFIX.et-meta.json: every layout's and every trace set's entry.
Issue 35: the HYBRID_TRANSFORMER keywords use the layout's tensor parallelism
(strategy/llm/tensor.py), so they send the vocabulary-parallel loss's three all-reduces of one
fp32 value per token after the LM head, as Megatron-LM does (tensor_parallel/cross_entropy.py),
in the text on lines of their own (lm_head.post1, .post2): both gpt2 keyword entries, every format.
Issue 37: each layout's memory per stage by what its blocks store (strategy/llm/activations.py:
FlashAttention keeps no s x s tensor, dropout masks only with dropout, a gated MLP's 3f) and fp32
main gradients: the .meta.json memory, which the traces' metadata carries too, of the slow models'
15 layout entries (llama-3-8b, mixtral-8x7b, deepseek-moe-16b); their nodes and text are unchanged
(compared node by node). Issue 37 again: a keyword preset's .meta.json `parallel.memory`, its one
rank's memory by the same model (null for these entries' ONNX GPT-2 and VGG-16, whose
activations are not modelled), which the traces' metadata carries too: every keyword entry (39);
with that key left out of the metadata each digest is the one recorded before (compared for all
102 entries, the slow ones included). Issue 37's time: the update time is Megatron-LM's
mixed-precision Adam (cost/gemm.py, update_bytes: 50 B an fp16 parameter, 36 B an fp32 one) where
it was an SGD step's 3 x the parameter bytes: every text and JSON entry (they write the update
column); a layout's traces end each rank with the optimizer step, a compute node of its own
(UPDATE, strategy/program.py): the layout chakra-et entries. The keyword presets' traces have no
update node and are unchanged (70 of 102 entries re-recorded). Issue 37, today's software: the
loss over a head's logits is charged to the head's forward and input gradient (cost/loss.py:
every entry whose head a rank of the written program runs, and the keyword presets' classifier
heads), and under ZeRO / FSDP each rank's optimizer step updates its 1/D of the state
(strategy/llm/build.py, _sharded_update); the SimAI entries with --pp 2 write the first stage,
which holds no head, and are unchanged (71 of 102 re-recorded). Then the loss on a rank's share
of the logits (its GEMM's output: 1/T under tensor parallelism), where it was the whole
vocabulary's (50 of 102). The A100 profile's sources, which a trace set's metadata records, gained
eager_rmsnorm's (cost/norms.py): the 17 chakra-et entries. The distributed optimizer's parameter
all-gathers after its step, waiting for it, where the step waited for them (Megatron-Core's
step_with_ready_grads; strategy/llm/buckets.py, Place.AFTER_STEP): the one --zero 1 entry's
traces (its text and JSON write the same columns in the same order, unchanged). A keyword preset's
`parallel.memory` of a model the block formulas do not know (these entries' ONNX GPT-2 and
VGG-16: null before) by the bytes autograd saves (strategy/saved.py), a row-parallel unit's
folded layers on its whole output: every keyword entry of both (39); with that memory null again
each digest is the one recorded before (compared for all 39). Each memory object's
`reserved_bytes` (the tensors' peak and the blocks PyTorch's caching allocator keeps cached at
it: StageMemory.reserved), and the 16-bit logits Megatron's loss holds beside its fp32 copy (2 B a
logit on the last stage: frameworks.py, logit_bytes): every entry with memory (77 of 102); with
that key left out and the logits at 4 B again each digest is the one recorded before (all 102).
The A100's and H100's sources, which a trace set's metadata records, gained FlashAttention-1's and
the Triton kernel's (--attention flash1, triton), and the A100's its FlashAttention-2 entry (its
own curve, named): the 17 chakra-et entries; without those sources each digest is the one
recorded before. A MoE block's activations gained the experts' outputs Megatron-Core's unpermute
multiplies by the probabilities and the router's scores (strategy/llm/mlps.py, of): the simai,
json simai and chakra-et entries of mixtral-8x7b and deepseek-moe-16b (6), whose memory they
report; with one routed copy and no scores again each digest is the one recorded before.
FlashAttention-1's and the Triton kernel's profiles gained the head dimensions each kernel runs
(`padded`) and their sources, which a trace set's metadata records: the 17 chakra-et entries;
with the profiles as before each digest is the one recorded before. RMSNorm's op-by-op cost a
fixed time a call plus bytes an element, and Inductor's (`compiled_rmsnorm`), fitted on
Liger-Kernel's sweep, in the A100's and H100's profiles and their sources: the 17 chakra-et entries;
with those profiles as before each digest is the one recorded before. HSDP's degree
(strategy/llm/hsdp.py) in every layout's `parallel.llm` (`dp_replicate`: 1 where not given): the
38 layout entries; with that key left out each digest is the one recorded before (all 102).
Megatron's gradient hook adding the word and position embeddings' gradients into their main_grad
every micro-batch (strategy/llm/maingrad.py: 10 B a bf16 or 12 B an fp32 vocabulary-shard element
more in the embedding's weight-gradient step): the 36 entries of the Megatron layouts of gpt2,
llama-3-8b, mixtral-8x7b and deepseek-moe-16b that carry compute times; without the add each
digest is the one recorded before.
Megatron's end of an iteration (strategy/llm/clipping.py): its gradient norm (and fp16's
unscaling) out of each unit's update time into kernels of their own before the step, charged in
the text formats to each rank's first unit's update column, in the traces as UPDATE computes each
followed by an all-reduce of one fp32 number over the model-parallel ranks (every rank under the
distributed optimizer); and at D = 1 the bucket kernels Megatron-Core still runs (the NaN
check's norm: frameworks.py, grad_sync_passes): every layout entry (36 of 102, all under
--framework megatron, the default); the keyword presets' are unchanged. Then those D = 1 bucket
kernels in the tail section, after the schedule (program.py, _alone_kernels), not in the last
backward: the three D = 1 chakra-et entries (their text and JSON write the same columns).
Both together, after merging the two branches (main_grad's add and the end-of-iteration
kernels): the same 36 layout entries re-recorded once more.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from modtrans import pipeline
from modtrans.api import run
from modtrans.diagnostics import Diagnostic, has_errors
from modtrans.fileio import Content
from modtrans.ir.document import ModelIR
from modtrans.request import Request, prepare

CONFIGS: dict[str, dict[str, Any]] = {
    "gpt2 DATA 4": {"model": "gpt2", "parallel": "DATA", "npus": 4},
    "gpt2 MODEL 4": {"model": "gpt2", "parallel": "MODEL", "npus": 4},
    "gpt2 HYBRID_DATA_MODEL 8/4": {
        "model": "gpt2",
        "parallel": "HYBRID_DATA_MODEL",
        "npus": 8,
        "model_parallel_group": 4,
    },
    "gpt2 HYBRID_MODEL_DATA 8/2": {
        "model": "gpt2",
        "parallel": "HYBRID_MODEL_DATA",
        "npus": 8,
        "model_parallel_group": 2,
    },
    "gpt2 HYBRID_TRANSFORMER 8/4": {
        "model": "gpt2",
        "parallel": "HYBRID_TRANSFORMER",
        "npus": 8,
        "model_parallel_group": 4,
    },
    "gpt2 FWD_IN_BCKWD 4/2 every 40": {
        "model": "gpt2",
        "parallel": "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
        "npus": 4,
        "model_parallel_group": 2,
        "checkpoint_every": 40,
    },
    "vgg16 HYBRID_CUSTOMIZED 4": {
        "model": "vgg16",
        "parallel": "HYBRID_CUSTOMIZED",
        "npus": 4,
        "model_parallel_group": 2,
        "per_layer": {"classifier.*": "MODEL", "*": "DATA"},
    },
    "gpt2 --dp 2": {"model": "gpt2", "dp": 2},
    "gpt2 --tp 4 --dp 2": {"model": "gpt2", "tp": 4, "dp": 2},
    "gpt2 --tp 2 --dp 2 --sp --zero 1": {"model": "gpt2", "tp": 2, "dp": 2, "sp": True, "zero": 1},
    "gpt2 --tp 2 --recompute full": {"model": "gpt2", "tp": 2, "recompute": "full"},
    "gpt2 --tp 2 --recompute selective": {"model": "gpt2", "tp": 2, "recompute": "selective"},
    "llama-3-8b --tp 2 --pp 2 --dp 2": {"model": "llama-3-8b", "tp": 2, "pp": 2, "dp": 2},
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4": {
        "model": "llama-3-8b",
        "pp": 2,
        "schedule": "interleaved",
        "vpp": 2,
        "global_batch": 4,
    },
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2": {
        "model": "llama-3-8b",
        "pp": 2,
        "dp": 2,
        "schedule": "gpipe",
        "zero": 3,
    },
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2": {
        "model": "mixtral-8x7b",
        "tp": 2,
        "sp": True,
        "dp": 4,
        "ep": 2,
    },
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2": {"model": "deepseek-moe-16b", "dp": 4, "ep": 2, "pp": 2},
}
FORMATS: dict[str, dict[str, Any]] = {
    "astra-sim": {"format": "text", "dialect": "astra-sim"},
    "simai": {"format": "text", "dialect": "simai"},
    "chakra": {
        "format": "text",
        "dialect": "chakra",
        "time_unit": "ns",
    },  # as recorded (default: us)
    "json": {"format": "json"},
    "json simai": {"format": "json", "dialect": "simai"},
    "chakra-et": {"format": "chakra-et"},
}

GOLDEN = {
    "gpt2 DATA 4 | astra-sim": "11273326869444c5",
    "gpt2 DATA 4 | simai": "2ea631789603ae19",
    "gpt2 DATA 4 | chakra": "11273326869444c5",
    "gpt2 DATA 4 | json": "bcd7a1a60267137f",
    "gpt2 DATA 4 | json simai": "db38392647e3be57",
    "gpt2 DATA 4 | chakra-et": "7e1de7c21c9f7b7a",
    "gpt2 MODEL 4 | astra-sim": "7e91a6dc4c18ea4d",
    "gpt2 MODEL 4 | simai": "98763455786cc2fe",
    "gpt2 MODEL 4 | chakra": "7e91a6dc4c18ea4d",
    "gpt2 MODEL 4 | json": "d49fd3d23a5c2865",
    "gpt2 MODEL 4 | json simai": "e6b4b686b73333a0",
    "gpt2 MODEL 4 | chakra-et": "e409f1728cc72f42",
    "gpt2 HYBRID_DATA_MODEL 8/4 | astra-sim": "fe9551fe397dbe16",
    "gpt2 HYBRID_DATA_MODEL 8/4 | simai": "a1266b0be18377f7",
    "gpt2 HYBRID_DATA_MODEL 8/4 | chakra": "fe9551fe397dbe16",
    "gpt2 HYBRID_DATA_MODEL 8/4 | json": "fd42e7b3656382f5",
    "gpt2 HYBRID_DATA_MODEL 8/4 | json simai": "f0a8a18b26b33fce",
    "gpt2 HYBRID_DATA_MODEL 8/4 | chakra-et": "770e349c966fe9c0",
    "gpt2 HYBRID_MODEL_DATA 8/2 | astra-sim": "f67906af9a795903",
    "gpt2 HYBRID_MODEL_DATA 8/2 | simai": "3823f83319bed594",
    "gpt2 HYBRID_MODEL_DATA 8/2 | chakra": "f67906af9a795903",
    "gpt2 HYBRID_MODEL_DATA 8/2 | json": "8820ccb69fd9bba0",
    "gpt2 HYBRID_MODEL_DATA 8/2 | json simai": "461c6b6b33d62fc7",
    "gpt2 HYBRID_MODEL_DATA 8/2 | chakra-et": "29f6b032e0199738",
    "gpt2 HYBRID_TRANSFORMER 8/4 | astra-sim": "2bf2b87c88c3ccdc",
    "gpt2 HYBRID_TRANSFORMER 8/4 | simai": "92a9cf6047d21919",
    "gpt2 HYBRID_TRANSFORMER 8/4 | chakra": "refused: D310",
    "gpt2 HYBRID_TRANSFORMER 8/4 | json": "1cca2d57d659d6ea",
    "gpt2 HYBRID_TRANSFORMER 8/4 | json simai": "dda3eede2ae6900d",
    "gpt2 HYBRID_TRANSFORMER 8/4 | chakra-et": "564c749461f0fbd6",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | astra-sim": "7d39a714496f29b5",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | simai": "45c78fca73fc00f6",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | chakra": "refused: D310",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | json": "d273fe37e65df80f",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | json simai": "e2aeac923eda38f3",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | chakra-et": "90a466c1eca7274a",
    "vgg16 HYBRID_CUSTOMIZED 4 | astra-sim": "b4cf25b54200b0a2",
    "vgg16 HYBRID_CUSTOMIZED 4 | simai": "6b26666e9e64d05d",
    "vgg16 HYBRID_CUSTOMIZED 4 | chakra": "refused: D310",
    "vgg16 HYBRID_CUSTOMIZED 4 | json": "ae7f15cbc5e814b3",
    "vgg16 HYBRID_CUSTOMIZED 4 | json simai": "40e3247508c8f795",
    "vgg16 HYBRID_CUSTOMIZED 4 | chakra-et": "62de2acba8211c13",
    "gpt2 --dp 2 | astra-sim": "92e8eb88471aac4e",
    "gpt2 --dp 2 | simai": "315776d53f7a6368",
    "gpt2 --dp 2 | chakra": "refused: D310",
    "gpt2 --dp 2 | json": "6d47e20f2a271fb6",
    "gpt2 --dp 2 | json simai": "3544e0c8be902102",
    "gpt2 --dp 2 | chakra-et": "c710d8ccc2ce42ba",
    "gpt2 --tp 4 --dp 2 | astra-sim": "7185d6871a204884",
    "gpt2 --tp 4 --dp 2 | simai": "45dc0545a958cb24",
    "gpt2 --tp 4 --dp 2 | chakra": "refused: D310",
    "gpt2 --tp 4 --dp 2 | json": "3f2eaaca32b12aa8",
    "gpt2 --tp 4 --dp 2 | json simai": "8636ecf2de4b9d83",
    "gpt2 --tp 4 --dp 2 | chakra-et": "56f98fbccc0e3fd7",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | astra-sim": "cfb25f88c0a4607e",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | simai": "384a0a3c0ff531e2",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | chakra": "refused: D310",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | json": "910dc93811d525f6",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | json simai": "f6109b8faf99843c",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | chakra-et": "6ec6eee890d23b22",
    "gpt2 --tp 2 --recompute full | astra-sim": "3c2b9367bb4abdc3",
    "gpt2 --tp 2 --recompute full | simai": "5717107830f32c09",
    "gpt2 --tp 2 --recompute full | chakra": "refused: D310",
    "gpt2 --tp 2 --recompute full | json": "e917f23f9142f4c6",
    "gpt2 --tp 2 --recompute full | json simai": "91bad43af3e48257",
    "gpt2 --tp 2 --recompute full | chakra-et": "ce70bf20b38900d7",
    "gpt2 --tp 2 --recompute selective | astra-sim": "refused: D310",
    "gpt2 --tp 2 --recompute selective | simai": "refused: D310",
    "gpt2 --tp 2 --recompute selective | chakra": "refused: D310",
    "gpt2 --tp 2 --recompute selective | json": "refused: D310",
    "gpt2 --tp 2 --recompute selective | json simai": "refused: D310",
    "gpt2 --tp 2 --recompute selective | chakra-et": "2c7778e0651fc40e",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | astra-sim": "refused: D310",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | simai": "b3a6b29d1c0246b6",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | chakra": "refused: D310",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | json": "refused: D310",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | json simai": "1d700f4ea6d72e29",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | chakra-et": "b500e5fa956ec8b1",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | astra-sim": "refused: D310",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | simai": "e6d052efb9abd63d",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | chakra": "refused: D310",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | json": "refused: D310",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | json simai": "e27d43b9416a6874",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | chakra-et": "73fff00709fa67d5",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | astra-sim": "refused: D310",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | simai": "edfd39ff7e5a0245",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | chakra": "refused: D310",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | json": "refused: D310",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | json simai": "b9a845f22d45acc2",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | chakra-et": "f4de73d32fad950d",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | astra-sim": "refused: D310",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | simai": "270c1a0d403dd947",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | chakra": "refused: D310",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | json": "refused: D310",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | json simai": "347c29c09d0986cd",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | chakra-et": "052d0821de37f009",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | astra-sim": "refused: D310",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | simai": "243ba1f00d4fff66",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | chakra": "refused: D310",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | json": "refused: D310",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | json simai": "4b4ccdff0f85126f",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | chakra-et": "4608184b8a6ef3d3",
}
# seconds per format each (64 routed experts; 32 blocks through six formats): -m slow
SLOW = {"deepseek-moe-16b", "llama-3-8b", "mixtral-8x7b"}


def _digest(config: str, fmt: str, tmp: Path) -> str:
    output = f"{tmp}/" if fmt == "chakra-et" else str(tmp / "x.txt")
    result = run(prepare(Request(output=output, **CONFIGS[config], **FORMATS[fmt])))
    if has_errors(result.diagnostics) or not result.files:
        return "refused: " + ",".join(sorted({d.code for d in result.diagnostics if d.severity <= 1}))
    h = hashlib.sha256()
    for path, content in result.files:
        data = _bytes(content)
        if path.name.endswith((".meta.json", ".et-meta.json")):
            data = json.dumps(json.loads(data)["parallel"], sort_keys=True).encode()
        h.update(path.name.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


def _bytes(content: Content) -> bytes:
    if isinstance(content, str):
        return content.encode()
    if isinstance(content, bytes):
        return content
    made = content()
    return made if isinstance(made, bytes) else b"".join(made)


@cache
def _extracted(
    spec: str,
    batch: int | None,
    shapes: tuple[tuple[str, tuple[int, ...]], ...],
    full_hash: bool,
    multiple: int,
) -> tuple[ModelIR | None, tuple[Diagnostic, ...]]:
    ir, found = _EXTRACT(
        spec, batch=batch, input_shapes=dict(shapes), full_hash=full_hash, vocabulary_multiple=multiple
    )
    return ir, tuple(found)


_EXTRACT = pipeline.extract_checked


def _cached_extract(
    spec: str | Path,
    *,
    batch: int | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    input_values: Mapping[str, float] | None = None,
    file_hash: bool = True,
    full_hash: bool = False,
    vocabulary_multiple: int = 1,
    per_expert: bool = False,
    trust_remote_code: bool = False,
    tensor: int = 1,
    precision: str | None = None,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """pipeline.extract_checked, once per model: the IR is frozen, and six formats read it."""
    assert file_hash
    assert precision is None  # the goldens are the models' own dtypes
    assert not input_values
    assert not per_expert
    assert not trust_remote_code
    shapes = tuple(sorted((input_shapes or {}).items()))
    ir, found = _extracted(str(spec), batch, shapes, full_hash, vocabulary_multiple)
    return ir, list(found)


MODELS = sorted({c["model"] for c in CONFIGS.values()})


@pytest.mark.parametrize(
    "model", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODELS]
)
def test_outputs_equal_those_before_the_plan_was_format_neutral(
    model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline, "extract_checked", _cached_extract)
    keys = [f"{c} | {f}" for c in CONFIGS if CONFIGS[c]["model"] == model for f in FORMATS]
    got: dict[str, str] = {}
    for key in keys:
        config, fmt = key.split(" | ")
        folder = tmp_path / str(len(got))
        folder.mkdir()
        got[key] = _digest(config, fmt, folder)
    assert got == {key: GOLDEN[key] for key in keys}
