"""The options of a translation, one row each: the one list from which `modtrans translate`'s
and `modtrans diff`'s options (cli/options.py), `modtrans.translate`'s keywords (api.py), the
Request's fields (request.py, a test holds them equal), the LLM layout's fields and what --like
fills all come. A row's name is the API keyword and the Request field; --name-with-hyphens the
command line's option. Its rule (bounds, choices, the text form a list is typed in) is checked
here for the API and by the command line's conversion with the same bounds and messages."""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modtrans import cost, formats
from modtrans.comm import TRANSLATED, Policy
from modtrans.ir.precision import PRECISIONS
from modtrans.rules import (
    Grid,
    Option,
    Registered,
    array,
    indices,
    shapes,
    switches,
    value,
    values,
    words,
)
from modtrans.strategy import Params
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm.modules import MODULES
from modtrans.strategy.llm.options import Recompute, Schedule
from modtrans.workload.model import Dialect

Keyword = enum.StrEnum("Keyword", [(p.name, p.value) for p in TRANSLATED])  # type: ignore[misc]
"""The parallelism keywords `translate` writes (comm.TRANSLATED), --parallel's choices."""


class DataflowKind(enum.StrEnum):
    WS = "ws"
    IS = "is"
    OS = "os"


MODEL, KEYWORD, LAYOUT, SCHEDULE, COST, OUTPUT, OTHER = (
    "Model",
    "Parallelism keyword (ASTRA-sim's workload file)",
    "LLM layout (tensor x pipeline x data x expert)",
    "Pipeline schedule",
    "Cost model",
    "Output",
    "Options",
)
GROUPS = (MODEL, KEYWORD, LAYOUT, SCHEDULE, COST)
"""The help groups translate and diff share, in the order --help lists them (Output is
translate's own; Options, the rest, comes last)."""


def _o(name: str, kind: Any, help: str, group: str = OTHER, **rest: Any) -> Option:
    return Option(name, kind, help, group, **rest)


N1 = {"low": 1}
_SIDE = {"diff": True}

