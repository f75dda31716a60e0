"""Architecture -> the IR, layer for layer as an ONNX export of the same model would give it.

Layers and parameters are named after the transformers modules and state-dict keys
(`model.layers.3.self_attn.q_proj`, `...q_proj.weight`), as in any exported model; each layer's
block (index and part: embedding, attention, MLP, MoE router / expert, norm, head) and, for
experts, the expert index (Moe.expert) are set here, from the architecture. Per block (decoder
families):

    input_layernorm; q_proj, k_proj, v_proj (or DeepSeek's latent projections); rotary; scores
    (Q·Kᵀ); softmax; context (P·V); o_proj; residual add; post_attention_layernorm; the MLP
    (gate_proj, up_proj, act, down_proj) or the mixture of experts (router; the routed experts'
    gate, up, act and down as grouped GEMMs of every expert, each on tokens x top_k / experts
    tokens; shared experts; combine); residual add

FLOPs come from modtrans/ir/flops.py, the formulas ONNX extraction uses. Weights are [out, in]
as torch stores them (GPT-2's Conv1D: [in, out]); a tied LM head shares the embedding table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from modtrans.ir import flops
from modtrans.ir.document import (
    Activation,
    Block,
    Flops,
    Gemm,
    Heads,
    Kind,
    Layer,
    ModelIR,
    Moe,
    Param,
    Part,
    Provenance,
    Role,
)
from modtrans.llm.config import DTYPES, Arch

ENCODERS = frozenset(
    {"bert", "clip_vision_model", "siglip_vision_model", "qwen2_vl_vision", "qwen2_5_vl_vision"}
)
"""The families whose attention sees the whole sequence (BertSelfAttention: no mask but padding;
the vision towers of llm/vision.py: every patch attends to every patch of its image, or window);
every other family is a causal decoder (its attention masks the tokens after each one)."""


def dims(a: Activation) -> tuple[int, ...]:
    """An activation's dims (every one is known: the builder made them)."""
    return tuple(map(int, a.shape or ()))


