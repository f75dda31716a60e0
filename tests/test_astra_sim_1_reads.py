"""What ASTRA-sim 1.0 reads of the text files translate writes, by its own reader transcribed:
astra-sim/astra-sim branch ASTRA-sim-1.0 (07d5d19), astra-sim/workload/Workload.cc,
Workload::initialize_workload. It reads whitespace-separated tokens with `operator>>` and never
checks the stream: the keyword; under HYBRID_TRANSFORMER(_FWD_IN_BCKWD) a key and the group; under
FWD_IN_BCKWD a key, a count and that many checkpoints, twice; under HYBRID_DLRM(_ENHANCED) the last
bottom layer; then the layer count and per layer 12 tokens (13 under HYBRID_CUSTOMIZED, its own
keyword last). A header short of a token makes it read the next one in its place (an integer read
from a name fails, and every read after it), and no pass finishes: found running ASTRA-sim 1.0 on
`translate --recompute full`'s file, whose FWD_IN_BCKWD header had no lists."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import Result

Run = Callable[..., Result]
_INTEGERS = (1, 2, 4, 5, 7, 8, 10, 11)  # a layer line's: depends, then each column's time and size, update


@dataclass(frozen=True)
class Read:
    keyword: str
    group: int | None
    checkpoints: tuple[int, ...]
    initiates: tuple[int, ...]
    names: tuple[str, ...]


def _int(tokens: Iterator[str], what: str) -> int:
    token = next(tokens, None)
    if token is None or not token.lstrip("-").isdigit():
        raise AssertionError(f"ASTRA-sim 1.0 reads {token!r} as {what}: the stream fails there")
    return int(token)


def _list(tokens: Iterator[str], what: str) -> tuple[int, ...]:
    next(tokens)  # `inFile >> tmp`: the key, whatever it says
    count = _int(tokens, f"the number of {what}")
    return tuple(_int(tokens, what) for _ in range(count))


def astra_sim_1_reads(text: str) -> Read:
    """initialize_workload's reads, in its order; AssertionError where one fails or tokens are left."""
    tokens = iter(text.split())
    keyword = next(tokens)
    group: int | None = None
    checkpoints: tuple[int, ...] = ()
    initiates: tuple[int, ...] = ()
    if keyword in ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD"):
        next(tokens)
        group = _int(tokens, "model_parallel_npu_group")
        if keyword == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
            checkpoints, initiates = _list(tokens, "checkpoints"), _list(tokens, "checkpoint initiations")
    elif keyword in ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"):
        _int(tokens, "DLRM_LAST_BOTTOM_LAYER")
    names = []
    for _ in range(_int(tokens, "the layer count")):
        fields = [next(tokens, "") for _ in range(13 if keyword == "HYBRID_CUSTOMIZED" else 12)]
        for i in _INTEGERS:
            _int(iter(fields[i : i + 1]), f"field {i + 1} of layer {fields[0]}")
        names.append(fields[0])
    left = list(tokens)
    assert not left, f"ASTRA-sim 1.0 leaves {len(left)} tokens unread, from {left[:3]}"
    return Read(keyword, group, checkpoints, initiates, tuple(names))


def _written(run_cli: Run, at: Path, *options: str) -> str:
    out = at / "w.txt"
    done = run_cli("translate", *options, "-o", out)
    assert done.exit_code == 0, done.output
    return out.read_text()


@pytest.mark.parametrize(
    "options",
    [
        ("resnet50", "--npus", "8"),
        ("vgg16", "-p", "HYBRID_CUSTOMIZED", "--npus", "8"),
        ("gpt2", "-p", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "--npus", "8", "--model-parallel-group", "2"),
        ("gpt2", "--tp", "2", "--dp", "4"),
        ("gpt2", "--tp", "2", "--dp", "4", "--sp", "--zero", "1"),
        ("gpt2", "--tp", "2", "--dp", "4", "--recompute", "full"),
    ],
    ids=lambda o: " ".join(o),
)
def test_astra_sim_1_reads_every_line_of_what_translate_writes(
    run_cli: Run, tmp_path: Path, options: tuple[str, ...]
) -> None:
    text = _written(run_cli, tmp_path, *options)
    read = astra_sim_1_reads(text)
    lines = text.splitlines()
    assert read.keyword == lines[0].split()[0]
    assert read.names == tuple(line.split()[0] for line in lines[2:])


def test_full_recomputation_reruns_the_whole_forward_once_on_astra_sim_1(
    run_cli: Run, tmp_path: Path
) -> None:
    """The default of every dialect (strategy/recompute.py): one checkpoint at the first line, the
    rerun started when the backward reaches the last (iterate_hybrid_parallel_Transformer_fwd_in_bckwd
    reruns from the nearest checkpoint up to the line before the initiating one)."""
    read = astra_sim_1_reads(
        _written(run_cli, tmp_path, "gpt2", "--tp", "2", "--dp", "4", "--recompute", "full")
    )
    assert (read.keyword, read.group) == ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", 2)
    assert (read.checkpoints, read.initiates) == ((0,), (len(read.names) - 1,))


def test_the_transcription_fails_a_fwd_in_bckwd_header_without_its_lists() -> None:
    """What translate wrote before: ASTRA-sim 1.0 takes the layer count for a key and a layer's name
    for the number of checkpoints."""
    line = "l -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1"
    text = f"HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2\n1\n{line}\n"
    with pytest.raises(AssertionError, match="reads 'l' as the number of checkpoints"):
        astra_sim_1_reads(text)


def test_selective_recomputation_is_refused_in_astra_sim_1_text(run_cli: Run, tmp_path: Path) -> None:
    """FWD_IN_BCKWD reruns whole lines; Megatron's selective recomputation reruns the attention core
    of each block (Korthikanti et al. 2022, section 5): D310, as SimAI's text refuses it."""
    done = run_cli(
        "translate", "gpt2", "--tp", "2", "--dp", "4", "--recompute", "selective", "-o", tmp_path / "w.txt"
    )
    assert done.exit_code == 1
    assert "D310" in done.output
    assert "selective recomputation" in done.output
