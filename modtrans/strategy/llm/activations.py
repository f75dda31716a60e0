"""What one transformer block stores for its backward pass, per micro-batch on one rank, by the
attention kernel that runs and the model's own MLP and dropout.

Korthikanti et al. 2022 (arXiv 2205.05198) section 4.1 counts a GPT block's 16-bit activations
term by term, 34 sbh + 5 a s^2 b bytes (table 2 with t, sequence parallelism and recomputation);
this counts the same terms for the model the IR describes (s sequence, b micro-batch, h hidden,
a query heads, kv key/value heads, d_qk and d_v a head's query/key and value widths, f the MLP
width; Q = a d_qk, K = kv d_qk, V = kv d_v, the context O = a d_v, each h for GPT):

Element size: Korthikanti counts every tensor at 2 bytes "assuming 16-bit floating point"; a
block stores its tensors in the dtype it computes in, so each tensor term below is written at 2
and counts w bytes an element, the IR's activation dtype's (dtypes.py; torch's element_size: fp32
4, fp16 and bf16 2): a configuration stating no dtype, an fp32 ONNX file or --precision fp32
stores twice fp16's. What does not scale: the dropout masks (1 byte an element, torch's bool /
uint8 mask), FlashAttention's fp32 statistics (4) and the loss's logits (frameworks.logit_bytes: the
cross-entropies run on fp32 logits whatever the model's dtype, beside or after the model's own).

    replicated over the tensor ranks (/ t under sequence parallelism)
      the two norms' inputs               4 sbh
      the QKV projections' shared input   2 sbh (attention experts: also their k routed copies,
                                          2 k sbh: JetMoE's mixture of attention heads)
      the MLP's input                     2 sbh (a MoE: also its k routed copies and its
                                          experts' k outputs, which the routing probabilities
                                          multiply, 2 x 2 k sbh; its router's probabilities
                                          over every expert, in fp32 and at w, and its routing
                                          map, (4 + 2 + 1) sbE: mlps.of, routing)
      two dropout masks, 1 byte each      2 sbh, only where the model drops out the attention's
                                          and MLP's outputs (Heads.hidden_dropout: GPT-2's
                                          resid_pdrop, BERT's hidden_dropout_prob, phi-2's 0.1)
      multi-head latent attention (DeepSeek-V2, arXiv 2405.04434, section 2.1.2: c^KV of width
      d_c = kv_lora_rank, c^Q of d_c' = q_lora_rank): each latent's RMSNorm input and its up
      projection's input, 2 sb x 2 (d_c + d_c'); Megatron-Core's down projections are duplicated
      over the tensor ranks (multi_latent_attention.py: linear_q_down_proj, linear_kv_down_proj)
    split over the tensor ranks (/ t)
      Q, K, V (QK^T's and the context's inputs)   2 sb (Q + K + V); MLA's decompressed K and V
                                                  (a heads of d_nope + d_rope and of d_v)
      the output projection's input               2 sb O
      eager attention: the softmax output 2 a s^2 b, and with attention dropout (Heads.dropout)
      its mask (a s^2 b) and output (2 a s^2 b): Korthikanti's 5 a s^2 b
      FlashAttention: no s x s tensor; the kernel keeps the fp32 logsumexp of each head and token,
      4 a s b (Dao et al. 2022, arXiv 2205.14135, algorithm 2: the backward recomputes the scores
      from Q, K, V, O and the statistics; its dropout mask regenerated from the RNG state)
      the MLP (each 2 bytes per element per token):
        GeLU:     the first linear's output (the GeLU's input) and the second's input, 2 f
        gated:    the gate's and up projection's outputs (the activation's input; Megatron-Core's
                  fused bias_swiglu keeps both) and the down projection's input, 3 f
        MoE:      the experts' terms for the k x s b tokens the rank's experts process (balanced
                  routing; x the capacity factor where one caps them), split over the expert
                  tensor ranks instead of t

For Korthikanti's GPT (dropout, f = 4h, Q = K = V = O = h) the terms are their 10 sbh + 24 sbh / t
+ 5 a s^2 b / t. Selective recomputation reruns the attention core: no s^2 term, no statistics.
torchtitan's 'op' policy keeps less (selective.py): the block's input, every other linear's output
(Llama: q, v, w1, w2), and its attention kernel's output and statistics, 2 O + 4 a bytes a token;
under torch.compile (--compile) not w2's, which the backward never reads (selective.py).

State-space blocks (a Mamba mixer in place of attention: Mamba, Mamba-2; beside attention and MLP
blocks in Jamba, Nemotron-H, Bamba, GraniteMoeHybrid; beside attention in one block in Falcon-H1):
the mixer's norm input and in_proj input, w sbh each (replicated; Falcon-H1's attention reads its
own scaled copy of the norm's output, w sbh more), and what mamba_ssm's fused kernel saves
(mixers.py: Mamba-1's xz, x_dbl, B, C and out with its fp32 chunk states; Mamba-2's zxbcdt and
out_x; Megatron-Core's Mamba-2 also its gated norm's and out_proj's inputs), split over t. Where a
model has mixers each block has what its own layers say: attention terms only with heads, MLP
terms only with an MLP (Nemotron-H's attention, Mamba, MoE and MLP blocks apart), one norm per
half. No s^2 term and nothing rerun by selective recomputation in a Mamba half; torchtitan's op
policy is left to models without mixers (they keep all their terms under it).

A vision tower (llm/vision.py's image encoder, or one read through transformers: hf/towers.py;
outside the blocks, on the first pipeline stage with the embedding) stores its own blocks' terms
above at the tower's own dims (tower, _towers): tokens per image (patches, + CLIP's class token),
images per micro-batch, hidden width, heads and head widths, MLP (GeLU 2 f, gated 3 f), the tower
configuration's dropouts (CLIPVisionConfig's attention_dropout; no hidden dropout in CLIP, SigLIP
or Qwen-VL layers), eager or flash as --attention says; a Qwen2.5-VL window block's scores are its
windows', sum of window^2 a head and image (`keys`: keys a query sees). Under recomputation as the
language model's blocks.

Not counted: a router's own MLP (Zaya's ZayaRouterMLP, router_hidden_size wide), the router's
top-k indices and probabilities (k values a token), the norms' fp32 statistics (a Mamba-2 gated norm's
included). StableLM and a parallel Falcon drop out one output (after the MLP, or the attention's
and MLP's sum), counted as the two masks.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from modtrans import dtypes
from modtrans.ir.document import Kind, Layer, ModelIR, Part, Role
from modtrans.plan.model import Recompute
from modtrans.strategy.llm import mixers as mixing
from modtrans.strategy.llm import mlps as mlp_terms
from modtrans.strategy.llm import modules as recomputed_modules
from modtrans.strategy.llm.context import sequence
from modtrans.strategy.llm.mixers import Mixer
from modtrans.strategy.llm.mlps import NO_MLP, Mlp
from modtrans.strategy.llm.selective import Kept, op_kept

FLASH, EAGER = "flash", "eager"
SOFTMAX = ("Softmax", "_softmax", "softmax")  # an ONNX or hand-written softmax's op, a torch one's
STATISTICS = 4  # bytes of one fp32 logsumexp per head and token (FlashAttention's softmax statistics)
SCORE = 4  # bytes of one fp32 routing probability (a MoE router's softmax or sigmoid output)


@dataclass(frozen=True)
class Dims:
    """What the activation terms need: sequence, micro-batch, hidden, query heads, query and
    key/value widths, vocabulary, whether the model drops out the attention probabilities and the
    hidden state (the attention's and MLP's outputs), each block's MLP."""

    s: int
    b: int
    h: int
    a: int
    q: int
    k: int
    value: int
    context: int
    latent: int
    v: int
    attention_dropout: bool
    hidden_dropout: bool
    mlps: dict[int, Mlp]
    kept: Kept  # what torchtitan's op policy keeps beside its attention kernel (selective.py)
    width: int  # bytes per element of the block's activations, their dtype's (Element size)
    mixers: dict[int, Mixer] = field(default_factory=dict)  # each state-space block's (mixers.py)
    attending: frozenset[int] = frozenset()  # where there are mixers: the blocks with attention
    keys: float = 0.0  # keys each query attends to where not s (a windowed block's mean)
    tower: tuple[tuple[Dims, int], ...] = ()  # a vision tower's blocks: their dims, how many alike
    passes: dict[int, int] = field(default_factory=dict)  # a block run more than once a forward (mlps.passes)
    copies: float = 0.0  # the hidden state's routed copies attention experts read a token (_copies)

    def mlp(self, block: int) -> Mlp:
        """The block's MLP; without one its model's first (a hybrid's: none)."""
        if block in self.mlps:
            return self.mlps[block]
        return NO_MLP if self.mixers or not self.mlps else next(iter(self.mlps.values()))

    def attends(self, block: int) -> bool:
        """Whether the block has attention (every block of a model without state-space mixers)."""
        return block in self.attending or not self.mixers

    def kind(self, block: int) -> tuple[Mlp, Mixer | None, bool, int]:
        """What decides a block's terms: blocks of one kind store alike."""
        return self.mlp(block), self.mixers.get(block), self.attends(block), self.passes.get(block, 1)


