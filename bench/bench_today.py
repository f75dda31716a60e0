"""Estimated iteration times against published runs of today's software (issue 37): FSDP2 and
FlashAttention in bf16 on A100s and H100s (torchtitan), FSDP on A100s and H100s (llm-foundry),
Megatron-Core on H100s. A CHECK, never a calibration target: nothing here feeds back into the
models (the compute model is calibrated on kernel measurements, modtrans/cost/devices.json; the
networks on nccl-tests, modtrans/simulate/network.py).

Run by hand: `python bench/bench_today.py [--only titan-8b-a100,...] [--kernels RUN] [--tier fast]`.
Each run is one `modtrans translate` to Chakra traces and one `modtrans estimate` (the exact tier:
what ASTRA-sim's analytical backend would report), each a fresh process as a user runs them;
`--tier fast` estimates each run with the fast tier instead (modtrans.estimate.layout, what
`modtrans sweep` ranks layouts by), in this process.
`--kernels RUN` prints that run's compute per kernel for one transformer layer and the layers
outside the blocks (the API: modtrans.api.run), where the gap is looked for.

The runs, each as its publisher ran it (the row's command: model, GPUs, layout, batch,
sequence, recomputation; bf16, the framework's flash attention):

    titan-8b-a100    pytorch/torchtitan 9dec370, docs/performance.md, "Llama 3 performance
                     numbers", row "8B | 1 | selective op | 2973 | 58.2%": Llama 3 8B, 64 A100
                     80GB, FSDP2, local batch 1, sequence 8192 (train_configs/llama3_8b.toml at
                     9dec370: seq_len 8192, compile false, selective_ac_option 'op')
    titan-70b-a100   the same table, row "70B | 1 | full | 331 | 51.7%": Llama 3 70B, 64 A100
                     80GB, FSDP2, local batch 1, sequence 8192, full recomputation
    titan-8b-h100    pytorch/torchtitan b5bcd76, benchmarks/llama3_h100_202412_torchtitan.md
                     (torchtitan 9dec370, torch 1963fc8), Table 1 row "FSDP | 5,762 | 82.4":
                     Llama 3.1 8B, 8 H100, FSDP, local batch 2, global 16, selective AC, 8192
    titan-8b-h100x128  the same file, Table 3 row "FSDP | 5,605 | 67.0": 128 H100, global 256
    titan-8b-h100-compile  the same file, Table 1 row "FSDP + torch.compile | 6,667 | 77.0": as
                     titan-8b-h100 with each block under torch.compile (--compile; train config
                     compile = true: apply_compile in torchtitan/parallelisms/parallelize_llama.py)
    titan-8b-h100x128-compile  the same file, Table 3 row "FSDP + torch.compile | 6,514 | 62.0":
                     as titan-8b-h100x128 with --compile
    foundry-7b-h100  mosaicml/llm-foundry 4952183, scripts/train/benchmarking/README.md, "H100
                     80GB BF16" row "7b | 2048 | 8 | h100_80gb | 46.44 | ... | 10643": MPT 7B
                     (GPT-2's layout: learned positions, LayerNorm, GeLU 4h, biases, tied;
                     6,658,859,008 parameters as the row says), 8 GPUs, micro-batch 6, 1
                     accumulation, FULL_SHARD, amp_bf16, no checkpointing, attn_impl triton
                     (the row came with b2a43a1; see FSDP_FOUNDRY below; bench_foundry.py runs
                     the whole table)
    foundry-7b-a100  the same file, "A100 80GB" row "7b | 2048 | 8 | a100_80gb | 64.23 | ... |
                     4641": micro-batch 6, 2 accumulations, global 96
    mcore-1.7b-h100  NVIDIA/Megatron-LM d98e8a6, README.md "Performance Benchmarking" and
                     images/model_table.png (Megatron-Core r0.8.0, images/weak_scaling.png), row
                     "1.7B | 16 | 2048 | 24 | 1 | 1 | 48 | 48 | 192 | 408.8 | 41%": vocabulary
                     131,072, sequence 4,096, --overlap-grad-reduce and --overlap-param-gather
                     (the distributed optimizer: --zero 1 here); micro-batch not published: 1
    mcore-7.1b-h100  the same table, row "7.1B | 32 | 4096 | 30 | 2 | 1 | 48 | 96 | 192 | 465.9":
                     TP 2, --sp and --tp-comm-overlap (the README's "Communication
                     optimizations: Fine-grained overlapping with DP (...), TP (`--tp-comm-overlap`)")
    mcore-16b-h100   the same table (images/model_table.png at d98e8a6, last changed f2e5db4, the
    ...              README's "Benchmark Configuration": vocabulary 131,072, sequence 4,096, the
    mcore-462b-h100  overlaps of DP, TP and PP), its other seven rows as the image reads them:
                     "16B | 48 | 6144 | 32 | 4 | 1 | 48 | 192 | 192 | 489.1 | 49% | 93.9",
                     "32B | 56 | 7168 | 48 | 8 | 1 | 48 | 384 | 192 | 459.6 | 46% | 176.5",
                     "70B | 64 | 8192 | 84 | 8 | 2 | 48 | 768 | 384 | 419.7 | 42% | 322.3",
                     "119B | 80 | 10240 | 92 | 8 | 4 | 48 | 1536 | 768 | 420.5 | 43% | 645.9",
                     "177B | 96 | 12288 | 96 | 8 | 6 | 48 | 2304 | 1152 | 432.8 | 44% | 997.2",
                     "314B | 128 | 16384 | 96 | 8 | 8 | 48 | 3072 | 1536 | 474.4 | 48% | 1457.4",
                     "462B | 144 | 18432 | 112 | 8 | 16 | 48 | 6144 | 3072 | 459.9 | 47% | 2825.6"
                     (model size | heads | hidden | layers | TP | PP | DP | GPUs | batch | TFLOP/s
                     per GPU | MFU | PFLOP/s); micro-batch and virtual stages not published: 1, none.
                     Every row's output layer has its own weights (--untie-embeddings-and-output-
                     weights): each size is the untied count (1.7B 1.75, 16B 16.1, 177B 177.2
                     billion), none the tied one (1.49, 15.3, 175.6): tests/test_mcore_untied.py
    mcore-mixtral-8x7b-h100  NVIDIA/Megatron-LM 823466e, megatron/core/transformer/moe/README.md:
                     its opening line "With MCore v0.9, we've achieved remarkable performance of
                     **468 TFLOPS** for Mixtral 8X7B bf16 training", and its "Reference Best
                     Parallel Mapping" (MCore v0.8) row "Mixtral 8x7B(Dropless) | 32K | All-to-All
                     | BF16 | 64 | 4096 | 1 | 8 | 4 | 8 | 1 | 256" (vocabulary, dispatcher,
                     precision, GPUs, sequence, TP, EP, PP, VP, MBS, GBS) on "8xH100 80GB HBM3";
                     the README's own script (--num-layers-per-virtual-pipeline-stage 8 at PP 4, 32
                     layers) reads VP as layers per virtual stage: no interleaving; its
                     --use-distributed-optimizer, --overlap-grad-reduce, --overlap-param-gather,
                     --moe-grouped-gemm. The README pairs the figure and the mapping without saying
                     they are one run: the weakest row here

Published tokens/s per GPU where the row gives them; Megatron-Core's per-GPU TFLOP/s turned into
an iteration time by the formula it was computed with (megatron/training/training.py at
core_r0.8.0 and core_r0.9.0, num_floating_point_operations: 12 B s l h^2 ((1 + g / n + s / h) +
F / h x k x (3/2 if SwiGLU) + V / (2 l h)), g / n the query groups per head, k the experts a token
is routed to; a GPT's F = 4 h, g = n, k = 1). Its logit term, 6 B s V h, is the output layer's three
GEMMs once, tied or not (the embedding's lookup is no GEMM): untying moves none of the published times.

Looked at and left out, none expressible in BF16: NVIDIA/NeMo's performance summaries
(docs/source/performance/performance_summary.md at 9c5c5e9, NeMo 24.07, DGX-H100: "pre-training
performance for various tasks at FP8 precision", every row; performance_long_sequence.md at
a2c4cc8: FP8) and NVIDIA-NeMo/Megatron-Bridge's (docs/performance-summary.md and
performance-summary-archive.md at 4ab94df, 25.09 to 26.08: every DGX-H100 row FP8 but GPT-OSS
120B's BF16, "64 | BF16 | 1280 | 1 | 4096 | 0 | 1 | 4 | 1 | n/a | 8 | 5824 | 158" in 26.04.01,
a 2026 DeepEP/HybridEP dispatcher on a model with attention sinks); the NeMo 24.07 FP8 rows are
bench/bench_nemo.py's (--precision fp8, since branch fp8).
Error: our iteration time against the published one (negative: we are faster). Memory: the
busiest rank's reserved bytes (the tensors' peak and the blocks the caching allocator keeps
beside it: strategy/llm/memory.py) against torchtitan's reading (max reserved).

Caveats on the hardware: torchtitan's H100s are Grand Teton's HBM2e H100s at a 500 W limit
("the actual peak TFLOPs number is between SXM and NVL", its footnote): its rows run on
`--device h100-hbm2e`, whose peak between the two datasheets is an assumption (devices.json);
llm-foundry's are H100 80GB SXM (HBM3), Megatron-Core's H100 SXM with Transformer Engine's cuDNN
attention (`--attention cudnn`).

Latest: the table, main after merging the six branches of 2026-12-07's second session (main
0787cf9, the exact tier): titanfix, megbytes, fastbucket, megclip (each below; mcore32 and hostcpu
changed no number). MAE 9.5 % (9.5 before), worst 24.6 to 23.5 %; 70B +8.3 to -0.5 % (fastbucket:
each pipeline stage's --overlap-param-gather gathers its own chunks' buffers, where every stage
gathered the whole model's: program.py), 119B-462B 1-3 points faster for the same reason. Nothing
tuned. Branch megbytes (2026-12-07, on main 620bc74; the Megatron-Core rows re-run, the
others as on main): the model_table rows' output layer untied, as the table's sizes count it
(tests/test_mcore_untied.py): 1.7B -24.6 to -24.3 %, 7.1B -23.9 to -23.7, 16B -16.7 to -16.6, 32B
+19.1 to +20.5 (0.94 B parameters more in its exposed fp32 reduce-scatter: 0.308 to 0.320 s), 70B
+8.3 to +7.8, 119B +0.8 to +0.4, 177B -0.9 to -1.2, 314B +0.4 to +0.1, 462B -1.5 to -1.8; then
Megatron's gradient hook adding the embeddings' gradients into their fp32 main_grad every
micro-batch (strategy/llm/maingrad.py: 10 B a bf16 vocabulary-shard element, 0.90 ms a micro-batch
for the 1.7B's 131,072 x 2,048): 1.7B -23.5 %, 7.1B -23.2, 16B -16.2, 32B +20.7, the pipelined
rows to the millisecond as before (the first stage's add inside its bubble); MAE 9.5 to 9.4 %,
worst 24.6 to 23.5 %; nothing tuned. The 32B's account below (73 buckets, 15.39 GB) is the tied
model's. Gradient-accumulation fusion's fp32 C left uncharged (docs/compute-times.md).
Before it: the table, main after merging the four branches below (2026-12-07, main b2ebb1a: MAE 10.8 to
9.5 %, worst 26.4 to 24.6 %; nothing tuned).
Branch titanfix (2026-12-07, on main efc9c12: torchtitan's units as apply_fsdp wraps them at
9dec370, the last block and the root's group not gathered again for the backward, the root's
group one gather and one reduce-scatter, strategy/llm/fsdp.py): titan-8b-a100 +7.0 to +6.8 %,
-70b-a100 +4.2 to +4.1 %, -8b-h100 -10.8 to -10.9 %, -8b-h100x128 -11.1 to -11.3 %, the --compile
rows -13.1 / -12.6 to -13.2 / -12.9 %; the others unchanged; nothing tuned.
Branch titankern (2026-12-07, on main 6d11ded: torchtitan's kernels around FSDP2 as they
run, FSDP2's copies on the compute stream after each gather and before each reduce-scatter
(strategy/llm/fsdp.py, copies) and its optimizer step torch's foreach AdamW and clip over fp32
shards (cost/gemm.py, foreach_update_bytes), autograd's sum of its separate q, k, v and gate, up
input gradients (strategy/llm/projections.py), its repeat_kv copies (strategy/llm/gqa.py), each
held to torch's count of its bytes, and under
full recomputation no FSDP gather of the rerun forward's own (Rerun.regathers: the backward's
gather serves it; 70B's exposed communication 3.763 to 2.544 s); only the torchtitan rows move:
titan-8b-a100 +3.8 to +7.0 %, -70b-a100 +6.2 to +4.2 % (+9.3 % with the copies alone),
-8b-h100 -14.6 to -10.8 %, -8b-h100x128 -14.1 to -11.1 %, the --compile rows -16.1 / -14.8 to
-13.1 / -12.6 %; MAE 10.8 to 10.2 %; nothing tuned (docs/performance.md).
Branch spfinal (2026-12-07, on main 5502bc8: on Megatron's 1F1B stages
but the first the
gradients' reductions wait for the last backward's send, as Megatron launches them after it
(program.py, Pipeline.reduce_after_send), and under SP one all-reduce of the norms' gradients a
rank after the backward, not one a block (strategy/llm/tensor.py, finalized_grads). Moved:
Megatron-Core 32B +18.9 to +18.5 %, 70B +7.8 to +7.2 (bubble 0.246 to 0.237 s), 119B -0.2 to
-0.6, 177B -2.1 to -2.4, 314B -1.1 to -1.3, 462B -3.1 to -3.3, Mixtral 8x7B +5.1 to -1.3 (its
later stages' buckets no longer ahead of their last sends: bubble 0.720 to 0.535 s); MAE 10.8 to
10.6 % (from the rows' rounded errors); nothing tuned. The order alone, without the one
all-reduce: 70B 2.337 s, 119B 3.628, 177B 5.133, 314B 8.287, 462B 12.297; the all-reduce alone
(branch leftovers2, reverted) had given +24.3 to +32.7 % on the five with stages, its bucket
ahead of the send. Branch bucketkern (2026-12-07, on main 5502bc8: Megatron's kernels over
each data-parallel
bucket before its collective, strategy/llm/buckets.py: Bucket.start_grad_sync's NaN-check norm and
1/D scale, three passes over the bucket's fp32 gradients at the streaming bandwidth, after its last
weight gradient, before the rest of the backward. Moved, the Megatron-Core rows only: 1.7B -26.4 to
-25.1 %, 7.1B -26.1 to -24.4, 16B -19.1 to -17.3, 32B +18.9 (its compute 0.734 to 0.749 s, beside
its exposed reduce-scatters), 70B +7.8 to +8.6, 119B -0.2 to +1.0, 177B -2.1 to -0.7, 314B -1.1 to
+0.5, 462B -3.1 to -1.4, Mixtral +5.1 to +6.1 %; at PP > 1 a stage's kernels hold its part of the
pipeline too (119B: compute +16 ms, bubble +45 ms). Then a bf16 parameter's optimizer step
without a loss scale's unscaling (cost/gemm.py, update_bytes: 42 B, not 50): titan-8b-a100 +3.8
to +3.7 %, -8b-h100 -14.6 to -14.7 %, -8b-h100-compile -16.1 to -16.3 %, foundry-7b-h100 -12.0 to
-12.2 %, -7b-a100 -2.9 to -3.0 %, Mixtral +6.1 to +6.0 %, the others under 0.05 %. Then the
distributed optimizer's zeroing of the whole gradient buffer on every rank (zero_grad_buffer:
4 B a parameter, not 4 / D; strategy/llm/build.py, sharded_update): the Megatron-Core rows 2-7 ms
longer, 1.7B -24.6 %, 7.1B -23.9, 16B -16.7, 32B +19.4, 70B +8.8, 119B +1.2, 177B -0.6, 314B +0.6,
462B -1.4, Mixtral +6.1 %. MAE 10.8 to 10.5 %, worst 26.4 to 24.6 %; nothing tuned. Before it
(2026-12-07, branch compile2 on main 46fae57: the op-by-op RMSNorm bound by the SMs, not
the bandwidth, cost/norms.py: an element the longer of its SM cycles, fitted on Liger-Kernel's
H100 NVL and A100 rows, at the device's SMs x boost clock and torch's count of its bytes at the
streaming rate. Moved: titan-8b-a100 +3.2 to +3.8 %, -70b-a100 +5.9 to +6.2 %, -8b-h100 -7.7 to
-14.6 %, -8b-h100x128 -7.4 to -14.1 %, the --compile rows -16.0 to -16.1 % and -14.7 to -14.8 %;
MAE 10.0 to 10.8 %; nothing tuned. Before it (2026-12-07, third session, main 98955de: the GEMM
model's bounds at every wave count,
cost/gpu.py: two kernels of half the rows bound a GEMM above a wave too, split-K slices of 1,024
with the last what is left. Moved: titan-8b-a100 +3.3 to +3.2 %, Megatron-Core 7.1B -26.0 to
-26.1, 16B -18.7 to -19.1, 32B +19.0 to +18.9, 462B +0.4 to -3.1 % (its userbuffers GEMMs on
116 SMs, 9.271 to 8.901 s of compute); MAE 9.8 to 10.0 %; nothing tuned. Before it (second
session, on main 2bb9556): a GEMM under one wave of the large tiles is never charged more than
two of half its rows or columns, cost/gpu.py. That moved only the
Megatron-Core rows at TP 8, whose --tp-comm-overlap GEMMs run in T chunks of s / T rows on the
SMs userbuffers leave (512 x 4,608 x 12,288 on 116 SMs for the 177B's QKV: 144 large tiles, two
waves at 62 % of the SMs before; split into quarters with split-K now, 93 %): 70B +8.4 to +7.8 %,
119B +5.9 to -0.2 %, 177B +3.0 to -2.1 %, 314B -0.1 to -1.1 %, 462B +0.6 to +0.4 %; MAE 10.2 to
9.8 %. Nothing was tuned to these rows; the bound came from GPT-2 and BART at 256 and 512 tokens.
Before it (2026-12-07 on main after branches rowbias and nemo: the same times but the Megatron-Core
32B's and 70B's, whose SP norms' and row-parallel biases' gradient all-reduces are one a block
(+19.3 and +8.5 % before). 2026-12-06, the exact tier, re-run on main 1f7dfe5 to the same times;
Mixtral's memory
50.3 GiB with the MoE terms Megatron-Core core_r0.10.0 keeps (mlps.py; 48.3 before); torchtitan's
reserved with its FSDP2 all-gather stream's pool (memory.py, gather_pool: +2.4 GiB for Llama 3 8B,
+5.6 for 70B; 76.1, 62.1, 72.1, 58.1, 33.6 and 45.9 before). On branch
compile 08a939a: RMSNorm op by op as a fixed time a
call plus bytes an element fitted on Liger-Kernel's whole sweep (cost/norms.py), and the two
--compile rows; before that branch the torchtitan rows read +4.6, +6.7, -4.2 and -4.1 %, the
others as now. Earlier: re-run on main a972908 to the same figures, and on f4d44a4
for the memory, what the caching allocator reserves (memory.py); the Megatron-Core
rows at TP > 1 with --tp-comm-overlap, its GEMMs on the SMs the comm kernel leaves only while it
runs (main a0d2f16), the others as on branch nemorows (main b02debe), which those rows' commands
leave alone; history in docs/performance.md; compute, exposed communication and bubble: the
busiest stage's):

    run                        published    ours   error  compute   comm  bubble  memory pub / ours
    titan-8b-a100                2.755 s   2.942 s  +6.8 %   2.604 s  0.337  0.000       - / 36.0
    titan-70b-a100              24.749 s  25.758 s  +4.1 %  23.229 s  2.529  0.000       - / 51.5
    titan-8b-h100                2.843 s   2.534 s -10.9 %   2.451 s  0.082  0.000    82.4 / 78.5
    titan-8b-h100x128            2.923 s   2.593 s -11.3 %   2.409 s  0.184  0.000    67.0 / 64.4
    titan-8b-h100-compile        2.457 s   2.133 s -13.2 %   2.051 s  0.082  0.000    77.0 / 74.5
    titan-8b-h100x128-compile    2.515 s   2.192 s -12.9 %   2.008 s  0.184  0.000    62.0 / 60.4
    foundry-7b-h100              1.155 s   1.013 s -12.2 %   0.949 s  0.065  0.000       - / 63.8
    foundry-7b-a100              5.295 s   5.135 s  -3.0 %   4.862 s  0.274  0.000       - / 63.8
    mcore-1.7b-h100              0.452 s   0.346 s -23.5 %   0.338 s  0.007  0.000       - / 19.6
    mcore-7.1b-h100              0.800 s   0.615 s -23.2 %   0.609 s  0.006  0.000       - / 30.3
    mcore-16b-h100               0.850 s   0.712 s -16.2 %   0.705 s  0.007  0.000       - / 30.8
    mcore-32b-h100               0.892 s   1.076 s +20.7 %   0.757 s  0.320  0.000       - / 29.1
    mcore-70b-h100               2.177 s   2.165 s  -0.5 %   1.554 s  0.361  0.250       - / 36.8
    mcore-119b-h100              3.648 s   3.513 s  -3.7 %   2.564 s  0.333  0.616       - / 37.6
    mcore-177b-h100              5.259 s   5.045 s  -4.1 %   3.693 s  0.351  1.001       - / 41.7
    mcore-314b-h100              8.399 s   8.210 s  -2.3 %   6.004 s  0.489  1.716       - / 55.7
    mcore-462b-h100             12.716 s  12.350 s  -2.9 %   9.004 s  0.434  2.912       - / 56.6
    mcore-mixtral-8x7b-h100      2.903 s   2.893 s  -0.3 %   1.988 s  0.355  0.550       - / 50.3
    MAE 9.5 %, worst 23.5 % (goal: within 10 % each)

The rows before that change (main 64b994f), where they differ: 16B 0.692 s (-18.5 %), 70B 2.359 s
(+8.4 %, compute 1.539 s), 119B 3.861 s (+5.9 %, 2.728), 177B 5.417 s (+3.0 %, 3.882), 314B 8.393 s
(-0.1 %, 6.014), 462B 12.795 s (+0.6 %, 9.291); MAE 10.2 %, worst 26.4 %.

2026-12-07, branch fastbucket: each pipeline stage's --overlap-param-gather gathers are its own
chunks' (strategy/program.py; every stage had chained the whole model's: at P 2 stage 0 gathered
stage 1's buffer after its own, stage 1 stage 0's embedding and never its own), which moves every
row at P > 1: 70B 2.357 -> 2.176 s (+8.3 -> -0.0 %), Mixtral 2.894 -> 2.892 s (-0.3 -> -0.4 %),
both tiers; 119B 3.676 -> 3.526 s (-3.3 %), 177B 5.211 -> 5.061 (-3.8 %), 314B 8.431 -> 8.231
(-2.0 %), 462B 12.519 -> 12.373 (-2.7 %) by the fast tier (`--tier fast`), which gives the exact
tier's 1.7B, 7.1B, 16B, 32B, 70B and Mixtral rows to the microsecond. Not re-run with the exact
tier: 119B-462B (the table above is theirs before the change).

torchtitan's --compile rows, a check as the others: compile takes 0.37 s off our 8-GPU iteration
(2.429 to 2.062 s, 1.178x), torchtitan measured 0.39 s (2.843 to 2.457, 1.157x). Most of ours is
the blocks' RMSNorm (`--kernels titan-8b-h100` and `titan-8b-h100-compile`: 1.22 ms forward and
3.45 ms backward a norm op by op, its bytes at the part's 2.4 TB/s; 0.22 and 0.82 compiled, as
Liger-Kernel measured the module alone at torchtitan's 67 M elements), about 0.30 s over 32 blocks
with the 'op' policy's rerun; SwiGLU fused about 0.07 s. Neither is tuned to the rows. Before
branch compile2 the op-by-op norm took 1.97 and 4.98 ms, the NVL's measurement moved by the
bandwidth where its kernels follow the SMs (cost/norms.py), and compile took 0.56 s off (1.272x):
the compile rows' gap (-16.1 / -14.8 %) is now the eager rows' own (-14.6 / -14.1 %), not the
compile model's. Not modelled: Inductor inside a whole block (its kernels fused with
the residual adds, the partitioner's choice of what the backward recomputes in its own kernels),
FSDP2 beside compiled blocks. Memory: the compiled block keeps what the partitioner saves (not
w2's output: 4.0 GiB over 32 blocks on 16,384 tokens), 4.0 GiB off against the published 5.4 and
5.0; the rest of each row's gap is the eager rows' own (76.1 against 82.4).

llm-foundry's two rows on main at the commit adding bench_foundry.py, with the attention kernel
they ran (FlashAttention in Triton; before, FlashAttention-2: -23.4 % and -10.1 %, MAE 10.4 %).

With the GEMMs on 116 of 132 SMs throughout (branch tpoverlap): 7.1B -19.3 %, 16B -14.1 %, 32B
+21.1 %, 70B +12.4 %, 119B +9.2 %, 177B +7.4 %, 314B +4.5 %, 462B +4.1 %; MAE 11.0 %.
Before --tp-comm-overlap (the same day, TP collectives NCCL's, in series): 7.1B -18.2 %, 16B
-6.2 %, 32B +56.7 %, 70B +35.5 %, 119B +19.3 %, 177B +12.8 %, 314B +13.1 %, 462B +6.5 %; MAE
15.8 %, worst 56.7 %.

torchtitan's four rows came within 10 % with its own conventions, each held to a kernel
measurement, never to these rows: its H100 part, its 'op' selective recomputation (every second
matmul of a block rerun: strategy/llm/selective.py), rotary and SwiGLU op by op (cost/eager.py,
Liger-Kernel's H100 measurement), RMSNorm op by op (cost/norms.py), the loss and the optimizer
step over a rank's shard. Its memory reads 7.6 and 7.3 % under torchtitan's max reserved (12.4 and
13.2 % before the allocator's reserve, 17 % before FSDP's state was counted as it holds it). Ours is
what the caching allocator holds at the peak (the metadata's reserved_bytes): the tensors' peak and
the blocks it keeps freed before it that its requests there do not fit, the forward's bf16 logits
(2 B a logit, 3.9 GiB here: freed before the loss's backward, too small for its 4 B requests;
frameworks.py, logit_cached). Not counted: the blocks cached in the pools of FSDP's all-gather
stream (a block's gathered parameters, which the compute stream's requests cannot use), other
fragmentation.

llm-foundry's rows lost their time in the attention kernel: run over its whole published tables
(bench_foundry.py: 125M to 70B, 512 to 65,536 tokens) with FlashAttention-2 they were 5-43 % fast,
the error growing with the sequence in every model size, the attention's share; the runs took
submit_benchmarks.py's default attn_impl 'triton', which the FlashAttention-2 paper measured at
42-55 % of FlashAttention-2's rate on the A100. With it (--framework llm-foundry's own kernel) the
A100 table's rows at 512 to 8k tokens come within 6.7 % on average (30 of 39 within 10 %), the
long ones 8-23 % slow (the kernel's curve is flat past its last measured 16k). On the H100 no
measurement of that kernel is published; derived from the A100's by FlashAttention-1's gain, the
H100 rows at 4k-8k come within 5 %, the short ones 5-16 % fast, the long ones 10-28 % slow.

Where Megatron-Core's H100 runs lose time is not the kernels: the H100 BF16 GEMM
model sits 3 % above to 15 % below each of 24 published measurements at training's shapes
(tests/test_gpu_model.py), and `--kernels mcore-1.7b-h100` gives 0.325 s of compute against the
published 0.452 s. Every
published H100 GEMM point is a short burst; no sustained BF16 sweep of the H100 is published (the
A100's sustained sweep sits 4.5-4.7 % under its burst best). What each framework sends was read
from its source: Megatron-Core's fp32 gradient reduce-scatter, its buckets, --overlap-param-gather
(its first bucket exposed), Composer's FSDP mixed precision. Nor is it communication
(bench/bench_dp_account.py): the data-parallel collectives cost 1.6x NCCL's ring here, and with
every collective exposed at NCCL's rates Megatron-Core's 1.7B stays 22.6 % under the published
time. Nor is it any kernel class at its published figure
(bench/bench_kernels.py, one micro-batch kernel by kernel): the time missing a block and
micro-batch (1.7B 1.24 ms, +49 % of the block's 2.54) would be 220 passes over an activation, or
the block's GEMMs at 0.59 of their rate, half of every published burst; Megatron-Core's loss,
its passes counted from cross_entropy.py (52 bytes a logit), moves less than the 58.8 charged
(tests/test_loss.py); Transformer Engine's published CPU cost of a linear's forward (pull request
1191: 140 us for TEColumnParallelLinear, BF16, TP 1) puts a block's four at 0.56 ms, under the
GPU's 0.84 ms; Megatron-Core syncs the host once a micro-batch (schedules.py, num_tokens.item()),
so the host would set these rows' pace only at 4.7, 6.7 and 6.6 ms of host time a block and
micro-batch, for which nothing published accounts (docs/simulate.md, "Host time"; 2026-12-07,
on main efc9c12: 1.16, 1.59 and 1.11 ms missing). The missing time a block and micro-batch
hardly moves with the block's work: 1.24, 1.73, 1.23 ms for the 1.7B, 7.1B (TP 2) and 16B
(TP 4). A cost a block pays whatever its FLOPs, for which no published figure was found. Left:
compute slowed beside the data-parallel collectives it overlaps (docs/simulate.md), FSDP's
prefetch, the CPU time of what the published figure does not cover (Transformer Engine's
attention module, a module's backward, FSDP's hooks), a sustained clock under the H100's power
limit.

Megatron-Core's nine model_table rows split by tensor parallelism, not by size, MoE or pipeline.
Without --tp-comm-overlap TP 1-2 ran 18-26 % fast, TP 4 6 % fast, TP 8 7-57 % slow (the 32B, TP 8
and PP 1, the most; the pipeline's bubble dilutes it from 70B on). The TP 8 rows' excess is
communication, in two parts bench_mcore_lanes.py takes away: ASTRA-sim's one collective at a time
per rank (a data-parallel bucket on InfiniBand holds the next tensor-parallel all-gather on NVLink;
NCCL runs the two communicators beside each other) and the TP collectives in series, where the
README's benchmark ran --tp-comm-overlap. The rows now run it (strategy/llm/userbuffers.py: each
userbuffers GEMM and its collective one compute node, off the communication lane): TP 8 comes to +4
to +21 %, the exposed communication left mostly the data-parallel reduce-scatter's (32B) and the
pipeline's sends behind it; TP 2 and 4 run 19 and 14 % fast (their GEMMs' time, no longer their
collectives', is the compute gap above). Without both (bench_mcore_lanes.py, before the
flag), every dense row but the 32B runs 7-27 % fast, the smaller the faster (1.7B -26 %, 7.1B -27
%, 16B -24 %, 70B -8 %, 462B -10 %): the gap above, unexplained. The 32B stays 12 % slow: TP 8
leaves one data-parallel rank per node, so its fp32 reduce-scatter of 15.4 GB crosses one 400 Gb/s
NIC per GPU (328 ms; NCCL's ring 321 ms), which only the last of 4 micro-batches' backward overlaps
(Megatron-Core's no_sync for the others: pipeline_parallel/schedules.py at core_r0.8.0). Mixtral
8x7B (EP 8, PP 4) comes within 5 %; its all-to-alls are ASTRA-sim's ring all-to-all, n (n - 1) / 2
steps of size / n (estimate/collectives.py): 0.64 ms for one 64 MiB dispatch on 8 GPUs, where (n -
1) / n of it at the 360 GB/s NCCL's all-gather reaches on 8 H100s (simulate/nccl.py, H100_RING)
takes 0.16 ms (no published all-to-all figure checked).
The micro-batch, not published, moves the rows it leaves exposed communication or a bubble in
(`--micro-batch N`, 2026-12-07 at b043e45): the 32B +19.3 / -1.0 / -18.7 % at 1 / 2 / 4 (fewer
micro-batches, so the no_sync window leaves less of the reduce-scatter after the last backward);
70B +8.5 / +6.1 / +9.3 %, 119B +5.9 / +7.4 / +22.3 %, 177B +3.0 / +6.6 / +26.4 % (the bubble
grows with it); the 1.7B, 7.1B and 16B stay at -26 to -28 %, -26 to -28 % and -18 to -24 %
whatever it is: their gap is not that setting.
The 32B's exposed 0.326 s, read against Megatron-LM core_v0.8.0 (2026-12-07, branch dpexposed on
main 46fae57; the table came with f2e5db4, whose data-parallel code is core_v0.8.0's to the byte;
tests/test_megatron_dp.py transcribes it): 0.108 s of it in micro-batch 0's forward, 0.212 s after
the last backward, 0.006 s between (the loss's TP all-reduces, 0.34 ms a micro-batch; 2.6 ms of a
TP all-gather in the last backward held on the one lane behind a bucket, where NCCL runs the two
communicators side by side). What Megatron-Core sends is what we send: 73 buckets of max(40 M, 1 M
x 48) = 48 M parameters or more (ParamAndGradBuffer, the parameters reversed; ours the same 73, the
same parameters, a layer norm's 14,336 elements one bucket over where Megatron registers
linear_proj before linear_qkv, 9,216 elements of padding less in all), reduce-scattered in fp32
(--bf16 forces accumulate_allreduce_grads_in_fp32, arguments.py, validate_args; no flag at
core_v0.8.0 turns it off: 15.39 GB), only in the last of 4 micro-batches' backward
(forward_backward_no_pipelining: no_sync for the others), each bucket as its last gradient lands;
the bf16 parameters gathered bucket by bucket in the next forward (7.70 GB: zero_grad dispatches
the embeddings' bucket, each forward pre-hook the next, in forward order); the group one GPU in
each of 48 nodes, so one NDR NIC a rank (0.328 s and 0.167 s here, NCCL's ring at 47 GB/s 0.321 and
0.160 s). Megatron's schedule exposes the same: the gathers outrun micro-batch 0's 62 ms of forward
by about 0.10 s, the reduce-scatters the last backward's 121 ms by about 0.20 s, at NCCL's own
rate. --align-param-gather and --no-align-grad-reduce came with core_r0.9; --delay-grad-reduce (on
by default) and --delay-param-gather (off) act at PP > 1 only. Modelled since (branch spfinal):
Megatron's one coalesced all-reduce of the SP norms' and biases' gradients after the reductions
(finalize_model_grads, _allreduce_layernorm_grads), where we issued one a block (1.060 to 1.057 s);
each bucket's `grad_data *= 1 / D` and NaN-check norm before its collective (Bucket.start_grad_sync:
three passes over the fp32 buffer, 15.5 ms of HBM traffic, branch bucketkern, beside the
reduce-scatters). Not modelled: the host sync of each bucket's NaN check. So with our compute of
0.734 s (0.754 s with those kernels and the whole buffer's zeroing) Megatron-Core r0.8.0 would take
about 1.05 s at micro-batch 1, and the published 0.892 s leaves 0.16 s for what the run exposed.
What else could
explain it: a micro-batch of 2 or 4 (not published; at 2, 0.871 s, -2.3 %, on 46fae57: two
micro-batches' backward hide more of the reduce-scatter); our compute at TP 8 above the run's (yet
the TP 1-4 rows' compute is 19-26 % short of theirs: as short here, nothing would be left for
communication); data-parallel collectives faster than one NDR NIC's published 46-48 GB/s, for which
no evidence was found.
Bounded since (branch mcore32, 2026-12-07): the gathers can hide only behind micro-batch 0's forward
and the reduce-scatters only behind the last backward, and at the NIC's 400 Gb/s line rate they take
0.151 and 0.302 s, so at our compute no run of Megatron-Core r0.8.0's schedule at micro-batch 1 is
under 1.008 s (+13.0 %), whatever the network model (bench_dp_account.py, floor;
tests/test_megatron_dp.py); the published time needs our compute 26 % above the run's, or another
micro-batch (the floor at 2: 0.813 s).
Ruled out for the small rows: attention dropout inside the fused kernel (Transformer Engine issue
3312, H200, TE 2.15, sbhd, 4,096 tokens, 16 heads of 128: 0.594 ms at p = 0, 0.614 ms at p = 0.1;
+3 % of an attention that is about 16 % of the 1.7B's compute); the attention kernel (the
README does not say which ran: with Transformer Engine's FlashAttention-2, NVTE_FUSED_ATTN=0 as
NeMo's launcher defaults it, bench_nemo.py, in place of cuDNN's, 2026-12-07 on main: 1.7B -20.5 %,
7.1B -21.6 %, 16B -14.8 %, 70B +11.3 %).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from configs import megatron_gpt, written  # bench/configs.py: the script's folder is on sys.path

if TYPE_CHECKING:
    from modtrans.plan.model import Plan


@dataclass(frozen=True)
class Run:
    name: str
    model: str | dict[str, object]  # a built-in, or a config.json's contents
    device: str
    network: str
    gpus: int
    seq: int
    micro_batch: int
    batch: int  # global batch, sequences
    layout: dict[str, object]  # the layout's and framework's options, as Request fields
    tokens_per_gpu: float | None = None  # published tokens/s per GPU
    tflops_per_gpu: float | None = None  # published (Megatron-Core: its formula's TFLOP/s per GPU)
    memory_gib: float | None = None  # published memory per GPU
    megatron: dict[str, float] = field(default_factory=dict)  # what Megatron's FLOP formula reads

    def published_s(self) -> float:
        """The published iteration time, from tokens/s per GPU or Megatron's TFLOP/s per GPU."""
        if self.tokens_per_gpu is not None:
            return self.batch * self.seq / (self.tokens_per_gpu * self.gpus)
        m = self.megatron
        b, s, layers, h, v = self.batch, self.seq, m["layers"], m["hidden"], m["vocab"]
        groups = m.get("groups_per_head", 1.0)  # query groups / heads (GQA)
        mlp = m.get("ffn", 4 * h) / h * m.get("topk", 1) * (1.5 if m.get("swiglu") else 1.0)
        flops = 12 * b * s * layers * h * h * (1 + groups + s / h + mlp + v / (2 * layers * h))
        assert self.tflops_per_gpu is not None
        return flops / (self.tflops_per_gpu * 1e12 * self.gpus)


