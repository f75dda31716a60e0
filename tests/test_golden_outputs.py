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
padded: strategy/llm/buckets.py) where each layer had its own all-reduce.
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
    "chakra": {"format": "text", "dialect": "chakra"},
    "json": {"format": "json"},
    "json simai": {"format": "json", "dialect": "simai"},
    "chakra-et": {"format": "chakra-et"},
}

GOLDEN = {
    "gpt2 DATA 4 | astra-sim": "81d23d78327ec449",
    "gpt2 DATA 4 | simai": "61ef0c6c1cab17df",
    "gpt2 DATA 4 | chakra": "81d23d78327ec449",
    "gpt2 DATA 4 | json": "b9415d743b550681",
    "gpt2 DATA 4 | json simai": "b72cb63d43a666b8",
    "gpt2 DATA 4 | chakra-et": "cfc8998049f08562",
    "gpt2 MODEL 4 | astra-sim": "c12611e021ea8cef",
    "gpt2 MODEL 4 | simai": "ea2cb5a7437e14f3",
    "gpt2 MODEL 4 | chakra": "c12611e021ea8cef",
    "gpt2 MODEL 4 | json": "4b7cc323b0345984",
    "gpt2 MODEL 4 | json simai": "d8664b33afd163b1",
    "gpt2 MODEL 4 | chakra-et": "c9b430db215a86b0",
    "gpt2 HYBRID_DATA_MODEL 8/4 | astra-sim": "0c372a2463475061",
    "gpt2 HYBRID_DATA_MODEL 8/4 | simai": "222ba660f0d58ec2",
    "gpt2 HYBRID_DATA_MODEL 8/4 | chakra": "0c372a2463475061",
    "gpt2 HYBRID_DATA_MODEL 8/4 | json": "f490a43edc4b62f3",
    "gpt2 HYBRID_DATA_MODEL 8/4 | json simai": "6998eff292ef5ad1",
    "gpt2 HYBRID_DATA_MODEL 8/4 | chakra-et": "94642c682ade69aa",
    "gpt2 HYBRID_MODEL_DATA 8/2 | astra-sim": "320a48984a5ab8d4",
    "gpt2 HYBRID_MODEL_DATA 8/2 | simai": "d9efd9879c89f172",
    "gpt2 HYBRID_MODEL_DATA 8/2 | chakra": "320a48984a5ab8d4",
    "gpt2 HYBRID_MODEL_DATA 8/2 | json": "5318ab8547c0e47c",
    "gpt2 HYBRID_MODEL_DATA 8/2 | json simai": "6b90e099c83a48b9",
    "gpt2 HYBRID_MODEL_DATA 8/2 | chakra-et": "350eb3518d631a55",
    "gpt2 HYBRID_TRANSFORMER 8/4 | astra-sim": "bdac4bf8f0685d90",
    "gpt2 HYBRID_TRANSFORMER 8/4 | simai": "442479748f4ad311",
    "gpt2 HYBRID_TRANSFORMER 8/4 | chakra": "refused: D310",
    "gpt2 HYBRID_TRANSFORMER 8/4 | json": "e942994c52716ac6",
    "gpt2 HYBRID_TRANSFORMER 8/4 | json simai": "48f760a01fb8bc83",
    "gpt2 HYBRID_TRANSFORMER 8/4 | chakra-et": "9da0f6a935277c2d",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | astra-sim": "7562bca769b043d8",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | simai": "d2d4dd7010f5cb2e",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | chakra": "refused: D310",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | json": "4d21ed0560295dd6",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | json simai": "85533c29d6aa288d",
    "gpt2 FWD_IN_BCKWD 4/2 every 40 | chakra-et": "88e255181b0374cc",
    "vgg16 HYBRID_CUSTOMIZED 4 | astra-sim": "68eb2199b7680435",
    "vgg16 HYBRID_CUSTOMIZED 4 | simai": "b5c6ff972590eab4",
    "vgg16 HYBRID_CUSTOMIZED 4 | chakra": "refused: D310",
    "vgg16 HYBRID_CUSTOMIZED 4 | json": "12185489c3061a86",
    "vgg16 HYBRID_CUSTOMIZED 4 | json simai": "1b73f42448cbe8cb",
    "vgg16 HYBRID_CUSTOMIZED 4 | chakra-et": "9c2d5aafe0682140",
    "gpt2 --dp 2 | astra-sim": "acf7d3dba41b0832",
    "gpt2 --dp 2 | simai": "25923733bc8c888d",
    "gpt2 --dp 2 | chakra": "refused: D310",
    "gpt2 --dp 2 | json": "b82c97e4409b2a17",
    "gpt2 --dp 2 | json simai": "9f968868f91ff697",
    "gpt2 --dp 2 | chakra-et": "6cee44138cc63aef",
    "gpt2 --tp 4 --dp 2 | astra-sim": "c7d8c4997c32eb00",
    "gpt2 --tp 4 --dp 2 | simai": "e3989e714149b8bc",
    "gpt2 --tp 4 --dp 2 | chakra": "refused: D310",
    "gpt2 --tp 4 --dp 2 | json": "7c590a616cc4643f",
    "gpt2 --tp 4 --dp 2 | json simai": "b77e9d9971bbb1c0",
    "gpt2 --tp 4 --dp 2 | chakra-et": "2e8e4719b897d85c",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | astra-sim": "e1385257a7cd0ae8",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | simai": "e5f966e6c39d04e5",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | chakra": "refused: D310",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | json": "61a574f82674507b",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | json simai": "0e88297dc5996231",
    "gpt2 --tp 2 --dp 2 --sp --zero 1 | chakra-et": "6cbda19b73865ffe",
    "gpt2 --tp 2 --recompute full | astra-sim": "90d7e9674fddf1c9",
    "gpt2 --tp 2 --recompute full | simai": "a4a94c8f4511499e",
    "gpt2 --tp 2 --recompute full | chakra": "refused: D310",
    "gpt2 --tp 2 --recompute full | json": "67f33232ea347756",
    "gpt2 --tp 2 --recompute full | json simai": "af3eb989930cd5f2",
    "gpt2 --tp 2 --recompute full | chakra-et": "9ae70d3699a33399",
    "gpt2 --tp 2 --recompute selective | astra-sim": "4367742c75e20f16",
    "gpt2 --tp 2 --recompute selective | simai": "refused: D310",
    "gpt2 --tp 2 --recompute selective | chakra": "refused: D310",
    "gpt2 --tp 2 --recompute selective | json": "a87f921d4b8d4d3e",
    "gpt2 --tp 2 --recompute selective | json simai": "refused: D310",
    "gpt2 --tp 2 --recompute selective | chakra-et": "40a588266ae32743",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | astra-sim": "refused: D310",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | simai": "d3539aa0a6873440",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | chakra": "refused: D310",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | json": "refused: D310",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | json simai": "5f3fa303003ac433",
    "llama-3-8b --tp 2 --pp 2 --dp 2 | chakra-et": "2431e151bf74bd0d",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | astra-sim": "refused: D310",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | simai": "2924e1febe401316",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | chakra": "refused: D310",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | json": "refused: D310",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | json simai": "b7c99778b93a4c71",
    "llama-3-8b --pp 2 interleaved vpp 2 gb 4 | chakra-et": "f2aec128b835b208",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | astra-sim": "refused: D310",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | simai": "63344f42c68d8ca5",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | chakra": "refused: D310",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | json": "refused: D310",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | json simai": "81997cb3e0dd192b",
    "llama-3-8b --pp 2 gpipe --zero 3 --dp 2 | chakra-et": "ee9398d2e208c4a5",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | astra-sim": "refused: D310",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | simai": "385b31fdabdbdb58",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | chakra": "refused: D310",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | json": "refused: D310",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | json simai": "e60525291a59fd65",
    "mixtral-8x7b --tp 2 --sp --dp 4 --ep 2 | chakra-et": "432502e5475fcf2f",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | astra-sim": "refused: D310",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | simai": "d0c8c703650fe7a8",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | chakra": "refused: D310",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | json": "refused: D310",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | json simai": "0b08d5fcf6e24581",
    "deepseek-moe-16b --dp 4 --ep 2 --pp 2 | chakra-et": "6ca0b4c9f5272893",
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
        if path.name.endswith(".meta.json"):
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
    file_hash: bool = True,
    full_hash: bool = False,
    vocabulary_multiple: int = 1,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """pipeline.extract_checked, once per model: the IR is frozen, and six formats read it."""
    assert file_hash
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
