"""How the training frameworks reduce gradients: conventions as data, each with its source.

`--framework` picks one for the LLM layout's data parallelism (strategy/llm/data.py for
Megatron-LM, strategy/llm/deepspeed.py for DeepSpeed, strategy/llm/fsdp.py for PyTorch FSDP); the
keyword presets follow Megatron-LM's gradient dtype.

Megatron-LM (NVIDIA/Megatron-LM d98e8a6), the default:

    gradient reduction dtype   fp32 for bf16 parameters: megatron/training/arguments.py,
                               validate_args: "if args.bf16: ... args.accumulate_allreduce_grads_in_fp32
                               = True" unless --grad-reduce-in-bf16; training.py passes it on as
                               DistributedDataParallelConfig.grad_reduce_in_fp32, and
                               megatron/core/distributed/param_and_grad_buffer.py allocates the
                               gradient buffer as `torch.float if grad_reduce_in_fp32 else
                               param.dtype`. fp16 and fp32 parameters: their own dtype (nothing turns
                               the flag on for fp16).
    parameter gathers          the parameters' own dtype (the distributed optimizer's
                               all_gather_into_tensor of bucket.param_data, start_param_sync)

So a bf16 model's data-parallel all-reduce (or the distributed optimizer's reduce-scatter) moves
4 bytes per parameter and its parameter all-gather 2: AICB's GPT-13B file at TP 4 writes
grad_param_comm REDUCESCATTER 13,913,149,440 B and grad_gather ALLGATHER 6,956,574,720 B, i.e.
4 and 2 bytes per parameter of a tensor-parallel rank.
`--dtype-bytes B` overrides the gradient's width (B = 2: Megatron's --grad-reduce-in-bf16).

DeepSpeed (microsoft/DeepSpeed 38327e0) sends gradients in the model's own dtype (bf16 or fp16:
engine.py, communication_data_type, unless set), but for bf16 at ZeRO 0 (BF16_Optimizer) its fp32
gradient buffer; see strategy/llm/deepspeed.py. Its PipelineEngine (deepspeed/runtime/pipe/) hands
a boundary on as megatron-2022 does, blocking and split over the tensor ranks: p2p.py, send,
`assert async_op == False, "Doesn't support async_op true"` before a dist.send (recv likewise), so
the schedule waits for each send (blocking_p2p); engine.py, is_pipe_partitioned and
is_grad_partitioned, true for a model-parallel grid (pipeline config pipe_partitioned and
grad_partitioned, both True by default: runtime/config.py): the activation sent as the tensor
rank's PartitionedTensor of 1/T and rebuilt by the receiver over the slice-parallel (tensor) group
(_exec_forward_pass, _exec_recv_activations: PartitionedTensor.from_meta(...).full()), the
gradient the same way (_exec_send_grads). BigScience's 2022 DeepSpeed had both (pipe/engine.py of
the time: "self.is_pipe_partitioned = self.is_model_parallel", p2p.py's synchronous send).

Named versions and configurations, each a member below whose `family` runs the data parallelism:

    megatron-2022  Megatron-LM as Korthikanti et al. 2022 ran it (v3.0, 2022): the pipeline's
                   transfers block. megatron/p2p_communication.py, _communicate: every send and
                   receive, batched or not, is waited for (`for req in reqs: req.wait()`, then
                   torch.cuda.synchronize()), in both schedules (schedules.py, forward_backward_
                   pipelining_with/without_interleaving); Megatron-Core's overlap_p2p_comm came
                   later. The interleaved schedule's steady state exchanges once per forward-
                   backward pair, after the backward (send_forward_backward_recv_forward_backward),
                   so a forward's output leaves behind the next backward's gradient. Without SP
                   each tensor rank sends 1/T of the activation and the
                   receivers all-gather it over the tensor group ("scatter_gather_tensors_in_
                   pipeline and not args.sequence_parallel": split_tensor_into_1d_equal_chunks,
                   gather_split_1d_tensor; on by default, --no-scatter-gather-tensors-in-pipeline)
    torchtitan     PyTorch FSDP2 as pytorch/torchtitan configures it: fully_shard with
                   MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)
                   (torchtitan/config/job_config.py, Training.mixed_precision_param "bfloat16",
                   mixed_precision_reduce "float32"; torchtitan/models/llama3/infra/parallelize.py,
                   apply_fsdp): parameters gathered in bf16, gradients reduce-scattered in fp32; and
                   as its train_configs run: without torch.compile, RMSNorm op by op (eager_norms),
                   selective recomputation its 'op' policy (op_recompute: llama3_8b.toml,
                   selective_ac_option = 'op'); with --compile (compiles) its compile = true:
                   each block under torch.compile, RMSNorm as Inductor's kernels (cost/norms.py)
    llm-foundry    PyTorch FSDP1 as mosaicml/llm-foundry runs it through Composer (llm-foundry
                   4952183, its benchmarking table's runs: MP Mode DEFAULT, FULL_SHARD; Composer
                   0.21.3, composer/trainer/mosaic_fsdp_utils.py, get_mixed_precision: 'DEFAULT' ->
                   param_dtype the precision's (bf16 under amp_bf16), reduce_dtype float32): the
                   same bytes as torchtitan's, parameters gathered in bf16 and gradients reduce-
                   scattered in fp32; its RMSNorms ('rmsnorm', 'low_precision_rmsnorm':
                   llmfoundry/models/layers/norm.py, rms_norm: `x * torch.rsqrt(x.pow(2).mean(-1,
                   keepdim=True) + eps)`, the cast up and down around it) op by op, no
                   compile_config in its yamls (eager_norms); its default LayerNorm
                   (low_precision_layernorm: F.layer_norm) is one kernel, as elsewhere. Composer's
                   prefetch defaults (composer/trainer/dist_strategy.py, set_fsdp_default:
                   backward_prefetch BACKWARD_POST, forward_prefetch False, limit_all_gathers True)
                   overlap gathers with compute as far as the CPU runs ahead, which no framework's
                   traces model here: every FSDP gather waits for the compute before it. Its
                   attention the benchmark tables' runs took, FlashAttention in Triton (attention)
    flash-attn     Dao-AILab/flash-attention's training scripts (training/, as its README's
                   "Training speed" table ran them: 4a6eaa9f, 2022-11-29, 8 A100 80GB): PyTorch
                   Lightning's DDP over fp32 parameters under bf16 autocast (configs/experiment/pile/
                   base.yaml: trainer.precision bf16, strategy DDP; its GPT-2 runs' owt/base.yaml
                   precision 16, fp16 autocast), so the gradients all-reduced are fp32 (4 bytes at
                   either autocast dtype: gradient_width); --zero 1 its gpt3l/xl/2.7B
                   runs' torch.distributed.optim.ZeroRedundancyOptimizer (configs/optimizer/
                   adamw-zero.yaml), not Megatron's distributed optimizer: DDP's all-reduce as at
                   --zero 0, each rank's step over its partition of the state, then each rank's
                   updated fp32 parameters broadcast (zero_broadcast, buckets.py; --zero 2 and 3
                   refused); the loss apex's fused softmax cross-entropy in
                   the logits' own dtype (src/losses/cross_entropy_apex.py over csrc/xentropy,
                   inplace_backward True: loss, logit_bytes); its attention FlashAttention-1
                   (flash-attn 0.2 at that commit: attention)

    fms-fsdp       foundation-model-stack/fms-fsdp (ed74fd5, 2024-05-09, its README's throughput
                   table) training fms's Llama: PyTorch FSDP1 (main_training_llama.py: FSDP(model,
                   auto_wrap_policy= one unit per LLaMABlock (fms_fsdp/policies/wrapping.py),
                   sharding_strategy FULL_SHARD for "fsdp", HYBRID_SHARD for "hsdp"
                   (fms_fsdp/utils/train_utils.py, get_policies: --zero 3, --dp-replicate for the
                   nodes), limit_all_gathers=True) under its bfSixteen policy
                   (fms_fsdp/policies/mixed_precision.py: param_dtype, reduce_dtype and
                   buffer_dtype all bfloat16): gradients reduce-scattered in bf16, the fsdp
                   family's default; AdamW (main_training_llama.py: optim.AdamW over the fp32
                   sharded parameters). Its attention PyTorch's SDPA (foundation-model-stack
                   fms/modules/attention.py: F.scaled_dot_product_attention), FlashAttention-2 on
                   A100 and H100 (attention); its RMSNorm op by op (fms/modules/layernorm.py,
                   LayerNormParameterized.forward: `xf * torch.rsqrt(xf.pow(2).mean(-1,
                   keepdim=True) + self.eps)` in fp32, cast back, scaled: eager_norms); with
                   use_torch_compile, torch.compile(model) after FSDP wrapping, which Dynamo
                   breaks at each FSDP unit: --compile (compiles). Its selective activation
                   checkpointing (fms_fsdp/policies/ac_handler.py: a fraction of the blocks fully
                   checkpointed) is --recompute full --recompute-fraction p
                   (strategy/llm/checkpoints.py)

    nemo           NVIDIA NeMo 24.07 (NeMo r2.0.0rc1, Megatron-Core under it: the family's data
                   parallelism and Transformer Engine's layers) as the NeMo-Framework-Launcher's
                   published performance commands run it (NVIDIA/NeMo-Framework-Launcher 24.07,
                   8325688: examples/training/{gpt,llama}/h100/*_fp8*.sh over launcher_scripts/conf/
                   training/{gpt3,llama}/*.yaml). Its optimizer is distributed_fused_adam, NeMo's
                   MegatronDistributedFusedAdam (nemo/core/optim/distributed_adam.py) over Apex's
                   DistributedFusedAdam (NVIDIA/apex 810ffae, the APEX_TAG of NeMo r2.0.0rc1's
                   Dockerfile.ci; apex/contrib/optimizers/distributed_fused_adam.py), its state
                   sharded over the data ranks with the context ranks (process_group
                   get_data_parallel_group(with_context_parallel=True)), the gradient buffer whole
                   (contiguous_grad_buffer, on in every yaml and NeMo's default): --zero 1 only.
                   What it sends: gradients reduce-scattered in grad_sync_dtype, bf16 on every row
                   (`+training.model.optim.grad_sync_dtype=bf16` in each command; Apex's default,
                   the state dtype fp32, is --dtype-bytes 4), but the word and position
                   embeddings' in fp32 (embedding_grad_width), parameters all-gathered in
                   param_sync_dtype, the model's dtype (megatron_base_model.py,
                   setup_optimization: "Match param allgather with model dtype"). What it keeps a
                   parameter (strategy/llm/memory.py, NEMO_*): the bf16 parameters as views of its
                   param buffer (contiguous_param_buffer), the grad buffer in grad_sync_dtype, and
                   in shards of 1/D the reduce-scattered gradients (_start_bucket_grad_sync:
                   sync_grads_shard, kept as grads_shard until the step), 16-bit parameter
                   remainders instead of an fp32 master copy (setup_optimization: fp32 state
                   over bf16 parameters -> store_params False, store_param_remainders True;
                   StateBucket: param_remainders_shard int16) and Adam's two fp32 moments
                   (exp_avg_shard, exp_avg_sq_shard). Its attention TE's DotProductAttention with
                   the launcher's NVTE_FUSED_ATTN=0 (launcher_scripts/conf/config.yaml, env_vars:
                   "Disable cudnn FA until we've tested it more"), so the flash-attn package's
                   FlashAttention-2 (TE 7d576ed, attention.py: use_fused_attention reads
                   NVTE_FUSED_ATTN). Not set on any row, so not modelled: fp8_params (TE's
                   fp8_model_init, the parameters held and gathered in FP8: only the MLPerf
                   yamls, gpt3/mlperf.yaml "fp8_params: true"); distribute_within_nodes. With
                   overlap_grad_sync and overlap_param_sync (every yaml: --overlap-grad-reduce
                   --overlap-param-gather) its gradients are reduced, and its parameters gathered
                   in the next forward, one transformer layer a bucket on every pipeline stage and
                   model chunk (layer_buckets), not by bucket_cap_mb (125-400 MB in the yamls:
                   the size Apex splits a layer's bucket at, all of whose parts it syncs together)

Each framework's attention kernel is its default where --attention does not say (attention).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from modtrans.plan.model import Schedule


class Framework(enum.StrEnum):
    MEGATRON = "megatron"
    MEGATRON_2022 = "megatron-2022"
    DEEPSPEED = "deepspeed"
    FSDP = "fsdp"
    TORCHTITAN = "torchtitan"
    LLM_FOUNDRY = "llm-foundry"
    FLASH_ATTN = "flash-attn"
    FMS_FSDP = "fms-fsdp"
    NEMO = "nemo"

    @property
    def family(self) -> Framework:
        """Whose data parallelism and ZeRO it runs: a named version or configuration's framework."""
        return _FAMILY.get(self, self)

    @property
    def blocking_p2p(self) -> bool:
        """The pipeline's sends are waited for, as its receives are (megatron-2022; DeepSpeed's
        PipelineEngine: pipe/p2p.py, send: `assert async_op == False`, then dist.send)."""
        return self is Framework.MEGATRON_2022 or self.family is Framework.DEEPSPEED

    @property
    def scatter_gather(self) -> bool:
        """Without SP a boundary crosses as 1/T per tensor rank, all-gathered on arrival
        (megatron-2022; DeepSpeed's PipelineEngine, is_pipe_partitioned and is_grad_partitioned)."""
        return self is Framework.MEGATRON_2022 or self.family is Framework.DEEPSPEED

    @property
    def transformer_engine(self) -> bool:
        """It runs Megatron-Core's Transformer Engine layers: TE's FP8 linears (--precision fp8) and
        its userbuffers (--tp-comm-overlap): Megatron-LM and NeMo (mcore_gpt, transformer_engine
        true in the launcher's yamls), not Megatron-LM of 2022."""
        return self in (Framework.MEGATRON, Framework.NEMO)

    @property
    def context_parallel(self) -> bool:
        """It runs context parallelism (--cp) as ModTrans models it, Megatron-Core's ring of
        Transformer Engine's attention (strategy/llm/context.py): Megatron-LM (core_r0.8.0,
        megatron/training/arguments.py: --context-parallel-size) and NeMo 24.07 over it
        (NeMo-Framework-Launcher 8325688, launcher_scripts/conf/training/llama/llama3_70b.yaml:
        `context_parallel_size: 2`). Not Megatron-LM of 2022 (NVIDIA/Megatron-LM fc7f4f0: no
        context parallelism anywhere in megatron/), flash-attention's training scripts (4a6eaa9f,
        training/: none), DeepSpeed (its Ulysses sequence parallelism, deepspeed/sequence/, is
        all-to-alls of heads, not this) or the FSDP family's (not modelled)."""
        return self in (Framework.MEGATRON, Framework.NEMO)

    @property
    def reduces_in_fp32(self) -> bool:
        """FSDP's reduce_dtype is fp32 whatever the parameters' dtype (torchtitan, llm-foundry)."""
        return self in (Framework.TORCHTITAN, Framework.LLM_FOUNDRY)

    @property
    def fsdp2(self) -> bool:
        """Its data parallelism is FSDP2 (fully_shard), whose gathers and reduce-scatters copy the
        parameters and gradients between their own tensors and the collectives' flat buffers on the
        compute stream (strategy/llm/fsdp.py, copies): torchtitan. llm-foundry and fms-fsdp run
        FSDP1, whose flat parameter is the all-gather's output and the reduce-scatter's input
        itself, its gradient's cast to reduce_dtype and division on its post-backward stream
        (torch/distributed/fsdp/_runtime_utils.py, _post_backward_hook: `with
        state._device_handle.stream(state._post_backward_stream)`, flat_param.grad.to(
        handle._reduce_dtype)); --framework fsdp is FSDP1 as transformers' Trainer and accelerate
        wrap a model."""
        return self is Framework.TORCHTITAN

    @property
    def titan_wrapping(self) -> bool:
        """Its FSDP2 units are torchtitan's (torchtitan/parallelisms/parallelize_llama.py at 9dec370,
        apply_fsdp): fully_shard of each block, `reshard_after_forward = int(layer_id) <
        len(model.layers) - 1` (False for every block under PP), then of the model, whose own
        parameters (the embedding, final norm and output layer) make one group FSDP2 never
        reshards after the forward (the root's: strategy/llm/fsdp.py, unresharded and rooted)."""
        return self is Framework.TORCHTITAN

    @property
    def separate_projections(self) -> bool:
        """It runs q, k and v, and an MLP's gate and up, as separate linears on one input, whose
        input gradients autograd then sums (strategy/llm/projections.py): torchtitan's Llama
        (torchtitan/models/llama/model.py at 9dec370: wq, wk, wv; w1, w3), and the frameworks that
        train the module they are handed (wraps_module: --framework fsdp, deepspeed), whose
        transformers modules run them as the model's own code does where it holds them apart
        (transformers' LlamaAttention: q_proj, k_proj, v_proj; LlamaMLP.forward:
        `self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))`; the IR's linears
        reading one input say which, projections.repeated: none for GPT-2's one c_attn).
        Megatron-Core fuses each set into one GEMM (linear_qkv, linear_fc1), as llm-foundry's MPT
        (Wqkv) and fms's defaults (fused QKV and wg1_fused) do."""
        return self is Framework.TORCHTITAN or self.wraps_module

    @property
    def repeats_kv(self) -> bool:
        """Its attention copies grouped-query attention's keys and values to every query head
        before SDPA (strategy/llm/gqa.py): torchtitan (torchtitan/models/llama/model.py at 9dec370,
        repeat_kv). The others' kernels take the groups as they are."""
        return self is Framework.TORCHTITAN

    @property
    def foreach_adamw(self) -> bool:
        """Its optimizer step is torch's AdamW with foreach kernels over fp32 parameters and a foreach
        gradient-norm clip (cost/gemm.py, foreach_update_bytes): torchtitan (torchtitan/optimizer.py
        at 9dec370, build_optimizers: `"foreach": not fused`, --optimizer.fused off by default;
        train.py: utils.clip_grad_norm_(..., foreach=True) every step). The others' is charged as
        Megatron-LM's (update_bytes)."""
        return self is Framework.TORCHTITAN

    @property
    def op_recompute(self) -> bool:
        """Selective recomputation is torchtitan's 'op' policy (every second matmul of a block and
        the ops between what it saves: strategy/llm/selective.py), not Megatron's attention core."""
        return self is Framework.TORCHTITAN

    def logit_bytes(self, width: int) -> int:
        """Bytes a logit costs at the loss's peak, beside the blocks' activations, for logits of
        `width` bytes (the model's activations'); each held to PyTorch running the loss's ops
        (tests/test_loss_memory_measured.py).

        Megatron: 2 + 4 for 16-bit logits, 4 for fp32 ones. Its cross-entropy makes an fp32 copy
        while the caller still holds the logits (megatron/core/tensor_parallel/cross_entropy.py
        at core_r0.8.0, calculate_logits_max: `vocab_parallel_logits.float()`; GPTModel.forward
        holds `logits` across compute_language_model_loss), turns it into exp_logits in place
        and saves it; its backward hands that fp32 tensor back as the gradient, which autograd
        casts to the logits' dtype: 2 + 4 again. theoretical_memory_usage.py counts the 4 alone.
        flash-attn: the logits' own width, which apex's fused cross-entropy saves and whose
        gradient it writes over them (inplace_backward). torchtitan: 12, its cross-entropy over
        an fp32 copy of the whole bf16 logits (train.py at
        9dec370: loss_fn's `cross_entropy(pred.flatten(0, 1).float(), ...)`, `del pred` before the
        backward), whose backward holds log_softmax's fp32 output, its gradient and the input's
        gradient at once. fms-fsdp: the same three in the logits' own dtype, its cross-entropy on
        them as they come (`native`, above; `del output` before the backward). The others: 4, the
        fp32 logits."""
        if self is Framework.TORCHTITAN:
            return 12
        if self is Framework.FMS_FSDP:
            return 3 * width
        if self is Framework.FLASH_ATTN:  # apex's xentropy saves the logits, its backward in place
            return width
        copy = width if width < 4 else 0  # .float() of fp32 logits is the logits themselves
        return 4 + copy if self.family is Framework.MEGATRON else 4

    def logit_cached(self, width: int) -> int:
        """Bytes a logit PyTorch's caching allocator keeps reserved at the loss's peak beyond the
        live tensors: blocks freed before it that none of its requests fit. torchtitan's bf16
        logits, freed by `del pred` before the backward (2 B a logit), whose backward then asks
        for 4-byte ones; the allocator reuses a cached block only for a request it holds
        (c10/cuda/CUDACachingAllocator.cpp, get_free_block: the smallest cached block of the
        stream's pool at least the request's size) and returns cached blocks only when an
        allocation would fail (release_cached_blocks). Megatron's loss frees nothing before its
        peak. What torch.cuda.max_memory_reserved adds to the peak there
        (tests/test_loss_memory_measured.py replays the loss's allocations through that policy)."""
        return width if self is Framework.TORCHTITAN and width < 4 else 0

    @property
    def precision(self) -> str | None:
        """The training precision the framework's own configuration runs where --precision does
        not say (None: the model's own dtype, as Megatron-LM trains without --bf16, DeepSpeed
        without its bf16 section, FSDP without a MixedPrecision, flash-attn's scripts by their
        configs' autocast). torchtitan: bf16, its mixed_precision_param default (torchtitan/config/
        configs.py at b5bcd76: "bfloat16", through fully_shard under FSDP, torch.autocast under DDP
        or one device). llm-foundry: amp_bf16, the `precision` of its pretraining yamls
        (scripts/train/yamls/pretrain/mpt-7b.yaml at 15fb4ff). fms-fsdp: bf16, its bfSixteen policy
        (fms_fsdp/config/training.py at 5a296af: mixed_precision True; utils/train_utils.py,
        get_mixed_precision_policy). NeMo: bf16, the launcher's training yamls (launcher_scripts/
        conf/training at 26e42fa: `precision: bf16` or `bf16-mixed` in every model's)."""
        on = (Framework.TORCHTITAN, Framework.LLM_FOUNDRY, Framework.FMS_FSDP, Framework.NEMO)
        return "bf16" if self in on else None

    @property
    def attention(self) -> str | None:
        """The attention kernel the framework runs where --attention does not say (None: the
        device's newest fused kernel). torchtitan: PyTorch's SDPA (torchtitan/models/llama/model.py
        at 9dec370: F.scaled_dot_product_attention), whose flash backend is FlashAttention-2. llm-foundry:
        FlashAttention in Triton, attn_impl 'triton', the default its benchmarking table's runs took
        (scripts/train/benchmarking/submit_benchmarks.py at b2a43a1: `--attn_impl` default 'triton';
        sweep.sh gives none). flash-attn: FlashAttention-1, its own kernel when the training
        scripts' speed table was measured (flash-attn 0.2 at 4a6eaa9f). fms-fsdp: PyTorch's SDPA
        (fms/modules/attention.py), FlashAttention-2."""
        return {
            Framework.TORCHTITAN: "flash2", Framework.LLM_FOUNDRY: "triton", Framework.FLASH_ATTN: "flash1",
            Framework.FMS_FSDP: "flash2", Framework.NEMO: "flash2",
        }.get(self)  # fmt: skip

    @property
    def wraps_module(self) -> bool:
        """It trains the module it is handed, a transformers model's own code included: PyTorch FSDP
        (FullyShardedDataParallel(module), as transformers' Trainer and accelerate apply it) and
        DeepSpeed's engine (deepspeed.initialize(model=...)). So the model's own attention runs:
        transformers' default, PyTorch's SDPA (FlashAttention-2), or op by op for a class
        transformers gives no fused kernel (hf/blocks.eager_only; pipeline.own_attention).
        The others train the model their own code builds from the configuration's sizes
        (Megatron's GPTModel, torchtitan's and fms's Llama, llm-foundry's MPT, flash-attn's GPT)."""
        return self in (Framework.FSDP, Framework.DEEPSPEED)

    @property
    def eager_norms(self) -> bool:
        """RMSNorm runs as PyTorch's ops, not one fused kernel: torchtitan's defaults (its
        train_configs at 9dec370: compile = false, norm_type = "rmsnorm", the eager module of
        torchtitan/models/norms.py; cost/norms.py), llm-foundry's RMSNorms and fms's
        LayerNormParameterized (above)."""
        return self in (Framework.TORCHTITAN, Framework.LLM_FOUNDRY, Framework.FMS_FSDP)

    @property
    def loss(self) -> str:
        """The loss's kernels (cost/loss.py, LOSSES): "fused", one fused softmax cross-entropy
        kernel in the logits' own dtype (flash-attn's training scripts: apex's xentropy);
        "native", PyTorch's cross-entropy on the logits as they come, bf16 under fms-fsdp's
        bfSixteen (fms_fsdp/utils/train_utils.py, train: `ce_loss(output.view(-1, ...), ...)`);
        "torch", PyTorch's on fp32 logits (the others: torchtitan's and transformers' .float(),
        Megatron's own fp32 loss)."""
        return {Framework.FLASH_ATTN: "fused", Framework.FMS_FSDP: "native"}.get(self, "torch")

    def gradient_width(self, given: int | None) -> int | None:
        """Bytes of a gradient element in the data-parallel reduction: --dtype-bytes where
        `given`; flash-attn's 4 whatever its autocast dtype, its parameters and so its gradients
        fp32 under Lightning's mixed precision (training/configs/experiment/pile/base.yaml at
        4a6eaa9f, trainer.precision bf16; owt/base.yaml, precision 16: fp16 autocast and a
        GradScaler); nemo's 2, the launcher's grad_sync_dtype=bf16 (above); else None, the
        parameters' dtype's (gradient_bytes)."""
        return given or {Framework.FLASH_ATTN: 4, Framework.NEMO: NEMO_GRAD_SYNC}.get(self)

    @property
    def layer_buckets(self) -> bool:
        """With --overlap-grad-reduce its gradients are bucketed one transformer layer a bucket, on
        every pipeline stage and model chunk (buckets.py): nemo (NeMo r2.0.0rc1,
        megatron_gpt_model.py, configure_optimizers: `buckets.extend(make_parameter_bucket(layer)
        for layer in layers)` for each model chunk, reversed, the parameters outside the layers in
        the first layer's; megatron_base_model.py: init_params_bucket of each, whose buckets
        "all perform communication together"; Apex's try_grad_sync after each chunk's last
        backward, its grad_sync_func)."""
        return self is Framework.NEMO

    @property
    def main_grad_hook(self) -> bool:
        """Its data-parallel wrapper adds each parameter's `.grad` into the parameter's main_grad
        every micro-batch where no fused weight-gradient GEMM accumulated it there already
        (strategy/llm/maingrad.py: the embeddings): Megatron-LM (megatron/core/distributed/
        distributed_data_parallel.py at core_r0.8.0, _make_param_hook) and Megatron-LM of 2022
        (fc7f4f0, megatron/model/distributed.py, _make_param_hook). NeMo's buckets are Apex's
        DistributedFusedAdam's (not this hook), the others' PyTorch's DDP or FSDP."""
        return self in (Framework.MEGATRON, Framework.MEGATRON_2022)

    @property
    def embedding_grad_width(self) -> int | None:
        """Bytes of an embedding's gradient element where the framework reduces embeddings apart
        from the rest: nemo's 4, whatever grad_sync_dtype and --dtype-bytes say (NeMo r2.0.0rc1,
        megatron_gpt_model.py, configure_optimizers: the word and position embeddings'
        `_with_fp32_optimizer = with_fp32_embedding_grads`, default True, no launcher yaml sets it;
        distributed_adam.py, init_params_bucket: those parameters' buckets get
        grad_sync_dtype=torch.float32); else None, as every other parameter."""
        return NEMO_EMBEDDING_GRAD if self is Framework.NEMO else None

    @property
    def distributed_optimizer(self) -> bool:
        """Its --zero 1 is Megatron-LM's distributed optimizer (--use-distributed-optimizer:
        megatron/training/arguments.py at core_r0.8.0; megatron/arguments.py at fc7f4f0, 2022);
        NeMo's is Apex's DistributedFusedAdam, flash-attn's ZeroRedundancyOptimizer, DeepSpeed's
        its ZeRO stage 1 (a sweep's label: Z1, not DO)."""
        return self in (Framework.MEGATRON, Framework.MEGATRON_2022)

    def grad_sync_passes(self, fp16: bool, data_ranks: int = 2) -> tuple[int, ...]:
        """The kernels the framework runs on a data-parallel bucket's whole gradient buffer right
        before it issues the bucket's collective, on the compute stream, each as its passes over
        the bucket's bytes (a read or a write of every element); `fp16`: the model's trainable
        parameters are fp16 (strategy/llm/buckets.py charges them, Bucket.reduce); `data_ranks`:
        D, the data-parallel world size without the context ranks.

        megatron: Megatron-Core's Bucket.start_grad_sync (megatron/core/distributed/
        param_and_grad_buffer.py at core_r0.8.0): with ddp_config.check_for_nan_in_grad `norm =
        self.grad_data.norm(p=2)` (a read) and `assert not norm.isnan()`, then `self.grad_data *=
        self.gradient_scaling_factor` (a read and a write), the factor 1/D (distributed_data_
        parallel.py, DistributedDataParallel.__init__: average_in_collective False, its default).
        check_for_nan_in_grad is training's check_for_nan_in_loss_and_grad (megatron/training/
        training.py, get_model), on unless --no-check-for-nan-in-loss-and-grad (arguments.py,
        store_false) and turned off for fp16 under dynamic loss scaling (validate_args: "if not
        args.loss_scale: args.check_for_nan_in_loss_and_grad = False"): (1, 2), fp16 (2,).
        megatron-2022: the scale alone (NVIDIA/Megatron-LM fc7f4f0, megatron/model/distributed.py,
        DistributedDataParallel.allreduce_gradients: `buffer_.data /= mpu.get_data_parallel_world_
        size()` before its all-reduce; megatron/optimizer/distrib_optimizer.py, reduce_model_grads:
        `gbuf.data /= data_parallel_world_size` before the reduce-scatter; no NaN check): (2,).
        The others none: NeMo's buckets are Apex's DistributedFusedAdam's, flash-attn's PyTorch's
        DDP reducer, which scales a gradient as it copies it into its bucket (not charged).

        At D = 1 both still run their kernels, the collective over one rank aside: Megatron-Core
        wraps every model chunk in its DDP (training.py, get_model: wrap_with_ddp) and
        finalize_model_grads -> finish_grad_sync calls start_grad_sync whatever D, whose NaN check
        has no condition on D, but the scale is skipped: gradient_scaling_factor is
        1.0 / get_data_parallel_world_size() (without the context ranks: parallel_state.py,
        with_context_parallel=False), the experts' buffer's too, and start_grad_sync scales only
        `if self.gradient_scaling_factor != 1.0`: bf16 (1,), fp16 none. Megatron-LM 2022's
        `buffer_.data /= mpu.get_data_parallel_world_size()` has no condition (reduce_model_grads
        calls allreduce_gradients under the default --DDP-impl local: arguments.py at fc7f4f0):
        (2,) at D = 1 too."""
        if self is Framework.MEGATRON:
            scale = (2,) if data_ranks > 1 else ()
            return scale if fp16 else (1, *scale)
        return (2,) if self is Framework.MEGATRON_2022 else ()

    @property
    def clips_apart(self) -> bool:
        """Its optimizer step is Megatron-LM's MixedPrecisionOptimizer.step, whose fp16 unscaling
        and gradient-norm kernels, each followed by an all-reduce of one number, run before Adam as
        kernels of their own (strategy/llm/clipping.py): Megatron-Core and Megatron-LM 2022. NeMo's
        is Apex's DistributedFusedAdam, the others' their own optimizers' (update_bytes keeps the
        norm in their steps)."""
        return self in (Framework.MEGATRON, Framework.MEGATRON_2022)

    @property
    def zero_broadcast(self) -> bool:
        """--zero 1 is PyTorch's ZeroRedundancyOptimizer: the gradients all-reduced whole, each
        rank's updated parameters broadcast after its step (flash-attn: strategy/llm/buckets.py)."""
        return self is Framework.FLASH_ATTN

    @property
    def compiles(self) -> bool:
        """--compile means something: torch.compile of each transformer block, as torchtitan
        applies it (torchtitan/models/llama3/infra/parallelize.py at 9dec370, apply_compile:
        `torch.compile(transformer_block, fullgraph=True)` for each of model.layers, after
        activation checkpointing; its train configs' `compile = true`), so torchtitan and PyTorch
        FSDP, and fms-fsdp's torch.compile(model) of the FSDP-wrapped model (above). Megatron-LM
        runs its own fused kernels (Transformer Engine, Apex) and DeepSpeed and llm-foundry's
        benchmark runs none of this: refused there."""
        return self in (Framework.TORCHTITAN, Framework.FSDP, Framework.FMS_FSDP)

    def reduces_after_sends(self, schedule: Schedule) -> bool:
        """On every pipeline rank but the first, the data-parallel reduction of the rank's
        gradients (its buckets), the SP norms' all-reduce and the tied embedding's start after
        the last backward has sent its gradient on, never beside that backward: Megatron's
        frameworks under their 1F1B schedule.

        Megatron-LM (megatron/core/pipeline_parallel/schedules.py at core_r0.8.0): with
        --overlap-grad-reduce training.py sets config.grad_sync_func (start_grad_sync) unless
        --no-delay-grad-reduce (delay_grad_reduce, default True: "delay / synchronize grad
        reductions in all but first PP stage"), and forward_backward_pipelining_without_
        interleaving enables the reduction in the last backward only `if config.grad_sync_func is
        None or rank == 0` ("Other pipeline stages do grad reduction during pipeline bubble"):
        elsewhere it calls grad_sync_func after the cooldown's last send_backward. The
        interleaved schedule launches a chunk's at the backward `pipeline_parallel_rank` steps
        after its last one's (backward_step_helper), or after every send ("Launch any remaining
        grad reductions"). Without the overlap every reduction is finalize_model_grads',
        after the schedule; so are the SP norms' (_allreduce_layernorm_grads) and the embedding's
        (_allreduce_embedding_grads), after finish_grad_sync. NeMo r2.0.0rc1 hands the same
        schedule its grad_sync_func (megatron_gpt_model.py, fwd_bwd_step: distributed Adam's
        reduce_overlap_gradients). Megatron-LM of 2022 (fc7f4f0) reduces in the optimizer's
        reduce_model_grads, after forward_backward_func returns.

        Not under the interleaved schedule (chunk_reductions), nor under the schedules
        Megatron-LM does not run."""
        ours = (Framework.MEGATRON, Framework.MEGATRON_2022, Framework.NEMO)
        return self in ours and schedule is Schedule.ONE_F_ONE_B

    def chunk_reductions(self, schedule: Schedule, overlap: bool) -> Launch:
        """When each model chunk's gradient reduction (its buckets, and the tails and swap
        program.py issues with them) launches under the interleaved schedule: Launch.DELAYED,
        after the rank's backward `pipeline_parallel_rank` backwards after the chunk's last one,
        or after the rank's last backward send where that is past the end; Launch.AFTER, after
        the rank's last backward (and its send); Launch.READY, as each unit's last weight
        gradient readies it (the other frameworks, and the other schedules).

        Megatron-LM (megatron/core/pipeline_parallel/schedules.py at core_r0.8.0,
        forward_backward_pipelining_with_interleaving): with --overlap-grad-reduce training.py
        sets config.no_sync_func to every chunk's no_sync and, delay_grad_reduce being the
        default, config.grad_sync_func to each chunk's start_grad_sync (training.py, train).
        The schedule enters no_sync before the first step (disable_grad_sync) and again after
        every backward_step_helper, so no bucket launches as its gradients complete; in
        backward_step_helper(microbatch_id), after backward_step and before the step's send,
        `grad_sync_microbatch_id = microbatch_id - pipeline_parallel_rank`, and where
        is_last_microbatch_for_model_chunk(grad_sync_microbatch_id) (the last group's
        `microbatch_id_in_group % pipeline_parallel_size == pipeline_parallel_size - 1`) it calls
        grad_sync_func[get_model_chunk_id(grad_sync_microbatch_id, forward=False)]: the whole
        chunk's buckets at once, `pipeline_parallel_rank` backwards after its last (rank 0: right
        after it, its first chunk's bucketed reduction too). Chunk 0's falls past the last
        backward on every rank but the first: after the cooldown's last send_backward_recv_
        backward, "Launch any remaining grad reductions". Without the overlap grad_sync_func
        is None and the buckets do nothing in the backward (DistributedDataParallel's hook
        registers a gradient only `if self.ddp_config.overlap_grad_reduce`): every reduction is
        finalize_model_grads' (finish_grad_sync), after the schedule, as are the SP norms'
        all-reduce and the embedding's. NeMo r2.0.0rc1 hands the same schedule its no_sync_func
        and grad_sync_func (megatron_gpt_model.py, fwd_bwd_step). Megatron-LM of 2022
        (fc7f4f0) reduces in the optimizer's reduce_model_grads, after forward_backward_func
        returns (training.py, train_step)."""
        if schedule is not Schedule.INTERLEAVED:
            return Launch.READY
        if self in (Framework.MEGATRON, Framework.NEMO):
            return Launch.DELAYED if overlap else Launch.AFTER
        return Launch.AFTER if self is Framework.MEGATRON_2022 else Launch.READY


