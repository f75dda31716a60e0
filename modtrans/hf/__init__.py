"""Any model transformers can build, read from the library that defines it: its configuration's
class built on the meta device (no file downloaded, no weight allocated), one forward recorded op
by op, and the IR the hand-written path gives its own families. The optional extra `hf`
brings torch and transformers; without it a family outside the hand-written list is refused in
one line.

classes.py  transformers (imported there, in inputs.py for its processors and in audio.py for its
            feature extractors, alone): which
            configuration and model class a config.json builds (its architectures, its tasks'
            Auto classes, an auto_map's code), the models' import structure reused at import
library.py  torch (imported there, in classes.py, inputs.py, audio.py, feeds.py, values.py,
            kernels.py, scans.py and deltas.py alone): the model built on meta, its forward
            recorded as ops with their modules, FLOPs (flop_counter's formulas) and operands
configs.py  a published config.json's class among its `architectures`, its checkpoint's dtype,
            and what the build does not follow (auto_map beside a native model_type,
            quantization_config, a dtype the IR does not hold), said in one warning each (M805);
            the sub-configurations a configuration holds and its text configuration
inputs.py   a model's inputs as meta tensors: token ids no special token uses (in the layout its
            forward documents), audio features beside its audio tokens, images through its
            image processor where square pixels do not run its tower
audio.py    a speech model's input features: one second of silence through the model type's
            feature extractor, its mel bins
feeds.py    the inputs of a model its first input alone does not run, as the code that feeds
            it makes them: Kyutai's codebook ids, Voxtral realtime's audio a token, a drafter's
            key/value states, a frame-stacking extractor's layout without its library; BLT's
            entropy patching refused
values.py   the values a forward on meta reads: CPU copies of the tensors whose values are known,
            a router's choice of experts taken balanced where the values come from weights; META,
            the meta device the other modules build and record on
kernels.py  meta kernels' outputs remembered by their operands' metadata: a block's ops, run
            again by the next block on the same shapes, each a look-up
scans.py    a recurrent scan's token loop (Mamba's selective scan, RecurrentGemma's RG-LRU,
            RWKV's wkv, xLSTM's and gated delta nets' chunks) recorded as one pass over the
            sequence: its ops once, on L steps' elements
deltas.py   a gated delta net's chunk recurrence (Qwen3-Next's) in one pass, for scans.py
layers.py   the recorded ops -> the IR's layers: named by module, FLOPs, GEMMs, producers, tied
            weights counted once
blocks.py   what a layer is to the model: block index and part, heads per block, the experts'
            counts
mixture.py  a mixture's router and expert layers (document.Moe): which, from the counts and the
            module paths; a router's own MLP the router's; experts run on every token as the
            routed run
towers.py   a multimodal model's towers (its vision and audio encoders): outside the blocks, on
            the first pipeline stage, with their own configuration's heads
plans.py    the model's own base_model_tp_plan: each layer's style (Layer.tp_style), which
            strategy/llm/tensor.py splits and communicates by; --tp refused without a plan
derived.py  the plan Megatron-LM would apply where the configuration publishes none, or one
            naming no layer of the blocks: the blocks' linear layers column- or row-parallel by
            the data flow (M806), or the reason the blocks are not ones it understands (X501)
built.py    a built model's IR, made one way: its inputs, one forward recorded, its layers under
            a provenance, its anchored tensor-parallel plan (extract's, the tests' and tools')
cache.py    the IR kept by the configuration's digest: a second run reads it without torch

    ir, found = extract(config, data, name="config.json", batch=1, sequence=2048)
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from modtrans.diagnostics import Diagnostic, DiagnosticError, diagnostic
from modtrans.ir.document import ModelIR


def available() -> bool:
    """Whether torch and transformers are installed (found, not imported: importing costs ~2 s)."""
    return all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))


def missing(family: str) -> str:
    """The one line for a family llm/ does not read when the extra is not installed."""
    from modtrans.resources import install_hint

    return (
        f"model_type {family!r} is not a family modtrans reads without transformers: "
        f"{install_hint('hf')} builds it on the meta device"
    )


def extract(
    config: Mapping[str, Any],
    data: bytes,
    *,
    name: str,
    batch: int,
    sequence: int,
    targets: int | None = None,
    tensor: int = 1,
    remote: Path | None = None,
) -> tuple[ModelIR | None, list[Diagnostic]]:
    """The IR of the model a configuration describes, as transformers builds it; M801 in one line
    for one it cannot build (no class for any task, an error in its forward, a family only its
    own code defines without `remote`), X501 for `tensor` > 1 ranks where the configuration has
    no tensor-parallel plan and blocks derived.py does not understand (M806 where it derives
    one), M805 for an auto_map or quantization_config the build does
    not follow (configs.py). `remote`: the folder whose code the configuration's auto_map names,
    run as transformers' trust_remote_code runs it (--trust-remote-code)."""
    from modtrans.hf import cache, configs, plans

    family = str(config.get("model_type", ""))
    if not available():
        return None, [diagnostic("M801", missing(family), path=name)]
    digest = hashlib.sha256(data).hexdigest()
    remote = remote if config.get("auto_map") else None
    key = cache.key(digest, batch, sequence, targets, remote is not None)
    kept = cache.load(key, name)
    if kept is not None:
        ir, plan = kept
    else:
        try:
            if config.get("auto_map") and remote is None and not _known(family):
                message = (
                    f"model_type {family!r} is defined by code beside the configuration (auto_map): "
                    "--trust-remote-code runs it (transformers' trust_remote_code)"
                )
                return None, [diagnostic("M801", message, path=name)]
            ir, plan = _traced(config, digest, len(data), name, batch, sequence, targets, remote)
        except LookupError as error:
            return None, [diagnostic("M801", f"model_type {family!r}: {error}", path=name)]
        except DiagnosticError as error:  # inputs the options cannot give (inputs._placed: X501)
            return None, [dataclasses.replace(d, path=name) for d in error.diagnostics]
        except Exception as error:  # transformers' or torch's own: said in one line
            lines = [x.strip() for x in str(error).splitlines() if x.strip()]  # timm's fix: its 2nd
            text = " ".join(lines)[:240] or type(error).__name__
            message = f"transformers could not build or run {family!r} on the meta device: {text}"
            return None, [diagnostic("M801", message, path=name)]
        cache.store(key, ir, plan)
    plan, reason, derived = _derived(ir, plan, family, tensor, name)
    ir = plans.annotate(ir, plan)
    refused = plans.refusal(family, plan, tensor, ir, reason)
    if refused is not None:
        return None, [diagnostic("X501", refused, path=name)]
    remote_run = remote is not None
    native = bool(config.get("auto_map")) and _known(family)  # no import of transformers without one
    fields = _unread(config) if configs.foreign(config, native, remote_run) else []
    said = configs.warnings(config, name, native=native, remote=remote_run, fields=fields)
    return ir, [*derived, *said, *_unrun(ir, name)]


