"""translate / extract / inspect / zoo / fetch end to end, and the IR document's schema."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer.main
from typer.testing import Result

from modtrans import fetch, schema
from modtrans.ir import document
from modtrans.pipeline import extract
from modtrans.workload.parse import parse
from modtrans.workload.validate import validate

Run = Callable[..., Result]
RESNET_REFERENCE = (
    Path(__file__).parent.parent / "fixtures/workloads/corpus/astra-sim/Resnet50_DataParallel.txt"
)


def test_translate_resnet50_to_a_file_with_provenance(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "r50.txt"
    result = run_cli("translate", "resnet50", "--params", "weights", "-o", out)
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert validate(text, dialect="astra-sim") == []
    workload = parse(text).workload
    assert workload is not None
    assert len(workload.layers) == 54
    assert workload.layers[0].name == "conv1"
    assert all(layer.fwd.compute_time > 0 for layer in workload.layers)  # never silent zeros
    meta = json.loads((tmp_path / "r50.txt.meta.json").read_text())
    assert meta["compute"]["model"] == "gpu"  # the default: GPU kernels as measured (cost/gpu.py)
    assert meta["compute"]["unit"] == "ns"
    assert meta["model"]["file"] == "resnet50"
    assert meta["params"] == "weights"
    assert (
        meta["model"]["sha256"]
        == hashlib.sha256(
            (Path(document.__file__).parent.parent / "zoo" / "resnet50.onnx").read_bytes()
        ).hexdigest()
    )


def test_translate_to_stdout_every_dialect(run_cli: Run) -> None:
    for dialect in ("astra-sim", "chakra"):
        result = run_cli("translate", "vgg16", "--dialect", dialect, "--batch", "4")
        assert result.exit_code == 0, result.stderr
        assert validate(result.stdout, dialect=dialect) == []
    as_json = run_cli("translate", "vgg16", "--format", "json")
    assert json.loads(as_json.stdout)["format"] == "modtrans-workload"


def test_translate_trainable_includes_biases_and_norms(run_cli: Run) -> None:
    # ResNet-50 trainable: 53 convs + 53 BatchNorms + fc = 107 layers, 25,557,032 fp32 parameters.
    result = run_cli("translate", "resnet50")
    workload = parse(result.stdout).workload
    assert workload is not None
    assert len(workload.layers) == 107
    assert sum(layer.weight_grad.comm_size for layer in workload.layers) == 4 * 25_557_032
    half = parse(run_cli("translate", "resnet50", "--dtype-bytes", "2").stdout).workload
    assert half is not None
    assert sum(layer.weight_grad.comm_size for layer in half.layers) == 2 * 25_557_032


def test_translate_refuses_to_overwrite_its_input(run_cli: Run, tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes((Path(document.__file__).parent.parent / "zoo" / "vgg16.onnx").read_bytes())
    before = model.read_bytes()
    result = run_cli("translate", model, "-o", model, "--batch", "1")
    assert result.exit_code == 2
    assert "refusing to overwrite" in result.stderr
    assert model.read_bytes() == before


def test_translate_errors_leave_no_output(run_cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12")
    out = tmp_path / "out.txt"
    result = run_cli("translate", bad, "-o", out)
    assert result.exit_code == 2
    assert "F004" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bad]
    result = run_cli("translate", "resnet50", "--input-shape", "input=1x3")
    assert result.exit_code == 2  # an option that does not fit the model: a usage error
    assert "X501" in result.stderr
    result = run_cli("translate", "resnet50", "--input-shape", "garbage")
    assert result.exit_code == 2


def _unusable_models(folder: Path) -> dict[str, tuple[Path, str]]:
    """One model input of every kind modtrans cannot read or use as given, and its code."""
    from onnx import TensorProto, helper

    def matmul(name: str, weight: TensorProto) -> Path:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
        nodes = [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")]
        path = folder / name
        path.write_bytes(
            helper.make_model(helper.make_graph(nodes, "g", [x], [y], [weight])).SerializeToString()
        )
        return path

    outside = TensorProto(
        name="W", data_type=TensorProto.FLOAT, dims=[2, 2], data_location=TensorProto.EXTERNAL
    )
    outside.external_data.add(key="location", value="../escape.data")
    texts = {
        "garbage.onnx": b"\x08\x07\x12",
        "workload.json": b'{"format": "modtrans-workload"}',
        "truncated-config.json": b'{"model_type": "llama"',
        "unknown-family.json": b'{"model_type": "bart", "d_model": 512}',
        "missing-key.json": b'{"model_type": "llama", "hidden_size": 64}',
    }
    for name, data in texts.items():
        (folder / name).write_bytes(data)
    return {
        "missing": (folder / "absent.onnx", "F001"),
        "not ONNX": (folder / "garbage.onnx", "F004"),
        "JSON, not a model": (folder / "workload.json", "F004"),
        "config, not JSON": (folder / "truncated-config.json", "M801"),
        "config, unknown family": (folder / "unknown-family.json", "M801"),
        "config, key missing": (folder / "missing-key.json", "M801"),
        "external data outside": (matmul("outside.onnx", outside), "X506"),
        "absurd dims": (matmul("absurd.onnx", TensorProto(name="W", data_type=1, dims=[2**40] * 2)), "X507"),
    }  # fmt: skip


@pytest.mark.parametrize("command", ["translate", "extract", "inspect", "diff"])
def test_a_model_that_cannot_be_read_or_used_is_exit_2_everywhere(
    command: str, run_cli: Run, tmp_path: Path
) -> None:
    """Unreadable or unusable input is exit 2 (a finding in a model that is read is exit 1), for
    every way a model input can be unusable and every command that reads one: an ONNX file that
    is not one (F004) and a config.json that is not one (M801) alike."""
    from modtrans.diagnostics import CATALOG, UNUSABLE

    for case, (path, code) in _unusable_models(tmp_path).items():
        args = (command, path, "resnet50") if command == "diff" else (command, path)
        result = run_cli(*args)
        assert result.exit_code == 2, (case, result.stderr)
        # diff and inspect also read workload files: a JSON that is no model is read as one (S402)
        as_workload = command == "diff" or (command == "inspect" and case == "JSON, not a model")
        assert as_workload or f"error {code} " in result.stderr, (case, result.stderr)
        assert "Traceback" not in result.stderr
    for code in UNUSABLE:  # and `validate --explain` says so
        assert "exit status 2" in CATALOG[code].explanation.lower(), code


def test_translate_unknown_dims_are_errors(run_cli: Run, tmp_path: Path) -> None:
    model = tmp_path / "dyn.onnx"
    model.write_bytes((Path(document.__file__).parent.parent / "zoo" / "vgg16.onnx").read_bytes())
    result = run_cli("translate", model)  # batch is symbolic in the file
    assert result.exit_code == 1
    assert "warning X504" in result.stderr  # the unknown dimension itself ...
    assert (
        "error X510 layer features.0 (Conv): FLOPs unknown" in result.stderr
    )  # ... blocks the layers needing it
    assert result.stdout == ""
    assert run_cli("translate", model, "--batch", "2").exit_code == 0
    kept = run_cli("translate", model, "--allow-unknown", "-o", tmp_path / "w.txt")
    assert kept.exit_code == 0, kept.stderr
    meta = json.loads((tmp_path / "w.txt.meta.json").read_text())
    assert "features.0" in meta["unknown_flops"]


def test_extract_writes_a_schema_valid_ir(run_cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "m.ir.json"
    result = run_cli("extract", "mobilenet_v2", "-o", out)
    assert result.exit_code == 0, result.stderr
    data = json.loads(out.read_text())
    assert schema.check(data, document.SCHEMA) == []
    assert document.to_dict(document.from_dict(data)) == data


def test_ir_schema_errors_name_the_json_path() -> None:
    data = document.to_dict(extract("vgg16"))
    data["layers"][2]["params"][0]["bytes"] = -1
    del data["provenance"]["opset"]
    found = schema.check(data, document.SCHEMA, code="S403")
    messages = sorted(d.message for d in found)
    assert [d.code for d in found] == ["S403", "S403"]
    assert messages[0].startswith("layers/2/params/0/bytes: -1 is less than the minimum of 0")
    assert messages[1] == "provenance: 'opset' is missing"


def test_inspect_table_csv_json(run_cli: Run) -> None:
    table = run_cli("inspect", "vgg19", "--params", "weights", "--no-color")
    assert table.exit_code == 0
    # fc6: 25,088 x 4,096 weights = 102,760,448 (411,041,792 bytes), in the table to 3 figures
    fc6 = next(line.split() for line in table.stdout.splitlines() if "classifier.0" in line)
    assert fc6[3:5] == ["103M", "411M"]
    rows = run_cli("inspect", "vgg19", "--params", "weights", "--format", "csv").stdout.splitlines()
    assert rows[0].startswith("index,layer,op,variables")
    assert len(rows) == 1 + 19
    assert rows[1].split(",")[3:6] == ["1728", "float", "6912"]
    assert any(row.split(",")[3:6] == ["102760448", "float", "411041792"] for row in rows)
    ir = json.loads(run_cli("inspect", "gpt2", "--format", "json").stdout)
    assert ir["totals"]["trainable_params"] == 124_439_808


def test_zoo_list(run_cli: Run) -> None:
    out = run_cli("zoo", "list").stdout
    for name in ("resnet50", "vgg16", "vgg19", "mobilenet_v2", "bert-base", "gpt2", "resnet18-v2-7"):
        assert name in out


# ---------------------------------------------------------------------------------------- fetch


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A local HTTP server over tmp_path/www (these machines have no internet)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    finally:
        httpd.shutdown()
        httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _publish(root: Path, item: fetch.Remote, data: bytes) -> None:
    path = root / item.url.split("/", 3)[3]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture
def small_model(monkeypatch: pytest.MonkeyPatch) -> tuple[fetch.Remote, bytes]:
    """A manifest entry for a small real ONNX file (the built-in vgg16) instead of a zoo URL."""
    data = (Path(document.__file__).parent.parent / "zoo" / "vgg16.onnx").read_bytes()
    item = fetch.Remote(
        "tiny-vgg",
        "https://github.com/onnx/models/raw/abc/tiny.onnx",
        hashlib.sha256(data).hexdigest(),
        len(data),
        "test model",
    )
    monkeypatch.setattr(fetch, "remotes", lambda: [item])
    return item, data


def test_fetch_downloads_verifies_and_caches(
    run_cli: Run, tmp_path: Path, server: tuple[str, Path], small_model: tuple[fetch.Remote, bytes]
) -> None:
    url, root = server
    item, data = small_model
    _publish(root, item, data)
    cache = tmp_path / "cache"
    result = run_cli("fetch", "tiny-vgg", "--cache", cache, "--mirror", url)
    assert result.exit_code == 0, result.stderr
    assert (cache / "tiny-vgg.onnx").read_bytes() == data
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE((cache / "tiny-vgg.onnx").stat().st_mode) == 0o666 & ~mask  # not mkstemp's 0600
    (root / item.url.split("/", 3)[3]).unlink()  # a second fetch is served from the cache
    assert run_cli("fetch", "tiny-vgg", "--cache", cache, "--mirror", url).exit_code == 0


def test_fetch_refuses_a_checksum_mismatch_and_leaves_nothing(
    run_cli: Run, tmp_path: Path, server: tuple[str, Path], small_model: tuple[fetch.Remote, bytes]
) -> None:
    url, root = server
    item, data = small_model
    _publish(root, item, data[:-1] + bytes([data[-1] ^ 1]))
    cache = tmp_path / "cache"
    result = run_cli("fetch", "tiny-vgg", "--cache", cache, "--mirror", url)
    assert result.exit_code == 2
    assert "does not match" in result.stderr
    assert list(cache.iterdir()) == []
    result = run_cli("fetch", "no-such-model", "--cache", cache)
    assert result.exit_code == 2
    assert "unknown model" in result.stderr


def test_fetch_unreachable_is_a_one_line_error(
    run_cli: Run, tmp_path: Path, small_model: tuple[fetch.Remote, bytes]
) -> None:
    result = run_cli("fetch", "tiny-vgg", "--cache", tmp_path, "--mirror", "http://127.0.0.1:9")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "[Errno" not in result.stderr, result.stderr  # the reason in words: Connection refused
    assert result.stderr.rstrip().endswith("Connection refused"), result.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_invalid_ir_is_never_written() -> None:
    import dataclasses

    from modtrans.diagnostics import DiagnosticError

    ir = extract("vgg16")
    broken = dataclasses.replace(ir, layers=(dataclasses.replace(ir.layers[0], name="has space"),))
    with pytest.raises(DiagnosticError) as caught:
        document.dumps(broken)
    (problem,) = caught.value.diagnostics
    assert problem.code == "S403"
    assert problem.message.startswith("layers/0/name: 'has space' does not match")


def test_a_fetched_model_is_translated_by_name(
    run_cli: Run,
    tmp_path: Path,
    server: tuple[str, Path],
    small_model: tuple[fetch.Remote, bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, root = server
    item, data = small_model
    _publish(root, item, data)
    monkeypatch.setenv("MODTRANS_CACHE", str(tmp_path / "cache"))
    assert run_cli("translate", "tiny-vgg", "--batch", "1").exit_code == 2  # not fetched yet: no such model
    assert run_cli("fetch", "tiny-vgg", "--mirror", url).exit_code == 0
    result = run_cli("translate", "tiny-vgg", "--batch", "1", "--params", "weights")
    assert result.exit_code == 0, result.stderr
    workload = parse(result.stdout).workload
    assert workload is not None
    assert len(workload.layers) == 16  # the file is VGG16's architecture


# Every option that names a file to read, as a command line reading it ({} is the file), and what a
# file that cannot be used gives; and the options naming files to write, or a folder.
READ_OPTIONS = {
    "translate --per-layer": ("translate", "resnet50", "-p", "HYBRID_CUSTOMIZED", "--per-layer", "{}"),
    "translate --like": ("translate", "resnet50", "--like", "{}"),
    "translate --per-layer-times": ("translate", "resnet50", "--per-layer-times", "{}"),
    "translate --device": ("translate", "resnet50", "--device", "{}"),
    "diff --device": ("diff", "resnet50", str(RESNET_REFERENCE), "--device", "{}"),
    "validate --comm-groups": ("validate", "TRACES", "--comm-groups", "{}"),
    "simulate --from-log": ("simulate", "TRACES", "--from-log", "{}"),
}
WRITE_OPTIONS = {  # a folder that does not exist, a folder where a file goes, a file where a folder goes
    "translate --meta": ("translate", "resnet50", "-o", "OUT", "--meta", "{}"),
    "translate --timeline": ("translate", "resnet50", "-o", "OUT", "--timeline", "{}"),
    "inspect --timeline": ("inspect", "TRACES", "--timeline", "{}"),
    "convert --output": ("convert", "WORKLOAD", "--to", "json", "-o", "{}"),
    "fetch --cache": ("fetch", "mnist-8", "--mirror", "http://127.0.0.1:9", "--cache", "{}"),
}
RAW = ("Traceback", "[Errno", "codec can't decode", "No such file or directory:")


def test_every_path_option_is_covered_below() -> None:
    """A new option that takes a path is added to READ_OPTIONS or WRITE_OPTIONS (and so tested)."""
    import typing

    from modtrans.cli import app
    from modtrans.cli.common import commands, cost_app, zoo_app

    program: typing.Any = typer.main.get_command(app)
    assert len(program.commands) > 10  # every command module imported, so every command registered
    taking_paths = set()
    for group in (commands, zoo_app, cost_app):
        for command in group.registered_commands:
            assert command.callback is not None
            hints = typing.get_type_hints(command.callback, include_extras=True)
            for name, hint in hints.items():
                kind = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
                if "Path" in str(kind) and name not in ("paths", "path"):  # the arguments: tested elsewhere
                    taking_paths.add(f"{command.callback.__name__} --{name.replace('_', '-')}")
    assert taking_paths <= {*READ_OPTIONS, *WRITE_OPTIONS}, taking_paths - {*READ_OPTIONS, *WRITE_OPTIONS}


@pytest.mark.parametrize("option", sorted(READ_OPTIONS))
@pytest.mark.parametrize("kind", ["missing", "folder", "binary"])
def test_a_file_an_option_names_that_cannot_be_read_is_one_line_naming_it(
    option: str, kind: str, run_cli: Run, tmp_path: Path
) -> None:
    """Missing or a folder: exit 2, one line naming the option's file, never Python's own error
    text; a file that is not text: no raw decoder message either."""
    given = {
        "missing": tmp_path / "absent.json",
        "folder": tmp_path / "folder.json",
        "binary": tmp_path / "b.json",
    }
    given["folder"].mkdir()
    given["binary"].write_bytes(b"\xff\xfe\x00\x01binary")
    traces = tmp_path / "set" / "r"
    if option.startswith(("validate", "simulate")):
        traces.parent.mkdir()
        made = run_cli("translate", "resnet50", "--format", "chakra-et", "--npus", "2", "-o", traces)
        assert made.exit_code == 0, made.stderr
    path = given[kind]
    args = [str(path) if a == "{}" else str(traces) if a == "TRACES" else a for a in READ_OPTIONS[option]]
    result = run_cli(*args)
    said = result.stdout + result.stderr if option.startswith("validate") else result.stderr  # its report
    assert not any(raw in said for raw in RAW), said
    assert len([line for line in said.splitlines() if str(path) in line]) == 1, said
    assert result.exit_code == 2, said


@pytest.mark.parametrize(
    ("option", "kind"),
    [*((o, k) for o in ("translate --meta", "translate --timeline", "inspect --timeline", "convert --output")
       for k in ("in a missing folder", "a folder")),
     ("fetch --cache", "a file")],
)  # fmt: skip
def test_a_path_an_option_cannot_write_is_one_line_naming_it(
    option: str, kind: str, run_cli: Run, tmp_path: Path
) -> None:
    places = {
        "in a missing folder": tmp_path / "absent" / "x.json",
        "a folder": tmp_path,
        "a file": tmp_path / "f",
    }
    (tmp_path / "f").write_text("")
    workload = tmp_path / "w.txt"
    workload.write_text("DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n")
    path = places[kind]
    traces = tmp_path / "t"
    if "TRACES" in WRITE_OPTIONS[option]:
        assert run_cli("translate", "gpt2", "--format", "chakra-et", "-o", traces).exit_code == 0
        path = path.with_suffix(".svg") if kind != "a folder" else path
    fill = {
        "{}": str(path),
        "OUT": str(tmp_path / "out.txt"),
        "WORKLOAD": str(workload),
        "TRACES": str(traces),
    }
    result = run_cli(*[fill.get(a, a) for a in WRITE_OPTIONS[option]])
    assert result.exit_code == 2
    assert not any(raw in result.stderr for raw in RAW), result.stderr
    assert len([line for line in result.stderr.splitlines() if str(path) in line]) == 1, result.stderr


def test_inspect_a_workload_file_per_layer_and_in_total(run_cli: Run) -> None:
    """A workload file (text or JSON) is shown per layer and in total: ASTRA-sim's ResNet-50, its
    54 layers' forward times and weight-gradient all-reduces summed from the file's own columns."""
    path = (
        Path(__file__).resolve().parents[1] / "fixtures/workloads/corpus/astra-sim/Resnet50_DataParallel.txt"
    )
    rows = [line.split() for line in path.read_text().splitlines()[2:] if line.strip()]
    done = run_cli("inspect", path, "--format", "json")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.stdout)
    assert len(shown["layers"]) == len(rows) == 54
    assert shown["compute"]["fwd"] == sum(int(r[2]) for r in rows)
    assert shown["collectives"] == [
        {
            "type": "ALLREDUCE",
            "group": "weight_grad column",
            "count": 54,
            "bytes": sum(int(r[10]) for r in rows),
        }
    ]
    table = run_cli("inspect", path)
    assert "54 layers" in table.stdout
    assert "ALLREDUCE over weight_grad column: 54 /" in table.stdout