# torchtitan's attention is PyTorch's SDPA (torchtitan/models/llama/model.py at 9dec370, line 209:
# F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)), whose flash backend is
# FlashAttention-2: --attention flash2
FSDP_TITAN: dict[str, object] = {"framework": "torchtitan", "zero": 3, "attention": "flash2"}
# llm-foundry's FULL_SHARD with Composer's DEFAULT mixed precision: parameters gathered in bf16,
# gradients reduced in fp32 (composer/distributed/mosaic_parallelism.py, get_mixed_precision:
# 'DEFAULT' -> MixedPrecision(param_dtype=bf16 under amp_bf16, reduce_dtype=float32)):
# --framework llm-foundry (strategy/frameworks.py; the same bytes as torchtitan's).
# The attention the rows ran: both came with b2a43a1 (2023-10-19), whose sweep.sh gives no
# --attn_impl to submit_benchmarks.py (default 'triton': FlashAttention in Triton on triton-pre-mlir,
# image mosaicml/pytorch:2.1.0_cu121): --framework llm-foundry's own attention (frameworks.py), the
# FlashAttention-2 paper's measurement of that kernel (devices.json, attention_triton; on the H100 a
# derivation). bench/bench_foundry.py runs the tables these rows come from.
FSDP_FOUNDRY: dict[str, object] = {"framework": "llm-foundry", "zero": 3}
# llm-foundry's MPT defaults: no dropout anywhere (llmfoundry/models/mpt/configuration_mpt.py:
# attn_pdrop, resid_pdrop, emb_pdrop 0.0)
MPT_7B = {
    **megatron_gpt(32, 4096, 32, dropout=0.0, vocab=50368, positions=2048, dtype="bfloat16"),
    "resid_pdrop": 0.0, "embd_pdrop": 0.0,
}  # fmt: skip