OPTIONS: tuple[Option, ...] = (
    _o("output", str, "Write here (atomically); - or nothing for standard output.", OUTPUT,
       flags=("--output", "-o")),
    _o("parallel", Keyword,
       "The parallelism keyword (formulas: modtrans/strategy/techniques/, a module each).", KEYWORD,
       flags=("--parallel", "-p"), shown=Keyword(Policy.DATA), like=True),
    _o("npus", int, "NPUs in the simulated system.", KEYWORD, shown=1, **N1),
    _o("model_parallel_group", int,
       "NPUs per model-parallel group (hybrids, transformers); divides --npus.", KEYWORD, **N1),
    _o("packages", int, "Or: the number of packages (groups); the group is --npus / --packages.", KEYWORD,
       **N1),
    _o("checkpoint_every", int,
       "FWD_IN_BCKWD: an activation checkpoint every K layers (default: one, at 0).", KEYWORD, **N1),
    _o("checkpoints", tuple, "FWD_IN_BCKWD: explicit checkpoint layers, e.g. 0,9,18.", KEYWORD, text=indices),
    _o("checkpoint_initiates", tuple,
       "FWD_IN_BCKWD: layers that start recomputation (default: each segment's last layer).", KEYWORD,
       text=indices),
    _o("per_layer", Path,
       "HYBRID_CUSTOMIZED: a file of `PATTERN KEYWORD` lines (fnmatch patterns on layer names; first "
       "match wins; unmatched layers are DATA). Without it each layer takes the cheaper of DATA "
       "(all-reduce of its parameters, 2P) and MODEL (all-gather of its output plus all-reduce of its "
       "input gradient, A_out + 2 A_in).", KEYWORD),
    _o("timeline", Path,
       "Also draw the plan's schedule (FILE.svg or FILE.png): a lane per pipeline stage, a block per "
       "forward / backward of each micro-batch and chunk, the bubble the white between.", OUTPUT),
    _o("per_layer_times", Path,
       "Measured compute times: a CSV of `layer,phase,time_ns` (phase fwd, ig, wg, update), an "
       "AICB/AIOB computation profile or a PyTorch profiler trace (.json[.gz], with_modules), projected "
       "onto each rank's share by the cost model.", COST),
    _o("per_expert", bool,
       "A configuration's routed experts a layer and trace node each, as transformers' modules are "
       "(default: one grouped GEMM of an EP rank's experts per projection).", MODEL, default=False,
       flags=("--per-expert",)),
    _o("trust_remote_code", bool,
       "Run the code a configuration's auto_map names (modeling_*.py beside its config.json), as "
       "transformers' trust_remote_code does: without it such a configuration is refused.", MODEL,
       default=False, flags=("--trust-remote-code",), **_SIDE),
    _o("dialect", Dialect, "Consumer to write for.", OUTPUT, flags=("--dialect", "-d"),
       shown=Dialect.ASTRA_SIM, like=True),
    _o("params", Params,
       "trainable: weights, biases, norm scales (what a framework all-reduces); weights: the conv/linear "
       "weight tensor only (ASTRA-sim's reference ResNet-50 convention).", MODEL, shown=Params.TRAINABLE,
       like=True, **_SIDE),
    _o("batch", int, "Batch size: fixes dim 0 of every input where it is symbolic.", MODEL,
       flags=("--batch", "-b"), **N1, **_SIDE),
    _o("input_shape", dict,
       "NAME=1x3x224x224: the whole shape of one input (repeatable); a T5 configuration's "
       "decoder_input_ids=BxT sets its decoder's tokens (default T = S); a vision-language model's "
       "images pixel_values=NxCxHxW (N / B per sample of input_ids=BxS, whose S counts the image tokens).",
       MODEL, text=shapes, many=True, **_SIDE),
    _o("input_value", dict,
       "NAME=V: a scalar input's value (repeatable), so that an If on it takes one branch (Silero VAD's "
       "sr=16000) where otherwise both are costed (X513).", MODEL, text=values, many=True),
    _o("dtype_bytes", int, "Bytes per parameter element in the all-reduce (default: the model's dtype).",
       MODEL, **N1),
    _o("precision", tuple(PRECISIONS),
       "The dtype training computes in: every floating parameter and activation (and the bytes the "
       "collectives move) in fp32, fp16 or bf16, as Megatron-LM's --fp16/--bf16 or DeepSpeed's "
       "fp16/bf16 sections run it; Adam's fp32 master weights and states stay (default: the "
       "framework's own where it has one: bf16 under torchtitan, llm-foundry, fms-fsdp and nemo; else the "
       "model's own dtype, float32 where a configuration states none). fp8: bf16 with the transformer "
       "blocks' linears in FP8 as Transformer Engine runs them under Megatron-Core (--fp8-format "
       "hybrid); --framework megatron or nemo, the gpu model and an FP8 device (h100, h200, b200) only.",
       MODEL, **_SIDE),
    _o("compute", cost.Model, "Compute-time model (`modtrans cost list` describes them).", COST,
       shown=cost.Model.GPU, like=True, **_SIDE),
    _o("device", str,
       "gpu, roofline: a100, h100, h100-hbm2e, h200, b200, mi300x (roofline also v100, tpu-v4) or a profile "
       "FILE.json; scalesim-v3: a SCALE-Sim .cfg.", COST, **_SIDE),
    _o("array", tuple, "Systolic array ROWSxCOLS (default 256x256).", COST, text=array, **_SIDE),
    _o("dataflow", DataflowKind,
       "Systolic dataflow (scalesim-v3, scalesim): weight, input or output stationary.", COST, **_SIDE),
    _o("bytes_per_cycle", float, "Systolic models: memory bytes per cycle for layers without a GEMM.", COST,
       low=0.001, **_SIDE),
    _o("efficiency", str,
       "gpu: scale its measured rates, all (0.9) or per class (gemm=0.8,attention=0.9,memory=0.95).", COST,
       **_SIDE),
    _o("attention", ("flash", "flash2", "cudnn", "flash1", "triton", "efficient", "sdpa", "eager"),
       "gpu: flash (the device's newest fused kernel, the default; --framework torchtitan: flash2, "
       "llm-foundry: triton, flash-attn: flash1, fms-fsdp: flash2), flash2 (FlashAttention-2: PyTorch "
       "SDPA's, flash-attn 2.x), cudnn (cuDNN's: Transformer Engine's on Hopper), flash1 (flash-attn "
       "1.x), triton "
       "(FlashAttention in Triton: llm-foundry's 2023 benchmarks), efficient (the memory-efficient "
       "kernel: PyTorch SDPA's where it is handed a mask), sdpa (SDPA's choice per attention: flash2, "
       "or efficient where a window or bias is passed as a mask) or eager (its GEMMs and a "
       "materialised softmax).", COST,
       flags=("--attention",), **_SIDE),
    _o("time_unit", cost.Unit,
       "What one tick of a workload file is: ns (ASTRA-sim 1.0's and SimAI's default), us (--dialect "
       "chakra's default: its converter writes duration_micros, which ASTRA-sim 2.x reads as us; Chakra "
       "traces always hold us), cycles (--clock-ghz).", COST, like=True, **_SIDE),
    _o("clock_ghz", float, "Accelerator clock, to turn cycles into ns / us.", COST, default=1.0, low=0.001,
       like=True, **_SIDE),
    _o("format", Registered(formats.formats),
       "text (the workload file), json (workload JSON) or chakra-et (one Chakra trace per NPU, -o "
       "DIR/PREFIX -> PREFIX.<npu>.et, with PREFIX.comm_groups.json).", OUTPUT, default="text",
       flags=("--format",)),
    _o("passes", int, "chakra-et: training iterations in each trace.", OUTPUT, default=1, **N1),
    _o("network_dims", tuple,
       "chakra-et: NPUs per network dimension, e.g. 4,2: each collective gets the involved_dim mask "
       "ASTRA-sim 1.0 would give it (default: no mask, i.e. every dimension).", OUTPUT,
       text=functools.partial(indices, expected="NPUs per network dimension like 4,2")),
    _o("meta", Path,
       "Write a text or JSON output's provenance here (default: OUTPUT.meta.json beside it); a trace "
       "set's is always PREFIX.et-meta.json.", OUTPUT),
    _o("like", Path,
       "A reference workload whose conventions to follow where not given: its keyword, dialect, layer "
       "convention (--params) and compute model (ASTRA-sim's reference model when its update times are a "
       "tenth of its weight-gradient times)."),
    _o("force", bool, "Allow --output to overwrite an input file.", OUTPUT, default=False),
    _o("check", ("quick", "full"),
       "How an output is checked before it is written: quick (a text's lines' form and count, and the "
       "workload's checks, read back whole where they find anything; above 64 ranks, the sampled traces "
       "decoded and their graphs checked) or full (read back as `modtrans validate` reads it; the sampled "
       "traces node by node).", OUTPUT, default="quick", flags=("--check",)),
    _o("strict", bool, "Warnings (e.g. what the consumer misreads) fail: no output.", default=False),
    _o("allow_unknown", bool,
       "Keep layers whose FLOPs are unknown (X510: 0; X514: one loop iteration); the metadata lists them.",
       MODEL, default=False, flags=("--allow-unknown",)),
    _o("full_hash", bool,
       "Provenance: the SHA-256 of the whole file even above 64 MiB (there, by default, a sampled digest "
       "of 64 blocks: a few ms instead of reading it all).", default=False, flags=("--full-hash",)),
    _o("tp", int, "Tensor-parallel ranks T.", LAYOUT, layout=True, like=True, **N1, **_SIDE),
    _o("pp", int, "Pipeline stages P.", LAYOUT, layout=True, like=True, **N1, **_SIDE),
    _o("dp", int, "Data-parallel ranks D (default N / (T P)).", LAYOUT, layout=True, like=True, **N1,
       **_SIDE),
    _o("ep", int, "Expert-parallel ranks E, carved from the D data ranks.", LAYOUT, layout=True, like=True,
       **N1, **_SIDE),
    _o("etp", int, "Tensor ranks each expert is split over: T (default, Megatron-Core's) or 1.", LAYOUT,
       layout=True, **N1, **_SIDE),
    _o("cp", int,
       "Context-parallel ranks C: the sequence split over them (Megatron's --context-parallel-size; "
       "N = T C P D).", LAYOUT, layout=True, **N1, **_SIDE),
    _o("dp_replicate", int,
       "HSDP: the D data ranks as R replicas, each a shard group of D / R ranks (torchtitan's "
       "data_parallel_replicate_degree, FSDP's HYBRID_SHARD; --framework fsdp, torchtitan, llm-foundry or "
       "fms-fsdp, "
       "--zero 2 or 3).", LAYOUT, layout=True, **N1, **_SIDE),
    _o("sp", bool, "Sequence parallelism over the T ranks (default: none, or --like's reference's).", LAYOUT,
       flags=("--sp/--no-sp",), layout=True, like=True, **_SIDE),
    _o("zero", int, "ZeRO stage 0-3.", LAYOUT, low=0, high=3, layout=True, like=True, **_SIDE),
    _o("micro_batch", int, "Sequences per micro-batch M (default 1).", LAYOUT, layout=True, **N1, **_SIDE),
    _o("global_batch", int, "Sequences per iteration B (default M D P).", LAYOUT, layout=True, like=True,
       **N1, **_SIDE),
    _o("schedule", Schedule, "Pipeline schedule.", SCHEDULE, layout=True, **_SIDE),
    _o("vpp", int, "Interleaved: model chunks per pipeline rank V.", SCHEDULE, layout=True, **N1, **_SIDE),
    _o("recompute", Recompute, "Activation recomputation.", SCHEDULE, layout=True, **_SIDE),
    _o("recompute_fraction", float,
       "--recompute full of this fraction of the blocks, spread as fms-fsdp's selective activation "
       "checkpointing spreads them (0.5: every second block from the first; default 1, all).", SCHEDULE,
       low=0.001, layout=True, **_SIDE),
    _o("recompute_method", ("uniform", "block"),
       "Megatron's placement of --recompute full, with --recompute-num-layers N: uniform (segments of N "
       "blocks, each keeping its input and rerun whole) or block (the first N blocks of each pipeline "
       "chunk, the rest not recomputed); default: every block alone (uniform 1).", SCHEDULE, layout=True,
       **_SIDE),
    _o("recompute_modules", tuple,
       "Megatron-Core's --recompute-modules for --recompute selective, a list of core_attn (default), "
       "layernorm, mla_up_proj, mlp, moe, shared_experts, moe_act: what reruns in the backward and "
       "stops being stored (strategy/llm/modules.py).", SCHEDULE, layout=True, metavar="LIST",
       text=functools.partial(words, choices={m: m for m in MODULES}), **_SIDE),
    _o("recompute_num_layers", int, "Megatron's --recompute-num-layers N (with --recompute-method).",
       SCHEDULE, layout=True, **N1, **_SIDE),
    _o("seq_len", int,
       "Tokens per sequence S (input_ids=1xS; default 2048, or the model's context if shorter; Megatron's "
       "--seq-length; a vision-language model's S counts its image tokens).", MODEL, like=True, **N1,
       **_SIDE),
    _o("framework", Framework,
       "Whose data parallelism and ZeRO, and which version: megatron (default), megatron-2022, "
       "deepspeed, fsdp, torchtitan, llm-foundry, flash-attn, fms-fsdp or nemo (strategy/frameworks.py).",
       LAYOUT, layout=True, **_SIDE),
    _o("overlap_grad_reduce", bool,
       "Megatron: reduce gradients in buckets during the backward (default: once, after it).", LAYOUT,
       default=False, flags=("--overlap-grad-reduce",), layout=True, **_SIDE),
    _o("overlap_param_gather", bool,
       "Megatron: all-gather the distributed optimizer's parameters bucket by bucket during the next "
       "forward (default: all after the step; needs --overlap-grad-reduce and --zero 1 or 2).", LAYOUT,
       default=False, flags=("--overlap-param-gather",), layout=True, **_SIDE),
    _o("tp_comm_overlap", bool,
       "Megatron-Core: Transformer Engine's userbuffers run the blocks' sequence-parallel collectives "
       "inside their GEMMs, as compute (needs --sp; the NVLink of --device's node).", LAYOUT,
       default=False, flags=("--tp-comm-overlap",), layout=True, **_SIDE),
    _o("compile", bool,
       "torch.compile of each transformer block, as torchtitan's compile = true applies it: RMSNorm "
       "and SwiGLU as Inductor's fused kernels (a complex rotary stays op by op), and what its "
       "partitioner saves for the backward (--framework torchtitan, fsdp or fms-fsdp).", LAYOUT,
       default=False,
       flags=("--compile",), layout=True, **_SIDE),
    _o("make_vocab_size_divisible_by", int,
       "Megatron: pad the vocabulary to a multiple of this x T (default 128; 1: unpadded).", LAYOUT,
       layout=True, **N1, **_SIDE),
    _o("moe_expert_capacity_factor", float,
       "Megatron's: each expert takes at most ceil(tokens x top-k / E x F) tokens, the rest dropped "
       "(default: none dropped).", LAYOUT, low=0.001, layout=True, **_SIDE),
    _o("moe_pad_expert_input_to_capacity", bool,
       "Megatron's: every expert's tokens padded to its capacity (computed and sent).", LAYOUT,
       default=False, flags=("--moe-pad-expert-input-to-capacity",), layout=True, **_SIDE),
    _o("stages", tuple, "Blocks per pipeline chunk, e.g. 9,8,8,7 (default: balanced).", SCHEDULE,
       text=functools.partial(indices, expected="blocks per chunk like 9,8,8,7"), layout=True),
)  # fmt: skip