def dims(ir: ModelIR, micro_batch: int, capacity_factor: float | None = None) -> Dims | None:
    """The transformer's dimensions from its IR (None for a model without them: an ONNX CNN); a
    state-space model's too (its blocks' mixers: mixers.py), and a vision tower's (_towers)."""
    s = sequence(ir)
    blocks = [x for x in ir.layers if _in_blocks(x)]
    attention = [x for x in blocks if x.block and x.block.heads]
    table = max(
        (p.shape for x in ir.layers if x.kind is Kind.EMBEDDING for p in x.params if p.role is Role.WEIGHT),
        key=lambda shape: shape[0] if shape else 0,
        default=None,
    )
    if s is None or not table or len(table) != 2:
        return None
    h = table[1]
    mixers, mixed = mixing.of(blocks, h)
    mlps = mlp_terms.of(ir, h, capacity_factor or 1.0, mixed)
    passes = mlp_terms.passes(blocks)
    if not mixers and (not attention or not mlps):
        return None
    kept = op_kept(ir, h)
    width = element_size(attention or [x for x in blocks if x.name in mixed])
    towers = _towers(ir, micro_batch)
    attending = frozenset(x.block.index for x in attention if x.block and x.block.index is not None)
    if not attention:  # a state-space model: no heads
        return Dims(
            s, micro_batch, h, 0, 0, 0, 0, 0, 0, table[0], False, False, mlps, kept, width, mixers,
            passes=passes,
        )  # fmt: skip
    heads = attention[0].block.heads  # type: ignore[union-attr]
    assert heads is not None
    widths = _widths(attention, h, heads.query, heads.key_value)
    dropout = (heads.dropout > 0, heads.hidden_dropout > 0)
    return Dims(
        s, micro_batch, h, heads.query, *widths, table[0], *dropout, mlps, kept, width,
        mixers, attending, tower=towers, passes=passes, copies=_copies(attention, h),
    )  # fmt: skip


