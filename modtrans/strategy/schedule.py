"""Pipeline schedules: the order in which a stage runs its micro-batches' forward and backward
chunks (Narayanan et al. 2021, section 2.2; Megatron-LM's schedules.py).

    GPipe        every forward, then every backward (Huang et al. 2019)
    1F1B         warm-up of P - s - 1 forwards, then one forward / one backward, then cool-down
                 (PipeDream-Flush)
    interleaved  V chunks per stage; Megatron's order: warm-up (P - s - 1) x 2 + (V - 1) x P
                 virtual micro-batches, the chunk of virtual micro-batch k being (k // P) mod V
                 (reversed for backward), its micro-batch (k // (P V)) x P + k mod P
    ZB-H1        zero bubble, handcrafted (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
                 2024, section 3.1 and figure 3): each backward split into B (the input gradient,
                 which the stage before waits for) and W (the weight gradient, which nobody
                 waits for). Stage s runs 1F1B's warm-up (P - s forwards in flight), then per
                 micro-batch its B as soon as it can, and W s steps later than 1F1B would: the
                 first s W's are deferred and fill the cool-down, where 1F1B's stage s idles.
                 With equal F, B and W times the bubble is a third of 1F1B's, (P - 1)(F + B - W);
                 the activations a stage holds are at most P micro-batches', 1F1B's peak.

Each step is (direction, micro-batch, chunk): chunk c of stage s is virtual stage c x P + s;
direction F (forward), B (the whole backward, or only its input gradient under ZB-H1) or W (ZB-H1:
the weight gradient).
"""

from __future__ import annotations

from modtrans.plan.model import Schedule

FWD, BWD, WGRAD = "F", "B", "W"
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
    if schedule is Schedule.ZB_H1:
        return _zb_h1(stage, stages, micro_batches)
    return _interleaved(stage, stages, micro_batches, chunks)


def _zb_h1(stage: int, stages: int, micro_batches: int) -> list[Step]:
    """1F1B with split backwards, stage s deferring its W's by s (module docstring)."""
    warmup = min(stages - stage, micro_batches)
    steps: list[Step] = [(FWD, m, 0) for m in range(warmup)]
    forward, weight = warmup, 0
    for m in range(micro_batches):
        steps.append((BWD, m, 0))
        if m >= stage:
            steps.append((WGRAD, weight, 0))
            weight += 1
        if forward < micro_batches:
            steps.append((FWD, forward, 0))
            forward += 1
    steps += [(WGRAD, m, 0) for m in range(weight, micro_batches)]
    return steps


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