SPACE, CLUSTER, SWEEPING = (
    "Search space (a list 1,2,4 or a range 1:16; default: every value that can be valid)",
    "Cluster",
    "Sweep",
)
_SPACE = {"text": Grid(), "metavar": "LIST"}

SWEEP_OWN: tuple[Option, ...] = (
    _o("gpus", tuple, "GPUs of the cluster N (a list: a sweep of each count).", CLUSTER, text=Grid(),
       metavar="LIST"),
    _o("network", str,
       "switch:NPUS:GBPS, dgx-a100, selene, hgx-h100 or jean-zay-a100 (nodes of 8 GPUs): the "
       "estimate's and the simulator's.",
       CLUSTER, default="hgx-h100"),
    _o("tp", tuple, "Tensor-parallel ranks T.", SPACE, **_SPACE),
    _o("pp", tuple, "Pipeline stages P.", SPACE, **_SPACE),
    _o("cp", tuple, "Context-parallel ranks C.", SPACE, **_SPACE),
    _o("ep", tuple, "Expert-parallel ranks E (default: 1, or a MoE's experts' divisors).", SPACE, **_SPACE),
    _o("dp_replicate", tuple, "HSDP replicas R (default: 1, no hybrid sharding).", SPACE, **_SPACE),
    _o("vpp", tuple, "Model chunks per pipeline rank V (1: 1F1B; 2 or more: interleaved).", SPACE, **_SPACE),
    _o("micro_batch", tuple, "Sequences per micro-batch M.", SPACE, **_SPACE),
    _o("recompute", tuple, "Activation recomputation: none, selective, full.", SPACE,
       text=functools.partial(words, choices={r.value: r for r in Recompute}), metavar="LIST"),
    _o("distributed_optimizer", tuple, "Megatron's distributed optimizer (ZeRO-1): on, off.", SPACE,
       text=switches, metavar="LIST"),
    _o("sp", tuple, "Sequence parallelism: on, off (default: on where T > 1).", SPACE, text=switches,
       metavar="LIST"),
    _o("tp_comm_overlap", tuple,
       "Megatron-Core's --tp-comm-overlap (Transformer Engine's userbuffers): on, off (default: off "
       "only, as Megatron-LM runs without the flag; on is tried where SP is on and T > 1 within a "
       "node).", SPACE, text=switches, metavar="LIST"),
    _o("zero", tuple, "ZeRO stages Z, 0-3 (default: megatron --distributed-optimizer's; deepspeed 0-3; "
       "fsdp 0, 2, 3).", SPACE, text=Grid(0, 3), metavar="LIST"),
    _o("simulate", str, "Run ASTRA-sim 2.x on the best K by the estimate (top:K), all, or none.", SWEEPING,
       default="none", metavar="top:K|all|none"),
    _o("astra_sim", str, "The ASTRA-sim 2.x binary (default: $MODTRANS_ASTRA_SIM).", SWEEPING,
       metavar="FILE"),
    _o("jobs", int, "Worker processes (default: the CPUs this process may use).", SWEEPING, **N1),
    _o("engine", ("local", "dask"),
       "local: a process pool on this machine; dask: a Dask cluster (the distributed extra).", SWEEPING,
       default="local"),
    _o("scheduler", str, "--engine dask: a scheduler's address (default: a local cluster of --jobs workers).",
       SWEEPING),
    _o("cache", Path, "Keep results here, to resume and repeat (default: ~/.cache/modtrans).", SWEEPING),
    _o("no_cache", bool, "Keep no results.", SWEEPING, default=False, flags=("--no-cache",)),
    _o("output", str, "Write the table to PREFIX.csv and PREFIX.json, the picture to PREFIX.svg.", OUTPUT,
       flags=("--output", "-o"), metavar="PREFIX"),
    _o("against", ("memory", "gpus"), "The picture's x axis: memory per GPU, or GPUs.", OUTPUT,
       default="memory"),
)  # fmt: skip
"""`modtrans sweep`'s own options (a layout option here is the list of values to try)."""

