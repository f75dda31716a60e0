"""What an estimate says: the iteration's time and where it goes, per pipeline stage and for the
rank the iteration waits for, and the rates derived from it."""

from __future__ import annotations

from dataclasses import dataclass

from modtrans.estimate.walk import Lane


@dataclass(frozen=True, slots=True)
class StageTime:
    """One pipeline stage (its ranks run one program): seconds, and one rank's memory in bytes."""

    stage: int
    wall_s: float  # from the iteration's start to the stage's last operation
    compute_s: float
    comm_s: float  # collectives and sends in flight, overlapped or not
    exposed_comm_s: float  # communication no compute overlapped
    memory_bytes: int | None = None

    @property
    def bubble_s(self) -> float:
        """Neither computing nor communicating: waiting for the other stages."""
        return max(self.wall_s - self.compute_s - self.exposed_comm_s, 0.0)

    @property
    def simulator_exposed_s(self) -> float:
        """Wall minus compute: what ASTRA-sim 2.x prints as a rank's exposed communication
        (Workload::report: curr_tick - tics_gpu_ops), the bubble included."""
        return self.wall_s - self.compute_s


@dataclass(frozen=True, slots=True)
class Estimate:
    """One training iteration's estimate. `compute_s`, `exposed_comm_s` and `bubble_s` are those
    of the stage that finishes last (they sum to `iteration_s`); `flops` every rank's FLOPs
    together, `tokens` the iteration's (global batch x sequence)."""

    iteration_s: float
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    stages: tuple[StageTime, ...]
    npus: int
    flops: int
    tokens: int
    peak_flops: float | None  # one GPU's dense BF16 peak, FLOP/s (None: unknown)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.iteration_s if self.iteration_s else 0.0

    @property
    def tflops_per_gpu(self) -> float:
        """Every rank's FLOPs / (iteration x ranks): the figure Megatron-LM reports (Narayanan et
        al. 2021, section 5.1; as simulate/astra2.py's `achieved`)."""
        return self.flops / self.iteration_s / self.npus / 1e12 if self.iteration_s and self.npus else 0.0

    @property
    def mfu(self) -> float | None:
        """TFLOP/s per GPU over the device's peak."""
        return self.tflops_per_gpu * 1e12 / self.peak_flops if self.peak_flops else None

    @property
    def memory_bytes(self) -> int | None:
        """The largest stage's memory per rank (None: not modelled)."""
        known = [s.memory_bytes for s in self.stages if s.memory_bytes is not None]
        return max(known) if known else None


def stage_time(stage: int, lane: Lane, memory: int | None = None) -> StageTime:
    """A lane (ns) as a stage's seconds."""
    return StageTime(
        stage, lane.finish / 1e9, lane.compute / 1e9, lane.comm / 1e9, lane.exposed / 1e9, memory
    )


def combine(
    stages: tuple[StageTime, ...], *, npus: int, flops: int, tokens: int, peak_flops: float | None
) -> Estimate:
    """The estimate of an iteration whose stages are these: the last to finish sets its time."""
    last = max(stages, key=lambda s: s.wall_s)
    return Estimate(
        last.wall_s,
        last.compute_s,
        last.exposed_comm_s,
        last.bubble_s,
        stages,
        npus,
        flops,
        tokens,
        peak_flops,
    )