def _copies(attention: list[Layer], h: int) -> float:
    """The copies of the hidden state an attention's experts read a token: a mixture of attention
    heads (JetMoE's JetMoeMoA, modeling_jetmoe.py: map() gathers each token's input for its k
    experts, layer_input[batch_index], and input_linear keeps them for its weight's gradient, k h a
    token) is a grouped linear of the attention ([E, ...] weights, Gemm.groups E, each expert's
    rows), its rows over the tokens a plain projection of the hidden state runs; 0 without one."""
    first = attention[0].block.index if attention[0].block else None
    mine = [x for x in attention if x.block and x.block.index == first and _projects(x, h)]
    plain = next((x.gemm.m for x in mine if x.gemm and x.gemm.groups == 1), 0)
    grouped = [  # each expert on a share of the tokens (a per-head [heads, h, d] weight runs them all)
        x.gemm
        for x in mine
        if x.gemm and x.gemm.groups > 1 and x.gemm.m < plain and any(len(p.shape) == 3 for p in x.params)
    ]
    return grouped[0].m * grouped[0].groups / plain if grouped else 0.0


def element_size(attention: list[Layer]) -> int:
    """Bytes per element of the activations a block stores: the dtype most of its attention
    layers' floating outputs have (the IR's, --precision's where given: ir/precision.py; an fp16
    export's fp32 norm does not decide it), 4 (dtypes.DEFAULT_BITS) when none is known."""
    found = Counter(
        known.bytes
        for x in attention
        for a in x.outputs
        if (known := dtypes.BY_NAME.get(a.dtype)) is not None and known.floating
    )
    return found.most_common(1)[0][0] if found else dtypes.DEFAULT_BITS // 8