# Megatron-Core's attention is Transformer Engine's DotProductAttention, which prefers cuDNN's fused
# attention on Hopper where both it and flash-attn apply (NVIDIA/NeMo pull request 9188,
# memory_optimizations.rst, 'Flash Attention'): --attention cudnn
MCORE_H100: dict[str, object] = {"attention": "cudnn"}


def _mcore_table(row: tuple[str, int, int, int, int, int, int, int, float]) -> Run:
    """A row of Megatron-LM's model_table (r0.8.0) as (name, layers, hidden, heads, TP, PP, GPUs,
    batch, TFLOP/s per GPU): a GPT of vocabulary 131,072 and sequence 4,096, its output layer
    untied (the table's sizes: tests/test_mcore_untied.py), the distributed
    optimizer with both overlaps, sequence parallelism where TP > 1 (as 7.1B's), micro-batch 1 and
    no virtual stages (neither published)."""
    name, layers, hidden, heads, tp, pp, gpus, batch, tflops = row
    layout: dict[str, object] = {
        **MCORE_H100, "tp": tp, "pp": pp, "zero": 1, "overlap_grad_reduce": True,
        "overlap_param_gather": True, "make_vocab_size_divisible_by": 1,
    }  # fmt: skip
    if tp > 1:  # README.md at d98e8a6: "Fine-grained overlapping with ... TP (`--tp-comm-overlap`)"
        layout |= {"sp": True, "tp_comm_overlap": True}
    model = megatron_gpt(layers, hidden, heads, vocab=131072, positions=4096, dtype="bfloat16", tied=False)
    formula: dict[str, float] = {"layers": layers, "hidden": hidden, "vocab": 131072}
    return Run(name, model, "h100", "hgx-h100", gpus, 4096, 1, batch, layout, tflops_per_gpu=tflops,
               megatron=formula)  # fmt: skip


