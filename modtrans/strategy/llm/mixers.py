"""What a state-space block's Mamba mixer stores for its backward, per micro-batch, as the fused
training kernels of state-spaces/mamba (mamba_ssm, e9594ce) save it; the sizes read off the IR.

The IR marks a mixer by its A_log parameter (Mamba's A = -exp(A_log): modeling_mamba.py,
modeling_mamba2.py and their copies in Jamba, Zamba2, Falcon-H1, Nemotron-H, Bamba and
GraniteMoeHybrid; llm/build.py's _mixer): the layers under its module are the mixer's. A 2-D
A_log (d_inner x N) is Mamba-1's selective scan, a 1-D one (one value per head) Mamba-2's SSD.
Each size comes from a parameter or a GEMM of the mixer (h the block's hidden width):

    d_inner  the out_proj's input width (the last linear of the mixer)
    N        A_log's second dimension (Mamba-1)
    R        dt_proj's input width, dt_rank (Mamba-1: the linear to d_inner that does not read h)
    P        in_proj's output width: 2 d_inner (Mamba-1's x and z); 2 d_inner + 2 G N + H
             (Mamba-2's z, x, B, C and dt, zxbcdt)

Mamba-1, mamba_ssm/ops/selective_scan_interface.py, MambaInnerFn.forward (mamba_inner_fn's
default checkpoint_lvl=1, as mamba_simple.Mamba and transformers' MambaMixer.cuda_kernels_forward
call it in training): ctx.save_for_backward(xz, conv1d_weight, conv1d_bias, x_dbl, x_proj_weight,
delta_proj_weight, out_proj_weight, conv1d_out, delta, A, B, C, D, delta_bias, scan_intermediates,
..., out) with conv1d_out and delta set to None (recomputed in the backward). Per token, at the
activations' dtype: xz (2 d_inner), x_dbl (R + 2 N), B and C (their own contiguous copies of
x_dbl's columns, 2 N), out (the scan's output before the z gate, d_inner); per sequence, fp32 (A
is fp32: `A = -torch.exp(self.A_log.float())`): scan_intermediates, the scan's chunk states,
d_inner x ceil(L / 2048) x 2 N (csrc/selective_scan/selective_scan.cpp, selective_scan_fwd:
`n_chunks = (seqlen + 2048 - 1) / 2048`, x of {batch, dim, n_chunks, dstate * 2} in weight_type).

Mamba-2, mamba_ssm/ops/triton/ssd_combined.py, MambaSplitConv1dScanCombinedFn.forward (the path
mamba_ssm's Mamba2 module takes with use_mem_eff_path, and transformers' Mamba2Mixer in training,
its gated RMSNorm and out_proj fused in): ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias,
out_x, A, D, dt_bias, initial_states, seq_idx, rmsnorm_weight, rstd, outproj_weight,
outproj_bias). Per token: zxbcdt (P) and out_x (the scan's output before the gated norm, d_inner);
the convolution's output, the chunk states, dA_cumsum and dt are recomputed in the backward (its
"Recompute x, B, C" and _mamba_chunk_scan_combined_bwd). The norm's fp32 rstd, G values a token
(Codestral's 8: 32 bytes against zxbcdt's 37 kB), is not counted.

Megatron-Core's MambaMixer (megatron/core/ssm/mamba_mixer.py d98e8a6, MambaMixer._ssm_training,
its only Mamba: Mamba-2) calls the same kernel without rmsnorm_weight and outproj_weight, then
`y = self.norm(y)` (ExtendedRMSNorm, mamba_ssm's gated RMSNorm: layernorm_gated.py,
LayerNormFn.forward saves x, weight, bias, mean, rstd, z) and self.out_proj(y) (a row-parallel
linear: its input): 2 d_inner more a token under --framework megatron (d_inner without the
norm). The mixer's terms split over the tensor ranks as Megatron-Core shards d_inner, the heads
and the groups (d_inner_local_tp, nheads_local_tp, ngroups_local_tp); the block's norm input and
the in_proj's input are activations.py's. Megatron-LM's own estimate has none for them
(megatron/training/theoretical_memory_usage.py: "Theoretical memory footprints not yet supported
for hybrid Mamba-Transformer models").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from modtrans.ir.document import Kind, Layer

CHUNK = 2048  # selective_scan_fwd's tokens per chunk state (n_chunks = ceil(seqlen / 2048))
STATE_BYTES = 4  # scan_intermediates are fp32 (the weight type of A)


@dataclass(frozen=True)
class Mixer:
    """A Mamba mixer's sizes (the module's docstring): d_inner, in_proj's output width P,
    Mamba-1's state size N and dt rank R (both 0 for Mamba-2), and whether Mamba-2's output
    goes through its gated RMSNorm (Falcon-H1's mamba_rms_norm False: not)."""

    inner: int
    projected: int
    state: int = 0
    rank: int = 0
    norm: bool = True

    def elements(self, megatron: bool = False) -> int:
        """Elements per token the mixer saves at the activations' dtype (`megatron`: Megatron-Core's
        Mamba-2, its gated norm and out_proj outside the kernel)."""
        if self.state:  # Mamba-1: xz, x_dbl, B and C, out
            return self.projected + (self.rank + 2 * self.state) + 2 * self.state + self.inner
        # Mamba-2: zxbcdt, out_x; Megatron's norm input and out_proj input
        return self.projected + self.inner + ((1 + self.norm) * self.inner if megatron else 0)

    def states(self, s: int, b: int) -> int:
        """Bytes of Mamba-1's fp32 chunk states for b sequences of s tokens (Mamba-2: none kept)."""
        return b * self.inner * math.ceil(s / CHUNK) * 2 * self.state * STATE_BYTES if self.state else 0


def of(in_blocks: list[Layer], h: int) -> tuple[dict[int, Mixer], frozenset[str]]:
    """Each block's mixer (by block index) and the names of the mixers' layers, from `in_blocks`
    (the layers of the model's blocks, in order), `h` the hidden width."""
    by_block: dict[int, list[Layer]] = {}
    for x in in_blocks:
        if x.block is not None and x.block.index is not None:
            by_block.setdefault(x.block.index, []).append(x)
    found: dict[int, Mixer] = {}
    names: set[str] = set()
    for block, members in by_block.items():
        a_log = next((p for x in members for p in x.params if p.name.endswith("A_log")), None)
        if a_log is None:
            continue
        prefix = a_log.name.removesuffix("A_log")
        mine = [x for x in members if x.name.startswith(prefix)]
        linears = [x.gemm for x in mine if x.kind is Kind.LINEAR and x.gemm is not None]
        if not linears:
            continue
        inner, projected = linears[-1].k, next((g.n for g in linears if g.k == h), linears[0].n)
        state = a_log.shape[1] if len(a_log.shape) == 2 else 0
        rank = next((g.k for g in linears if g.n == inner and g.k not in (h, inner)), 0) if state else 0
        norm = any(x.kind is Kind.NORM for x in mine)
        found[block] = Mixer(inner, projected, state, rank, norm or bool(state))
        names.update(x.name for x in mine)
    return found, frozenset(names)
