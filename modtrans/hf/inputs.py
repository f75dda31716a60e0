"""A model's inputs for one training forward, as meta tensors, with the values the forward may read.

The input the model names first (`main_input_name`) says what it reads: token ids, images, audio.
Audio goes through the model type's own feature extractor (audio.py): one second of silence at
its sampling rate gives the real layout, Whisper's [batch, mels, 3000 frames] (padded to its 30 s
window), Parakeet's and Canary's [batch, frames, mels] with their attention mask. Token ids are
one id none of the configuration's special tokens use (no padding, no image or audio token), so a
forward that derives masks or lengths from them (XLM's `input_ids != pad_index`) takes its
training path; values.py computes those from the ids' values. A vision-language model gets one
image a sample, its image tokens first: square pixels of its tower's size, or what its image
processor makes of that image (a patch grid and its sizes, tiles and their mask); an
audio-language model one second of its extractor's features, its audio tokens first. A model that
reads an image and a text side by side, no image token placing one in the other (CLIP's and
ALIGN's dual encoders, BLIP's captioner), gets both (paired). A model that its first input alone
does not run (Kyutai's codebook ids, Voxtral realtime's audio a token, a drafter's key/value
states) takes feeds.py's rule first.
"""

from __future__ import annotations

from typing import Any

import torch

from modtrans.diagnostics import DiagnosticError, diagnostic
from modtrans.hf import feeds
from modtrans.hf.audio import audio, empty, extracted, first_input, mel_bins
from modtrans.hf.configs import nested
from modtrans.hf.values import META, carrying, flat, forward_args, parameters_of


def inputs(model: Any, batch: int, sequence: int, targets: int | None = None) -> dict[str, Any]:
    """The model's inputs of `batch` samples on meta: `sequence` token ids (and `targets` decoder
    ids for an encoder-decoder), or its images (image_size square, num_channels) or audio, with
    the other side of an image-and-text model (paired). Each integer input carries its value
    (values.carrying)."""
    config = model.config
    name = getattr(model, "main_input_name", "input_ids")
    ruled = feeds.fed(model, batch, sequence, plain_token(config), mel_bins(config))
    if ruled is not None:  # codebooks, audio a token, a drafter's states (feeds.py)
        return ruled
    if name == "pixel_values":
        vision = getattr(config, "vision_config", None) or config
        laid = processed(config.model_type, vision, batch, forward_args(model))
        if laid and len(laid) > 1:  # a layout beside the pixels: SigLIP 2's patches and their shapes
            return laid
        found = {name: pixels(vision, batch)}
        return found | paired(model, found, batch, sequence)
    if first_input(model) in ("input_features", "input_values"):
        found = audio(model, batch)
    else:
        found = (
            images(model, batch, sequence)
            or sounds(model, batch, sequence)
            or {name: ended(config, ids(config, *shape(model, name, batch, sequence)))}
        )
        found.update(paired(model, found, batch, sequence))
    if getattr(config, "is_encoder_decoder", False):
        found["decoder_input_ids"] = ids(
            config, *shape(model, "decoder_input_ids", batch, targets or sequence)
        )
    return found


def shape(model: Any, name: str, batch: int, sequence: int) -> tuple[int, ...]:
    """The shape of the ids `name` for `batch` samples of `sequence` tokens, as the model's forward
    documents it: (batch, sequence, codebooks) where it states `(batch_size, ..., num_codebooks)`
    (Dia's decoder_input_ids: the layout its decoder reads; its 2-D form is transposed, then
    viewed, and stops), (batch x codebooks, sequence) where it states `(batch_size *
    num_codebooks, ...)` (Musicgen's: a row per codebook of each sample), else (batch, sequence).
    The codebooks: the configuration's num_codebooks (its decoder's), or its decoder's
    num_channels (Dia's 9)."""
    import re

    found = re.search(rf"\b{name} \(`[^`]*` of shape `([^`]*)`", model.forward.__doc__ or "")
    stated = found.group(1) if found else ""
    if "num_codebooks" not in stated:
        return batch, sequence
    config = model.config
    decoder = getattr(config, "decoder_config", None) or getattr(config, "decoder", None)
    count = next(
        (
            value
            for each, key in (
                (config, "num_codebooks"),
                (decoder, "num_codebooks"),
                (decoder, "num_channels"),
            )
            if isinstance(value := getattr(each, key, None), int) and value > 0
        ),
        1,
    )
    if re.search(r"\(batch_size, \w+, num_codebooks\)", stated):
        return batch, sequence, count
    return batch * count, sequence