# torchtitan's H100s are Grand Teton's 96 GB HBM2e parts at 500 W (its benchmark's 'Hardware'):
# --device h100-hbm2e (devices.json: its bandwidth as published, its peak an assumption)
RUNS = (
    Run("titan-8b-a100", "llama-3-8b", "a100", "dgx-a100", 64, 8192, 1, 64,
        {**FSDP_TITAN, "recompute": "selective"}, tokens_per_gpu=2973),
    Run("titan-70b-a100", "llama-3-70b", "a100", "dgx-a100", 64, 8192, 1, 64,
        {**FSDP_TITAN, "recompute": "full"}, tokens_per_gpu=331),
    Run("titan-8b-h100", "llama-3-8b", "h100-hbm2e", "hgx-h100", 8, 8192, 2, 16,
        {**FSDP_TITAN, "recompute": "selective"}, tokens_per_gpu=5762, memory_gib=82.4),
    Run("titan-8b-h100x128", "llama-3-8b", "h100-hbm2e", "hgx-h100", 128, 8192, 2, 256,
        {**FSDP_TITAN, "recompute": "selective"}, tokens_per_gpu=5605, memory_gib=67.0),
    Run("titan-8b-h100-compile", "llama-3-8b", "h100-hbm2e", "hgx-h100", 8, 8192, 2, 16,
        {**FSDP_TITAN, "recompute": "selective", "compile": True}, tokens_per_gpu=6667, memory_gib=77.0),
    Run("titan-8b-h100x128-compile", "llama-3-8b", "h100-hbm2e", "hgx-h100", 128, 8192, 2, 256,
        {**FSDP_TITAN, "recompute": "selective", "compile": True}, tokens_per_gpu=6514, memory_gib=62.0),
    Run("foundry-7b-h100", MPT_7B, "h100", "hgx-h100", 8, 2048, 6, 48, FSDP_FOUNDRY,
        tokens_per_gpu=10643),
    Run("foundry-7b-a100", MPT_7B, "a100", "dgx-a100", 8, 2048, 6, 96, FSDP_FOUNDRY,
        tokens_per_gpu=4641),
    Run("mcore-1.7b-h100",
        megatron_gpt(24, 2048, 16, vocab=131072, positions=4096, dtype="bfloat16", tied=False),
        "h100", "hgx-h100", 48, 4096, 1, 192,
        {**MCORE_H100, "tp": 1, "zero": 1, "overlap_grad_reduce": True,
         "overlap_param_gather": True, "make_vocab_size_divisible_by": 1},
        tflops_per_gpu=408.8, megatron={"layers": 24, "hidden": 2048, "vocab": 131072}),
    Run("mcore-7.1b-h100",
        megatron_gpt(30, 4096, 32, vocab=131072, positions=4096, dtype="bfloat16", tied=False),
        "h100", "hgx-h100", 96, 4096, 1, 192,
        {**MCORE_H100, "tp": 2, "sp": True, "tp_comm_overlap": True, "zero": 1,
         "overlap_grad_reduce": True, "overlap_param_gather": True, "make_vocab_size_divisible_by": 1},
        tflops_per_gpu=465.9, megatron={"layers": 30, "hidden": 4096, "vocab": 131072}),
    *(
        _mcore_table(row)
        for row in (
            ("mcore-16b-h100", 32, 6144, 48, 4, 1, 192, 192, 489.1),
            ("mcore-32b-h100", 48, 7168, 56, 8, 1, 384, 192, 459.6),
            ("mcore-70b-h100", 84, 8192, 64, 8, 2, 768, 384, 419.7),
            ("mcore-119b-h100", 92, 10240, 80, 8, 4, 1536, 768, 420.5),
            ("mcore-177b-h100", 96, 12288, 96, 8, 6, 2304, 1152, 432.8),
            ("mcore-314b-h100", 96, 16384, 128, 8, 8, 3072, 1536, 474.4),
            ("mcore-462b-h100", 112, 18432, 144, 8, 16, 6144, 3072, 459.9),
        )
    ),
    Run("mcore-mixtral-8x7b-h100", "mixtral-8x7b", "h100", "hgx-h100", 64, 4096, 1, 256,
        {**MCORE_H100, "pp": 4, "ep": 8, "zero": 1, "overlap_grad_reduce": True,
         "overlap_param_gather": True},
        tflops_per_gpu=468, megatron={"layers": 32, "hidden": 4096, "vocab": 32000,
                                      "groups_per_head": 0.25, "ffn": 14336, "topk": 2,
                                      "swiglu": 1}),
)  # fmt: skip


