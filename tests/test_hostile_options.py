"""Option values that are numbers no one means (inf, nan, 1e400, 1e-300) or addresses no one can
listen on: each is a one-line error with exit 1 or 2, never a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from modtrans.cli import app

runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize("value", ["1e400", "inf", "-inf", "nan", "1e20", "0", "-1"])
@pytest.mark.parametrize("option", ["--clock-ghz", "--bytes-per-cycle"])
def test_float_options_take_finite_sane_values(option: str, value: str) -> None:
    code, output = _run("translate", "resnet50", "--compute", "scalesim-v3", f"{option}={value}")
    assert code == 2
    assert option in output


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
def test_diff_tolerances_are_finite(value: str) -> None:
    code, output = _run("diff", "--rtol", value, "resnet50", "resnet50")
    assert code == 2
    assert "--rtol" in output


@pytest.mark.parametrize("value", ["1e400", "1e-300", "5e-324", "0.5"])
def test_a_device_profile_with_absurd_rates_is_refused(value: str, tmp_path: Path) -> None:
    profile = tmp_path / "device.json"
    rates = {"default": float(value)}
    profile.write_text(
        json.dumps(
            {"version": 1, "name": "x", "peak_flops": rates, "memory_bandwidth": 1e12, "sources": {}}
        ).replace("Infinity", "1e400")
    )
    code, output = _run("translate", "resnet50", "--device", str(profile))
    assert code == 2
    assert "X501" in output
    assert "peak_flops.default" in output


def test_an_array_too_large_for_any_tick_count_is_refused() -> None:
    code, output = _run(
        "translate", "resnet50", "--compute", "scalesim-v3", "--array", "99999999999999999999x1"
    )
    assert code == 2
    assert "X501" in output


def test_lsp_addresses_that_cannot_be_listened_on() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for address in (
            "127.0.0.1:99999",
            "127.0.0.1:100000000000000000000",
            "127.0.0.1:0",
            "no-such-host.invalid:2087",
            "192.0.2.1:2087",  # TEST-NET-1: not an address of this machine
            f"127.0.0.1:{port}",  # in use
            "nocolon",
        ):
            code, output = _run("lsp", "--tcp", address)
            assert code == 2, address
            assert output.startswith("modtrans: --tcp"), output


def test_a_fifo_or_device_named_like_a_model_is_refused_not_waited_on(tmp_path: Path) -> None:
    import os
    import stat

    fifo = tmp_path / "x.onnx"
    os.mkfifo(fifo)  # no writer: open() would block forever
    for command in ("inspect", "translate", "extract"):
        code, output = _run(command, str(fifo))
        assert code == 2, command
        assert "not a regular file" in output
    zero = tmp_path / "zero.onnx"
    try:
        os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # a private /dev/zero: endless
    except PermissionError:
        return
    code, output = _run("inspect", str(zero))
    assert code == 2
    assert "not a regular file" in output


def test_parallel_offers_exactly_what_translate_writes() -> None:
    """--parallel's choices are the keywords a technique module registers (strategy/techniques/)."""
    from modtrans.strategy.techniques import load
    from modtrans.table import Keyword

    assert {k.value for k in Keyword} == {p.value for p in load()}
    code, output = _run("translate", "resnet50", "--parallel", "micro")
    assert code == 2
    assert output.startswith("modtrans: --parallel: 'micro' is not one of")


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("translate", "resnet50", "--compute", "nonsense"), "--compute"),
        (("translate", "resnet50", "--clock-ghz", "abc"), "--clock-ghz"),
        (("translate", "resnet50", "--format", "xml"), "--format"),
        (("translate", "resnet50", "--dataflow", "xs"), "--dataflow"),
        (("translate", "resnet50", "--array", "axb"), "--array"),
        (("translate", "resnet50", "--npus", "0"), "--npus"),
        (("convert", "x.txt", "--to", "yaml"), "--to"),
        (("diff", "a", "b", "--format", "xml"), "--format"),
        (("inspect", "resnet50", "--format", "xml"), "--format"),
    ],
)
def test_every_bad_option_value_is_one_usage_line(args: tuple[str, ...], option: str) -> None:
    code, output = _run(*args)
    assert code == 2
    assert output.startswith(f"modtrans: {option}"), output
    assert len(output.strip().splitlines()) == 1


def test_help_shows_choices_and_no_python_types() -> None:
    for command in ("translate", "diff", "convert", "validate", "inspect", "extract", "fmt", "lsp"):
        _, text = _run(command, "--help")
        for python in ("<str>", "<int range>", "list[", "<path>", "<float"):
            assert python not in text, (command, python)
    _, text = _run("translate", "--help")
    for choices in (
        "gpu|roofline|astra-sim-reference|scalesim-v3|scalesim",
        "ws|is|os",
        "astra-sim|simai|chakra",
    ):
        assert choices in text


def test_every_format_option_lists_its_choices() -> None:
    for command, choices in (
        ("translate", "text|json|chakra-et"),
        ("inspect", "table|json|csv"),
        ("diff", "text|json|github"),
        ("convert", "json|text"),
        ("validate", "auto|text|json|github|sarif"),
    ):
        _, text = _run(command, "--help")
        assert choices in text, command


_CONTEXT = {  # what makes each option count: the strategy or format that reads it
    "--passes": ("--format", "chakra-et"),
    "--vpp": ("--pp", "2", "--schedule", "interleaved"),
    "--checkpoint-every": ("--parallel", "HYBRID_TRANSFORMER_FWD_IN_BCKWD", "--model-parallel-group", "1"),
    "--packages": ("--parallel", "HYBRID_DATA_MODEL"),
    "--model-parallel-group": ("--parallel", "HYBRID_DATA_MODEL"),
}


def _integer_options() -> list[str]:
    """translate's integer options, as its help shows them (N): every one, new ones included."""
    import re

    _, text = _run("translate", "--help")
    return sorted(set(re.findall(r"(--[a-z][a-z-]+)(?:,\s+-\w)?\s+N\b", text)))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["gpt2", "llama-3-8b"])
def test_an_integer_option_with_an_extra_twenty_digits_is_one_line(model: str, tmp_path: Path) -> None:
    """10^23 NPUs, micro-batches, iterations or bytes: once a traceback (--npus), a misleading F004
    (--batch), a hang (--tp, --dp, --global-batch, --passes: a table per rank, micro-batch or
    iteration). Now each is refused on one line naming the limit (modtrans/limits.py), or, where
    the option allows it (one checkpoint every 10^23 layers), translated."""
    import signal

    options = _integer_options()
    assert {"--npus", "--tp", "--batch", "--global-batch", "--passes", "--dtype-bytes"} <= set(options)

    def hung(*_: object) -> None:
        raise TimeoutError

    previous = signal.signal(signal.SIGALRM, hung)
    try:
        for option in options:
            if option in ("--zero",):  # 0-3, refused by its range
                continue
            signal.alarm(60)
            args = (*_CONTEXT.get(option, ()), option, str(10**23), "-o", str(tmp_path / "out"), "--force")
            code, output = _run("translate", model, *args)
            signal.alarm(0)
            assert code in (0, 2), (option, output)
            if code == 2:
                assert len(output.strip().splitlines()) == 1, (option, output)
                assert output.startswith("modtrans: --") or " error X501 " in output, (option, output)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
