"""A speech model's input features, as its own feature extractor makes them: one second of
silence through the model type's extractor (transformers' table of them, built from its defaults,
the configuration's mel bins as its feature size), `batch` times on meta; the older layout rules
(Whisper's [batch, mels, frames], Wav2Vec2-BERT's frames of features, raw samples) where
transformers has no extractor that runs here.
"""

from __future__ import annotations

from typing import Any

import torch

from modtrans.hf import feeds
from modtrans.hf.configs import nested
from modtrans.hf.values import META, carrying, forward_args


def audio(model: Any, batch: int) -> dict[str, Any]:
    """One second of silence through the model type's feature extractor, `batch` times: its input
    features (or values) and the masks the model's forward takes, on meta with their values; the
    older layout rule where transformers has no extractor that runs here."""
    config = model.config
    name, kind = model.main_input_name, first_input(model)
    mels = mel_bins(config)
    encoder = getattr(config, "encoder", None)  # SpeechEncoderDecoderModel's: its encoder's extractor
    made = extracted(getattr(encoder, "model_type", config.model_type), mels)
    if made is not None and kind in made:
        taken = set(forward_args(model))
        found = {}
        for key, value in made.items():
            if key == kind or (key in taken and isinstance(value, torch.Tensor)):
                value = value.expand(batch, *value.shape[1:]).contiguous()
                key = name if key == kind else key
                found[key] = carrying(value) if not value.is_floating_point() else empty(value)
        return found
    width = getattr(config, "feature_projection_input_dim", None)
    if kind == "input_features" and isinstance(width, int) and width > 0:
        # Wav2Vec2-BERT's [batch, frames, features] (its forward's layout; its feature projection
        # normalises the last axis), where the model type's Auto extractor gives input_values
        # (Wav2Vec2FeatureExtractor): one second of 10 ms frames, SeamlessM4TFeatureExtractor's hop
        return {name: torch.zeros(batch, 100, width, device=META)}
    if kind == "input_features":  # Whisper's [batch, mels, frames]
        frames = 2 * getattr(config, "max_source_positions", 1500)
        return {name: torch.zeros(batch, mels or 80, frames, device=META)}
    return {name: torch.zeros(batch, 16000, device=META)}


def first_input(model: Any) -> str:
    """What the model's first input is: its main_input_name, or for a composite that names it
    `inputs` (SpeechEncoderDecoderModel) its encoder's."""
    name = getattr(model, "main_input_name", "input_ids")
    if name == "inputs":
        return str(getattr(getattr(model, "encoder", None), "main_input_name", name))
    return str(name)


def empty(value: Any) -> Any:
    """A meta tensor of `value`'s shape and dtype (a float feature whose values no forward reads)."""
    return torch.zeros(value.shape, dtype=value.dtype, device=META)


def mel_bins(config: Any) -> int | None:
    """The mel bins a speech configuration states (num_mel_bins, input_feat_per_channel,
    feature_size; its encoder's or audio tower's), None where none."""
    for each in nested(config):
        for key in ("num_mel_bins", "input_feat_per_channel", "feature_size", "num_mel_filters"):
            value = getattr(each, key, None)
            if isinstance(value, int) and value > 1:
                return value
    return None


def extracted(model_type: str, mels: int | None, **options: Any) -> dict[str, Any] | None:
    """The model type's feature extractor (its defaults, `mels` as its feature size) on one
    second of silence: its outputs as CPU tensors; None where it has none or it does not run.
    `options` go to its call (return_attention_mask)."""
    import numpy
    import transformers
    from transformers.models.auto import feature_extraction_auto

    name = feature_extraction_auto.FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)
    cls = getattr(transformers, name, None) if isinstance(name, str) else None
    if not isinstance(cls, type):
        return None
    if getattr(cls, "_backends", None):  # a placeholder: a library it needs is missing
        return feeds.stacked(_defined(model_type, cls), mels)
    try:
        extractor = cls(**({"feature_size": mels} if mels else {}))
        rate = int(getattr(extractor, "sampling_rate", 16000))
        with numpy.errstate(all="ignore"):  # silence normalised by its deviation, 0 (Speech2Text's)
            silence = numpy.zeros(rate, dtype=numpy.float32)
            out = extractor(silence, sampling_rate=rate, return_tensors="pt", **options)
    except Exception:  # one that needs a library not installed (torchaudio): the older rule
        return None
    return {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}


def _defined(model_type: str, cls: Any) -> Any:
    """The class transformers defines for a placeholder that stands for it while a library it
    needs is missing (its module imported directly; the placeholder where none)."""
    import importlib

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    folder = model_type_to_module_name(model_type)
    try:
        module = importlib.import_module(f"transformers.models.{folder}.feature_extraction_{folder}")
    except ImportError:
        return cls
    return getattr(module, cls.__name__, cls)