def _modtrans(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modtrans", *args], capture_output=True, text=True, check=False
    )


def _model(run: Run, folder: Path) -> str:
    if isinstance(run.model, str):
        return run.model
    return str(written(run.model, folder / f"{run.name}.json"))


def _options(run: Run) -> list[str]:
    """The run's options on translate's command line."""
    argv = []
    for key, value in run.layout.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return [
        *argv, "--micro-batch", str(run.micro_batch), "--global-batch", str(run.batch),
        "--seq-len", str(run.seq), "--device", run.device,
    ]  # fmt: skip


def estimate(run: Run, folder: Path) -> dict[str, object]:
    """`modtrans estimate`'s JSON report of the run's traces (translated at `run.gpus` ranks)."""
    prefix = folder / run.name / "t"
    prefix.parent.mkdir()
    done = _modtrans(
        "translate", _model(run, folder), "--npus", str(run.gpus), *_options(run),
        "--format", "chakra-et", "-q", "-o", str(prefix),
        *(["--force"] if run.gpus > 4096 else []),  # translate asks it above 4,096 trace files
    )  # fmt: skip
    if done.returncode:
        raise SystemExit(f"translate {run.name} failed: {done.stderr.strip()}")
    done = _modtrans("estimate", str(prefix), "--network", run.network, "--format", "json")
    if done.returncode:
        raise SystemExit(f"estimate {run.name} failed: {done.stderr.strip()}")
    report: dict[str, object] = json.loads(done.stdout)
    for path in prefix.parent.iterdir():
        path.unlink()
    return report