def _widths(attention: list[Layer], h: int, a: int, kv: int) -> tuple[int, int, int, int, int]:
    """Per token, the first block's Q, K and V widths, its context's (the output projection's
    input) and its latent tensors' (Widths in the module's docstring). The attention core's two
    matmuls give them: the scores' per-head k (query and key width, d_qk) over `a` query heads, the
    context's per-head n (d_v); without them the projections of the hidden state before the
    output projection hold q + k + v outputs, k / q = kv / a, d_v = d_qk."""
    first = attention[0].block.index if attention[0].block else None
    mine = [x for x in attention if x.block and x.block.index == first]
    linears = [x for x in mine if x.kind is Kind.LINEAR and x.gemm]
    core = [x.gemm for x in mine if x.kind is Kind.MATMUL and x.gemm]
    # an up projection of a latent (MLA's q_b_proj, kv_b_proj): its input and its norm's input
    latent = sum(2 * x.gemm.k for x in linears[:-1] if x.gemm and x.gemm.k != h)
    if len(core) >= 2:
        qk, v = core[0].k, core[1].n
        return a * qk, kv * qk, kv * v, a * v, latent
    total = sum(x.gemm.n for x in linears[:-1] if _projects(x, h) and x.gemm)
    hq = round(total * a / (a + 2 * kv)) if total else h
    hkv = (total - hq) // 2 if total else h * kv // a
    return hq, hkv, hkv, hq, latent


def _projects(x: Layer, h: int) -> bool:
    return x.kind is Kind.LINEAR and x.gemm is not None and x.gemm.k == h


def _in_blocks(x: Layer) -> bool:
    """A layer of the transformer's blocks (a vision-language model's image encoder, outside
    them, has heads and MLP widths of its own: llm/vision.py)."""
    return x.block is not None and x.block.index is not None


def layer(
    d: Dims,
    block: int,
    t: int,
    sp: bool,
    recompute: Recompute,
    attention: str,
    etp: int,
    ops: bool = False,
    megatron: bool = False,
    compiled: bool = False,
    modules: tuple[str, ...] = recomputed_modules.DEFAULT,
) -> float:
    """Bytes one block stores per micro-batch on one rank (the module's terms; `ops`: selective
    recomputation is torchtitan's op policy, selective.py; `megatron`: Megatron-Core's Mamba
    mixer, mixers.py; `compiled`: the block under torch.compile, selective.py; `modules`: what
    Megatron-Core's selective recomputation reruns, modules.py), each of its passes' (mlps.passes)."""
    kept = _recomputed(d, t, sp, recompute, attention, ops, compiled)
    if kept is not None:
        return d.passes.get(block, 1) * kept
    one = _terms(d, block, t, sp, recompute, attention, etp, megatron, modules)
    if recompute is Recompute.SELECTIVE:
        one -= _dropped(d, block, t, sp, etp, modules)
    return d.passes.get(block, 1) * one


def _recomputed(
    d: Dims, t: int, sp: bool, recompute: Recompute, attention: str, ops: bool, compiled: bool
) -> float | None:
    """Bytes one pass keeps under full recomputation or torchtitan's op policy (layer); None
    under neither: the module's terms (_terms)."""
    sb, w = d.s * d.b, d.width
    if recompute is Recompute.FULL:
        return w * sb * d.h / (t if sp else 1)  # the block's input only (Korthikanti section 5)
    if recompute is Recompute.SELECTIVE and ops and not d.mixers:
        kept = w * sb * d.kept.split
        if attention != EAGER:  # SDPA's saved output and logsumexp
            kept += w * sb * d.context + STATISTICS * d.a * sb
        hidden = d.kept.hidden - (d.kept.unread if compiled else 0)  # compiled: what the backward reads
        return w * sb * d.h * hidden / (t if sp else 1) + kept / t
    return None