@dataclass
class _Builder:
    arch: Arch
    batch: int
    sequence: int
    layers: list[Layer] = field(default_factory=list)
    producer: dict[str, str] = field(default_factory=dict)  # tensor -> the layer that wrote it
    index: int | None = None  # the block the next layers belong to (None: outside the blocks)
    part: Part = Part.EMBEDDING  # their part there (norms and MoE layers say their own)
    causal: bool | None = None  # their attention masks later tokens (None: as the family's, ENCODERS)
    # the Blocks made so far, by what makes them differ: the layers of a block share them (frozen)
    blocks: dict[tuple[int | None, Part, bool | None], Block] = field(default_factory=dict)
    # and their attention's heads, by causal and sliding window
    heads: dict[tuple[bool, int | None], Heads] = field(default_factory=dict)

    def at(self, index: int | None, part: Part) -> None:
        self.index, self.part = index, part

    def block(self, kind: Kind, moe: Moe | None) -> Block:
        if moe is not None:
            part = Part.ROUTER if moe.expert is None else Part.EXPERT
        else:
            part = Part.NORM if kind is Kind.NORM else self.part
        causal = self.causal if part is Part.ATTENTION else None
        key = (self.index, part, causal)
        made = self.blocks.get(key)
        if made is None:
            made = self.blocks[key] = self._block(part)
        return made

    def _block(self, part: Part) -> Block:
        if part is Part.ATTENTION:
            causal = self.arch.family not in ENCODERS if self.causal is None else self.causal
            arch, index = self.arch, self.index
            window = arch.windows[index] if index is not None and index < len(arch.windows) else None
            heads = self.heads.get((causal, window))  # every block's attention has the arch's heads
            if heads is None:
                heads = Heads(
                    arch.heads, arch.kv_heads, causal, arch.attention_dropout, arch.hidden_dropout, window
                )
                self.heads[(causal, window)] = heads
            return Block(self.index, Part.ATTENTION, heads)
        return Block(self.index, part)

    @property
    def dtype(self) -> str:
        return DTYPES[self.arch.dtype][0]

    @property
    def width(self) -> int:
        return DTYPES[self.arch.dtype][1]

    @property
    def tokens(self) -> int:
        return self.batch * self.sequence

    def tensor(self, name: str, shape: Sequence[int], dtype: str | None = None) -> Activation:
        dtype = dtype or self.dtype
        width = 8 if dtype == "int64" else self.width
        return Activation(name, tuple(shape), dtype, math.prod(shape) * width)

    def param(self, name: str, role: Role, shape: Sequence[int], shared_with: str | None = None) -> Param:
        elements = math.prod(shape)
        return Param(name, role, tuple(shape), self.dtype, elements, elements * self.width, True, shared_with)

    def add(
        self,
        name: str,
        op_type: str,
        kind: Kind,
        inputs: Sequence[Activation],
        out_shape: Sequence[int],
        fl: Flops,
        params: Sequence[Param] = (),
        gemm: Gemm | None = None,
        moe: Moe | None = None,
    ) -> Activation:
        out = self.tensor(f"{name}.out", out_shape)
        producers = tuple(dict.fromkeys(self.producer[a.name] for a in inputs if a.name in self.producer))
        self.layers.append(
            Layer(
                name,
                name,
                op_type,
                kind,
                tuple(params),
                tuple(inputs),
                (out,),
                fl,
                gemm,
                producers=producers,
                moe=moe,
                block=self.block(kind, moe),
            )
        )
        self.producer[out.name] = name
        return out

    def linear(
        self,
        name: str,
        x: Activation,
        n: int,
        *,
        bias: bool = False,
        rows: int | None = None,
        conv1d: bool = False,
        moe: Moe | None = None,
        shared_with: str | None = None,
    ) -> Activation:
        """x [..., K] times a [K -> n] weight; `rows` tokens (default: every token)."""
        k = dims(x)[-1]
        m = rows if rows is not None else self.tokens
        shape = (k, n) if conv1d else (n, k)
        params = [self.param(f"{name}.weight", Role.WEIGHT, shape, shared_with)]
        if bias:
            params.append(self.param(f"{name}.bias", Role.BIAS, (n,)))
        extra = m * n if bias else 0
        out_shape = (m, n) if rows is not None else (self.batch, self.sequence, n)
        fl = flops.gemm(m * k * n, extra, extra)
        return self.add(
            name, "Gemm" if bias else "MatMul", Kind.LINEAR, [x], out_shape, fl, params, Gemm(m, k, n), moe
        )

    def norm(self, name: str, x: Activation, params: Sequence[Param] | None = None) -> Activation:
        """An RMSNorm or LayerNorm over x's last dim: a scale and, for a LayerNorm, a shift of that
        width, or none (OLMo 1's OlmoLayerNorm), or `params` (query and key norms per head)."""
        h = dims(x)[-1]
        if params is None:
            params = [self.param(f"{name}.weight", Role.SCALE, (h,))] if self.arch.norm_scale else []
            if self.arch.norm == "layer" and self.arch.norm_bias and self.arch.norm_scale:
                params.append(self.param(f"{name}.bias", Role.SHIFT, (h,)))
        op = "LayerNormalization" if self.arch.norm == "layer" else "RMSNormalization"
        made = flops.norm(math.prod(dims(x)), affine=bool(params))
        return self.add(name, op, Kind.NORM, [x], dims(x), made, params)

    def elementwise(
        self, name: str, op: str, inputs: Sequence[Activation], shape: Sequence[int]
    ) -> Activation:
        return self.add(name, op, Kind.ELEMENTWISE, inputs, shape, flops.elementwise(math.prod(shape)))

    def embedding(self, name: str, ids: Activation, rows: int) -> Activation:
        table = self.param(f"{name}.weight", Role.WEIGHT, (rows, self.arch.hidden))
        shape = (self.batch, self.sequence, self.arch.hidden)
        return self.add(
            name, "Gather", Kind.EMBEDDING, [ids], shape, flops.embedding(math.prod(shape)), [table]
        )