def fast(run: Run, folder: Path) -> dict[str, object]:
    """The fast tier's report of the run (`--tier fast`: modtrans.estimate.layout, the sweep's
    first tier, in this process), its layout read as `translate` reads the run's options (plan_of's
    Request), the other options handed on as the sweep hands them; the keys of `estimate`'s."""
    from modtrans import estimate as tiers
    from modtrans.estimate.result import document
    from modtrans.request import Request, prepare
    from modtrans.sweep.request import SPACE_FIELDS

    model = _model(run, folder)
    request = Request(
        model=model, npus=run.gpus, micro_batch=run.micro_batch, global_batch=run.batch,
        seq_len=run.seq, device=run.device, **run.layout,  # type: ignore[arg-type]
    )  # fmt: skip
    layout = prepare(request).options.parallel.layout
    assert layout is not None  # every run lays a transformer out
    training = {k: v for k, v in run.layout.items() if k not in SPACE_FIELDS}
    try:
        found = tiers.layout(
            model, layout, device=run.device, network=run.network, seq_len=run.seq, **training
        )
    except tiers.EstimateError as error:
        raise SystemExit(f"the fast tier refuses {run.name}: {error}") from None
    return document(found)


def _seconds(report: dict[str, object], key: str) -> float:
    """One of the estimate's seconds: the busiest stage's compute, exposed communication, bubble."""
    return float(report[key])  # type: ignore[arg-type]


