"""A multimodal model's towers: the encoders of another modality (vision, audio) a language model
reads the output of, each built by transformers from a sub-configuration of its own. They are no
blocks of the model: their layers take block index None and the heads of their own configuration,
as llm/vision.py builds a hand-written VLM's image encoder, so a pipeline puts them on the first
stage with the embedding (Megatron-LM's LLaVAModel: "When we use pipelining, the encoder will live
on only the first stage") and the activation model counts them apart (strategy/llm/activations.py,
tower). The blocks numbered are the language model's; an encoder-decoder's encoder (T5, BART,
Whisper, Canary), which its decoder cross-attends to, stays blocks of the model. No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modtrans.hf.blocks import Shape, block_of, shape_of, tower_of
from modtrans.hf.configs import nested, text_of
from modtrans.ir.document import Part


def towers(model: Any) -> dict[str, Shape]:
    """A multimodal model's towers, path -> the Shape of the configuration each is built from.
    transformers says what a model is: its input_modalities (LlavaForConditionalGeneration's
    image and text), its text configuration (get_text_config) and the sub-configurations it
    builds the other modules from (configs.nested). Where the model reads more than text and
    builds its language model from a text configuration (the model's, or a sub-configuration's:
    T5Gemma 2's encoder's), a tower is the outermost module whose `config` is a sub-configuration
    neither a text configuration nor one holding one: LLaVA's vision_tower (CLIPVisionModel of
    vision_config), Qwen2.5-VL's visual, Idefics3's vision_model, Qwen2-Audio's and Voxtral's
    audio_tower (audio_config), Granite Speech's encoder (encoder_config); BLIP-2's Q-Former
    (qformer_config) and Idefics2's perceiver resampler (perceiver_config), connectors run on
    the tower's features before the language model, as the projectors llm/vision.py puts
    outside the blocks. None for a model of text alone (T5, BART, an EncoderDecoderModel of
    BERTs, T5Gemma: their encoders' blocks are the model's) or of one configuration (Whisper);
    not the encoder of an encoder-decoder (_encoder_config: Canary's speech encoder); none in a
    model that builds no language model (CLIPForImageClassification: its vision encoder's blocks
    are the model's). A dual encoder's (CLIPModel's) vision encoder is a tower beside its text
    encoder."""
    config = model.config
    modalities = getattr(model, "input_modalities", "text")
    modalities = (modalities,) if isinstance(modalities, str) else tuple(modalities)
    held = nested(config)
    texts = [t for c in held if (t := text_of(c)) is not c]  # each configuration's text configuration
    if not texts or set(modalities) <= {"text"}:
        return {}
    named = list(model.named_modules())
    if not any(any(getattr(module, "config", None) is t for t in texts) for _, module in named):
        return {}
    kept = [*texts, *_encoder_config(model)]
    others = [c for c in held if not any(x is t for x in nested(c) for t in kept)]
    found: dict[str, Shape] = {}
    for path, module in named:
        own = getattr(module, "config", None)
        if any(own is c for c in others) and not any(path.startswith(f"{p}.") for p in found):
            found[path] = shape_of(own, within=config)
    return found


def _encoder_config(model: Any) -> list[Any]:
    """The configuration of an encoder-decoder's encoder (get_encoder, where the configuration
    says is_encoder_decoder): Canary's and a SpeechEncoderDecoderModel's speech encoder is the
    encoder the decoder cross-attends to, its blocks the model's as Whisper's are."""
    if not getattr(model.config, "is_encoder_decoder", False) or not hasattr(model, "get_encoder"):
        return []
    try:
        encoder = model.get_encoder()
    except Exception:  # transformers' own refusal, whatever its class
        return []
    own = getattr(encoder, "config", None)
    return [] if encoder is model or own is None else [own]


def ahead(groups: list[Any], blocks: Mapping[str, int], towers: Mapping[str, Shape]) -> list[Any]:
    """The groups with a tower's modules the forward did not run (layers.py lists them last: Idefics3
    or Mllama read on token ids alone, M804) moved before the first block, where the tower runs,
    so a pipeline holds their parameters on the first stage with the rest of the tower."""
    first = _first_block(groups, blocks)
    if first is None:
        return groups
    idle = [g for g in groups[first:] if not g.ops and tower_of(g.module, towers) is not None]
    if not idle:
        return groups
    moved = {id(g) for g in idle}
    return [*groups[:first], *idle, *(g for g in groups[first:] if id(g) not in moved)]


def where_outside(
    groups: Sequence[Any], blocks: Mapping[str, int], inner: Mapping[str, int], towers: Mapping[str, Shape]
) -> list[tuple[str | None, Part]]:
    """Each group's (layers.py's: a module path, its ops) tower (None: outside every tower) and its
    part outside the blocks (blocks.block's `outside`; `inner`: the towers' blocks), as
    llm/vision.py gives a hand-written VLM's: in a tower, the embedding before the tower's first
    block and the MLP in and after its blocks (CLIP's layers, Qwen's merger); outside the towers
    and before the first block, the MLP where it reads a tower's output (the projector that hands
    its features to the language model), else the embedding; after the first block, the head."""
    found = [tower_of(g.module, towers) for g in groups]
    first_block = _first_block(groups, blocks) or 0
    started: dict[str, int] = {}  # a tower -> its first group in the tower's blocks
    for i, (g, t) in enumerate(zip(groups, found, strict=True)):
        if t is not None and t not in started and block_of(g.module, inner) is not None:
            started[t] = i
    fed: set[int] = set()  # the ops whose output comes from a tower
    places: list[tuple[str | None, Part]] = []
    for i, (g, t) in enumerate(zip(groups, found, strict=True)):
        if t is not None:
            fed.update(op.index for op in g.ops)
            places.append((t, Part.EMBEDDING if i < started.get(t, len(groups)) else Part.MLP))
        elif i >= first_block:
            places.append((None, Part.HEAD))
        elif any(r in fed for op in g.ops for r in op.reads):
            fed.update(op.index for op in g.ops)
            places.append((None, Part.MLP))
        else:
            places.append((None, Part.EMBEDDING))
    return places


def _first_block(groups: Sequence[Any], blocks: Mapping[str, int]) -> int | None:
    """The index of the first group in a block of the model (None: no group is)."""
    return next((i for i, g in enumerate(groups) if block_of(g.module, blocks) is not None), None)