def build(arch: Arch, batch: int, sequence: int, provenance: Provenance) -> ModelIR:
    """The IR of `arch` for `batch` sequences of `sequence` tokens."""
    b = _Builder(arch, batch, sequence)
    ids = b.tensor("input_ids", (batch, sequence), "int64")
    if arch.family == "bert":
        _bert(b, ids)
    elif arch.family in ("gpt2", "gpt_bigcode"):
        _gpt2(b, ids)
    elif arch.ssm is not None and arch.attention_blocks is None:
        _mamba(b, ids)
    else:
        _decoder(b, ids)
    return ModelIR(provenance, tuple(b.layers))


def _attention_core(
    b: _Builder,
    p: str,
    q: Activation,
    k: Activation,
    v: Activation,
    qk: int,
    vd: int,
    *,
    keys: int | None = None,
    bias: Activation | None = None,
) -> Activation:
    """Q·Kᵀ, softmax, P·V for the builder's sequence of queries over `keys` keys (default: the
    same sequence; an encoder-decoder's cross-attention: the encoder's). `bias`: added to the
    scores before the softmax (T5's relative position bias, [1, heads, queries, keys])."""
    a = b.arch
    heads, s = a.heads, b.sequence
    t = s if keys is None else keys
    scores_shape = (b.batch, heads, s, t)
    macs = b.batch * heads * s * qk * t
    scores_gemm = Gemm(s, qk, t, groups=b.batch * heads)
    scores = b.add(
        f"{p}.scores", "MatMul", Kind.MATMUL, [q, k], scores_shape, flops.matmul(macs), gemm=scores_gemm
    )
    if bias is not None:
        scores = b.elementwise(f"{p}.position_bias", "Add", [scores, bias], scores_shape)
    probs = b.add(
        f"{p}.softmax", "Softmax", Kind.REDUCE, [scores], scores_shape, flops.softmax(math.prod(scores_shape))
    )
    macs = b.batch * heads * s * t * vd
    context_gemm = Gemm(s, t, vd, groups=b.batch * heads)
    out = (b.batch, s, heads * vd)
    return b.add(
        f"{p}.context", "MatMul", Kind.MATMUL, [probs, v], out, flops.matmul(macs), gemm=context_gemm
    )


def _decoder(b: _Builder, ids: Activation, features: Activation | None = None) -> None:
    """Any decoder family (its module names and norm placement: families.py). `features`: a
    vision-language model's image features, which replace the embeddings of the image placeholder
    tokens (masked_scatter: LlavaModel.forward, Qwen2VLModel.forward; llm/vision.py)."""
    a, st = b.arch, b.arch.style
    x = b.embedding(f"{st.root}.{st.embed}", ids, a.vocab)
    if features is not None:
        x = b.add(f"{st.root}.masked_scatter", "ScatterND", Kind.DATA, [x, features], dims(x), Flops())
    for i in range(a.layers):
        p = f"{st.root}.{st.blocks}.{i}"
        b.at(i, Part.ATTENTION)
        if st.norms in ("parallel", "parallel2"):
            x = _parallel_block(b, p, x, i)
            continue
        h = b.norm(f"{p}.{st.norm_names[0]}", x) if st.norms != "post" else x
        if a.attention_blocks is not None and i not in a.attention_blocks:  # a hybrid's Mamba block
            b.at(i, Part.MLP)
            o = _mixer(b, f"{p}.{st.mixer}", h)
        else:
            o = _self_attention(b, f"{p}.{st.attention}", h)
        if st.norms in ("sandwich", "post"):
            o = b.norm(f"{p}.{st.norm_names[1 if st.norms == 'sandwich' else 0]}", o)
        x = b.elementwise(f"{p}.residual_attn", "Add", [x, o], dims(x))
        b.at(i, Part.MLP)
        h = x if st.norms == "post" else b.norm(f"{p}.{st.norm_names[2 if st.norms == 'sandwich' else 1]}", x)
        m = _mlp(b, p, h, i)
        if st.norms in ("sandwich", "post"):
            m = b.norm(f"{p}.{st.norm_names[-1]}", m)
        x = b.elementwise(f"{p}.residual_mlp", "Add", [x, m], dims(x))
    b.at(None, Part.HEAD)
    x = b.norm(f"{st.root}.{st.final_norm}", x)
    tied = f"{st.root}.{st.embed}" if a.tied else None
    b.linear(st.head, x, a.vocab, bias=a.head_bias, shared_with=tied)  # PhiForCausalLM: lm_head bias