def plan_of(run: Run, folder: Path) -> Plan:
    """The run's plan as `translate` builds it (the API: modtrans.api.run), its model file written
    in `folder`; the analyses beside this script (bench_dp_account, bench_mcore_lanes) start here."""
    from modtrans.api import run as translate
    from modtrans.request import Request, prepare

    request = Request(
        model=_model(run, folder), npus=run.gpus, micro_batch=run.micro_batch,
        global_batch=run.batch, seq_len=run.seq, device=run.device, **run.layout,  # type: ignore[arg-type]
    )  # fmt: skip
    result = translate(prepare(request))
    if result.plan is None:
        raise SystemExit(f"{run.name}: {result.diagnostics}")
    return result.plan


def kernels(run: Run, folder: Path) -> None:
    """The run's compute on rank 0 by kernel for its fourth block and the layers outside the
    blocks, per step (ms over the iteration), then the steps' totals (s)."""
    from modtrans.plan.model import Compute

    plan = plan_of(run, folder)
    ms: dict[tuple[str, str], float] = defaultdict(float)
    flops: dict[tuple[str, str], int] = defaultdict(int)
    steps: dict[str, float] = defaultdict(float)
    for op in plan.programs[0]:
        if not isinstance(op, Compute):
            continue
        name = plan.layers[op.layer].name
        steps[op.step.value] += op.time * 1e-9
        if ".layers.3." in name or ".h.3." in name or (".layers." not in name and ".h." not in name):
            ms[(name, op.step.value)] += op.time * 1e-6
            flops[(name, op.step.value)] += op.flops
    print(f"{run.name}: rank 0's compute by kernel (one block and the layers outside the blocks)")
    for (name, step), t in sorted(ms.items()):
        rate = flops[(name, step)] / (t * 1e-3) / 1e12 if t else 0.0
        print(f"  {name:<42} {step:<12} {t:>9.3f} ms  {rate:>7.1f} TFLOP/s")
    print("  steps: " + ", ".join(f"{k} {v:.3f} s" for k, v in sorted(steps.items())))
    print(f"  compute {sum(steps.values()):.3f} s; published iteration {run.published_s():.3f} s")