def pixels(vision: Any, batch: int) -> Any:
    """`batch` images of the vision configuration's size and channels, on meta."""
    return torch.zeros(batch, getattr(vision, "num_channels", 3), *_square(vision), device=META)


def paired(model: Any, found: dict[str, Any], batch: int, sequence: int) -> dict[str, Any]:
    """The other input of a model that reads an image and a text side by side, no image token
    placing one in the other: a dual encoder (CLIPModel, AlignModel: the image and the text each
    through its own tower, then compared) or a captioner (BlipForConditionalGeneration: the text
    decoder attends to the image). Its forward takes both input_ids and pixel_values, its
    configuration holds a text and a vision configuration: given one, the other (`sequence`
    token ids, or one image of the tower's size a sample); nothing otherwise."""
    config = model.config
    vision = getattr(config, "vision_config", None)
    if vision is None or getattr(config, "text_config", None) is None:
        return {}
    if any(isinstance(getattr(config, k, None), int) for k in ("image_token_id", "image_token_index")):
        return {}  # a vision-language model: images() places the image among the tokens
    if not {"input_ids", "pixel_values"} <= forward_args(model):
        return {}
    if ("input_ids" in found) == ("pixel_values" in found):
        return {}
    if "pixel_values" in found:
        return {"input_ids": ids(config, batch, sequence)}
    return {"pixel_values": pixels(vision, batch)}


def ended(config: Any, given: Any) -> Any:
    """An encoder-decoder's source ids as its tokenizer ends each example: the last its end-of-
    sequence token (T5's and BART's tokenizers append </s>; their ForSequenceClassification heads
    pool where input_ids equal eos_token_id, and stop without one). The ids as given where the
    model is not an encoder-decoder, the configuration names no such token or pads with it."""
    eos, pad = getattr(config, "eos_token_id", None), getattr(config, "pad_token_id", None)
    if not getattr(config, "is_encoder_decoder", False) or not isinstance(eos, int) or eos == pad:
        return given
    if given.dim() != 2 or not given.shape[1]:
        return given
    values = given.modtrans_value.clone()
    values[:, -1] = eos
    return carrying(values)


def ids(config: Any, *size: int) -> Any:
    """Token ids of `size` (batch x sequence; a codebook axis: shape) on meta, each the first id no
    special token of the configuration uses (values.carrying)."""
    value = plain_token(config)
    return carrying(torch.full(size, value, dtype=torch.long))


def images(model: Any, batch: int, sequence: int) -> dict[str, Any] | None:
    """A vision-language model's inputs with one image a sample: pixel_values of its vision
    configuration's image_size (num_channels square), and token ids whose first N are its image
    token, N the rows its own get_image_features makes of the image (LLaVA's 576 patches of
    CLIP ViT-L/14 at 336, PaliGemma's 256), then `sequence` - N text ids (at least one): the
    tower and projector run, their FLOPs counted. Where square pixels do not run its image path
    (Qwen2-VL's patch grid, Idefics3's tiles), the model type's image processor lays the image
    out (processed). None where the model has no vision tower, no image token, an image path
    neither runs, or features wider than its token embeddings (Qwen2-VL's default
    configuration: a 3584-wide merger beside 8192-wide text)."""
    config = model.config
    vision = getattr(config, "vision_config", None)
    named = (getattr(config, k, None) for k in ("image_token_id", "image_token_index"))
    token = next((v for v in named if isinstance(v, int)), None)
    features = getattr(model, "get_image_features", None)
    if vision is None or token is None or features is None:
        return None
    pixels = torch.zeros(batch, getattr(vision, "num_channels", 3), *_square(vision), device=META)
    given = {"pixel_values": pixels}
    if _required(features, "image_sizes"):  # Pixtral's, Mistral 3's: each image's (height, width)
        given["image_sizes"] = carrying(torch.tensor([_square(vision)] * batch))
    made = _features(features, given)
    if made is None:  # a patch grid or tiles: the model type's image processor makes them
        laid = processed(config.model_type, vision, batch, set(forward_args(model)))
        given = laid or {}
        made = _features(features, given) if laid else None
    if made is None:  # an image path that needs more still: token ids alone (M804 says so)
        return None
    return _placed(model, made, given, token, 1, batch, sequence)