def _derived(
    ir: ModelIR, plan: dict[str, str], family: str, tensor: int, name: str
) -> tuple[dict[str, str], str | None, list[Diagnostic]]:
    """The plan to split by: the configuration's own, or for `tensor` > 1 ranks where it has none
    the one Megatron-LM would apply, derived from the forward (derived.py) with M806 saying so;
    {} and the reason where the blocks are not ones the derivation understands (X501 then). A
    published plan that names no layer of the blocks (derived.blockless: HunYuan dense's, GPT-OSS's
    embed_tokens alone) is completed by the derived one on the blocks, or followed with the blocks
    whole where none derives, M806 saying which."""
    if tensor <= 1:
        return plan, None, []
    from modtrans.hf import derived

    if plan and not derived.blockless(ir, plan):
        return plan, None, []
    found, reason = derived.derive(ir)
    if not found:
        if plan and reason is not None:  # followed as published: the blocks whole, said
            return plan, None, [diagnostic("M806", derived.whole(family, tensor, plan, reason), path=name)]
        return {}, reason, []
    completed = {**found, **plan}
    if not derived.divides(ir, tensor):  # the layout refuses it in one line (check_heads): nothing beside
        return completed, None, []
    said = derived.said(family, tensor, found, plan or None)
    return completed, None, [diagnostic("M806", said, path=name)]


def _unrun(ir: ModelIR, name: str) -> list[Diagnostic]:
    """M804 where the forward left modules with parameters unrun (layers.py names them
    MODULE.unused)."""
    idle = [x for x in ir.layers if x.name.endswith(".unused") or x.name == "unused"]
    count = sum(p.elements for x in idle for p in x.params if p.counted)
    if not count:
        return []
    modules = ", ".join(x.node or "the model" for x in idle[:3]) + (", ..." if len(idle) > 3 else "")
    share = count / ir.totals.params if ir.totals.params else 1.0
    given = " and ".join(ir.provenance.input_shapes) or "its inputs"  # WavLM's input_values
    message = (
        f"{count:,} parameters ({share:.1%}) sit in modules a forward on {given} did not run "
        f"({modules}): counted and all-reduced, computing nothing"
    )
    return [diagnostic("M804", message, path=name)]


def _unread(config: Mapping[str, Any]) -> list[str]:
    """classes.unread: transformers imported, on a cached read too (an auto_map file's alone)."""
    from modtrans.hf import classes

    return classes.unread(config)


def _known(family: str) -> bool:
    from modtrans.hf import classes

    return classes.known(family)


def _traced(
    config: Mapping[str, Any],
    digest: str,
    size: int,
    name: str,
    batch: int,
    sequence: int,
    targets: int | None,
    remote: Path | None,
) -> tuple[ModelIR, dict[str, str]]:
    """The IR of the configuration's model and its tensor-parallel plan ({} where none)."""
    from modtrans.hf import built, classes, library

    model = library.build(classes.config_of(config, remote), remote=remote)
    read = built.read(model, batch, sequence, targets, file=name, sha256=digest, size=size)
    return read.ir, read.plan
