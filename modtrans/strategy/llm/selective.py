"""What selective recomputation reruns and keeps, by framework.

Megatron-LM (Korthikanti et al. 2022, section 5): each block's attention core (the scores and
context products and the softmax between them) is rerun before its backward; everything else is
kept (activations.py's terms without the s^2 ones): program.in_attention_core.

torchtitan's 'op' policy (pytorch/torchtitan 9dec370, torchtitan/parallelisms/parallelize_llama.py,
_apply_ac_to_transformer_block, selective_ac_option "op"; torchtitan/models/llama3/infra/
parallelize.py later): each transformer block runs under torch.utils.checkpoint with
create_selective_checkpoint_contexts and a policy that saves the outputs of the ops in _save_list
(aten.mm, SDPA's flash and efficient kernels, reduce_scatter_tensor, abs, max) "except every
second mm" (`meta[mm_count_key] % 2 == 0`, counted per block in forward order) and recomputes the
rest. In a Llama block the mms run q, k, v, o, w1, w3, w2 (model.py: `xq, xk, xv = self.wq(x),
self.wk(x), self.wv(x)`; `self.w2(F.silu(self.w1(x)) * self.w3(x))`), so k, o and w3 are rerun,
and so is every op between what is saved: the norms, the rotary embedding, the first residual add,
the SiLU and the product. torch.utils.checkpoint stops the rerun once the last tensor the backward
needs is back (its early stop), the product that w2 reads: w2 (saved) and the block's last
residual add are not rerun. SDPA's outputs are saved: FlashAttention is not rerun (eager, the
math path's bmm and softmax are not in the list: rerun).

So the block keeps its input (the checkpoint's), the odd-numbered linears' outputs (q, v, w1, w2)
and SDPA's output and logsumexp (`kept`).

Under torch.compile (--compile: torchtitan's apply_compile, `torch.compile(transformer_block,
fullgraph=True)` of the checkpointed block) the policy marks the same ops MUST_SAVE, but what is
saved is what AOTAutograd's min-cut partitioner hands the backward graph: only tensors the backward
reads. w2's output feeds nothing but the residual add, whose backward reads no input, so it is not
saved; eager SAC's cache keeps every MUST_SAVE output whether read or not. Run on torch 2.13 (CPU,
Inductor) for a torchtitan-shaped block: the forward graph hands the backward the block's input,
q, v, w1's output, SDPA's output and logsumexp, and the parameters (tests/test_compile_saved.py).
A part's last linear (the attention's output projection, the MLP's down projection) feeds only the
residual add: where it is odd-numbered its output is `unread`.
"""

from __future__ import annotations

from dataclasses import dataclass

from modtrans.ir.document import Kind, ModelIR
from modtrans.strategy.llm import modules
from modtrans.strategy.program import in_attention_core


@dataclass(frozen=True)
class Kept:
    """Elements per token one block keeps under torchtitan's op policy beyond its attention kernel:
    `hidden` of the hidden state's width (its input, a row-parallel linear's output: whole on each
    tensor rank, / t under SP) and `split` (the column-parallel linears' outputs: / t)."""

    hidden: int
    split: int
    unread: int = 0  # of `hidden`: outputs the backward never reads, which a compiled block does not keep


def op_reruns(ir: ModelIR, fused_attention: bool) -> frozenset[str]:
    """The layers torchtitan's op policy reruns before each block's backward (the module's
    docstring): every second linear of the block, and the other ops up to its last linear; the
    attention core where it is not one fused kernel."""
    names: set[str] = set()
    for members in modules.blocks(ir).values():
        linears = [i for i, x in enumerate(members) if x.kind is Kind.LINEAR]
        if not linears:
            continue
        for count, i in enumerate(linears, start=1):
            if count % 2 == 0:
                names.add(members[i].name)
        for x in members[: linears[-1]]:
            if x.kind is Kind.LINEAR:
                continue
            if in_attention_core(x) and fused_attention:
                continue
            names.add(x.name)
    return frozenset(names)


def op_kept(ir: ModelIR, h: int) -> Kept:
    """What the first block keeps under the op policy, per token (Kept): its input and its
    odd-numbered linears' outputs, by whether they are the hidden state's width; of those, a part's
    last linear's (it feeds only the residual add: unread by the backward)."""
    blocks = modules.blocks(ir)
    members = blocks[min(blocks)] if blocks else []
    linears = [x for x in members if x.kind is Kind.LINEAR and x.gemm is not None]
    last = {x.block.part: x.name for x in linears if x.block is not None}  # each part's last linear
    odd = [(x.gemm.n * x.gemm.groups, x.name in last.values()) for x in linears[::2] if x.gemm is not None]
    hidden = 1 + sum(1 for n, _ in odd if n == h)
    unread = sum(1 for n, ends in odd if n == h and ends)
    return Kept(hidden, sum(n for n, _ in odd if n != h), unread)
