"""LLM-scale traces, whole process, against writing the same bytes with a plain loop.

Run by hand: `python bench/bench_llm.py [--npus 1024]`. In a temporary folder it runs

  modtrans translate llama-3-70b --tp 8 --pp 8 --dp 16 --format chakra-et -o DIR/l
      (1,024 ranks, GA = 8 micro-batches of one 2,048-token sequence: ~2.7 M nodes, ~1.1 GB,
      every stage's representative trace checked node by node, the plan checked across ranks)

and, as the baseline measured in the same run, a Python process that writes files of the same
names and sizes with a plain `open(...).write(bytes)` loop; then

  modtrans validate DIR/l     (every rank's trace checked, and the set across its ranks)

against a Python process reading every file of the set with a plain `open(...).read()` loop. Each
in a fresh subprocess; wall time and peak RSS (getrusage of the child). Targets: translate under
10 s and 1 GB (issue 14); validate under 10 s and 500 MB (issue 22).

Latest (2026-12-01, a6d37ee, the project's 2-core VM): translate 9.5 s and 190 MB against 3.3 s
for the loop; validate 5.9 s and 303 MB against 0.45 s. Earlier figures: docs/performance.md
(History).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from children import run  # bench/children.py: the script's own folder is on sys.path

_PLAIN = r"""
import sys
from pathlib import Path
for line in Path(sys.argv[1]).read_text().splitlines():
    name, size = line.rsplit(" ", 1)
    with open(name, "wb") as out:
        out.write(bytes(int(size)))
"""

_READ = r"""
import sys
from pathlib import Path
total = 0
for path in sorted(Path(sys.argv[1]).glob("l.*")):
    with open(path, "rb") as handle:
        total += len(handle.read())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--pp", type=int, default=8)
    parser.add_argument("--dp", type=int, default=16)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        args = [sys.executable, "-m", "modtrans", "translate", "llama-3-70b"]
        args += ["--tp", str(options.tp), "--pp", str(options.pp), "--dp", str(options.dp)]
        ours, ours_rss = run([*args, "--format", "chakra-et", "-o", str(folder / "l")])
        files = sorted(folder.glob("l.*"))
        total = sum(p.stat().st_size for p in files)
        listing = folder / "sizes.txt"
        listing.write_text("".join(f"{folder / ('copy-' + p.name)} {p.stat().st_size}\n" for p in files))
        plain, plain_rss = run([sys.executable, "-c", _PLAIN, str(listing)])
        read, read_rss = run([sys.executable, "-c", _READ, str(folder)])
        check, check_rss = run([sys.executable, "-m", "modtrans", "validate", str(folder / "l")])
    ranks = options.tp * options.pp * options.dp
    layout = f"TP{options.tp} x PP{options.pp} x DP{options.dp}"
    print(f"llama-3-70b {layout} = {ranks} ranks: {len(files)} files, {total / 1e9:.2f} GB")
    print(f"baseline, a plain loop writing the same bytes: {plain:6.2f} s, {plain_rss:6.0f} MB peak")
    print(f"modtrans translate --format chakra-et:          {ours:6.2f} s, {ours_rss:6.0f} MB peak")
    print(f"ratio to the baseline: {ours / plain:.1f}x the time (target: whole process < 10 s, < 1 GB)")
    print(f"baseline, a plain loop reading every file:     {read:6.2f} s, {read_rss:6.0f} MB peak")
    print(f"modtrans validate of the set:                   {check:6.2f} s, {check_rss:6.0f} MB peak")
    print(f"ratio to the baseline: {check / read:.1f}x the time (target: whole process < 10 s, < 500 MB)")


if __name__ == "__main__":
    main()
