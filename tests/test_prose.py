"""The prose the code carries says the present: no docstring or comment of modtrans/ narrates
this project's history by issue number (CHANGELOG.md holds it), and pyproject.toml's comments
name only files that exist.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "modtrans"

ISSUE = re.compile(r"(\S*)\s*\(?\b[Ii]ssues? #?\d+")
"""`issue 24` and the word before it, which names the project when the issue is another's
(`state-spaces/mamba issue 110`, `astra-sim issue #45`)."""


def ours(before: str) -> bool:
    """Whether an issue the word `before` precedes is this project's: no project named there."""
    return not any(mark in before for mark in "/-")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The comments and string literals of a module (docstrings among them), with their lines."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [(t.start[0], t.string) for t in tokens if t.type in (tokenize.COMMENT, tokenize.STRING)]


def test_no_docstring_or_comment_narrates_history() -> None:
    """A sentence such as "before issue 24 the cut balanced compute" belongs in CHANGELOG.md."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for line, text in _prose(path):
            for before in ISSUE.findall(text):
                if ours(before):
                    found.append(f"{where}:{line}")
    assert found == [], f"history narrated in the code (CHANGELOG.md is its place): {found}"


def test_the_history_reader_tells_ours_from_upstreams() -> None:
    said = (
        "the z gate: state-spaces/mamba issue 110; astra-sim issue #45. Before issue 24 the cut "
        "balanced compute; GEMM_ONLY (issue 23). Issue 26's families"
    )
    assert [ours(w) for w in ISSUE.findall(said)] == [False, False, True, True, True]


def test_pyprojects_comments_name_files_that_exist() -> None:
    """Each path pyproject.toml's comments give (`modtrans/chakra/schema.py`, `extraction/`,
    `.ci/run`) names a file or folder of the repository or of the package."""
    paths = []
    for line in (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        comment = line.partition("#")[2] if not line.lstrip().startswith("#") else line.lstrip("# ")
        paths += re.findall(r"(?<![\w.])((?:\.?[\w-]+/)+(?:[\w-]+\.\w+)?)", comment)
    assert len(paths) >= 8  # the comments name at least this many (14 when this was written)
    wheel_only = {"modtrans/_data/"}  # where the wheel puts grammar/ and schemas/ (test_packaging)
    missing = [p for p in paths if not ((ROOT / p).exists() or (PACKAGE / p).exists() or p in wheel_only)]
    assert not missing, f"pyproject.toml's comments name what is not there: {missing}"