class Launch(enum.Enum):
    """When a model chunk's gradient reduction launches (Framework.chunk_reductions)."""

    READY = "ready"  # as its units' last weight gradients ready it
    DELAYED = "delayed"  # the pipeline rank's number of backwards after the chunk's last
    AFTER = "after"  # after the rank's last backward (and its send)


_FAMILY = {
    Framework.MEGATRON_2022: Framework.MEGATRON,
    Framework.TORCHTITAN: Framework.FSDP,
    Framework.LLM_FOUNDRY: Framework.FSDP,
    Framework.FLASH_ATTN: Framework.MEGATRON,
    Framework.FMS_FSDP: Framework.FSDP,
    Framework.NEMO: Framework.MEGATRON,
}
# NeMo-Framework-Launcher 24.07, examples/training/{gpt,llama}/h100/*_fp8*.sh: every command's
# `+training.model.optim.grad_sync_dtype=bf16`, Apex's grad buffer and reduce-scatter dtype
NEMO_GRAD_SYNC = 2
NEMO_EMBEDDING_GRAD = 4  # its embeddings' fp32 gradients (Framework.embedding_grad_width)
REDUCED_IN_FP32 = frozenset({"bfloat16"})


def named(which: Callable[[Framework], bool]) -> str:
    """The frameworks `which` holds for, as a refusal names them ("torchtitan, fsdp or fms-fsdp"),
    read from the members so that a new one is named where it belongs."""
    names = [f.value for f in Framework if which(f)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def gradient_bytes(elements: int, dtype: str, size: int) -> int:
    """Bytes of the gradient of a parameter of `elements` values of `dtype` (`size` bytes) in the
    data-parallel reduction."""
    return elements * 4 if dtype in REDUCED_IN_FP32 else size