def _dropped(d: Dims, block: int, t: int, sp: bool, etp: int, modules: tuple[str, ...]) -> float:
    """Bytes of the block's terms that Megatron-Core's --recompute-modules stop storing (modules.py,
    each module's source there), beside core_attn's s^2 tensors (_terms): layernorm the normed
    hidden state its own norms make (multi-latent attention's input norm, a MoE's pre-MLP norm:
    the QKV's and the MLP's input), mla_up_proj the decompressed Q, K, V, mlp a dense MLP's input
    and inner tensors, moe a MoE's routing and routed copies, experts and shared experts,
    shared_experts the latter's, moe_act the experts' activation outputs."""
    sb, w = d.s * d.b, d.width
    m, _, attends, _ = d.kind(block)
    latent = attends and d.latent > 0
    moe = m.experts > 0
    replicated = split = experts = 0.0
    if recomputed_modules.LAYERNORM in modules:
        replicated += w * sb * d.h * (latent + (m.inputs if moe else 0))
    if recomputed_modules.MLA_UP_PROJ in modules and latent:
        split += w * sb * (d.q + d.k + d.value)
    if recomputed_modules.MLP in modules and not moe:
        replicated += w * sb * d.h * m.inputs
        split += w * sb * m.inner
    if moe and recomputed_modules.MOE in modules:
        replicated += routing(d, m)
        split += w * sb * m.inner
        experts += w * sb * m.experts
    elif moe:
        split += w * sb * m.inner if recomputed_modules.SHARED_EXPERTS in modules else 0
        experts += w * sb * m.act if recomputed_modules.MOE_ACT in modules else 0
    return replicated / (t if sp else 1) + split / t + experts / etp


def _terms(
    d: Dims,
    block: int,
    t: int,
    sp: bool,
    recompute: Recompute,
    attention: str,
    etp: int,
    megatron: bool,
    modules: tuple[str, ...] = recomputed_modules.DEFAULT,
) -> float:
    """Bytes one pass of a block stores, term by term (the module's docstring)."""
    sb, w = d.s * d.b, d.width  # w: bytes per element of every tensor term (Korthikanti's 2)
    m, mixer, attends, _ = d.kind(block)
    mixes = mixer is not None
    norms = (attends or mixes) + (m.inputs > 0)  # the mixer's (attention, Mamba) and the MLP's
    # the dropout masks after the attention and after the MLP, 1 byte each
    masks = ((m.inputs > 0) + attends) * sb * d.h if d.hidden_dropout else 0
    # the QKV projections' shared input (and attention experts' routed copies of it), the in_proj's
    reads = d.h * (attends * (1 + d.copies) + mixes)
    latent = d.latent if attends else 0
    replicated = w * sb * (norms * d.h + reads + m.inputs * d.h + latent) + masks
    replicated += routing(d, m)
    core = d.q + d.k + d.value + d.context if attends else 0
    split = w * sb * (core + m.inner + (mixer.elements(megatron) if mixer else 0))
    if mixer is not None:
        split += mixer.states(d.s, d.b)
    if attends and not (recompute is Recompute.SELECTIVE and recomputed_modules.CORE_ATTN in modules):
        if attention == EAGER:  # the softmax's output and the dropout's (w each), its 1-byte mask
            split += (2 * w + 1 if d.attention_dropout else w) * d.a * (d.keys or d.s) * sb
        else:
            split += STATISTICS * d.a * sb
    return replicated / (t if sp else 1) + split / t + w * sb * m.experts / etp


def routing(d: Dims, m: Mlp) -> float:
    """Bytes a MoE's dispatch, combine and router keep per micro-batch beside its experts' own
    terms, replicated over the tensor ranks as the MLP's input (mlps.of): the routed copies of
    the hidden state, w bytes an element, and for every expert a token's probability three ways
    (Megatron-Core at core_r0.10.0): in fp32, for the load-balancing loss (router.py); in the
    activations' dtype, the dense top-k probabilities unpermute's masked_select keeps
    (moe_utils.py: `probs.T.contiguous().masked_select(...)`, whose backward reads its input), and
    the routing map that selection's mask keeps, a byte (torch.bool)."""
    sb = d.s * d.b
    return d.width * sb * m.routed * d.h + (SCORE + d.width + 1) * sb * m.scores


