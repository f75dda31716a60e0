"""Inputs for models whose first input alone does not run them, each made as the code that feeds
the model makes it (transformers' ModelTester for the type, its processor or its generation
loop). A rule applies where the configuration or the built model states what it needs. The sizes
come from the configuration, the sequence from the request.

codebooks   ids of a text token and num_codebooks audio codes a position (Kyutai)
per_token   audio frames added to the ids position by position (Voxtral realtime)
drafted     a drafter's input: the drafted model's embeddings and its key/value states (Gemma 4
            unified assistant)
stacked     the layout of an extractor that stacks frames and their deltas, where its library
            (torchaudio) is missing (Granite Speech 5)
refusal     why a model's inputs are refused: BLT's entropy patching (its patch count depends
            on the text)
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from modtrans.hf.values import META, carrying, forward_args


def fed(model: Any, batch: int, sequence: int, plain: int, mels: int | None) -> dict[str, Any] | None:
    """The inputs of `batch` samples of `sequence` positions, where a rule below applies; `plain`
    is the token id the ids take (inputs.plain_token), `mels` the configuration's mel bins. None
    where no rule applies. Raises LookupError where the inputs depend on values a meta forward
    cannot know (refusal)."""
    refused = refusal(model.config)
    if refused:
        raise LookupError(refused)
    for rule in (codebooks, drafted):
        found = rule(model, batch, sequence, plain)
        if found is not None:
            return found
    return per_token(model, batch, sequence, plain, mels)


def codebooks(model: Any, batch: int, sequence: int, plain: int) -> dict[str, Any] | None:
    """Kyutai's input_ids: [batch, sequence, 1 + num_codebooks], the text token then one code per
    audio codebook at each position. KyutaiSpeechToTextModelTester.prepare_config_and_inputs
    (tests/models/kyutai_speech_to_text/test_modeling_kyutai_speech_to_text.py) concatenates
    text ids [batch, seq, 1] with codebook ids [batch, seq, num_codebooks]. The model's
    generation loop (prepare_inputs_for_generation) builds the same layout. Its embedding adds
    one vocabulary offset per column and sums the columns. The rule applies where the
    configuration has a codebook_vocab_size beside its num_codebooks (Kyutai's layout). Every
    column takes `plain`: a code below codebook_vocab_size that is not audio_pad_token_id."""
    config = model.config
    count, size = getattr(config, "num_codebooks", None), getattr(config, "codebook_vocab_size", None)
    if not isinstance(count, int) or not isinstance(size, int) or count < 1 or plain >= size:
        return None

    return {"input_ids": carrying(torch.full((batch, sequence, 1 + count), plain, dtype=torch.long))}


def per_token(model: Any, batch: int, sequence: int, plain: int, mels: int | None) -> dict[str, Any] | None:
    """Voxtral realtime's input_features [batch, num_mel_bins, sequence x audio_length_per_tok] with
    its ids [batch, sequence]. The configuration's audio_length_per_tok is "the number of audio
    frames corresponding to each text token": the model adds one audio embedding to each token's
    embedding. Its conv halves the frames and the projector stacks downsample_factor of them.
    VoxtralRealtimeModelTester (tests/models/voxtral_realtime/test_modeling_voxtral_realtime.py)
    sets feat_seq_length to seq_length x 8, the configuration's default, and says seq_length
    must equal num_audio_embeds. The rule applies where the configuration states
    audio_length_per_tok and mel bins, and the forward takes input_features."""

    config = model.config
    frames = getattr(config, "audio_length_per_tok", None)
    if not isinstance(frames, int) or frames < 1 or "input_features" not in forward_args(model):
        return None
    if mels is None:  # no mel bins stated: no layout to give
        return None
    features = torch.zeros(batch, mels, sequence * frames, device=META)
    ids = carrying(torch.full((batch, sequence), plain, dtype=torch.long))
    return {"input_ids": ids, "input_features": features}


def drafted(model: Any, batch: int, sequence: int, plain: int) -> dict[str, Any] | None:
    """A drafter's inputs: inputs_embeds [batch, sequence, 2 x backbone_hidden_size], the drafted
    model's token embedding joined to its last hidden state, and shared_kv_states, that model's
    keys and values for each attention type [batch, kv heads, sequence, head_dim]. This is how
    Gemma4AssistantCandidateGenerator.get_candidates (transformers/generation/
    candidate_generator.py) calls Gemma4UnifiedAssistantForCausalLM, one drafted position at a
    time; here `sequence` positions draft against `sequence` positions of context. Each layer
    reuses the shared states (num_kv_shared_layers is every layer): their heads and head_dim are
    those of the drafter's first attention module of each type. The rule applies where the
    forward takes shared_kv_states and the configuration states backbone_hidden_size."""

    width = getattr(model.config, "backbone_hidden_size", None)
    if not isinstance(width, int) or "shared_kv_states" not in forward_args(model):
        return None
    states: dict[str, tuple[Any, Any]] = {}
    for module in model.modules():
        kind, dim = getattr(module, "layer_type", None), getattr(module, "head_dim", None)
        groups = getattr(module, "num_key_value_groups", None)
        heads = getattr(getattr(module, "config", None), "num_attention_heads", None)
        if not isinstance(kind, str) or kind in states:
            continue
        if not (isinstance(dim, int) and isinstance(groups, int) and isinstance(heads, int)):
            continue
        shape = (batch, heads // groups, sequence, dim)
        states[kind] = (torch.zeros(shape, device=META), torch.zeros(shape, device=META))
    if not states:
        return None
    embeds = torch.zeros(batch, sequence, 2 * width, device=META)
    return {"inputs_embeds": embeds, "shared_kv_states": states}


def stacked(cls: Any, mels: int | None) -> dict[str, Any] | None:
    """The outputs of an extractor that joins each log-mel frame to its delta and stacks
    frame_stacking frames, for one second of audio, where its library is missing.
    GraniteSpeech5FeatureExtractor._extract_features needs torchaudio's MelSpectrogram (PyPI's
    torchaudio is a CUDA build that does not load beside torch's CPU wheel). Its layout follows
    that method: ceil((rate // hop_length) / frame_stacking) frames of
    num_mel_bins x delta_expansion x frame_stacking features. Its __call__ gives an
    attention_mask of those frames. The rate, hop length and mel bins are its __init__'s
    defaults; `mels` (the configuration's) replaces the last. None for any other extractor."""
    stacking, deltas = getattr(cls, "frame_stacking", None), getattr(cls, "delta_expansion", None)
    if not isinstance(stacking, int) or not isinstance(deltas, int):
        return None
    defaults = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()}
    rate, hop = defaults.get("sampling_rate"), defaults.get("hop_length")
    bins = mels or defaults.get("num_mel_bins")
    if (
        not (isinstance(rate, int) and isinstance(hop, int) and isinstance(bins, int))
        or min(rate, hop, bins) < 1
    ):
        return None
    frames = -(-(rate // hop) // stacking)
    return {
        "input_features": torch.zeros(1, frames, bins * deltas * stacking),
        "attention_mask": torch.ones(1, frames, dtype=torch.long),
    }


def refusal(config: Any) -> str | None:
    """Why a model's inputs cannot be known before its forward runs, None where they can. BLT with
    patch_in_forward and patching_mode "entropy" (its defaults) cuts bytes into patches where
    its small patcher LM's next-byte entropy passes patching_threshold
    (BltPatcher.patch_lengths_from_entropies). The patch count, and with it the global
    transformer's sequence, depends on the text. patch_size only turns that rule on. With
    patch_in_forward false every byte is a patch (BltModel.forward's other branch, the
    configuration transformers' BltModelTester builds), which reads."""
    if getattr(config, "patching_mode", None) == "entropy" and getattr(config, "patch_in_forward", False):
        return (
            "entropy patching (patching_mode 'entropy', patch_in_forward): the patch count "
            "depends on the entropies its patcher computes from the text, and no stated rule "
            "gives it; patch_in_forward false reads each byte as a patch"
        )
    return None
