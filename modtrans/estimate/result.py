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
    reserved_bytes: int | None = None  # what PyTorch's caching allocator holds at that peak

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
    of the stage that finishes last (they sum to `iteration_s`); `flops` every rank's model FLOPs
    together (no recomputed forward's: Step.modelled), `tokens` the iteration's (global batch x sequence)."""

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
        """Every rank's model FLOPs / (iteration x ranks): the figure Megatron-LM reports
        (NVIDIA/Megatron-LM 001b00c, megatron/training/training.py: num_floating_point_operations
        over the iteration's time, each GEMM counted 3 times whatever the recomputation)."""
        return self.flops / self.iteration_s / self.npus / 1e12 if self.iteration_s and self.npus else 0.0

    @property
    def mfu(self) -> float | None:
        """TFLOP/s per GPU over the device's peak: the model FLOPs utilisation (PaLM, Chowdhery et
        al. 2022, appendix B), recomputation not counted (Step.modelled)."""
        return self.tflops_per_gpu * 1e12 / self.peak_flops if self.peak_flops else None

    @property
    def memory_bytes(self) -> int | None:
        """The largest stage's memory per rank (None: not modelled)."""
        known = [s.memory_bytes for s in self.stages if s.memory_bytes is not None]
        return max(known) if known else None

    @property
    def reserved_bytes(self) -> int | None:
        """The largest stage's reserved bytes per rank (None: not modelled)."""
        known = [s.reserved_bytes for s in self.stages if s.reserved_bytes is not None]
        return max(known) if known else None


def stage_time(stage: int, lane: Lane, memory: int | None = None, reserved: int | None = None) -> StageTime:
    """A lane (ns) as a stage's seconds, with one rank's memory and reserved bytes where known."""
    return StageTime(
        stage, lane.finish / 1e9, lane.compute / 1e9, lane.comm / 1e9, lane.exposed / 1e9, memory, reserved
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


def peak_of(compute: object) -> float | None:
    """One GPU's dense BF16 peak FLOP/s from a compute model's description (its `peak_flops`, as
    a .meta.json's `compute` holds it), None without one."""
    peaks = compute.get("peak_flops") if isinstance(compute, dict) else None
    if not isinstance(peaks, dict):
        return None
    value = peaks.get("bfloat16") or peaks.get("default") or peaks.get("float")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def document(e: Estimate) -> dict[str, object]:
    """The estimate as JSON holds it: seconds, rates, and per stage the same."""
    return {
        "iteration_s": e.iteration_s,
        "compute_s": e.compute_s,
        "exposed_comm_s": e.exposed_comm_s,
        "bubble_s": e.bubble_s,
        "tokens_per_s": e.tokens_per_s,
        "tflops_per_gpu": e.tflops_per_gpu,
        "mfu": e.mfu,
        "memory_bytes": e.memory_bytes,
        "reserved_bytes": e.reserved_bytes,
        "npus": e.npus,
        "stages": [
            {
                "stage": s.stage,
                "wall_s": s.wall_s,
                "compute_s": s.compute_s,
                "comm_s": s.comm_s,
                "exposed_comm_s": s.exposed_comm_s,
                "bubble_s": s.bubble_s,
                "memory_bytes": s.memory_bytes,
                "reserved_bytes": s.reserved_bytes,
            }
            for s in e.stages
        ],
    }


def lines(e: Estimate) -> list[str]:
    """The estimate as a table of stages and a summary, for a terminal."""
    out = [
        f"{'stage':>7} {'wall ms':>12} {'compute ms':>11} {'comm ms':>10} {'exposed ms':>11} "
        f"{'bubble ms':>10} {'memory GiB':>11}"
    ]
    for s in e.stages:
        memory = f"{s.memory_bytes / 2**30:.1f}" if s.memory_bytes is not None else "-"
        out.append(
            f"{s.stage:>7} {s.wall_s * 1e3:>12.3f} {s.compute_s * 1e3:>11.3f} {s.comm_s * 1e3:>10.3f} "
            f"{s.exposed_comm_s * 1e3:>11.3f} {s.bubble_s * 1e3:>10.3f} {memory:>11}"
        )
    out.append(
        f"iteration: {e.iteration_s * 1e3:,.3f} ms: compute {e.compute_s * 1e3:,.3f} ms, "
        f"exposed communication {e.exposed_comm_s * 1e3:,.3f} ms, bubble {e.bubble_s * 1e3:,.3f} ms "
        "(the stage that finishes last)"
    )
    rates = [f"{e.tflops_per_gpu:.1f} TFLOP/s per GPU"]
    if e.tokens:
        rates.insert(0, f"{e.tokens_per_s:,.0f} tokens/s")
    if e.mfu is not None:
        rates.append(f"MFU {e.mfu:.1%}")
    out.append(", ".join(rates))
    return out
