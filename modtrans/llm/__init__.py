"""Transformer configurations -> the IR, with no weights and no framework: the path for LLMs.

config.py           Hugging Face config.json -> Arch (one normalised description per family)
families.py         the decoder families beyond Llama's layout: module names, where the norms go
build.py            Arch -> ModelIR, named like the transformers modules
encoder_decoder.py  the T5 family -> ModelIR, named like T5ForConditionalGeneration's modules
vision.py  a vision-language model's Arch (LLaVA, LLaVA-NeXT, Gemma 3, Qwen2-VL, Qwen2.5-VL) -> ModelIR:
           the image encoder, its projector or merger, then build.py's language model

    ir, found = extract(Path("config.json"), batch=1, input_shapes={"input_ids": (1, 4096)})

The sequence length is `input_ids`' second dimension (`--input-shape input_ids=BxS`), by default
SEQUENCE tokens or the model's context where that is shorter (default_sequence); the batch (the
micro-batch a rank computes at once) its first, or --batch. An encoder-decoder (T5) also reads
`decoder_input_ids=BxT`, its decoder's tokens (by default T = S). A vision-language model also
reads `--input-shape pixel_values=NxCxHxW` (N images for the B samples of input_ids, N / B each;
by default one image per sample of its default size), and S counts the image placeholder tokens
(vision.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from modtrans import limits
from modtrans._version import __version__
from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.ir.document import Dim, ModelIR, Provenance
from modtrans.llm.config import (
    ALIASES,
    FAMILIES,
    LAYER_KEYS,
    Arch,
    ConfigError,
    by_keys,
    from_hf,
    undescribed,
)

if TYPE_CHECKING:
    from modtrans.llm.vision import Images

SEQUENCE = 2048
"""The default sequence length (GPT-3's and Megatron's GPT examples'); set it with
--input-shape input_ids=1x8192."""


def is_config(head: bytes) -> bool:
    """Whether a file that starts with `head` is a transformers configuration: a JSON object that
    names its model_type or architectures, or whose keys are a configuration's (config.by_keys:
    GPT-2 XL's first file names neither)."""
    text = head.lstrip()
    if not text.startswith(b"{"):
        return False
    if b'"model_type"' in head or b'"architectures"' in head:
        return True
    try:
        document = json.loads(head)
    except (ValueError, RecursionError):  # cut at the head's end, or not JSON: its keys as bytes
        return b'"vocab_size"' in head and any(f'"{key}"'.encode() in head for key in LAYER_KEYS)
    return isinstance(document, dict) and by_keys(document)


def extract(
    path: Path,
    *,
    batch: int | None = None,
    input_shapes: Mapping[str, tuple[Dim, ...]] | None = None,
    display_name: str | None = None,
    vocabulary_multiple: int = 1,
    per_expert: bool = False,
    trust_remote_code: bool = False,
    tensor: int = 1,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """The IR of the architecture a config.json describes; M801 for one that describes none.
    `trust_remote_code`: a family transformers does not define is built by the code its auto_map
    names, in the configuration's folder (without it: refused).
    `tensor`: the layout's tensor-parallel ranks (a family read through transformers needs its
    configuration's tensor-parallel plan for more than one).
    `per_expert`: a layer per routed expert and projection (transformers' modules), not one
    grouped layer of every expert per projection (build.py).
    `vocabulary_multiple`: the vocabulary padded up to a multiple of it, as the training framework
    pads it (Megatron-LM: Layout.vocabulary_multiple); the embedding and the output layer then have
    the padded rows."""
    from modtrans.fileio import read_binary
    from modtrans.hf import configs  # what a published file says that the build does not follow
    from modtrans.llm import vision
    from modtrans.llm.build import build

    name = display_name or str(path)
    data, problem = read_binary(path)
    if data is None:
        return None, [problem] if problem else []
    try:
        config = json.loads(data)
        other = undescribed(config) if isinstance(config, dict) else None
        own = trust_remote_code and isinstance(config, dict) and bool(config.get("auto_map"))
        if _elsewhere(config) or ((other is not None or own) and _library()):
            remote = path.parent if trust_remote_code else None
            return _generic(config, data, name, batch, input_shapes or {}, tensor, remote)
        if own:  # the code its auto_map names runs through transformers only
            return None, [diagnostic("M801", _own_code(config), path=name)]
        arch = from_hf(config)
    except (ValueError, RecursionError) as error:
        message = str(error) if isinstance(error, ConfigError) else f"not JSON: {error}"
        return None, [diagnostic("M801", message, path=name)]
    shapes = dict(input_shapes or {})
    too_large = limits.input_error(batch, shapes)
    if too_large:
        return None, [diagnostic("X501", too_large, path=name)]
    read = _inputs(arch, shapes, batch)
    if isinstance(read, str):
        return None, [diagnostic("X501", read, path=name)]
    micro, sequence, targets, images = read
    vocab = -(-arch.vocab // vocabulary_multiple) * vocabulary_multiple
    arch = dataclasses.replace(arch, vocab=vocab, grouped_experts=arch.grouped_experts and not per_expert)
    micro = micro if batch is None else batch
    provenance = Provenance(
        file=name,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        producer="transformers configuration",
        producer_version=str(config.get("transformers_version", "")),
        ir_version=0,
        opset={},
        graph=arch.family,
        batch=micro,
        input_shapes=_shapes(arch, micro, sequence, targets, images),
        tool=f"modtrans {__version__}",
        architecture_only=True,
    )
    if arch.seq2seq is not None:
        from modtrans.llm.encoder_decoder import build as build_seq2seq

        ir = build_seq2seq(arch, micro, sequence, targets, provenance)
    elif images is not None:
        ir = vision.build(arch, micro, sequence, images, provenance)
    else:
        ir = build(arch, micro, sequence, provenance)
    said = [_as_language_model(other, arch.family, name)] if other is not None else []
    said += configs.warnings(config, name, native=config.get("model_type") not in ALIASES, remote=False)
    return ir, said + _implausible(ir, arch.context, micro, sequence, name)


def _own_code(config: Mapping[str, object]) -> str:
    """The line for --trust-remote-code on a hand-written family's file without the extra."""
    from modtrans.resources import install_hint

    family = config.get("model_type")
    return (
        f"--trust-remote-code runs the code this {family} configuration's auto_map names through "
        f"transformers: {install_hint('hf')} installs it (without the option the hand-written "
        f"{family} family reads it)"
    )


def _library() -> bool:
    """Whether transformers is here to build a class the hand-written families do not describe."""
    from modtrans import hf

    return hf.available()


def _as_language_model(named: str, family: str, name: str) -> Diagnostic:
    """M805 for a configuration whose class the hand-written family does not describe, read
    without the extra as the family's language model."""
    from modtrans.resources import install_hint

    return diagnostic(
        "M805",
        f"architectures names {named}, which the hand-written {family} family does not describe: "
        f"read as its language model (the LM head in place of {named}'s own head or none); "
        f"{install_hint('hf')} builds {named} itself",
        path=name,
    )


def _elsewhere(config: object) -> bool:
    """Whether a configuration names a model_type outside the hand-written families: transformers
    reads it (modtrans/hf/, the extra `hf`), or a line says how to install it."""
    if not isinstance(config, dict):
        return False
    family = config.get("model_type")
    return isinstance(family, str) and family not in FAMILIES and family not in ALIASES


def _generic(
    config: dict[str, object],
    data: bytes,
    name: str,
    batch: int | None,
    shapes: Mapping[str, tuple[Dim, ...]],
    tensor: int,
    remote: Path | None = None,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """The IR of a family llm/ does not describe, built by transformers on the meta device
    (modtrans/hf/); without the extra, M801 naming the family and the install command."""
    from modtrans import hf

    if not hf.available():
        return None, [diagnostic("M801", hf.missing(str(config["model_type"])), path=name)]
    too_large = limits.input_error(batch, dict(shapes))
    if too_large:
        return None, [diagnostic("X501", too_large, path=name)]
    seq2seq = bool(config.get("is_encoder_decoder"))
    unknown = sorted(set(shapes) - {"input_ids", *(["decoder_input_ids"] if seq2seq else [])})
    if unknown:
        return None, [diagnostic("X501", f"--input-shape {unknown[0]}: the model reads input_ids", path=name)]
    context = _context(config)
    tokens = _token_shapes(shapes, batch, seq2seq, min(SEQUENCE, context) if context else SEQUENCE)
    if isinstance(tokens, str):
        return None, [diagnostic("X501", tokens, path=name)]
    (micro, sequence), (_, targets) = tokens
    micro = micro if batch is None else batch  # --batch, or --micro-batch under a layout, as from_hf's
    return hf.extract(
        config,
        data,
        name=name,
        batch=micro,
        sequence=sequence,
        targets=targets if seq2seq else None,
        tensor=tensor,
        remote=remote,
    )


CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
"""Where a configuration says its context (LlamaConfig, GPT2Config, BloomConfig's, ChatGLM's)."""


def _context(config: Mapping[str, object]) -> int:
    """The positions a configuration states (CONTEXT_KEYS), or where it states none its text
    model's (text_config: CLIP's 77, BLIP's 512, which a longer sequence overruns); 0 if neither."""
    for each in (config, config.get("text_config")):
        if not isinstance(each, Mapping):
            continue
        for key in CONTEXT_KEYS:
            value = each.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return 0


def _inputs(
    arch: Arch, shapes: Mapping[str, tuple[Dim, ...]], batch: int | None
) -> tuple[int, int, int, Images | None] | str:
    """(micro-batch, sequence, an encoder-decoder's decoder tokens, a vision-language model's
    images) the input shapes give, or why they cannot be read (one line)."""
    from modtrans.llm import vision

    names = ["input_ids"]
    names += ["decoder_input_ids"] if arch.seq2seq is not None else []
    names += ["pixel_values"] if arch.vision is not None else []
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        said = (
            f"inputs are {' and '.join(names)}"
            if len(names) > 1
            else "one input is input_ids (decoder_input_ids: an encoder-decoder's, T5's; pixel_values: "
            "a vision-language model's)"
        )
        return f"--input-shape {unknown[0]}: the model's {said}"
    tokens = _token_shapes(shapes, batch, arch.seq2seq is not None, default_sequence(arch))
    if isinstance(tokens, str):
        return tokens
    (micro, sequence), (_, targets) = tokens
    if arch.vision is None:
        return micro, sequence, targets, None
    images = vision.inputs(arch.vision, shapes.get("pixel_values"), micro, sequence)
    return images if isinstance(images, str) else (micro, sequence, targets, images)


def default_sequence(arch: Arch) -> int:
    """The sequence when none is given: SEQUENCE, or the model's context where that is shorter
    (BERT's 512 positions, GPT-2's 1,024): a default the model cannot read would warn M802 with
    no option given."""
    return min(SEQUENCE, arch.context) if arch.context > 0 else SEQUENCE


def _token_shapes(
    shapes: Mapping[str, tuple[Dim, ...]], batch: int | None, seq2seq: bool, sequence: int
) -> tuple[tuple[int, int], tuple[int, int]] | str:
    """((batch, S) of input_ids, (batch, T) of decoder_input_ids), or a problem in one line; S is
    `sequence` unless given. Only an encoder-decoder has decoder_input_ids (T5's targets;
    Megatron-LM's --decoder-seq-length); T is S unless given; both share the batch."""
    names = ("input_ids", "decoder_input_ids") if seq2seq else ("input_ids",)
    found = []
    for name in names:
        dims = shapes.get(name) or shapes.get("input_ids") or (batch or 1, sequence)
        if len(dims) != 2 or not all(isinstance(d, int) and d > 0 for d in dims):
            return f"--input-shape {name}=BATCHxSEQUENCE (two positive sizes)"
        found.append((int(dims[0]), int(dims[1])))
    if found[0][0] != found[-1][0]:
        return (
            f"--input-shape: input_ids' batch {found[0][0]} and decoder_input_ids' {found[1][0]} "
            "differ (one batch of input and target pairs)"
        )
    return found[0], found[-1]


def _shapes(
    arch: Arch, micro: int, sequence: int, targets: int, images: Images | None
) -> dict[str, tuple[Dim, ...]]:
    """The model's inputs as its micro-batch of `micro` samples reads them."""
    shapes: dict[str, tuple[Dim, ...]] = {"input_ids": (micro, sequence)}
    if arch.seq2seq is not None:
        shapes["decoder_input_ids"] = (micro, targets)
    if arch.vision is not None and images is not None:
        shapes["pixel_values"] = (
            micro * images.per_sample,
            arch.vision.channels,
            images.height,
            images.width,
        )
    return shapes


ACTIVATION_BOUND = 2**40
"""One activation tensor of one micro-batch above this (1 TiB) is nearly four times what the
largest accelerator holds (288 GB, B300): a micro-batch no training run uses (M803)."""


def _implausible(ir: ModelIR, context: int, micro: int, sequence: int, name: str) -> list[Diagnostic]:
    """Warnings for settings the model allows but no training run uses: a sequence beyond the
    model's context (M802), a micro-batch whose activations fit no device (M803)."""
    found = []
    if context and sequence > context:
        found.append(
            diagnostic(
                "M802",
                f"a sequence of {sequence:,} tokens is {sequence / context:.3g}x the model's context of "
                f"{context:,} positions (max_position_embeddings; n_positions in GPT-2's configuration)",
                path=name,
            )
        )
    largest = max(
        ((a.bytes, layer.name) for layer in ir.layers for a in layer.outputs if a.bytes), default=(0, "")
    )
    if largest[0] > ACTIVATION_BOUND:
        found.append(
            diagnostic(
                "M803",
                f"a micro-batch of {micro:,} sequences x {sequence:,} tokens makes {largest[1]}'s output "
                f"alone {largest[0] / 2**40:,.1f} TiB: more than any device holds (a bound of "
                f"{ACTIVATION_BOUND / 2**40:g} TiB per tensor)",
                path=name,
            )
        )
    return found
