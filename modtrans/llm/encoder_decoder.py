"""The encoder-decoder T5 family (T5, T5 v1.1, Flan-T5, mT5, umT5) -> the IR, named like the
modules of transformers' T5ForConditionalGeneration (models/t5/modeling_t5.py):

    shared                                    the token table: both stacks look it up (and a
                                              tied head multiplies by it)
    encoder.block.N.layer.0.layer_norm        T5LayerNorm: RMS, a scale, no bias
                       .layer.0.SelfAttention.q, k, v (d_model -> heads x d_kv), o (back);
                       .relative_attention_bias in block 0 (umT5: every block), a [buckets,
                       heads] table looked up per (query, key) pair, added to the scores of
                       every block of its stack; bidirectional
                       .layer.1.layer_norm, .layer.1.DenseReluDense.wi (gated: wi_0, wi_1), wo
    encoder.final_layer_norm                  the encoder's output: every decoder block reads it
    decoder.embed_tokens                      the shared table again
    decoder.block.N.layer.0                   causal self-attention over the decoder's tokens
                       .layer.1.EncDecAttention q from the decoder; k and v from the encoder's
                                              output (S tokens); no position bias
                       .layer.2                the MLP
    decoder.final_layer_norm; lm_head         tied: the decoder's output times d_model ** -0.5
                                              first (T5ForConditionalGeneration.forward)

Every sub-layer is pre-norm with a residual add (T5LayerSelfAttention, T5LayerCrossAttention,
T5LayerFF). The encoder runs on input_ids' S tokens, the decoder on decoder_input_ids' T tokens
(the targets: 114 in T5's pre-training, 512 inputs; Raffel et al. 2020, section 3.1.4). Blocks are
numbered on through both stacks (the decoder's first is block num_layers), as the pipeline and
memory code count blocks by their index.
"""

from __future__ import annotations

import math

from modtrans.ir import flops
from modtrans.ir.document import Activation, Kind, ModelIR, Part, Provenance, Role
from modtrans.llm.build import _attention_core, _Builder, dims
from modtrans.llm.config import Arch


def build(arch: Arch, batch: int, sequence: int, targets: int, provenance: Provenance) -> ModelIR:
    """The IR of `arch` for `batch` pairs of `sequence` input tokens and `targets` decoder tokens."""
    assert arch.seq2seq is not None
    b = _Builder(arch, batch, sequence)
    ids = b.tensor("input_ids", (batch, sequence), "int64")
    x = b.embedding("shared", ids, arch.vocab)
    encoded = _stack(b, "encoder", x, sequence)
    b.sequence = targets
    # the decoder's embedding belongs to its first block: a pipeline cut before the decoder puts it
    # on the decoder's first stage, as Megatron-LM's T5 does (the split rank's stage embeds)
    b.at(arch.layers, Part.EMBEDDING)
    decoder_ids = b.tensor("decoder_input_ids", (batch, targets), "int64")
    table = b.param("shared.weight", Role.WEIGHT, (arch.vocab, arch.hidden), shared_with="shared")
    shape = (batch, targets, arch.hidden)
    y = b.add(
        "decoder.embed_tokens", "Gather", Kind.EMBEDDING, [decoder_ids], shape,
        flops.embedding(math.prod(shape)), [table],
    )  # fmt: skip
    y = _stack(b, "decoder", y, sequence, encoded)
    b.at(None, Part.HEAD)
    if arch.tied:  # T5ForConditionalGeneration.forward: sequence_output * (self.model_dim**-0.5)
        y = b.elementwise("lm_head.rescale", "Mul", [y], dims(y))
    b.linear("lm_head", y, arch.vocab, shared_with="shared" if arch.tied else None)
    return ModelIR(provenance, tuple(b.layers))


