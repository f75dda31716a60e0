"""BLOOM 176B's training as BigScience ran it (tr11: Megatron-DeepSpeed, bf16, 384 A100 80GB on
Jean Zay) against our estimates (issue 37). A CHECK, never a calibration target: nothing here feeds
the models (the network preset jean-zay-a100 comes from BigScience's all-reduce measurement, a
collective-level one: simulate/network.py, nccl.JEAN_ZAY_A100).

Run by hand: `python bench/bench_bloom.py`: each row's plan built through the API
(bench_today.plan_of) and its exact tier (modtrans.estimate.plan: what ASTRA-sim 2.x's analytical
backend would report) on three readings of the network between nodes (below).

Every setting is BigScience's own (bigscience-workshop/bigscience 9e64ede, train/tr11-176B-ml/):
tr11-176B-ml.slurm: TP_SIZE=4, PP_SIZE=12, NHIDDEN=14336, NLAYERS=70, NHEADS=112, SEQ_LEN=2048,
--pad-vocab-size-to 250880, --bf16, ZERO_STAGE=0 ("bf16 must use z0! it implements its own zero
stage 1 equivalent": DeepSpeed's BF16_Optimizer, --framework deepspeed --zero 0),
--checkpoint-activations (every block: --recompute full), --pp-partition-method
'type:transformer|embedding' (README.md: "pp rank 0: [embed | 5 transformer blocks]", ranks 1-10
6 blocks, "pp rank 11: [5 transformer blocks | embed]": --stages 5,6,...,6,5, the tied embedding
on the first and last stage as ModTrans puts it), --position-embedding-type alibi,
--embed-layernorm; README.md "The default Megatron-LM dropout settings are inherited":
attention and hidden dropout 0.1; 8 GPUs a node. The attention Megatron-DeepSpeed ran in 2022 is
its own: baddbmm of the scores (ALiBi as its input) and the fused masked softmax, no FlashAttention
(--attention eager). The rows:

    final-12695   chronicles.md, 2022-03-18: "full throttle of GBS=2048", the log line of
                  iteration 12695: "elapsed time per iteration (s): 105.22 ... TFLOPs: 149.02";
                  48 nodes (DP 8), MICRO_BATCH_SIZE=2, GLOBAL_BATCH_SIZE=2048
    final-85376   README.md, "Important checkpoints": iteration 85376 (the end of the first
                  epoch, before the move to 24 nodes on 2022-07-04), 104.70 s, 149.77 TFLOPs
    ramp-gbs16    README.md, "Global batch size": the log line of iteration 3707, "global batch
                  size: 16", 15.23 s, 8.04 TFLOPs, MBS 2 ("GBS=16/MBS=2 @ 8 TFLOPs"): one
                  micro-batch a pipeline, the pipeline's latency
    ramp-gbs192   README.md, the "Update": "starts with GBS=192/MBS=1 @ 73 TFLOPs": the
                  time from Megatron-DeepSpeed's own formula (throughput_calculator: 24 x 4 B s l
                  h^2 (1 + s / 6h + V / 16lh), 4 with --checkpoint-activations; it gives the logged
                  149.02 TFLOPs from 105.22 s), 20.1 s

The model: BLOOM is Megatron's GPT (pretrain_gpt.py) with ALiBi and an embedding LayerNorm, and
ModTrans reads the bloom model_type only through transformers, which names no tensor-parallel split
for it (X501 until hf/derived.py derived Megatron's, 2026-12-07: warning M806). The rows run a
GPT-2 configuration of BLOOM's sizes instead (bench/configs.py,
megatron_gpt: LayerNorm, biases, GeLU of 4h, tied output layer, as BLOOM's blocks: the README's
12 h^2 + 13 h a block). What differs, each small: learned positions, 2,048 x 14,336 = 29.4 M
parameters on stage 0 (0.017 % of the model) where BLOOM has none; no embedding LayerNorm (2 h
parameters, one LayerNorm of a micro-batch's b s h on stage 0 against 12 in its 6 blocks'
forwards and reruns); ALiBi's bias, Megatron-DeepSpeed's [heads, 1, s] tensor the scores' baddbmm
reads as its input (negligible against the s x s scores).

The network between nodes (jean-zay-a100, simulate/network.py): four 100 Gb/s Omni-Path ports a
node (README.md "Hardware"), and BigScience's all_reduce_bench on 4 of these nodes, NCCL 2.10.3:
40.6 Gb/s (5.08 GB/s) of bus bandwidth on a ring of 32 GPUs (experiments/bandwidth/
all_reduce_bench-a100-n4.txt). Whose rate that is, each GPU's or the node's, is not published:
each row is printed under three readings, none picked: "GPU" 5.08 GB/s a GPU (the preset),
"node" 5.08 / 8 = 0.63 GB/s a GPU, "line" 6.25 GB/s a GPU (400 Gb/s over 8 GPUs). Inside a node,
dgx-a100's NVLink (no A100 measurement by BigScience; NVSwitch not stated). The A100 80GB's
compute profile as for every A100 row (devices.json, `a100`).

Not modelled: CUDA_LAUNCH_BLOCKING=1 (tr11-176B-ml.slurm: "do not remove or the training will
hang"; README.md: "makes a tiny impact or no impact at all to the throughput"); the attention
mask DeepSpeed's PipelineEngine sends beside each activation (GPT2ModelPipe's, cast to half:
_exec_send_activations); the data loader's workers. ASTRA-sim's addressing sends a group's ring
over the first dimension where two ranks differ (collectives.py): the data-parallel group of a TP
rank (ranks 4 apart, two a node) runs its all-reduce on NVLink though its members sit on four
nodes; the "DP AR" column gives what that fp32 all-reduce takes at the measured 5.08 GB/s in
NCCL's ring (nccl.ring_seconds) beside what the estimate charged.

Latest (2026-12-07, branch bloom at the commit adding this script; error: ours against the
published iteration time, negative: we are faster; GiB: the busiest stage's tensors; DP AR: rank
0's data-parallel all-reduces as the estimate charged them and as NCCL's ring over Omni-Path takes
them; the discussion in docs/performance.md, "bench_bloom.py"):

    row           published    GPU   error   node   error   line   error   GiB  DP AR charged / OPA
    final-12695     105.22s  84.0s  -20.2% 105.0s   -0.2%  83.4s  -20.7%  42.7  0.13 / 5.53 s
    final-85376     104.70s  84.0s  -19.8% 105.0s   +0.3%  83.4s  -20.4%  42.7  0.13 / 5.53 s
    ramp-gbs16       15.23s   8.6s  -43.8%  19.4s  +27.2%   8.3s  -45.7%  36.8  0.13 / 5.53 s
    ramp-gbs192      20.14s  12.4s  -38.4%  23.7s  +17.6%  12.1s  -39.9%  39.1  0.13 / 5.53 s

No reading fits every row (per node the final rows land on the published time, the ramp-up rows
18-27 % slow), so none is chosen. With NCCL's ring for the data-parallel all-reduce in place of the
NVLink ring ASTRA-sim's addressing gives it (+5.4 s), the per-GPU reading's rows are -15.0, -14.6,
-8.1 and -11.6 %. BigScience published no memory per GPU for this layout. ramp-gbs16 is the
weakest row: a log line of a run before the launch, in the README's planning of the ramp-up.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench_today import Run, plan_of  # bench/bench_today.py: the script's folder is on sys.path
from configs import megatron_gpt

from modtrans import estimate
from modtrans.comm import CommType
from modtrans.estimate.collectives import Fabric
from modtrans.plan.model import Collective, Plan, Purpose
from modtrans.simulate import nccl
from modtrans.simulate.network import OMNI_PATH, PRESETS, Network

LAYERS, HIDDEN, HEADS, SEQ, VOCAB = 70, 14336, 112, 2048, 250880  # tr11-176B-ml.slurm
TP, PP, PER_NODE = 4, 12, 8
STAGES = (5, *[6] * 10, 5)  # README.md: the embedding a stage's layer on the first and the last
LAYOUT: dict[str, object] = {
    "framework": "deepspeed", "zero": 0, "tp": TP, "pp": PP, "precision": "bf16",
    "recompute": "full", "attention": "eager", "stages": STAGES, "make_vocab_size_divisible_by": 1,
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    name: str
    gpus: int
    micro: int
    batch: int
    published_s: float | None = None  # the log's "elapsed time per iteration (s)"
    tflops: float | None = None  # else the TFLOP/s it published, turned into seconds (formula)

    def seconds(self) -> float:
        """The published iteration time; from TFLOP/s by Megatron-DeepSpeed's throughput formula."""
        if self.published_s is not None:
            return self.published_s
        assert self.tflops is not None
        return formula_flops(self.batch) / (self.tflops * 1e12 * self.gpus)