def chosen(only: str) -> list[Run]:
    """The runs `only` names, comma-separated (none: every run), in RUNS's order: the --only of
    this script and of those that take its runs. A name not among them stops the script in one
    line."""
    names = [r.name for r in RUNS]
    wanted = {n.strip() for n in only.split(",") if n.strip()}
    unknown = wanted - set(names)
    if unknown:
        raise SystemExit(f"--only: {', '.join(sorted(unknown))} unknown; one of {', '.join(names)}")
    return [r for r in RUNS if not wanted or r.name in wanted]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="a subset of the runs' names, comma-separated")
    parser.add_argument("--kernels", default="", help="print this run's per-kernel compute instead")
    parser.add_argument(
        "--micro-batch", type=int, default=0,
        help="run the chosen runs at this micro-batch instead (where it was not published: the "
        "error's range over a setting nobody reported)",
    )  # fmt: skip
    parser.add_argument(
        "--tier", choices=("exact", "fast"), default="exact",
        help="exact: translate and `modtrans estimate` (the default); fast: modtrans.estimate.layout",
    )  # fmt: skip
    args = parser.parse_args()
    by_name = {r.name: r for r in RUNS}
    with tempfile.TemporaryDirectory() as tmp:
        if args.kernels:
            if args.kernels not in by_name:
                raise SystemExit(f"--kernels: one of {', '.join(by_name)}")
            kernels(by_name[args.kernels], Path(tmp))
            return
        runs = chosen(args.only)
        if args.micro_batch:
            runs = [dataclasses.replace(r, micro_batch=args.micro_batch) for r in runs]
        print(f"{'run':<24} {'published':>10} {'ours':>8} {'error':>7} {'compute':>8} {'comm':>7} "
              f"{'bubble':>7} {'tok/s/GPU pub':>14} {'ours':>7} {'mem pub':>8} {'ours':>6}")  # fmt: skip
        errors = []
        for run in runs:
            report = (fast if args.tier == "fast" else estimate)(run, Path(tmp))
            ours, published = float(report["iteration_s"]), run.published_s()  # type: ignore[arg-type]
            error = ours / published - 1
            errors.append(error)
            ours_tokens = run.batch * run.seq / ours / run.gpus
            pub_tokens = run.batch * run.seq / published / run.gpus
            # what max_memory_reserved would read: the busiest stage's tensors and the allocator's cache
            memory = float(report["reserved_bytes"]) / 2**30  # type: ignore[arg-type]
            pub_memory = f"{run.memory_gib:.1f}" if run.memory_gib else "-"
            print(
                f"{run.name:<24} {published:>9.3f}s {ours:>7.3f}s {100 * error:>+6.1f}% "
                f"{_seconds(report, 'compute_s'):>7.3f}s {_seconds(report, 'exposed_comm_s'):>6.3f}s "
                f"{_seconds(report, 'bubble_s'):>6.3f}s "
                f"{pub_tokens:>14.0f} {ours_tokens:>7.0f} {pub_memory:>8} {memory:>6.1f}",
                flush=True,
            )
    mae = sum(abs(e) for e in errors) / len(errors)
    print(f"MAE {100 * mae:.1f} %, worst {100 * max(abs(e) for e in errors):.1f} % (goal: within 10 % each)")


if __name__ == "__main__":
    main()
