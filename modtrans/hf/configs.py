"""How a published config.json becomes the model transformers builds on the meta device: which of
its `architectures` is built, the dtype its checkpoint holds, and what it says that the build does
not follow (an `auto_map` beside a model_type transformers defines, a `quantization_config`), each
said in one warning (M805). No torch or transformers here: classes.py asks, with its own lookups.

A published file carries what a class's defaults do not: MPT-7B names its remote-code class
(`MPTForCausalLM`, transformers' own is `MptForCausalLM`) with an auto_map; bart-large lists the
headless `BartModel` before `BartForConditionalGeneration`; a fine-tuned checkpoint names its head
(`DebertaV2ForQuestionAnswering`); gpt-oss-20b holds its experts in mxfp4; OPT-1.3B and MPT-7B say
their weights are float16 and bfloat16 (`torch_dtype`, `dtype` from transformers 4.56 on).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.llm.config import DTYPES  # the dtypes a checkpoint holds that the IR names

DEQUANTIZED = (
    "built unquantized, as training holds its weights: transformers dequantizes an mxfp4 or fp8 "
    "checkpoint to train it (Mxfp4Config and FineGrainedFP8Config, dequantize=True), and QLoRA "
    "trains adapters beside the frozen quantized weights, whose elements are counted here"
)
"""What a quantized checkpoint trains as (M805; the `dequantize` flags: transformers'
utils/quantization_config.py). Its parameters are the weights' logical elements:
gpt-oss-20b's gate_up_proj_blocks [32, 5760, 90, 16] uint8 hold two fp4 values a byte, 32 x 5760 x
2880, the unquantized shape (transformers' integrations/mxfp4.py, convert_moe_packed_tensors); the
scales, one byte per 32 values, are not parameters a step updates."""


SHOWN = 6
"""The unread fields an M805 names (then their count)."""


def choose(
    names: Iterable[object], tasks: Sequence[str], base: str | None, defined: Callable[[str], bool]
) -> str | None:
    """The class to build for a configuration, among those transformers defines (`defined`): of
    its `architectures`, the first that is a task's class for its model_type (`tasks`, in
    classes.TASKS' order: bart-large lists the headless BartModel before
    BartForConditionalGeneration), else the first listed (a fine-tuned checkpoint's head); else the
    first task's class, as AutoModelForCausalLM.from_config builds it (MPT-7B names MPTForCausalLM,
    its own code's; transformers' is MptForCausalLM); else the model type's base class (`base`,
    AutoModel's: LayoutLMv3's file names none, and its task classes read boxes and images)."""
    listed = [str(n) for n in names if isinstance(n, str) and defined(n)]
    named = next((n for n in listed if n in tasks), listed[0] if listed else None)
    return next((n for n in (named, *tasks, base) if n is not None and defined(n)), None)


def dtype(config: Any) -> Any:
    """The dtype the configuration says its checkpoint holds (transformers' config.dtype, read from
    `torch_dtype` or `dtype`), None where it says none: build() puts it back on the model's
    configuration after building in float32, where blocks.shape_of reads the IR's dtype."""
    found = getattr(config, "dtype", None)
    return found if found is not None and str(found).removeprefix("torch.") in DTYPES else None


def foreign(data: Mapping[str, Any], native: bool, remote: bool) -> bool:
    """Whether the file names code of its own (auto_map) for a model_type transformers defines,
    and that code is not run (no --trust-remote-code): transformers' own classes are built."""
    mapped = data.get("auto_map")
    return isinstance(mapped, Mapping) and bool(mapped) and native and not remote


def unread(data: Mapping[str, Any], config: Any, ignored: Collection[str]) -> list[str]:
    """The file's fields its configuration class defines nowhere (neither among its defaults nor
    its aliases; `ignored`: generation settings and PretrainedConfig's own), its sub-configurations'
    as `text_config.KEY`: what code written for another class reads and transformers' does not
    (Florence-2's vision_config.dim_embed, where Florence2VisionConfig takes embed_dim and builds
    its defaults). Lists and tables first: the fields that shape a model."""
    try:
        known = set(type(config)().to_dict()) | set(getattr(type(config), "attribute_map", {}))
    except Exception:  # a class whose defaults do not build: nothing said
        return []
    found = []
    for key, value in data.items():
        sub = getattr(config, key, None)
        if isinstance(value, Mapping) and hasattr(sub, "to_dict") and hasattr(sub, "model_type"):
            found += [f"{key}.{k}" for k in unread(value, sub, ignored)]
        elif key not in known and key not in ignored:
            found.append(key)
    return sorted(found, key=lambda k: not isinstance(_at(data, k), list | Mapping))


def _at(data: Mapping[str, Any], dotted: str) -> Any:
    head, _, rest = dotted.partition(".")
    value = data.get(head)
    return _at(value, rest) if rest and isinstance(value, Mapping) else value


def warnings(
    data: Mapping[str, Any], name: str, *, native: bool, remote: bool, fields: Sequence[str] = ()
) -> list[Diagnostic]:
    """M805 for what the file says that the meta build does not follow: an auto_map where
    transformers defines the model_type itself and no --trust-remote-code was given (its own class
    is built, as from_pretrained builds it without trust_remote_code; `fields`: the file's that
    transformers' class does not define, unread()), and a quantization_config (top-level or its
    text configuration's), and a checkpoint dtype the IR does not hold (classes.buildable drops
    one that names no torch dtype, "auto")."""
    found = []
    mapped = data.get("auto_map")
    if isinstance(mapped, Mapping) and foreign(data, native, remote):
        code = ", ".join(sorted({str(v).split(".")[0] for v in mapped.values() if isinstance(v, str)}))
        message = (
            f"auto_map names code beside the configuration ({code}): transformers' own "
            f"{data.get('model_type')!r} classes are built, as from_pretrained builds them without "
            "trust_remote_code (--trust-remote-code runs that code instead)"
        )
        if fields:
            more = f", ... ({len(fields)} in all)" if len(fields) > SHOWN else ""
            shown = ", ".join(fields[:SHOWN])
            message += f"; fields of the file they define nowhere, so read by no code here: {shown}{more}"
        found.append(diagnostic("M805", message, path=name))
    text = data.get("text_config")
    quantized = data.get("quantization_config") or (
        text.get("quantization_config") if isinstance(text, Mapping) else None
    )
    if isinstance(quantized, Mapping | str) and quantized:
        method = quantized if isinstance(quantized, str) else _method(quantized)
        message = f"quantization_config ({method}): {DEQUANTIZED}"
        found.append(diagnostic("M805", message, path=name))
    stated = data.get("dtype") if data.get("dtype") is not None else data.get("torch_dtype")
    if stated is not None and str(stated).removeprefix("torch.") not in DTYPES:
        message = (
            f"dtype {stated!r} is not float32, float16 or bfloat16, the weights a training step "
            "updates: the IR holds them in float32"
        )
        found.append(diagnostic("M805", message, path=name))
    return found


def _method(quantized: Mapping[str, Any]) -> str:
    """A quantization_config's method: its quant_method, else bitsandbytes' load_in_4bit/8bit."""
    loads = (k.removeprefix("load_in_") for k in ("load_in_4bit", "load_in_8bit") if quantized.get(k))
    return str(quantized.get("quant_method") or next(loads, "?"))


def nested(config: Any) -> list[Any]:
    """The configuration and the sub-configurations it holds (text, vision, audio, encoder ...)."""
    found = [config]
    for value in vars(config).values():
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and value is not config:
            found += nested(value)
    return found


def text_of(config: Any) -> Any:
    """A configuration's text configuration (itself where it has none of its own)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config
