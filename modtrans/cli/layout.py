"""The LLM layout's options of `modtrans translate` (tensor x pipeline x data x expert): one typed
alias each, as the library's Request and Layout name them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from modtrans.cli.common import finite
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.options import Recompute, Schedule

LLM = "LLM parallelism (tensor x pipeline x data x expert)"

TpOpt = Annotated[
    int | None, typer.Option("--tp", min=1, help="Tensor-parallel ranks T.", rich_help_panel=LLM)
]
PpOpt = Annotated[int | None, typer.Option("--pp", min=1, help="Pipeline stages P.", rich_help_panel=LLM)]
DpOpt = Annotated[
    int | None,
    typer.Option("--dp", min=1, help="Data-parallel ranks D (default N / (T P)).", rich_help_panel=LLM),
]
EpOpt = Annotated[
    int | None,
    typer.Option(
        "--ep", min=1, help="Expert-parallel ranks E, carved from the D data ranks.", rich_help_panel=LLM
    ),
]
EtpOpt = Annotated[
    int | None,
    typer.Option(
        "--etp",
        min=1,
        help="Tensor ranks each expert is split over: T (default, Megatron-Core's) or 1.",
        rich_help_panel=LLM,
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
        rich_help_panel=LLM,
    ),
]
PadOpt = Annotated[
    bool,
    typer.Option(
        "--moe-pad-expert-input-to-capacity",
        help="Megatron's: every expert's tokens padded to its capacity (computed and sent).",
        rich_help_panel=LLM,
    ),
]
CpOpt = Annotated[
    int | None,
    typer.Option(
        "--cp",
        min=1,
        help="Context-parallel ranks C: the sequence split over them (Megatron's "
        "--context-parallel-size; N = T C P D).",
        rich_help_panel=LLM,
    ),
]
SpOpt = Annotated[
    bool, typer.Option("--sp", help="Sequence parallelism over the T ranks.", rich_help_panel=LLM)
]
ZeroOpt = Annotated[
    int | None, typer.Option("--zero", min=0, max=3, help="ZeRO stage 0-3.", rich_help_panel=LLM)
]
MicroBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--micro-batch", min=1, help="Sequences per micro-batch M (default 1).", rich_help_panel=LLM
    ),
]
GlobalBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--global-batch", min=1, help="Sequences per iteration B (default M D P).", rich_help_panel=LLM
    ),
]
ScheduleOpt = Annotated[
    Schedule | None, typer.Option("--schedule", help="Pipeline schedule.", rich_help_panel=LLM)
]
VppOpt = Annotated[
    int | None,
    typer.Option("--vpp", min=1, help="Interleaved: model chunks per pipeline rank V.", rich_help_panel=LLM),
]
RecomputeOpt = Annotated[
    Recompute | None,
    typer.Option("--recompute", help="Activation recomputation.", rich_help_panel=LLM),
]
SeqLenOpt = Annotated[
    int | None,
    typer.Option(
        "--seq-len",
        min=1,
        help="Tokens per sequence S (input_ids=1xS; default 2048, or the model's context if shorter; "
        "Megatron's --seq-length; a vision-language model's S counts its image tokens).",
        rich_help_panel=LLM,
    ),
]
StagesOpt = Annotated[
    str | None,
    typer.Option(
        "--stages",
        help="Blocks per pipeline chunk, e.g. 9,8,8,7 (default: balanced).",
        rich_help_panel=LLM,
    ),
]


FrameworkOpt = Annotated[
    Framework | None,
    typer.Option(
        "--framework",
        help="Whose data parallelism and ZeRO: megatron (default), deepspeed or fsdp.",
        rich_help_panel=LLM,
    ),
]
OverlapOpt = Annotated[
    bool,
    typer.Option(
        "--overlap-grad-reduce",
        help="Megatron: reduce gradients in buckets during the backward (default: once, after it).",
        rich_help_panel=LLM,
    ),
]
VocabOpt = Annotated[
    int | None,
    typer.Option(
        "--make-vocab-size-divisible-by",
        min=1,
        help="Megatron: pad the vocabulary to a multiple of this x T (default 128; 1: unpadded).",
        rich_help_panel=LLM,
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
