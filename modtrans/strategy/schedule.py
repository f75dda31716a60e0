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

    DualPipe     DeepSeek-V3's bidirectional pipeline (DeepSeek-AI, "DeepSeek-V3 Technical Report",
                 2024, section 3.2.1 and figure 5; deepseek-ai/DualPipe, dualpipe/dualpipe.py,
                 DualPipe.step, transcribed step for step in _dualpipe): stage s holds the model's
                 stages s and P - 1 - s (two copies of every stage's weights, whose gradients the
                 two ranks sum: program.py); half the micro-batches enter at stage 0 and run
                 0 .. P - 1 on the ranks' first chunks, the other half enter at stage P - 1 and run
                 the same model stages on the ranks' second chunks, P - 1 .. 0. Its eight phases
                 pair one direction's forward with the other's backward (overlapped in DeepSeek's
                 kernels: their F&B), and defer some weight gradients (W) into the bubbles as
                 zero bubble does. Needs an even P and an even count of at least 2P micro-batches.
                 Bubble (P/2 - 1)(F&B + B - 3W); weights 2x; activations P + 1 micro-batches of a
                 stage (the repository's README table).
    DualPipeV    DualPipe "cut in half" (Sea AI Lab; dualpipe/dualpipev.py, DualPipeV.step): 2P
                 model stages on P ranks in a V, stage s holding model stages s and 2P - 1 - s;
                 every micro-batch runs 0 .. P - 1 down the ranks and back up P .. 2P - 1 (the
                 turn at stage P - 1 stays on its rank). Same bubble; weights 1x of a 1F1B stage
                 of the same P ranks; needs at least 2P micro-batches.

Each step is (direction, micro-batch, chunk), chunk the model chunk on the stage (virtual_stage
says which virtual stage it is); direction F (forward), B (the whole backward), I (the input
gradient alone: its weight gradient is a W step later) or W (the weight gradient of the earliest
I whose W has not run).
"""

from __future__ import annotations

from modtrans.plan.model import Schedule

FWD, BWD, IGRAD, WGRAD = "F", "B", "I", "W"
Step = tuple[str, int, int]


def virtual_stages(schedule: Schedule, stages: int, vpp: int = 1) -> int:
    """How many pieces the model is cut into: P x V; DualPipe's P (each held twice); DualPipeV's 2P."""
    if schedule is Schedule.DUALPIPE:
        return stages
    if schedule is Schedule.DUALPIPE_V:
        return 2 * stages
    return stages * vpp


def virtual_stage(schedule: Schedule, stage: int, stages: int, chunk: int) -> int:
    """The virtual stage (the piece of the model, in model order) that chunk `chunk` of `stage` runs."""
    if schedule is Schedule.DUALPIPE:
        return stage if chunk == 0 else stages - 1 - stage
    if schedule is Schedule.DUALPIPE_V:
        return stage if chunk == 0 else 2 * stages - 1 - stage
    return chunk * stages + stage


def stage_of(schedule: Schedule, virtual: int, stages: int, micro: int, micro_batches: int) -> int:
    """The stage that runs virtual stage `virtual` for micro-batch `micro`: DualPipe's second half
    of the micro-batches runs the model from the last stage back to the first."""
    if schedule is Schedule.DUALPIPE:
        return virtual if micro < micro_batches // 2 else stages - 1 - virtual
    if schedule is Schedule.DUALPIPE_V:
        return virtual if virtual < stages else 2 * stages - 1 - virtual
    return virtual % stages


def holders(schedule: Schedule, virtual: int, stages: int) -> tuple[int, ...]:
    """The stages holding virtual stage `virtual`'s weights: two under DualPipe, else one."""
    if schedule is Schedule.DUALPIPE:
        return tuple(sorted({virtual, stages - 1 - virtual}))
    return (stage_of(schedule, virtual, stages, 0, 1),)


def order(schedule: Schedule, stage: int, stages: int, micro_batches: int, chunks: int = 1) -> list[Step]:
    return paired(schedule, stage, stages, micro_batches, chunks)[0]


def paired(
    schedule: Schedule, stage: int, stages: int, micro_batches: int, chunks: int = 1
) -> tuple[list[Step], frozenset[int]]:
    """order()'s steps and the indices i whose forward runs overlapped with backward i + 1:
    DualPipe's and DualPipeV's F&B pairs, one micro-batch's communication hidden behind the
    other's compute (DeepSeek-V3 report, section 3.2.1 and figure 4); none in other schedules."""
    if schedule in (Schedule.DUALPIPE, Schedule.DUALPIPE_V):
        return _replay(schedule, stage, stages, micro_batches)
    return _unpaired(schedule, stage, stages, micro_batches, chunks), frozenset()


def _unpaired(schedule: Schedule, stage: int, stages: int, micro_batches: int, chunks: int) -> list[Step]:
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
        steps.append((IGRAD, m, 0))
        if m >= stage:
            steps.append((WGRAD, weight, 0))
            weight += 1
        if forward < micro_batches:
            steps.append((FWD, forward, 0))
            forward += 1
    steps += [(WGRAD, m, 0) for m in range(weight, micro_batches)]
    return steps


def _dualpipe_calls(ranks: int, rank: int, micro_batches: int) -> list[tuple[str, int, bool]]:
    """DualPipe's and DualPipeV's step(), phase by phase, as (F | F& | B | W, phase, zero-bubble B),
    F& a forward overlapped with the backward after it (their _forward_backward_chunk):
    `ranks`, `rank`, `micro_batches` are DualPipe's half the stages, the stage's distance from the
    nearer end and half the micro-batches; DualPipeV's the stages, the stage and the micro-batches
    (the two step() functions are the same with these: dualpipe.py, dualpipev.py)."""
    calls: list[tuple[str, int, bool]] = []
    pair = [("F&", 0, False), ("B", 1, False)]  # _forward_backward_chunk(0, 1), "F&": overlapped
    back = [("F&", 1, False), ("B", 0, False)]  # _forward_backward_chunk(1, 0)
    calls += [("F", 0, False)] * ((ranks - rank - 1) * 2)  # step 1: nF0
    calls += [("F", 0, False), ("F", 1, False)] * (rank + 1)  # step 2: nF0F1
    calls += [("B", 1, True), ("W", 0, False), ("F", 1, False)] * (ranks - rank - 1)  # step 3: nB1W1F1
    main = micro_batches - 2 * ranks + rank + 1
    calls += [*pair, *back] * main  # step 4: nF0B1F1B0
    if main and rank == ranks - 1:  # the middle stages' first pair is not overlapped ("to further
        calls[-4 * main] = ("F", 0, False)  # reduce bubble size"; DualPipeV: the last stage's)
    calls += [("B", 1, False), *back] * (ranks - rank - 1)  # step 5: nB1F1B0
    zero_bubble = False
    for i in range(rank + 1):  # step 6: nB1B0, the second half with zero bubble
        if i == (rank + 1) // 2 and rank % 2 == 1:
            zero_bubble = True
        calls.append(("B", 1, zero_bubble))
        if i == (rank + 1) // 2 and rank % 2 == 0:
            zero_bubble = True
        calls.append(("B", 0, zero_bubble))
    calls += [("W", 0, False), ("B", 0, True)] * (ranks - rank - 1)  # step 7: nWB0
    calls += [("W", 0, False)] * (rank + 1)  # step 8: nW
    return calls


def _replay(
    schedule: Schedule, stage: int, stages: int, micro_batches: int
) -> tuple[list[Step], frozenset[int]]:
    """DualPipe's or DualPipeV's calls as steps. DualPipe: the stages of the second half run the
    first half's calls mirrored (`phase ^= is_in_second_half`): phase p is chunk p ^ second half;
    chunk 1's micro-batches are the second half, numbered after the first's. Weight gradients run
    in the order their zero-bubble backwards did (WeightGradStore's FIFO)."""
    if schedule is Schedule.DUALPIPE:
        half = micro_batches // 2
        flip = int(stage >= stages // 2)
        calls = _dualpipe_calls(stages // 2, min(stage, stages - 1 - stage), half)
    else:
        half, flip = 0, 0
        calls = _dualpipe_calls(stages, stage, micro_batches)
    forwards, backwards = [0, 0], [0, 0]
    deferred: list[tuple[int, int]] = []
    steps: list[Step] = []
    pairs: set[int] = set()
    for call, phase, zero_bubble in calls:
        chunk = phase ^ flip
        if call == "F&":
            pairs.add(len(steps))
        kind = call[0]
        if kind == "W":
            steps.append((WGRAD, *deferred.pop(0)))
            continue
        counter = forwards if kind == "F" else backwards
        micro = counter[chunk] + chunk * half
        counter[chunk] += 1
        if kind == "F":
            steps.append((FWD, micro, chunk))
        elif zero_bubble:
            steps.append((IGRAD, micro, chunk))
            deferred.append((micro, chunk))
        else:
            steps.append((BWD, micro, chunk))
    return steps, frozenset(pairs)


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