def _parallel_block(b: _Builder, p: str, x: Activation, i: int) -> Activation:
    """Attention and MLP both read x (GPTNeoXLayer with use_parallel_residual, FalconDecoderLayer
    with parallel_attn, PhiDecoderLayer, CohereDecoderLayer, StableLmDecoderLayer with
    use_parallel_residual): one shared norm, or one each; one residual add of both."""
    st = b.arch.style
    h = b.norm(f"{p}.{st.norm_names[0]}", x)
    o = _self_attention(b, f"{p}.{st.attention}", h)
    b.at(i, Part.MLP)
    h2 = b.norm(f"{p}.{st.norm_names[1]}", x) if st.norms == "parallel2" else h
    m = _mlp(b, p, h2, i)
    return b.elementwise(f"{p}.residual", "Add", [x, o, m], dims(x))


def _mlp(b: _Builder, p: str, h: Activation, i: int) -> Activation:
    a, st = b.arch, b.arch.style
    if a.experts is not None and a.experts.in_block(i):
        return _mixture(b, p, h)
    if a.mlp == "gelu":  # not gated: up, GELU, down (Starcoder2MLP, GPTNeoXMLP, FalconMLP)
        up = b.linear(f"{p}.{st.mlp}.{st.up[0]}", h, a.intermediate, bias=a.mlp_bias)
        act = b.elementwise(f"{p}.{st.mlp}.act", "Gelu", [up], dims(up))
        return b.linear(f"{p}.{st.mlp}.{st.down}", act, a.hidden, bias=a.mlp_bias)
    if len(st.up) == 1:  # gate and up as one projection (Phi3MLP.gate_up_proj)
        both = b.linear(f"{p}.{st.mlp}.{st.up[0]}", h, 2 * a.intermediate, bias=a.mlp_bias)
        act = b.add(
            f"{p}.{st.mlp}.act", "SiluMul", Kind.ELEMENTWISE, [both], (*dims(both)[:-1], a.intermediate),
            flops.elementwise(b.tokens * a.intermediate),
        )  # fmt: skip
        return b.linear(f"{p}.{st.mlp}.{st.down}", act, a.hidden, bias=a.mlp_bias)
    return _swiglu(b, f"{p}.{st.mlp}", h, a.intermediate, names=(st.up[0], st.up[1], st.down))


def _self_attention(b: _Builder, p: str, h: Activation) -> Activation:
    a, st = b.arch, b.arch.style
    latent = a.latent
    if latent is None:
        q, k, v = _projections(b, p, h)
        qk, vd = a.head_dim, a.head_dim
    else:
        qk, vd = latent.nope_dim + latent.rope_dim, latent.v_dim
        if latent.q_rank:
            q = b.linear(f"{p}.q_a_proj", h, latent.q_rank, bias=a.qkv_bias)
            q = b.norm(f"{p}.q_a_layernorm", q)
            q = b.linear(f"{p}.q_b_proj", q, a.heads * qk)
        else:
            q = b.linear(f"{p}.q_proj", h, a.heads * qk)
        kv = b.linear(f"{p}.kv_a_proj_with_mqa", h, latent.kv_rank + latent.rope_dim, bias=a.qkv_bias)
        kv = b.norm(f"{p}.kv_a_layernorm", b.tensor(kv.name, (b.batch, b.sequence, latent.kv_rank)))
        k = v = b.linear(f"{p}.kv_b_proj", kv, a.heads * (latent.nope_dim + vd))
    rotated = b.elementwise(
        f"{p}.rotary", "RotaryEmbedding", [q, k], (b.batch, b.sequence, (a.heads + a.kv_heads) * qk)
    )
    context = _attention_core(b, p, rotated, rotated, v, qk, vd)
    return b.linear(f"{p}.{st.out}", context, a.hidden, bias=a.o_bias)