def _stack(
    b: _Builder, stack: str, x: Activation, sources: int, encoded: Activation | None = None
) -> Activation:
    """One T5Stack: its blocks, then final_layer_norm. `encoded` (the decoder's): the encoder's
    output of `sources` tokens, which every block's cross-attention reads."""
    a = b.arch
    assert a.seq2seq is not None
    decoder = encoded is not None
    depth, first = (a.seq2seq.decoder_layers, a.layers) if decoder else (a.layers, 0)
    bias: Activation | None = None
    for i in range(depth):
        p = f"{stack}.block.{i}"
        b.at(first + i, Part.ATTENTION)
        b.causal = decoder
        h = b.norm(f"{p}.layer.0.layer_norm", x)
        if i == 0 or a.seq2seq.bias_every_block:
            bias = _relative_bias(b, f"{p}.layer.0.SelfAttention", b.sequence)
        o = _attention(b, f"{p}.layer.0.SelfAttention", h, h, b.sequence, bias)
        x = b.elementwise(f"{p}.layer.0.residual", "Add", [x, o], dims(x))
        if encoded is not None:
            b.causal = False
            h = b.norm(f"{p}.layer.1.layer_norm", x)
            o = _attention(b, f"{p}.layer.1.EncDecAttention", h, encoded, sources, None)
            x = b.elementwise(f"{p}.layer.1.residual", "Add", [x, o], dims(x))
        ff = f"{p}.layer.{2 if decoder else 1}"
        b.at(first + i, Part.MLP)
        m = _mlp(b, f"{ff}.DenseReluDense", b.norm(f"{ff}.layer_norm", x))
        x = b.elementwise(f"{ff}.residual", "Add", [x, m], dims(x))
    b.at(None, Part.HEAD)
    return b.norm(f"{stack}.final_layer_norm", x)


def _relative_bias(b: _Builder, p: str, keys: int) -> Activation:
    """T5Attention.compute_bias: each (query, key) pair's bucket looked up in a [buckets, heads]
    table, one [1, heads, queries, keys] bias for every block of the stack (position_bias, which
    T5Stack hands from its first block to the others)."""
    a = b.arch
    assert a.seq2seq is not None
    table = b.param(f"{p}.relative_attention_bias.weight", Role.WEIGHT, (a.seq2seq.buckets, a.heads))
    buckets = b.tensor(f"{p}.relative_position_bucket", (b.sequence, keys), "int64")
    shape = (1, a.heads, b.sequence, keys)
    return b.add(
        f"{p}.relative_attention_bias", "Gather", Kind.EMBEDDING, [buckets], shape,
        flops.embedding(math.prod(shape)), [table],
    )  # fmt: skip


def _attention(
    b: _Builder, p: str, h: Activation, source: Activation, keys: int, bias: Activation | None
) -> Activation:
    """T5Attention: q of the queries `h`; k and v of `source` (`h` itself, or the encoder's
    output of `keys` tokens), heads x d_kv wide; no scaling of the scores (T5 folds it into the
    initialisation), the bias added; o back to d_model."""
    a = b.arch
    inner = a.heads * a.head_dim
    q = b.linear(f"{p}.q", h, inner)
    queries = b.sequence
    b.sequence = keys  # k and v run on the source's tokens
    k = b.linear(f"{p}.k", source, inner)
    v = b.linear(f"{p}.v", source, inner)
    b.sequence = queries
    context = _attention_core(b, p, q, k, v, a.head_dim, a.head_dim, keys=keys, bias=bias)
    return b.linear(f"{p}.o", context, a.hidden)


def _mlp(b: _Builder, p: str, h: Activation) -> Activation:
    """T5DenseActDense (wi, the activation, wo) or, for feed_forward_proj "gated-ACT",
    T5DenseGatedActDense (act(wi_0) * wi_1, wo)."""
    a = b.arch
    gated = a.mlp.startswith("gated-")
    activation = a.mlp.rsplit("-", 1)[-1].capitalize()
    if not gated:
        up = b.linear(f"{p}.wi", h, a.intermediate)
        act = b.elementwise(f"{p}.act", activation, [up], dims(up))
        return b.linear(f"{p}.wo", act, a.hidden)
    gate = b.linear(f"{p}.wi_0", h, a.intermediate)
    up = b.linear(f"{p}.wi_1", h, a.intermediate)
    act = b.add(
        f"{p}.act", f"{activation}Mul", Kind.ELEMENTWISE, [gate, up], dims(gate),
        flops.elementwise(math.prod(dims(gate))),
    )  # fmt: skip
    return b.linear(f"{p}.wo", act, a.hidden)
