"""Pipeline schedules: the order in which a stage runs its micro-batches' forward and backward
chunks (Narayanan et al. 2021, section 2.2; Megatron-LM's schedules.py).

    GPipe        every forward, then every backward (Huang et al. 2019)
    1F1B         warm-up of P - s - 1 forwards, then one forward / one backward, then cool-down
                 (PipeDream-Flush)
    interleaved  V chunks per stage; Megatron's order: warm-up (P - s - 1) x 2 + (V - 1) x P
                 virtual micro-batches, the chunk of virtual micro-batch k being (k // P) mod V
                 (reversed for backward), its micro-batch (k // (P V)) x P + k mod P

Each step is (direction, micro-batch, chunk): chunk c of stage s is virtual stage c x P + s.
"""

from __future__ import annotations

from modtrans.plan.model import Schedule

FWD, BWD = "F", "B"
Step = tuple[str, int, int]


def order(schedule: Schedule, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Step]:
    if schedule is Schedule.GPIPE:
        return [(FWD, m, 0) for m in range(micro_batches)] + [(BWD, m, 0) for m in range(micro_batches)]
    if schedule is Schedule.ONE_F_ONE_B:
        warmup = min(stages - stage - 1, micro_batches)
        steps = [(FWD, m, 0) for m in range(warmup)]
        forward, backward = warmup, 0
        while forward < micro_batches:
            steps.append((FWD, forward, 0))
            forward += 1
            steps.append((BWD, backward, 0))
            backward += 1
        steps += [(BWD, m, 0) for m in range(backward, micro_batches)]
        return steps
    return _interleaved(stage, stages, micro_batches, chunks)


def _virtual(k: int, stages: int, chunks: int, forward: bool) -> tuple[int, int]:
    group = k % (stages * chunks)
    chunk = group // stages
    if not forward:
        chunk = chunks - 1 - chunk
    micro = (k // (stages * chunks)) * stages + k % stages
    return micro, chunk


def _interleaved(stage: int, stages: int, micro_batches: int, chunks: int) -> list[Step]:
    total = micro_batches * chunks
    warmup = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    steps: list[Step] = []
    for k in range(warmup):
        steps.append((FWD, *_virtual(k, stages, chunks, True)))
    backward = 0
    for k in range(warmup, total):
        steps.append((FWD, *_virtual(k, stages, chunks, True)))
        steps.append((BWD, *_virtual(backward, stages, chunks, False)))
        backward += 1
    for k in range(backward, total):
        steps.append((BWD, *_virtual(k, stages, chunks, False)))
    return steps
