"""Rotary embeddings and SwiGLU as PyTorch runs them op by op, without a fused kernel or
torch.compile (torchtitan's defaults), each op a kernel that reads and writes whole tensors at the
streaming bandwidth. Bytes counted from the source, per element of the layer's output, w its
width (bf16: 2):

  rotary (torchtitan/models/llama/model.py at 9dec370, apply_rotary_emb: `torch.view_as_complex(
  xq.float().reshape(..., -1, 2))`, `torch.view_as_real(xq_ * freqs_cis).flatten(3)`,
  `.type_as(xq)`): the cast up reads w and writes 4, the complex product reads 4 and writes 4
  (the reshapes are views; freqs_cis, s x d / 2, is small), the cast down reads 4 and writes w:
  2 w + 16 forward (20 B in bf16, where a fused kernel moves 2 w). Autograd's backward runs the
  same three: the cast back up, the product by the conjugate, the cast down, 2 w + 16.
  swiglu (model.py, FeedForward.forward: `self.w2(F.silu(self.w1(x)) * self.w3(x))`): F.silu
  reads w and writes w, the product reads 2 w and writes w: 5 w forward (fused: 3 w). Backward:
  the product's two gradients (each reads the output's gradient and the other factor, writes w)
  and SiLU's (reads its gradient and input, writes w): 9 w (fused: read three, write two, 5 w).

Measured (linkedin/Liger-Kernel 3534d44, benchmark/data/h100_all_benchmark_data.csv, an H100 NVL,
`swiglu,{huggingface,liger},full`: transformers' LlamaMLP, the same ops, against Liger's fused
SwiGLU, with the same three GEMMs): the unfused ops cost 1.168 ms more at 4 x 8,192 tokens x
11,008 (tests/test_eager_ops.py), the count's 12 bytes an element at the part's streaming rate
1.251 ms. Rotary: no measurement of torchtitan's complex form is published; transformers'
rotate_half form (the same 20 B an element by count) measured 2.7 to 3.9 times its count on
transposed q and k (Liger's benchmark_rope.py: (1, s, heads, d).transpose(1, 2)), which
torchtitan's (b, s, heads, d) layout does not have: the count is charged, a lower bound.

Liger-Kernel's H100 SXM rows (linkedin/Liger-Kernel a63e0ffd, benchmark/data/all_benchmark_data.csv,
"NVIDIA H100 80GB HBM3", `megatron_swiglu`, benchmark/scripts/benchmark_megatron_swiglu.py, S 2,048
x B 4) run 1.65 times this count at the part's rate, but on another input: Megatron's, `F.silu(y_1)
* y_2` over `torch.chunk(y, 2, -1)` of one [s, b, 2 x ffn] fc1 output, so both factors are strided
halves of its rows. PyTorch's elementwise kernels run vectorized only over contiguous operands
(aten/src/ATen/native/cuda/CUDALoops.cuh, gpu_kernel_impl_nocast: `if (contiguous) return
launch_vectorized_kernel(...)`, else launch_legacy_kernel through an OffsetCalculator): the `torch`
forward at ffn 32,768 took 1.495 ms for 10 B x 268 M elements, 1.80 TB/s, 60 % of the part's
2.97; Megatron's TorchScript-fused bias_swiglu_impl over the same halves 0.858 ms for 6 B, 63 %,
where Liger's own kernel, indexing the row itself, moved those 6 B at 103 % (0.528 ms).
torchtitan's (and transformers' LlamaMLP) factors are two linears' whole outputs, contiguous: the
H100 NVL rows above measure that form, and their rate is the one charged (the NVL and the SXM
rows agree once the layout is the same: Liger's fused kernel streams at the part's rate on both).

Under torch.compile (--compile) Inductor fuses SwiGLU's ops into one pass, but not torchtitan's
rotary: it generates no code for complex tensors (torch 2.13, torch/_inductor/lowering.py,
unsupported_input_tensor: "if t.is_complex(): ... return True", with the warning "Torchinductor does
not support code generation for complex operators", which tests/test_compile_saved.py's compile of
torchtitan's block raises), so the complex product runs as an eager aten kernel and the casts
around it as kernels of their own: the same bytes as op by op (COMPLEX).
"""

from __future__ import annotations

from modtrans import dtypes
from modtrans.cost.base import result_elements
from modtrans.ir.document import Layer

FP32 = 4


def _rotary(w: int) -> tuple[int, int]:
    return 2 * w + 4 * FP32, 2 * w + 4 * FP32


def _swiglu(w: int) -> tuple[int, int]:
    return 5 * w, 9 * w


PER_ELEMENT = {"RotaryEmbedding": _rotary, "SiluMul": _swiglu}
COMPLEX = frozenset({"RotaryEmbedding"})  # torchtitan's in complex numbers: op by op under torch.compile too


def eager_under_compile(layer: Layer) -> bool:
    """Whether a compiled block still runs the layer op by op (torchtitan's complex rotary)."""
    return layer.op_type in COMPLEX


def eager_bytes(layer: Layer) -> tuple[int, int] | None:
    """The forward's and the backward's bytes of a rotary embedding or SwiGLU run op by op
    (None: the layer is neither)."""
    count = PER_ELEMENT.get(layer.op_type)
    if count is None or not layer.outputs:
        return None
    elements = result_elements(layer)
    forward, backward = count(max(1, dtypes.width(layer.outputs[0].dtype)))
    return elements * forward, elements * backward
