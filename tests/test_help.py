"""Every command's --help: its examples run as written in an empty folder, -h is --help, options
are listed in groups with their choices, and an unknown option is answered by what it means."""

from __future__ import annotations

import functools
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from modtrans.cli import app

ROOT = Path(__file__).resolve().parents[1]


def _commands() -> dict[str, object]:
    """Every command the program has, by its words after `modtrans` (zoo list ...)."""
    found: dict[str, object] = {}

    def walk(command: object, path: str) -> None:
        subs = getattr(command, "commands", None)
        if not subs:
            found[path] = command
        for name, sub in (subs or {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


COMMANDS = sorted(_commands())


@functools.cache
def _help(command: str, flag: str = "--help") -> subprocess.CompletedProcess[str]:
    """`modtrans COMMAND FLAG` in a process of its own, run once a test process for each command
    line: the same line in the same environment prints the same help, and nine tests read the
    help of every command (83 processes, 35 distinct: 35.5 -> 29.3 CPU-s for the module at -n 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    line = [sys.executable, "-m", "modtrans", *command.split(), *([flag] if flag else [])]
    return subprocess.run(line, capture_output=True, text=True, env=env, timeout=60)


def _examples(text: str) -> list[str]:
    """The command lines under `Example:` / `Examples:` of a help text."""
    block = re.search(r"^  Examples?:\n((?:    .*\n)+)", text, re.M)
    return [] if block is None else [line.strip() for line in block.group(1).splitlines()]


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose `modtrans` is this tree's, as an installed one would be."""
    folder = tmp_path_factory.mktemp("bin")
    program = folder / "modtrans"
    program.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m modtrans "$@"\n')
    program.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "NO_COLOR": "1",
    }


def test_every_command_but_the_lists_shows_examples() -> None:
    assert {c for c in COMMANDS if not _examples(_help(c).stdout)} <= {"simulate"}


def _free_port() -> int:
    """A port no one listens on now (the example's own 2087 may be taken by a user's server)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serves(line: str, folder: Path, env: dict[str, str]) -> bool:
    """Whether the server `line` starts is still serving after 5 s; it is then stopped with its
    process group (the shell and the server: a killed shell alone leaves the server listening)."""
    server = subprocess.Popen(
        line, shell=True, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        _, said = server.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGTERM)
        server.communicate()
        return True
    raise AssertionError(f"{line}: exit {server.returncode}\n{said}")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_example_runs_as_written_in_an_empty_folder(
    command: str, shim: dict[str, str], tmp_path: Path
) -> None:
    """Each example line, in order, in one fresh folder, through a shell: status 0 (diff's 1 says
    the two differ, its finding); never a traceback. The language server over TCP is still serving
    after 5 s; fetching needs the network (skipped without it)."""
    for line in _examples(_help(command).stdout):
        assert line.startswith("modtrans "), line
        if "--tcp" in line:
            assert _serves(line.replace(":2087", f":{_free_port()}"), tmp_path, shim), line
            continue
        done = subprocess.run(
            line, shell=True, cwd=tmp_path, env=shim, capture_output=True, text=True,
            stdin=subprocess.DEVNULL, timeout=300,
        )  # fmt: skip
        if line.startswith("modtrans fetch") and done.returncode == 2 and "cannot" in done.stderr:
            pytest.skip(f"{line}: needs the network ({done.stderr.strip()})")
        allowed = (0, 1) if line.startswith("modtrans diff") else (0,)
        assert done.returncode in allowed, f"{line}: exit {done.returncode}\n{done.stderr}"
        assert "Traceback" not in done.stderr, f"{line}:\n{done.stderr}"


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_h_is_help(command: str) -> None:
    short, long = _help(command, "-h"), _help(command)
    assert (short.returncode, short.stdout) == (0, long.stdout), short.stderr


def test_translate_lists_its_options_in_groups_each_choice_named() -> None:
    text = _help("translate").stdout
    titles = re.findall(r"^(\S[^:\n]*):$", text, re.M)
    assert titles[0] == "Arguments", titles
    assert titles[-1] == "Options", titles
    for group in ("Model", "Pipeline schedule", "Cost model"):
        assert group in titles
    assert any(title.startswith("LLM layout") for title in titles)
    # every option whose values are a fixed set lists them (the gpu model refuses the rest)
    assert re.search(r"--attention flash\|flash2\|cudnn\|flash1\|triton\|efficient\|sdpa\|eager", text), text
    assert "config.json" in text  # MODEL takes a Hugging Face configuration
    unit = text[text.index("--time-unit") :].split("\n  -")[0]
    assert "[default" not in unit  # traces refuse ns: no shown default of ns


# Other tools' spellings, as their own sources have them: Megatron-LM's
# megatron/training/arguments.py (_add_distributed_args, _add_training_args), DeepSpeed's
# configuration keys (train_micro_batch_size_per_gpu, zero_optimization.stage as --zero-stage)
# and plain words; each with the option of ours it means.
MEANT = {
    "--tensor-model-parallel-size": "--tp",
    "--pipeline-model-parallel-size": "--pp",
    "--context-parallel-size": "--cp",
    "--expert-model-parallel-size": "--ep",
    "--expert-tensor-parallel-size": "--etp",
    "--sequence-parallel": "--sp",
    "--micro-batch-size": "--micro-batch",
    "--global-batch-size": "--global-batch",
    "--seq-length": "--seq-len",
    "--train-micro-batch-size-per-gpu": "--micro-batch",
    "--zero-stage": "--zero",
    "--tensor-parallel": "--tp",
    "--pipeline-parallel": "--pp",
    "--data-parallel": "--dp",
    "--tensor_model_parallel_size": "--tp",
    "--Tensor-Parallel": "--tp",
    "--npu": "--npus",
}


@pytest.mark.parametrize("given", sorted(MEANT))
def test_an_unknown_option_is_answered_by_what_it_means(given: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "translate", "gpt2", given, "2"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"did you mean {MEANT[given]}" in done.stderr, done.stderr


@pytest.mark.parametrize("given", ["--tp", "--tensor-parallel", "--pp", "--zero-stage"])
def test_a_layout_option_to_a_command_without_one_names_the_commands_that_take_it(given: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "modtrans", "extract", "resnet50", given, "2"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "`modtrans extract` takes no" in done.stderr
    assert "`modtrans translate`" in done.stderr
    assert "--help" not in done.stderr, done.stderr


def test_every_group_names_options_that_exist() -> None:
    """A help group's table names options some command has (a renamed option is not left behind)."""
    from modtrans.cli.vocabulary import PANELS, SYNONYMS

    params = {p.name for command in _commands().values() for p in command.params}  # type: ignore[attr-defined]
    assert {name for names in PANELS.values() for name in names} <= params
    opts = {o for command in _commands().values() for p in command.params for o in p.opts}  # type: ignore[attr-defined]
    assert {meant.split()[0] for meant in SYNONYMS.values()} <= opts


def _sections(text: str) -> dict[str, list[str]]:
    """A help text's groups, each with the options it lists (first spelling of each row)."""
    found: dict[str, list[str]] = {}
    title = ""
    for line in text.splitlines():
        if re.fullmatch(r"\S[^:]*:", line):
            title = line[:-1]
            found[title] = []
        elif title and (row := re.match(r"  (-\w, )?(--?[\w-]+)", line)):
            found[title].append(row.group(2))
    return found


def test_diff_lists_its_own_options_in_groups_first() -> None:
    """diff's own options (what is compared, how it is reported) in groups of their own before
    those that translate a model side: the flat Options list keeps -h alone."""
    sections = _sections(_help("diff").stdout)
    assert sections.pop("Options") == ["--help"], sections
    titles = list(sections)
    assert titles[:3] == ["Arguments", "Comparison", "Report"], titles
    assert {"Model", "Cost model", "Pipeline schedule"} <= set(titles), titles
    assert {"--rtol", "--atol", "--fields", "--ignore-order", "--like"} <= set(sections["Comparison"])
    assert {"--format", "--max-rows", "--no-color"} <= set(sections["Report"])


def test_translate_lists_what_it_writes_in_a_group_of_its_own() -> None:
    sections = _sections(_help("translate").stdout)
    assert list(sections)[1] == "Output", list(sections)
    assert {"--output", "--format", "--dialect", "--timeline", "--meta"} <= set(sections["Output"])
    assert not {"--output", "--format", "--dialect"} & set(sections["Options"])


def test_every_commands_own_group_names_its_options() -> None:
    from modtrans.cli.vocabulary import OWN_PANELS

    commands = _commands()
    for name, panels in OWN_PANELS.items():
        params = {p.name for p in commands[name].params}  # type: ignore[attr-defined]
        assert {n for names in panels.values() for n in names} <= params, name


# a value's names in --help; a sweep's own: LIST (1,2,4 or 1:16), PREFIX, FILE, top:K|all|none
NAMES = {"N", "X", "TEXT", "PATH", "FILE|-", "NAME|FILE", "HOST:PORT"}
NAMES |= {"LIST", "PREFIX", "FILE", "top:K|all|none"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_value_is_named_as_the_manual_names_it(command: str) -> None:
    """Each option's and argument's value is N, X, TEXT, PATH (`...` when repeatable), a special
    name or its choices: never typer's own `<int range>` or `<list[Path]>`, which metavar= (from
    the option table) and program.py's argument labels replace."""
    text = _help(command).stdout
    sections = text[re.search(r"^\w[^\n]*:$", text, re.M).start() :]  # type: ignore[union-attr]
    entry = r"^  (?:-\w, )?(?:--[\w-]+|[a-z_]+(?:\.\.\.)?) ([^\s/][^\s]*)"
    for line in re.findall(entry, sections, re.M):
        name = line.removesuffix("...")
        assert name in NAMES or ("|" in name and name == name.lower() and "<" not in name), (command, line)


def test_a_values_name_follows_its_type() -> None:
    text = _help("translate").stdout
    for flag, name in [("--tp", "N"), ("--clock-ghz", "X"), ("--efficiency", "TEXT"),
                       ("--like", "PATH"), ("--output", "FILE|-"), ("--input-shape", "TEXT..."),
                       ("--schedule", "gpipe|1f1b|interleaved|zb-h1|dualpipe|dualpipev")]:  # fmt: skip
        assert re.search(rf"^  (?:-\w, )?{flag} {re.escape(name)}(?:\s|$)", text, re.M), (flag, name)
    assert re.search(r"^  model TEXT ", text, re.M)
    assert re.search(r"^  paths\.\.\. PATH\.\.\. ", _help("validate").stdout, re.M)


def test_the_programs_list_is_each_commands_own_summary() -> None:
    """`modtrans --help` lists the commands from modtrans.cli.COMMANDS without importing them:
    each entry's summary is the first paragraph of the command's own help, and every command the
    modules register is there."""
    from modtrans.cli import COMMANDS
    from modtrans.cli.common import commands

    program: Any = typer.main.get_command(app)
    for name, (_, summary) in COMMANDS.items():
        own = program.commands[name].help
        assert " ".join(own.split("\n\n")[0].split()) == summary, name
    assert set(typer.main.get_group(commands).list_commands(None)) == set(COMMANDS)  # type: ignore[arg-type]


@pytest.mark.parametrize("group", ["", "zoo", "cost"])
def test_a_group_run_with_nothing_to_do_shows_its_help_as_written(group: str) -> None:
    """`modtrans` alone (and `modtrans zoo`): the usage error is the help itself, on its lines,
    not folded into the one line of other usage errors."""
    done = _help(group, flag="")
    assert done.returncode == 2
    assert done.stderr.startswith("Usage: "), done.stderr
    assert done.stderr.rstrip("\n") == _help(group).stdout.rstrip("\n")