SWEEP_SHARED = (
    "seq_len",
    "global_batch",
    "framework",
    "device",
    "compute",
    "efficiency",
    "attention",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "make_vocab_size_divisible_by",
    "etp",
    "moe_expert_capacity_factor",
    "moe_pad_expert_input_to_capacity",
    "params",
    "dtype_bytes",
    "precision",
    "per_expert",
)
"""The options of `translate` every layout of a sweep shares, by the same rows."""

BY_NAME: Mapping[str, Option] = {row.name: row for row in OPTIONS}
SWEEP: tuple[Option, ...] = SWEEP_OWN + tuple(BY_NAME[name] for name in SWEEP_SHARED)
"""Every option of `modtrans sweep` and `modtrans.sweep`."""
LAYOUT_FIELDS = tuple(row.name for row in OPTIONS if row.layout)
"""The options of the LLM layout: giving any lays a transformer out (request._layout)."""
LIKE_FIELDS = tuple(row.name for row in OPTIONS if row.like)
"""What --like fills from a reference where not given (request._like)."""
SIDE = tuple(row for row in OPTIONS if row.diff)
"""The options of a model side of `modtrans diff`, translated as `translate` would."""


def values_of(
    given: Mapping[str, Any], caller: str = "translate", rows: tuple[Option, ...] = OPTIONS
) -> dict[str, Any]:
    """Every option of `given` by its rule (value()) among `rows` (translate's, or SWEEP); a name
    no row has is a TypeError, as Python says of an unexpected keyword."""
    named = BY_NAME if rows is OPTIONS else {row.name: row for row in rows}
    unknown = [name for name in given if name not in named]
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
    return {name: value(named[name], v) for name, v in given.items()}


