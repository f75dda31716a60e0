"""LLM-scale training: tensor x pipeline x data x expert parallelism, sequence parallelism, ZeRO,
micro-batches and activation recomputation, for any model the IR holds.

options.py      the layout: every degree (T, C, E, ETP, D, P, V), the rank order, the mesh, the rules
degrees.py      the registry of parallel degrees: each degree's module declares its mesh axis there
unit.py         a workload layer as one rank runs it, and where collectives attach
tensor.py       Megatron tensor parallelism and sequence parallelism (the transformer keywords' too)
userbuffers.py  Megatron-Core's --tp-comm-overlap: TE's userbuffers, the SP collectives in the GEMMs
fp8.py          --precision fp8: TE's input casts by module, its FP8 weight copies and saved inputs
context.py      context parallelism: the sequence split over C ranks, keys and values gathered
expert.py       expert parallelism: local experts, dispatch and combine all-to-alls
data.py         data parallelism and ZeRO 1/2/3 as Megatron-LM runs them
buckets.py      Megatron-LM's gradient buffers and buckets: the reduction per model chunk
clipping.py     Megatron-LM's fp16 unscaling and gradient norm before its step, each with its all-reduce
deepspeed.py    data parallelism and ZeRO as DeepSpeed runs them (--framework deepspeed)
fsdp.py         data parallelism as PyTorch FSDP runs it (--framework fsdp), FSDP2's copies
projections.py  separate q/k/v and gate/up linears: autograd's sum of their input gradients
gqa.py          torchtitan's repeat_kv: grouped-query keys and values copied to every query head
maingrad.py     Megatron's add of an embedding's gradient into its main_grad, every micro-batch
hsdp.py         its hybrid sharding (--dp-replicate R): R replicas of a D / R shard group
zero_redundancy.py  PyTorch's ZeroRedundancyOptimizer's partition of the parameters (flash-attn --zero 1)
stages.py       the cut into pipeline chunks at block boundaries
activations.py  what a block stores for its backward, by attention kernel, MLP and dropout
mixers.py       what a state-space block's Mamba mixer stores: mamba_ssm's fused kernels' saves
mlps.py         what a block's MLP stores a token (its modules' up outputs and down input, a MoE's
                routed experts'), and a looped block's passes
selective.py    what selective recomputation reruns and keeps: Megatron's core, torchtitan's ops
modules.py      Megatron-Core's --recompute-modules: the layers each reruns, the tensors it stops storing
checkpoints.py  where full recomputation checkpoints: Megatron's --recompute-method uniform|block
                segments, fms-fsdp's --recompute-fraction spread
memory.py       memory per rank of each stage: weights, gradients, optimizer state, activations
footprint.py    that memory for many layouts of one model without their plans (a sweep's filter)
build.py        plan(): all of the above composed into a Plan, each stage's program built by
                strategy/program.py (schedules: strategy/schedule.py), the keyword presets' builder too

A degree is its module: it registers its axis, its rules and its collectives (degrees.py), which
options.py and build.py read from the registry; tensor.py, context.py, expert.py, data.py and
stages.py register T, C, E, D and P; hsdp.py HSDP's replicas R.
The mesh is Layout.mesh(), in Megatron-Core's order "tp-cp-ep-dp-pp", tensor fastest; its dp axis
holds the D / E expert-data ranks: the dense gradients' group spans cp x ep x dp (D x C ranks),
an expert's the dp axis (D / E).
Every rank of a pipeline stage runs the stage's program; groups and peers resolve per rank.
"""

from modtrans.strategy.llm.options import ORDER, Layout, LayoutError, Recompute, Schedule

__all__ = ["ORDER", "Layout", "LayoutError", "Recompute", "Schedule"]