def sounds(model: Any, batch: int, sequence: int) -> dict[str, Any] | None:
    """An audio-language model's inputs with one second of silence a sample, as images gives an
    image: its feature extractor's features (audio), and token ids whose first N are its audio
    token, N the rows its own get_audio_features makes of them (Voxtral's, Qwen3-ASR's,
    Granite Speech's audio towers run). None where it has no audio tower or audio token, or its
    audio path does not run on the extractor's outputs."""
    config = model.config
    features = getattr(model, "get_audio_features", None)
    named = (getattr(c, k, None) for c in nested(config) for k in ("audio_token_id", "audio_token_index"))
    token = next((v for v in named if isinstance(v, int)), None)
    if features is None or token is None:
        return None
    made = extracted(config.model_type, mel_bins(config), return_attention_mask=True)
    if made is None or "input_features" not in made:
        return None
    own = parameters_of(features)
    taken = forward_args(model) | own
    masks = [k for k in own if k.endswith("mask") and k != "attention_mask"]
    if "attention_mask" in made and "attention_mask" not in own and len(masks) == 1:
        made[masks[0]] = made.pop("attention_mask")  # Qwen3-ASR's input_features_mask: the frames'
    given = {}
    for key, value in made.items():
        if key in taken:
            value = value.expand(batch, *value.shape[1:]).contiguous()
            given[key] = carrying(value) if not value.is_floating_point() else empty(value)
    out = _features(features, {k: v for k, v in given.items() if k in own})
    if out is None:
        return None
    return _placed(model, out, given, token, 3, batch, sequence)