def tower(d: Dims, t: int, sp: bool, recompute: Recompute, attention: str, etp: int) -> float:
    """Bytes a vision tower's blocks store per micro-batch on the rank that holds it (none without
    one): each block's terms at its own dims (_towers); torchtitan's op policy is not applied (it
    is written for the language model's blocks), nor Megatron's mixer terms (a tower has none)."""
    return sum(n * layer(x, 0, t, sp, recompute, attention, etp) for x, n in d.tower)


def _towers(ir: ModelIR, micro_batch: int) -> tuple[tuple[Dims, int], ...]:
    """A vision-language model's image encoder blocks (llm/vision.py: outside the language
    model's blocks, block index None), grouped by their module path (the name up to its first
    number: model.visual.blocks.7, ...vision_model.encoder.layers.7) and kept where they hold an
    attention core; each as Dims at its own width, heads and tokens, equal ones counted together."""
    groups: dict[str, list[Layer]] = {}
    for x in ir.layers:
        if x.block is None or x.block.index is not None or x.block.part in (None, Part.EMBEDDING, Part.HEAD):
            continue
        parts = x.name.split(".")
        at = next((i for i, part in enumerate(parts) if part.isdigit()), None)
        if at is not None:
            groups.setdefault(".".join(parts[: at + 1]), []).append(x)
    shape = ir.provenance.input_shapes.get("input_ids")
    batch = shape[0] if shape and isinstance(shape[0], int) and shape[0] > 0 else ir.provenance.batch or 1
    found: list[tuple[Dims, int]] = []
    for members in groups.values():
        block = _tower_block(members, micro_batch, batch)
        if block is None:
            continue
        same = next((i for i, (x, _) in enumerate(found) if x == block), None)
        if same is None:
            found.append((block, 1))
        else:
            found[same] = (block, found[same][1] + 1)
    return tuple(found)


def _known(shape: tuple[int | str, ...] | None) -> tuple[int, ...] | None:
    """A shape whose every dimension is a known size, None otherwise."""
    if not shape or not all(isinstance(n, int) and n > 0 for n in shape):
        return None
    return tuple(int(n) for n in shape)


def _tower_block(members: list[Layer], micro_batch: int, batch: int) -> Dims | None:
    """One tower block's Dims: its images x tokens from the first tensor of its width it makes (its
    first norm's output [images, tokens, h], or [patches, h] for one image a sample; images of the
    IR's `batch` samples, scaled to `micro_batch`), its heads and dropouts (the tower
    configuration's: CLIPVisionConfig's attention_dropout, ...), its MLP, and the keys a query sees
    from its softmaxes' elements (a Qwen2.5-VL window block's fewer than its tokens; read through
    transformers, one softmax a window)."""
    attention = [x for x in members if x.block and x.block.heads]
    linears = [x for x in attention if x.kind is Kind.LINEAR and x.gemm and x.outputs]
    scores = [x for x in attention if x.op_type in SOFTMAX and x.outputs]
    if not linears or not scores:
        return None
    heads = attention[0].block.heads  # type: ignore[union-attr]
    assert heads is not None
    assert linears[0].gemm is not None
    h = linears[0].gemm.k
    shapes = [n for x in members for o in x.outputs if (n := _known(o.shape)) and n[-1] == h]
    rows = next((n for n in shapes if len(n) == 3), None)  # [images, tokens, h]
    flat = next((n for n in shapes if len(n) == 2), None)  # Qwen-VL's [patches, h]: an image a sample
    probs = [_known(x.outputs[0].shape) for x in scores]
    if (rows is None and flat is None) or not all(probs):
        return None
    images, s = (rows[0], rows[1]) if rows else (batch, flat[0] // batch)  # type: ignore[index]
    keys = sum(math.prod(n or ()) for n in probs) / (images * heads.query * s)
    mlp = [x for x in members if x.block and x.block.part is Part.MLP and x.kind is Kind.LINEAR and x.gemm]
    widths = _widths(attention, h, heads.query, heads.key_value)
    return Dims(
        s, micro_batch * images // batch, h, heads.query, *widths, 0, heads.dropout > 0,
        heads.hidden_dropout > 0, {0: Mlp(1.0, float(mlp_terms.stored(mlp, h)))}, Kept(1, 0),
        element_size(attention),
        keys=0.0 if keys == s else keys,
    )  # fmt: skip