def _projections(b: _Builder, p: str, h: Activation) -> tuple[Activation, Activation, Activation]:
    """Query, key and value: three projections or one fused (GPT-NeoX's, Falcon's, Phi-3's), then
    the query and key norms before the rotation, in the form families.QK_NORMS describes."""
    a, st = b.arch, b.arch.style
    widths = (a.heads * a.head_dim, a.kv_heads * a.head_dim, a.kv_heads * a.head_dim)
    if len(st.qkv) == 1:
        q = k = v = b.linear(f"{p}.{st.qkv[0]}", h, sum(widths), bias=a.qkv_bias)
    else:
        q, k, v = (b.linear(f"{p}.{n}", h, w, bias=a.qkv_bias) for n, w in zip(st.qkv, widths, strict=True))
    kind = "head" if a.qk_norm else st.qk_norm
    if kind:
        q = _qk_norm(b, f"{p}.{st.qk_norm_names[0]}", q, a.heads, kind)
        k = _qk_norm(b, f"{p}.{st.qk_norm_names[1]}", k, a.kv_heads, kind)
    return q, k, v


def _qk_norm(b: _Builder, name: str, x: Activation, heads: int, kind: str) -> Activation:
    """A query or key norm over `heads` heads (families.QK_NORMS): over head_dim with the
    family's norm (Qwen3RMSNorm, Gemma3RMSNorm, Phi's nn.LayerNorm with bias), over all heads'
    width (Olmo2RMSNorm), over head_dim with a [heads, head_dim] scale (CohereLayerNorm), or one
    bias-free nn.LayerNorm per head (StableLmLayerNormPerHead: norms.0 .. norms.heads-1)."""
    hd = b.arch.head_dim
    if kind == "full":
        return b.norm(name, b.tensor(x.name, (b.batch, b.sequence, heads * hd)))
    shaped = b.tensor(x.name, (b.batch, b.sequence, heads, hd))
    if kind == "per_head":
        return b.norm(name, shaped, [b.param(f"{name}.weight", Role.SCALE, (heads, hd))])
    if kind == "norms":
        return b.norm(
            name, shaped, [b.param(f"{name}.norms.{i}.weight", Role.SCALE, (hd,)) for i in range(heads)]
        )
    return b.norm(name, shaped)


def _swiglu(
    b: _Builder,
    p: str,
    h: Activation,
    width: int,
    rows: int | None = None,
    moe: Moe | None = None,
    names: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj"),
) -> Activation:
    gate = b.linear(f"{p}.{names[0]}", h, width, rows=rows, moe=moe, bias=b.arch.mlp_bias)
    up = b.linear(f"{p}.{names[1]}", h, width, rows=rows, moe=moe, bias=b.arch.mlp_bias)
    act = b.add(
        f"{p}.act",
        "SiluMul",
        Kind.ELEMENTWISE,
        [gate, up],
        dims(gate),
        flops.elementwise(math.prod(dims(gate))),
        moe=moe,
    )
    return b.linear(f"{p}.{names[2]}", act, b.arch.hidden, rows=rows, moe=moe, bias=b.arch.mlp_bias)