def _placed(
    model: Any, made: Any, given: dict[str, Any], token: int, kind: int, batch: int, sequence: int
) -> dict[str, Any] | None:
    """Token ids whose first N are `token`, N the rows a sample of the features `made`, then
    `sequence` - N text ids (at least one), beside the inputs `given`; mm_token_type_ids where the
    forward takes them (`kind` for those tokens, 0 text: processing_utils.create_mm_token_type_ids'
    1 image, 3 audio). None where the features are wider than the token embeddings, or none.
    X501 (DiagnosticError) where `sequence` holds no text token after the N: the sequence is the
    one --seq-len asks for (before, PaliGemma's 256 image tokens made 257 of --seq-len 64 and of
    128 alike)."""
    made = [t for t in flat(getattr(made, "pooler_output", made)) if isinstance(t, torch.Tensor)]
    width = getattr(model.get_input_embeddings(), "embedding_dim", None)
    if any(t.shape[-1] != width for t in made):  # features no token of the sequence can hold
        return None
    each = sum(t.numel() // t.shape[-1] for t in made) // batch
    if not each:
        return None
    if sequence <= each:  # the sequence asked for, never a longer one (llm/vision.py refuses so too)
        what = "audio" if kind == 3 else "image"
        raise DiagnosticError(
            [
                diagnostic(
                    "X501",
                    f"input_ids' {sequence:,} tokens per sample cannot hold the {each:,} {what} tokens "
                    f"of one {what} a sample and a text token (S counts the {what} placeholders)",
                )
            ]
        )
    values = torch.full((batch, sequence), plain_token(model.config), dtype=torch.long)
    values[:, :each] = token
    found = {"input_ids": carrying(values), **given}
    if "mm_token_type_ids" in forward_args(model):  # M-RoPE's modalities
        found["mm_token_type_ids"] = carrying((values == token).long() * kind)
    return found


def _features(features: Any, given: dict[str, Any]) -> Any:
    """The model's get_image_features on `given`, None where it does not run on them."""
    from modtrans.hf.values import Values

    try:
        with torch.no_grad(), Values(given):
            return features(**given)
    except Exception:  # an image path that needs other inputs
        return None


def processed(model_type: str, vision: Any, batch: int, taken: set[str]) -> dict[str, Any] | None:
    """`batch` blank images of the vision configuration's size (224 square where it states none:
    Qwen2-VL's) through the model type's own image processor (its defaults; the patch, temporal
    patch and merge sizes the vision configuration states), as the processor lays them out: its
    inputs the forward takes, on meta with their values (Qwen2-VL's pixel_values [patches,
    3 x 2 x 14 x 14] and image_grid_thw, Idefics3's tiles and pixel_attention_mask). None where
    the model type has no processor that runs here (the PIL one: torchvision is not needed)."""
    import numpy
    import transformers
    from transformers.models.auto import image_processing_auto

    name = image_processing_auto.IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)
    name = name.get("pil") if isinstance(name, dict) else name
    cls = getattr(transformers, name, None) if isinstance(name, str) else None
    if not isinstance(cls, type):
        return None
    try:
        processor = cls()
        stated: dict[str, Any] = {}
        for key, value in vars(processor).items():
            own = next((getattr(vision, k) for k in (key, "spatial_" + key) if hasattr(vision, k)), None)
            if isinstance(value, int) and not isinstance(value, bool) and isinstance(own, int):
                stated[key] = own
        tile = getattr(processor, "max_image_size", None)  # Idefics3's tiles: its tower's image_size
        if isinstance(tile, dict) and "longest_edge" in tile and isinstance(vision.image_size, int):
            stated["max_image_size"] = {"longest_edge": vision.image_size}
        processor = cls(**stated) if stated else processor
        blank = numpy.zeros((*_square(vision), getattr(vision, "num_channels", 3)), dtype=numpy.uint8)
        out = processor(images=[blank] * batch, return_tensors="pt")
    except Exception:  # one that needs a library not installed
        return None
    return {  # pixels too: Idefics3 drops the tiles that are all zeros (padding images)
        k: carrying(v)
        for k, v in out.items()
        if isinstance(v, torch.Tensor) and (k == "pixel_values" or k in taken)
    }


def _square(vision: Any) -> tuple[int, int]:
    """A vision configuration's image size (an int, [h, w] or {"height", "width"}) as (h, w)."""
    size = getattr(vision, "image_size", 224)
    if isinstance(size, int):
        return size, size
    if isinstance(size, list | tuple):
        return int(size[0]), int(size[-1])
    return int(size["height"]), int(size["width"])


def special_tokens(config: Any) -> set[int]:
    """Every token id the configuration and its sub-configurations name (…_token_id, …_token_index,
    …_index such as XLM's pad_index, lists of them)."""
    found: set[int] = set()
    for each in nested(config):
        for key, value in vars(each).items():
            if not key.endswith(("_token_id", "_token_ids", "_token_index", "_index", "_id")):
                continue
            for v in value if isinstance(value, list | tuple) else (value,):
                if isinstance(v, int) and not isinstance(v, bool):
                    found.add(v)
    return found


def plain_token(config: Any) -> int:
    """The first token id that no special token uses."""
    taken = special_tokens(config)
    return next(i for i in range(len(taken) + 1) if i not in taken)


def _required(function: Any, name: str) -> bool:
    """Whether `function` takes `name` without a default."""
    import inspect

    try:
        found = inspect.signature(function).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return found is not None and found.default is inspect.Parameter.empty