def formula_flops(batch: int) -> float:
    """Megatron-DeepSpeed's FLOPs an iteration (megatron/utils.py, throughput_calculator, as the
    tr11 README's "Throughput" cites it): 24 c B s l h^2 (1 + s / 6h + V / 16lh), c = 4 with
    --checkpoint-activations."""
    h, s, layers = HIDDEN, SEQ, LAYERS
    return 24 * 4 * batch * s * layers * h * h * (1 + s / (6 * h) + VOCAB / (16 * layers * h))


ROWS = (
    Row("final-12695", 384, 2, 2048, published_s=105.22),
    Row("final-85376", 384, 2, 2048, published_s=104.70),
    Row("ramp-gbs16", 384, 2, 16, published_s=15.23),
    Row("ramp-gbs192", 384, 1, 192, tflops=73.0),
)


def networks(gpus: int) -> dict[str, Network]:
    """The three readings of BigScience's all-reduce rate between nodes, inside dgx-a100's NVLink."""
    line, inside, near = PRESETS["jean-zay-a100"].inside
    measured = nccl.JEAN_ZAY_A100.busbw[4_000_000_000]
    rates = {"GPU": measured, "node": measured / PER_NODE, "line": OMNI_PATH}
    dims = (PER_NODE, gpus // PER_NODE)
    return {k: Network(dims, (inside, v), (near, 1000.0), (line, OMNI_PATH)) for k, v in rates.items()}


def run_of(row: Row) -> Run:
    config = megatron_gpt(LAYERS, HIDDEN, HEADS, dropout=0.1, vocab=VOCAB, positions=SEQ, dtype="bfloat16")
    return Run(row.name, config, "a100", "jean-zay-a100", row.gpus, SEQ, row.micro, row.batch, LAYOUT)


def data_allreduce(plan: Plan, net: Network) -> tuple[float, float]:
    """Rank 0's data-parallel all-reduces: the seconds the estimate's fabric charges them, and
    NCCL's ring over Omni-Path at the measured bus bandwidth (nccl.ring_seconds)."""
    fabric = Fabric.of(net)
    dp = plan.mesh.extent(Purpose.DATA)
    charged = ring = 0.0
    for op in plan.programs[plan.program_of[0]]:
        if isinstance(op, Collective) and op.comm is CommType.ALLREDUCE and Purpose.DATA in op.over:
            charged += fabric.collective_ns(op.comm, op.bytes, plan.mesh.members(0, op.over)) * 1e-9
            measured = nccl.JEAN_ZAY_A100.busbw[4_000_000_000]
            ring += nccl.ring_seconds("all-reduce", op.bytes, dp, measured, 1000.0)
    return charged, ring


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    print(f"{'row':<13} {'published':>9} " + " ".join(f"{k:>6} {'error':>7}" for k in ("GPU", "node", "line"))
          + f" {'GiB':>5}  DP AR charged / OPA")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for row in ROWS:
            run = run_of(row)
            plan = plan_of(run, Path(tmp))
            nets = networks(row.gpus)
            published = row.seconds()
            cells = []
            for net in nets.values():
                found = estimate.plan(plan, network=net, tokens=row.batch * SEQ)
                cells.append(
                    f"{found.iteration_s:>5.1f}s {100 * (found.iteration_s / published - 1):>+6.1f}%"
                )
            gib = max(m.total for m in plan.memory) / 2**30
            charged, ring = data_allreduce(plan, nets["GPU"])
            dp = f"{charged:.2f} / {ring:.2f} s"
            print(f"{row.name:<13} {published:>8.2f}s {' '.join(cells)} {gib:>5.1f}  {dp}", flush=True)
    print("error: our iteration time against the published one (negative: we are faster)")


if __name__ == "__main__":
    main()
