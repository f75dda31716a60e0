"""The large run of ModTrans's own fuzzer (tests/fuzzing.py; tests/test_fuzz.py is the CI run).

    python bench/fuzz.py                    # 20,000 text, 5,000 JSON, 1,000 ONNX, 2 LSP sessions
    python bench/fuzz.py --scale 0.1        # a tenth of that
    python bench/fuzz.py --seed 7 --jobs 2

Cases are split into chunks over `--jobs` processes; every violation is printed with the seed
and case index that reproduce it, then the counts per kind. Each LSP session is one server fed
2,000 hostile messages (fuzzing.lsp_messages: bad bodies and params, garbage buffers, malformed
framing); a traceback, a stderr line that is not a one-line report, a death, an unanswered hover
or shutdown, or a diagnostic outside its text is a violation. A case that takes over 10 s is a
violation too (it found a regex that backtracked for hours on a 1 MB layer line). Exit 1 when
anything was found.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import fuzzing

CHUNK = 1000
PLAN = {"text": 20_000, "json": 5_000, "onnx": 1_000, "trace": 5_000, "config": 2_000}
LSP_SESSIONS, LSP_MESSAGES = 2, 2_000
SLOW_SECONDS = 10.0  # one case taking longer is reported: a hang or a quadratic path


MEMORY = 4 << 30  # per worker: a case that blows up memory is a MemoryError violation, not an OOM kill


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _chunk(job: tuple[str, int, int]) -> tuple[str, int, list[str], float]:
    kind, seed, count = job
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        run, violations = fuzzing.campaign(kind, seed, count, Path(scratch), slow=SLOW_SECONDS)
    return kind, run, violations, time.perf_counter() - start


def _lsp(seed: int) -> tuple[str, int, list[str], float]:
    start = time.perf_counter()
    return "lsp", LSP_MESSAGES, fuzzing.check_lsp(seed, LSP_MESSAGES), time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    jobs = []
    for kind, total in PLAN.items():
        count = max(1, int(total * options.scale))
        for index, first in enumerate(range(0, count, CHUNK)):
            jobs.append((kind, options.seed * 1000 + index, min(CHUNK, count - first)))
    totals: dict[str, list[float]] = {}
    found: list[str] = []
    start = time.perf_counter()
    with ProcessPoolExecutor(options.jobs, initializer=_limit_memory) as pool:
        futures = [pool.submit(_chunk, job) for job in jobs]
        futures += [pool.submit(_lsp, options.seed * 1000 + i) for i in range(LSP_SESSIONS)]
        for future in futures:
            kind, run, violations, seconds = future.result()
            entry = totals.setdefault(kind, [0, 0, 0.0])
            entry[0] += run
            entry[1] += len(violations)
            entry[2] += seconds
            found += violations
    wall = time.perf_counter() - start
    for violation in found:
        print(violation)
    print(f"{'kind':<6} {'cases':>8} {'violations':>11} {'cpu s':>8}")
    for kind, (run, bad, seconds) in totals.items():
        unit = "messages" if kind == "lsp" else ""
        print(f"{kind:<6} {int(run):>8} {int(bad):>11} {seconds:>8.1f} {unit}")
    cases = sum(int(v[0]) for k, v in totals.items() if k != "lsp")
    print(f"{cases} file cases and {LSP_SESSIONS} language-server sessions in {wall:.0f} s wall")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