def typed(row: Option) -> str:
    """The type a keyword of the API takes, as text (its signature's annotation)."""
    kind = row.kind
    if row.choices is not None:
        text = " | ".join(f'"{c}"' for c in row.choices)
    else:
        text = {tuple: "tuple[int, ...]", dict: "Mapping[str, Any]"}.get(
            kind, getattr(kind, "__name__", str(kind))
        )
    if row.text is not None:
        text += " | str" + (" | list[str]" if row.many else "")
    if row.name == "per_layer":
        text += " | Mapping[str, str]"
    return text + (" | None" if row.default is None else "")


def signature(
    leading: list[inspect.Parameter], returns: str, rows: tuple[Option, ...] = OPTIONS
) -> inspect.Signature:
    """`leading` then every option of `rows` as a keyword, with its type and default."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    keywords = [inspect.Parameter(r.name, keyword, default=r.default, annotation=typed(r)) for r in rows]
    return inspect.Signature([*leading, *keywords], return_annotation=returns)


def described(rows: tuple[Option, ...] = OPTIONS, command: str = "translate") -> str:
    """The options as a docstring lists them: name, type, default (or what None means), help."""
    lines = [f"Options (`modtrans {command} --help` groups them):", ""]
    for row in rows:
        shown = getattr(row.shown, "value", row.shown)
        default = shown if shown is not None else "not given" if row.default is None else repr(row.default)
        bounds = ", ".join(
            f"{word} {bound:g}"
            for word, bound in (("at least", row.low), ("at most", row.high))
            if bound is not None
        )
        lines.append(f"    {row.name}: {typed(row)} (default {default}{'; ' + bounds if bounds else ''})")
        lines.append(f"        {row.help}")
    return "\n".join(lines)