def _mixture(b: _Builder, p: str, h: Activation) -> Activation:
    a = b.arch
    e = a.experts
    assert e is not None
    mixtral = a.family == "mixtral"
    base = f"{p}.block_sparse_moe" if mixtral else f"{p}.{a.style.mlp}"
    router = Moe(e.experts, e.top_k)
    logits = b.linear(f"{base}.{'router' if a.family == 'jamba' else 'gate'}", h, e.experts, moe=router)
    routed = b.add(
        f"{base}.routing",
        "TopK",
        Kind.REDUCE,
        [logits],
        dims(logits),
        flops.softmax(b.tokens * e.experts),
        moe=router,
    )
    rows = math.ceil(b.tokens * e.top_k / e.experts)  # balanced routing
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    router_name = routed.name.rsplit(".out", 1)[0]
    if a.grouped_experts:
        tokens = b.tensor(f"{base}.experts.in", (e.experts * rows, a.hidden))
        b.producer[tokens.name] = router_name
        outs = [_grouped_experts(b, f"{base}.experts", tokens, rows, names)]
    else:  # --per-expert: transformers' modules, experts.<e>.<projection>
        outs = []
        for index in range(e.experts):
            tokens = b.tensor(f"{base}.experts.{index}.in", (rows, a.hidden))
            b.producer[tokens.name] = router_name
            moe = Moe(e.experts, e.top_k, index)
            outs.append(_swiglu(b, f"{base}.experts.{index}", tokens, e.intermediate, rows, moe, names))
    if e.shared:
        shared_name = f"{base}.shared_expert" if e.shared_gate else f"{base}.shared_experts"
        outs.append(_swiglu(b, shared_name, h, e.shared))
        if e.shared_gate:
            outs.append(b.linear(f"{base}.shared_expert_gate", h, 1))
    shape = (b.batch, b.sequence, a.hidden)
    return b.add(
        f"{base}.combine",
        "Combine",
        Kind.ELEMENTWISE,
        [*outs, logits],
        shape,
        flops.elementwise(b.tokens * e.top_k * a.hidden),
    )


def _grouped_experts(
    b: _Builder, p: str, tokens: Activation, rows: int, names: tuple[str, str, str]
) -> Activation:
    """Every routed expert's gated MLP as one grouped GEMM per projection (Megatron-Core's
    GroupedMLP, megatron/core/transformer/moe/experts.py: weight1 of every expert's gate and up,
    weight2 of every down projection, run by grouped_gemm over the tokens routed to each), each
    expert on its `rows` balanced-routing tokens. The weights are one [E, out, in] tensor per
    projection, named as the projection (transformers' state dict keeps them per expert,
    experts.<e>.<projection>.weight: the same elements)."""
    a = b.arch
    e = a.experts
    assert e is not None
    moe = Moe(e.experts, e.top_k, 0, e.experts)

    def grouped(name: str, x: Activation, n: int) -> Activation:
        k = dims(x)[-1]
        weight = b.param(f"{p}.{name}.weight", Role.WEIGHT, (e.experts, n, k))
        fl = flops.gemm(e.experts * rows * k * n, 0, 0)
        gemm = Gemm(rows, k, n, groups=e.experts)
        return b.add(
            f"{p}.{name}", "GroupedGemm", Kind.LINEAR, [x], (e.experts * rows, n), fl, [weight], gemm, moe
        )

    gate = grouped(names[0], tokens, e.intermediate)
    up = grouped(names[1], tokens, e.intermediate)
    act = b.add(
        f"{p}.act", "SiluMul", Kind.ELEMENTWISE, [gate, up], dims(gate),
        flops.elementwise(math.prod(dims(gate))), moe=moe,
    )  # fmt: skip
    return grouped(names[2], act, a.hidden)


def _mamba(b: _Builder, ids: Activation) -> None:
    """MambaForCausalLM (transformers' modeling_mamba.py): per block an RMSNorm, a MambaMixer
    (_mixer) and a residual add; a tied head."""
    a = b.arch
    x = b.embedding("backbone.embeddings", ids, a.vocab)
    for i in range(a.layers):
        p = f"backbone.layers.{i}"
        b.at(i, Part.MLP)
        out = _mixer(b, f"{p}.mixer", b.norm(f"{p}.norm", x))
        x = b.elementwise(f"{p}.residual", "Add", [x, out], dims(x))
    b.at(None, Part.HEAD)
    x = b.norm("backbone.norm_f", x)
    b.linear("lm_head", x, a.vocab, shared_with="backbone.embeddings" if a.tied else None)


