"""Record the order DeepSeek's own DualPipe and DualPipeV code runs its chunks in, per rank, into
fixtures/schedules/dualpipe.json: the independent source tests/test_schedules.py compares
modtrans/strategy/schedule.py's transcription with.

DualPipe.step and DualPipeV.step (deepseek-ai/DualPipe, dualpipe/dualpipe.py and dualpipev.py,
MIT) are run as they are, on one process, with their compute and communication methods replaced
by recorders: each forward, backward (with its zero-bubble flag) and weight chunk is written down
as (kind, module, chunk id). The module is the rank's nn.Module index after the code's own phase
mapping; a weight chunk is the zero-bubble backward that WeightGradStore's FIFO hands it (the
library's queue, not ours). The overlapped forward-and-backward pairs are a forward then a
backward, as DualPipe runs them without an overlapped_forward_backward.

Run in an environment with torch, with a checkout of deepseek-ai/DualPipe (3da1bbe was used):
    python tools/record_dualpipe_schedules.py PATH/TO/DualPipe [COMMIT]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch  # type: ignore[import-not-found]

OUT = Path(__file__).resolve().parents[1] / "fixtures" / "schedules" / "dualpipe.json"
CASES = {  # (ranks, micro-batches): DualPipe's README figure is 8 and 20
    "dualpipe": [(4, 8), (4, 12), (8, 20), (2, 4), (6, 14)],
    "dualpipev": [(4, 8), (4, 10), (3, 7), (2, 5)],
}


def record(kind: str, ranks: int, chunks: int) -> list[list[list[Any]]]:
    from dualpipe import DualPipe, DualPipeV, comm  # type: ignore[import-not-found]
    from dualpipe.utils import WeightGradStore  # type: ignore[import-not-found]

    cls = DualPipe if kind == "dualpipe" else DualPipeV
    mirrored = kind == "dualpipe"
    comm.set_p2p_tensor_shapes([(1,)])
    comm.set_p2p_tensor_dtype(torch.float32)
    out = []
    for rank in range(ranks):
        log: list[list[Any]] = []
        pipe = object.__new__(cls)
        torch.nn.Module.__init__(pipe)
        pipe.num_ranks, pipe.rank = ranks, rank
        pipe.is_first_rank, pipe.is_last_rank = rank == 0, rank == ranks - 1
        pipe.is_in_second_half = rank >= ranks // 2
        pipe.is_middle_rank = rank in (ranks // 2 - 1, ranks // 2)
        pipe.batch_dim = 0

        def forward(phase: int, pipe: Any = pipe, log: list[list[Any]] = log) -> None:
            phase ^= pipe.is_in_second_half if mirrored else 0
            log.append(["F", phase, pipe.current_f_chunk_id[phase]])
            pipe.current_f_chunk_id[phase] += 1
            pipe.loss_chunks.append(torch.zeros(()))  # what step() returns at the end; not recorded

        def backward(
            phase: int, enable_zb: bool = False, pipe: Any = pipe, log: list[list[Any]] = log
        ) -> None:
            phase ^= pipe.is_in_second_half if mirrored else 0
            chunk = pipe.current_b_chunk_id[phase]
            pipe.current_b_chunk_id[phase] += 1
            log.append(["I" if enable_zb else "B", phase, chunk])
            if enable_zb:
                WeightGradStore.put(lambda: log.append(["W", phase, chunk]))
                WeightGradStore.flush()

        def both(phase0: int, phase1: int) -> None:
            forward(phase0)
            backward(phase1)

        pipe._forward_compute_chunk = forward
        pipe._backward_compute_chunk = backward
        pipe._forward_backward_compute_chunk = both
        for name in ("_recv_forward", "_send_forward", "_recv_backward", "_send_backward"):
            setattr(pipe, name, lambda phase: None)
        pipe._commit_and_wait_comm = lambda: None
        half = chunks // 2 if mirrored else chunks
        ends = pipe.is_first_rank or pipe.is_last_rank
        inputs = torch.zeros(half, 1) if ends else None
        pipe.step(inputs, num_chunks=chunks, criterion=(lambda *a: torch.zeros(())) if ends else None)
        out.append(log)
    return out


def main() -> None:
    source = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(source))
    commit = sys.argv[2] if len(sys.argv) > 2 else ""  # a commit to name (an exported tree has none)
    commit = (
        commit
        or subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    )
    result: dict[str, Any] = {
        "made_with": f"deepseek-ai/DualPipe {commit or '(not a git checkout)'}, torch {torch.__version__}",
        "made_by": "tools/record_dualpipe_schedules.py",
        "schedules": {},
    }
    for kind, cases in CASES.items():
        for ranks, chunks in cases:
            result["schedules"][f"{kind}-p{ranks}-m{chunks}"] = record(kind, ranks, chunks)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
