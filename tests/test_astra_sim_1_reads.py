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

import json
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


# translations both checks read: a DATA file, a checkpointed keyword file, and gpt2's layouts
READ = [
    ("resnet50", "--npus", "8"),
    ("gpt2", "-p", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "--npus", "8", "--model-parallel-group", "2"),
]
LAYOUTS = [
    ("gpt2", "--tp", "2", "--dp", "4"),
    ("gpt2", "--tp", "2", "--dp", "4", "--sp", "--zero", "1"),
    ("gpt2", "--tp", "2", "--dp", "4", "--recompute", "full"),
]


@pytest.mark.parametrize(
    "options",
    [*READ, ("vgg16", "-p", "HYBRID_CUSTOMIZED", "--npus", "8"), *LAYOUTS],
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


@pytest.mark.parametrize("sp", [(), ("--sp",)], ids=["tp", "tp-sp"])
def test_full_recomputation_reruns_the_blocks_alone_on_astra_sim_1(
    run_cli: Run, tmp_path: Path, sp: tuple[str, ...]
) -> None:
    """Megatron-LM's full recomputation checkpoints the transformer layers alone
    (megatron/core/transformer/transformer_block.py, TransformerBlock._checkpointed_forward: the
    embedding runs before it, the final norm and the output layer after): the FWD_IN_BCKWD lists
    make ASTRA-sim 1.0 rerun every block's lines (a block's all-gather lines under --sp too) and no
    other. Before, one checkpoint at line 0 and the rerun from the last line reran the embeddings'
    and the LM head's forwards (+0.39 ms of gpt2's at TP 2)."""
    read = astra_sim_1_reads(
        _written(run_cli, tmp_path, "gpt2", "--tp", "2", "--dp", "4", *sp, "--recompute", "full")
    )
    assert (read.keyword, read.group) == ("HYBRID_TRANSFORMER_FWD_IN_BCKWD", 2)
    again = reruns(read.checkpoints, read.initiates, len(read.names))
    blocks = [i for i, name in enumerate(read.names) if name.startswith("transformer.h.")]
    assert sorted(again) == blocks  # each once
    assert read.names[read.initiates[0]] == "transformer.ln_f"


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


# The columns whose collective each keyword's training loop issues (Workload.cc: iterate_data_parallel
# and iterate_micro_benchmark issue the weight gradient's only, iterate_model_parallel the forward's and
# the input gradient's, iterate_distributed_inference the forward's, the others all three); a type it
# does not know is no collective (Workload::initialize_workload decodes it to ComType::None).
_ISSUED = {"DATA": (9,), "MICRO": (9,), "MODEL": (3, 6), "DISTRIBUTED_INFERENCE": (3,)}
_COLLECTIVES = frozenset({"ALLREDUCE", "ALLTOALL", "ALLGATHER", "REDUCESCATTER"})
# the loops that issue no input-gradient collective for the first line (`if (!collective_issued &&
# index > 0)`: iterate_hybrid_parallel_customized, _data_model, _model_data, iterate_model_parallel)
_FIRST_IG_UNISSUED = frozenset({"MODEL", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA", "HYBRID_CUSTOMIZED"})


def reruns(starts: tuple[int, ...], initiates: tuple[int, ...], count: int) -> list[int]:
    """The lines whose forward iterate_hybrid_parallel_Transformer_fwd_in_bckwd runs again, as often
    as it does: at an initiating line it walks back to a checkpoint (`while
    (!layers[index--]->is_checkpoint); index++;`), then LoopState::Forward_In_BackPass runs forwards
    until the next line is an initiating one (`index++; if
    (layers[index]->needs_fwd_in_bckwd_initiation)`)."""
    out = []
    for end in initiates:
        line = end
        while line not in starts:
            line -= 1
            assert line >= 0, "no checkpoint at or before the initiating line: it reads layers[-1]"
        while True:
            out.append(line)
            line += 1
            assert line < count, "the rerun runs past the last line"
            if line in initiates:
                break
    return out


@dataclass(frozen=True)
class Charged:
    compute: int  # ns: every compute column once, and the reruns' forwards
    first_ig: int  # ns of it: the first line's input gradient (DATA's loop ends before it)
    update: int  # ns: each line's update field, once after each collective it issues
    waits: int  # the update fields waited: one per collective issued
    first_written: int = 0  # ns: the first line's input-gradient field, run or not


def astra_sim_1_charges(text: str) -> Charged:
    """What ASTRA-sim 1.0 runs of a file in one pass. Layer::call ends every collective a line
    issues by an event its update field later (Fwd_, Input_Grad_ and
    Wight_Grad_Comm_Finished_After_Delay; Layer's constructor sets fwd_update_time =
    input_grad_update_time = weight_grad_update_time); measured on ASTRA-sim-1.0 07d5d19 with one
    line's field raised by 1 ms (docs/simulate.md): +1 ms with a forward collective alone, +2 ms when
    FWD_IN_BCKWD reruns that forward, nothing without a collective or under DATA's forward."""
    read = astra_sim_1_reads(text)
    rows = [line.split() for line in text.splitlines()[2:]]
    issued = _ISSUED.get(read.keyword, (3, 6, 9))
    again = reruns(read.checkpoints, read.initiates, len(rows))
    # iterate_data_parallel ends the pass after the first line's weight gradient (`index == 0`)
    first_ig = 0 if read.keyword in ("DATA", "MICRO") else int(rows[0][5])
    compute = sum(int(r[2]) + int(r[8]) for r in rows) + sum(int(r[5]) for r in rows[1:]) + first_ig
    compute += sum(int(rows[i][2]) for i in again)

    def collectives(i: int) -> int:
        row = rows[i]
        columns = [c for c in issued if not (i == 0 and c == 6 and read.keyword in _FIRST_IG_UNISSUED)]
        own = sum(row[c] in _COLLECTIVES and int(row[c + 1]) > 0 for c in columns)
        rerun = again.count(i) if 3 in issued and row[3] in _COLLECTIVES and int(row[4]) > 0 else 0
        return own + rerun

    waits = [collectives(i) for i in range(len(rows))]
    update = sum(w * int(r[11]) for w, r in zip(waits, rows, strict=True))
    return Charged(compute, first_ig, update, sum(waits), int(rows[0][5]))


def _traces_compute_ns(run_cli: Run, at: Path, *options: str) -> float:
    """The same options' Chakra traces: their first stage's compute, the optimizer step's node included,
    by the estimate (each trace node's time is whole microseconds)."""
    traces = at / "et"
    traces.mkdir()
    assert run_cli("translate", *options, "--format", "chakra-et", "-o", traces / "x").exit_code == 0
    done = run_cli("estimate", traces / "x", "--format", "json")
    assert done.exit_code == 0, done.output
    return float(json.loads(done.stdout)["stages"][0]["compute_s"]) * 1e9


@pytest.mark.parametrize(
    "options",
    [
        *READ,
        ("gpt2", "-p", "HYBRID_TRANSFORMER", "--npus", "8", "--model-parallel-group", "4"),
        ("vgg16", "-p", "MODEL", "--npus", "8"),
        ("vgg16", "-p", "HYBRID_DATA_MODEL", "--npus", "8", "--model-parallel-group", "2"),
        ("vgg16", "-p", "HYBRID_CUSTOMIZED", "--npus", "8"),
        *LAYOUTS,
    ],
    ids=lambda o: " ".join(o),
)
def test_astra_sim_1_runs_the_optimizer_step_once_as_the_traces_do(
    run_cli: Run, tmp_path: Path, options: tuple[str, ...]
) -> None:
    """Each layer's optimizer step once an iteration, as the traces' UPDATE node: in the update field
    where ASTRA-sim 1.0 waits it once (one collective on the line), else in the weight-gradient
    compute. Before, a gpt2 HYBRID_TRANSFORMER line waited it after each of its two or three
    collectives, a preset's traces had no step at all, and full recomputation reran the embedding's
    and the LM head's forwards, which Megatron-LM's checkpoints leave out. Left over: at most a tick
    per collective, the least update field ASTRA-sim 1.0 runs (D313) and the traces' rounding. The
    first line's input gradient is what its layers' backward needs (VGG-16's first ReLU; none of
    the first convolution's, whose input is the image: Costed.input_grad_runs): the traces run it,
    and the MODEL, hybrid and transformer loops of ASTRA-sim 1.0 too, DATA's not."""
    text = _written(run_cli, tmp_path, *options)
    charged = astra_sim_1_charges(text)
    rows = len(text.splitlines()) - 2
    traces = _traces_compute_ns(run_cli, tmp_path, *options)
    off = charged.compute - charged.first_ig + charged.first_written + charged.update - traces
    assert -500 * rows <= off <= 500 * rows + charged.waits


def test_the_transcription_waits_the_update_after_each_collective() -> None:
    """The hand-made files run on ASTRA-sim-1.0 07d5d19 (docs/simulate.md): a line with a forward,
    input-gradient and weight-gradient all-reduce waits its field three times under
    HYBRID_TRANSFORMER, once under DATA (only the weight gradient's is issued), twice a forward
    collective FWD_IN_BCKWD reruns."""
    line = "b -1 100000 ALLREDUCE 1048576 100000 ALLREDUCE 1048576 100000 ALLREDUCE 1048576 1000001"
    quiet = "a -1 100000 NONE 0 100000 NONE 0 100000 NONE 0 0"
    assert astra_sim_1_charges(f"HYBRID_TRANSFORMER g: 4\n3\n{quiet}\n{line}\n{quiet}\n").waits == 3
    assert astra_sim_1_charges(f"DATA\n3\n{quiet}\n{line}\n{quiet}\n").waits == 1
    forward = "b -1 100000 ALLREDUCE 1048576 100000 NONE 0 100000 NONE 0 1000001"
    head = "HYBRID_TRANSFORMER_FWD_IN_BCKWD g: 4 checkpoints: 1 0 checkpoint_initiates: 1 2"
    assert astra_sim_1_charges(f"{head}\n3\n{quiet}\n{forward}\n{quiet}\n").waits == 2