def _mixer(b: _Builder, p: str, h: Activation) -> Activation:
    """MambaMixer: in_proj (x and the gate z), a depthwise causal conv1d, x_proj (dt, B, C),
    dt_proj, the selective scan (its A_log and D) and out_proj. The convolution and the scan are
    no GEMMs: 2 x kernel FLOPs (and the bias) per channel and token, and the scan's 9 B L D N +
    B L D (the D skip) + B L D (the z gate): state-spaces/mamba issue 110 (the authors' count, as
    fvcore's flops_selective_scan_fn in VMamba counts it); backward twice the forward's."""
    ssm = b.arch.ssm
    assert ssm is not None
    tokens, channels = (b.batch, b.sequence), b.tokens * ssm.inner
    xz = b.linear(f"{p}.in_proj", h, 2 * ssm.inner, bias=ssm.bias)
    weights = [b.param(f"{p}.conv1d.weight", Role.WEIGHT, (ssm.inner, 1, ssm.conv))]
    if ssm.conv_bias:
        weights.append(b.param(f"{p}.conv1d.bias", Role.BIAS, (ssm.inner,)))
    taps = channels * 2 * ssm.conv
    conv_flops = Flops(taps + channels * ssm.conv_bias, taps, taps)
    conv = b.add(f"{p}.conv1d", "Conv", Kind.ELEMENTWISE, [xz], (*tokens, ssm.inner), conv_flops, weights)
    dbc = b.linear(f"{p}.x_proj", conv, ssm.dt_rank + 2 * ssm.state)
    step = b.tensor(dbc.name, (*tokens, ssm.dt_rank))
    if b.arch.family == "jamba":  # JambaMambaMixer: RMSNorms of dt, B and C
        step = b.norm(f"{p}.dt_layernorm", step)
        b.norm(f"{p}.b_layernorm", b.tensor(dbc.name, (*tokens, ssm.state)))
        b.norm(f"{p}.c_layernorm", b.tensor(dbc.name, (*tokens, ssm.state)))
    dt = b.linear(f"{p}.dt_proj", step, ssm.inner, bias=True)
    state = [
        b.param(f"{p}.A_log", Role.WEIGHT, (ssm.inner, ssm.state)),
        b.param(f"{p}.D", Role.SCALE, (ssm.inner,)),
    ]
    work = 9 * channels * ssm.state + 2 * channels
    scan = b.add(
        f"{p}.scan", "SelectiveScan", Kind.ELEMENTWISE, [conv, dt, dbc, xz], (*tokens, ssm.inner),
        Flops(work, 2 * work, work), state,
    )  # fmt: skip
    return b.linear(f"{p}.out_proj", scan, b.arch.hidden, bias=ssm.bias)


def _gpt2(b: _Builder, ids: Activation) -> None:
    """GPT2LMHeadModel, and GPTBigCodeForCausalLM: the same modules, nn.Linear weights ([out, in],
    where GPT-2's Conv1D stores [in, out]) and c_attn of hidden + 2 x kv_heads x head_dim
    (GPTBigCodeAttention: embed_dim + 2 * kv_dim, one key/value head under multi_query)."""
    a = b.arch
    conv1d = a.family == "gpt2"
    tokens = b.embedding("transformer.wte", ids, a.vocab)
    positions = b.embedding(
        "transformer.wpe", b.tensor("position_ids", (b.batch, b.sequence), "int64"), a.positions
    )
    x = b.elementwise("transformer.embeddings", "Add", [tokens, positions], dims(tokens))
    for i in range(a.layers):
        p = f"transformer.h.{i}"
        b.at(i, Part.ATTENTION)
        h = b.norm(f"{p}.ln_1", x)
        qkv = b.linear(
            f"{p}.attn.c_attn", h, a.hidden + 2 * a.kv_heads * a.head_dim, bias=True, conv1d=conv1d
        )
        context = _attention_core(b, f"{p}.attn", qkv, qkv, qkv, a.head_dim, a.head_dim)
        o = b.linear(f"{p}.attn.c_proj", context, a.hidden, bias=True, conv1d=conv1d)
        x = b.elementwise(f"{p}.residual_attn", "Add", [x, o], dims(x))
        b.at(i, Part.MLP)
        h = b.norm(f"{p}.ln_2", x)
        up = b.linear(f"{p}.mlp.c_fc", h, a.intermediate, bias=True, conv1d=conv1d)
        act = b.elementwise(f"{p}.mlp.act", "Gelu", [up], dims(up))
        m = b.linear(f"{p}.mlp.c_proj", act, a.hidden, bias=True, conv1d=conv1d)
        x = b.elementwise(f"{p}.residual_mlp", "Add", [x, m], dims(x))
    b.at(None, Part.HEAD)
    x = b.norm("transformer.ln_f", x)
    b.linear("lm_head", x, a.vocab, shared_with="transformer.wte" if a.tied else None)


