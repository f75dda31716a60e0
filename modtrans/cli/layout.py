"""The LLM layout's options of `modtrans translate` (tensor x pipeline x data x expert): one typed
alias each, as the library's Request and Layout name them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from modtrans.cli.common import finite
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.options import Recompute, Schedule

TpOpt = Annotated[int | None, typer.Option("--tp", min=1, help="Tensor-parallel ranks T.")]
PpOpt = Annotated[int | None, typer.Option("--pp", min=1, help="Pipeline stages P.")]
DpOpt = Annotated[
    int | None,
    typer.Option("--dp", min=1, help="Data-parallel ranks D (default N / (T P))."),
]
EpOpt = Annotated[
    int | None,
    typer.Option("--ep", min=1, help="Expert-parallel ranks E, carved from the D data ranks."),
]
EtpOpt = Annotated[
    int | None,
    typer.Option(
        "--etp",
        min=1,
        help="Tensor ranks each expert is split over: T (default, Megatron-Core's) or 1.",
    ),
]
CapacityOpt = Annotated[
    float | None,
    typer.Option(
        "--moe-expert-capacity-factor",
        min=0.001,
        callback=finite,
        help="Megatron's: each expert takes at most ceil(tokens x top-k / E x F) tokens, the rest dropped "
        "(default: none dropped).",
    ),
]
PadOpt = Annotated[
    bool,
    typer.Option(
        "--moe-pad-expert-input-to-capacity",
        help="Megatron's: every expert's tokens padded to its capacity (computed and sent).",
    ),
]
CpOpt = Annotated[
    int | None,
    typer.Option(
        "--cp",
        min=1,
        help="Context-parallel ranks C: the sequence split over them (Megatron's "
        "--context-parallel-size; N = T C P D).",
    ),
]
SpOpt = Annotated[
    bool | None,
    typer.Option(
        "--sp/--no-sp",
        help="Sequence parallelism over the T ranks (default: none, or --like's reference's).",
    ),
]
ZeroOpt = Annotated[int | None, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3.")]
MicroBatchOpt = Annotated[
    int | None,
    typer.Option("--micro-batch", min=1, help="Sequences per micro-batch M (default 1)."),
]
GlobalBatchOpt = Annotated[
    int | None,
    typer.Option("--global-batch", min=1, help="Sequences per iteration B (default M D P)."),
]
ScheduleOpt = Annotated[Schedule | None, typer.Option("--schedule", help="Pipeline schedule.")]
VppOpt = Annotated[
    int | None,
    typer.Option("--vpp", min=1, help="Interleaved: model chunks per pipeline rank V."),
]
RecomputeOpt = Annotated[
    Recompute | None,
    typer.Option("--recompute", help="Activation recomputation."),
]
SeqLenOpt = Annotated[
    int | None,
    typer.Option(
        "--seq-len",
        min=1,
        help="Tokens per sequence S (input_ids=1xS; default 2048, or the model's context if shorter; "
        "Megatron's --seq-length; a vision-language model's S counts its image tokens).",
    ),
]
StagesOpt = Annotated[
    str | None,
    typer.Option(
        "--stages",
        help="Blocks per pipeline chunk, e.g. 9,8,8,7 (default: balanced).",
    ),
]


FrameworkOpt = Annotated[
    Framework | None,
    typer.Option(
        "--framework",
        help="Whose data parallelism and ZeRO: megatron (default), deepspeed or fsdp.",
    ),
]
OverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap-grad-reduce",
        help="Megatron: reduce gradients in buckets during the backward (default: once, after it).",
    ),
]
VocabOpt = Annotated[
    int | None,
    typer.Option(
        "--make-vocab-size-divisible-by",
        min=1,
        help="Megatron: pad the vocabulary to a multiple of this x T (default 128; 1: unpadded).",
    ),
]

FIELDS = (
    "tp",
    "pp",
    "dp",
    "ep",
    "etp",
    "cp",
    "sp",
    "overlap_grad_reduce",
    "make_vocab_size_divisible_by",
    "moe_expert_capacity_factor",
    "moe_pad_expert_input_to_capacity",
    "zero",
    "micro_batch",
    "global_batch",
    "vpp",
    "seq_len",
)


def request_fields(given: dict[str, Any]) -> dict[str, Any]:
    """The layout options among a command's parameters, as Request fields (enums as values)."""
    fields = {name: given[name] for name in FIELDS}
    for name in ("schedule", "recompute", "framework"):
        value = given[name]
        fields[name] = None if value is None else getattr(value, "value", value)
    return fields