def _bert(b: _Builder, ids: Activation) -> None:
    a = b.arch
    words = b.embedding("embeddings.word_embeddings", ids, a.vocab)
    positions = b.embedding(
        "embeddings.position_embeddings", b.tensor("position_ids", dims(ids), "int64"), a.positions
    )
    types = b.embedding(
        "embeddings.token_type_embeddings",
        b.tensor("token_type_ids", dims(ids), "int64"),
        a.token_types,
    )
    x = b.elementwise("embeddings.add", "Add", [words, positions, types], dims(words))
    x = b.norm("embeddings.LayerNorm", x)
    for i in range(a.layers):
        p = f"encoder.layer.{i}"
        b.at(i, Part.ATTENTION)
        q = b.linear(f"{p}.attention.self.query", x, a.hidden, bias=True)
        k = b.linear(f"{p}.attention.self.key", x, a.hidden, bias=True)
        v = b.linear(f"{p}.attention.self.value", x, a.hidden, bias=True)
        context = _attention_core(b, f"{p}.attention.self", q, k, v, a.head_dim, a.head_dim)
        o = b.linear(f"{p}.attention.output.dense", context, a.hidden, bias=True)
        x = b.elementwise(f"{p}.attention.output.add", "Add", [x, o], dims(x))
        x = b.norm(f"{p}.attention.output.LayerNorm", x)
        b.at(i, Part.MLP)
        up = b.linear(f"{p}.intermediate.dense", x, a.intermediate, bias=True)
        act = b.elementwise(f"{p}.intermediate.act", "Gelu", [up], dims(up))
        down = b.linear(f"{p}.output.dense", act, a.hidden, bias=True)
        x = b.elementwise(f"{p}.output.add", "Add", [x, down], dims(x))
        x = b.norm(f"{p}.output.LayerNorm", x)
    _bert_heads(b, x)


def _bert_heads(b: _Builder, x: Activation) -> None:
    """The heads the configuration's class puts on the encoder (config.BERT_HEADS)."""
    a = b.arch
    b.at(None, Part.HEAD)
    if "pooler" in a.heads_on_top:  # on the first token of each sequence: batch rows
        pooled = b.linear("pooler.dense", x, a.hidden, bias=True, rows=b.batch)
        if "nsp" in a.heads_on_top:
            b.linear("cls.seq_relationship", pooled, 2, bias=True, rows=b.batch)
        if "classifier" in a.heads_on_top:
            b.linear("classifier", pooled, a.labels, bias=True, rows=b.batch)
        if "choice" in a.heads_on_top:
            b.linear("classifier", pooled, 1, bias=True, rows=b.batch)
    if "tokens" in a.heads_on_top:
        b.linear("classifier", x, a.labels, bias=True)
    if "qa" in a.heads_on_top:
        b.linear("qa_outputs", x, a.labels, bias=True)
    if "mlm" in a.heads_on_top:
        h = b.linear("cls.predictions.transform.dense", x, a.hidden, bias=True)
        h = b.elementwise("cls.predictions.transform.act", "Gelu", [h], dims(h))
        h = b.norm("cls.predictions.transform.LayerNorm", h)
        b.linear("cls.predictions.decoder", h, a.vocab, bias=True, shared_with="embeddings.word_embeddings")
