"""Every mixture-of-experts model type transformers defines, built on the meta device from its
default configuration (else transformers' own tester's, fixtures/hf/testers) and read by
modtrans/hf/: do the IR's Moe marks say what the model and its configuration say?

    python tools/hf_moe_marks.py [--only mixtral,nemotron_h] [--seconds 90]   # needs the extra `hf`

Per family, against the model transformers built (its modules, not our reading of them):
- the blocks with routed experts (a module named `experts`: a ModuleList, or fused [E, ...]
  weights) are the blocks with layers marked Part.EXPERT;
- each such layer's Moe.experts is E (the ModuleList's length or the fused weights' first
  dimension) and its top_k the configuration's;
- the router (the parameter of the block, outside the experts and any shared expert, of E rows)
  is a layer marked Part.ROUTER;
- a shared expert's layers (under a module named shared...) are the block's MLP, not routed;
- the activation model's expert width (activations.dims(ir, 1).mlps[block].experts / top_k, times
  the block's passes) is the gated expert's 3 f or the plain one's 2 f, f the expert's inner
  width, times the passes the block runs in one forward (Inkling 2 loop's looped layers: _passes);
- the experts' GEMMs run tokens x k rows in all, a training framework's routed run (_rows).

Prints one line per family: ok, or what differs; no-build where it does not build or run on meta.
After "ok", in brackets, where the activation model (strategy/llm/activations.py) reads correct
marks otherwise than the expert's 3 f (gated) or 2 f per routed token.

Measured with transformers 5.25.0, torch 2.13.0+cpu, 8 tokens: of the 79 model types whose
modeling file defines a router, top-k or experts module, 71 mark as their model and configuration
say, and the activation model reads each of the 71 as the expert's 3 f (gated) or 2 f a routed
token (tests/test_hf_moe_marks.py and tests/test_hf_moe_stored.py hold each class of miss found:
a router module that runs its top-k, counts in a sub-configuration, a top-k only the router's class
names, experts.expert_<i>, an expert run at a time, a leaf experts module, a convolution of E
channels; a bmm over [E, tokens, h], a layer run again in one forward, heads given per layer, an
attention class named MLA, a router of E + zero experts or with an MLP of its own, attention
experts, [E x f, h] weights). 19 marked right before this check (48 left their router unmarked,
its MLP width then the router's E), 70 before the second round, whose activation model read 65
(Llama 4's batched experts' GEMM folded the tokens into n: 139,264 elements a token for 24,576;
Inkling 2 loop's three passes read as one module of six projections, 101,376 for 82,944; Zaya's
router MLP read as a dense MLP; Dots3 Note, its heads per layer, and LongCat-Flash, its
LongcatFlashMLA, read no attention and so no MLP). JetMoE's attention experts (JetMoeMoA) were
marked the block's routed experts; they are its attention's now, its MLP's (JetMoeParallelExperts
under mlp) the routed ones (truth: an experts module outside the attention, or the module of
...Experts children). A block list under a tower's sub-configuration is no block (hf/towers.py;
the truth numbered them, 6 multimodal families differed). 8 do not build or run from their
defaults on meta (DeepSeek-OCR 2, DiffusionGemma, GLM-4.1V-MoE, GLM-5 Next, Step3p7; Qwen3-Omni-MoE
and ViTPose have no class this reads) or build no mixture (Granite Docling).

The routed rows (_rows), measured the same way: 70 of the 79 ok. Llama 4's experts read 16 x the
routed rows (128 for 8 tokens at top-1) before mixture.routed; NLLB-MoE's still read 64 x: its
NllbMoeSparseMLP hands NllbMoeExperts the router's one-hot top_1_mask [tokens, E] where it takes
expert indices (modeling_nllb_moe.py, transformers 5.25.0), so one_hot of the mask runs expert 0 on
each token E - 1 times and expert 1 once, and no other expert: transformers' run, not NLLB-MoE's
top-2 routing, and not read as that here.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import torch

from modtrans.hf import built, classes, library
from modtrans.ir.document import Kind, ModelIR, Part
from modtrans.strategy.llm import activations

DOWN = re.compile(r"down|w2|wo\b|output|fc2")
"""An expert's down projection's parameter names (down_proj, DBRX's w2, Switch's wo, JetMoE's
output_linear, fc2)."""
TESTERS = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "testers"


def moe_types() -> list[str]:
    """The model types whose modeling file defines a router, top-k or experts module."""
    import transformers.models as models

    root = Path(models.__file__).parent
    found = []
    for path in sorted(root.glob("*/modeling_*.py")):
        text = path.read_text()
        if re.search(r"self\.experts\b|class \w*(Router|TopK|Experts)\b", text):
            found.append(path.parent.name)
    return sorted(set(found))


def truth(model: Any, block_paths: list[str], config: Any) -> dict[int, dict[str, Any]]:
    """Per block index with routed experts: E, the router's module path, the shared modules, the
    expert's inner width f and whether it is gated, from the built model's modules."""
    out: dict[int, dict[str, Any]] = {}
    h = _hidden(config)
    named = dict(model.named_modules())
    index = 0
    for path in block_paths:
        if not _language(model, path):
            continue  # a tower's blocks are no blocks of the model (modtrans/hf/towers.py)
        for layer_path, layer in named[path].named_children():
            here = f"{path}.{layer_path}"
            i, index = index, index + 1
            attention = [n for n, m in layer.named_modules() if "Attention" in type(m).__name__]
            mine = [
                (n, m)
                for n, m in layer.named_modules()
                if "shared" not in n and not any(n.startswith(a + ".") for a in attention)
            ]  # not an attention's experts (JetMoE's JetMoeMoA: mixture of attention heads)
            experts = [(n, m) for n, m in mine if n.rsplit(".", 1)[-1] == "experts"]
            if not experts:  # JetMoeMoE: input_linear, output_linear, JetMoeParallelExperts [E, ...]
                held = [n for n, m in mine if type(m).__name__.endswith("Experts") and "." in n]
                experts = [(n, layer.get_submodule(n.rsplit(".", 1)[0])) for n in held]  # their MoE's
            if not experts:
                continue
            name, module = experts[0]
            if isinstance(module, torch.nn.ModuleList | torch.nn.ModuleDict):
                e = sum(1 for c in module.children() if any(True for _ in c.parameters()))  # not a dropout
                first = next(iter(module.children()))
                named_shapes = [(n, tuple(p.shape)) for n, p in first.named_parameters() if p.dim() == 2]
            else:
                named_shapes = [(n, tuple(p.shape[1:])) for n, p in module.named_parameters() if p.dim() == 3]
                e = next((p.shape[0] for p in module.parameters() if p.dim() == 3), 0)
                if not e:  # DBRX: [E x f, h] weights, E in its ffn_config
                    e = _sub_int(config, "moe_num_experts")
                    named_shapes = [(n, (p.shape[0] // e, p.shape[1])) for n, p in module.named_parameters()]
            # the down projection's width other than the hidden size (nn.Linear's [h, f], the fused
            # down_proj's [E, h, f], Llama 4's [E, f, h]); else the narrowest width not h
            down = [next((d for d in s if d != h), h) for n, s in named_shapes if DOWN.search(n)]
            inner = [d for _, s in named_shapes for d in s if d != h]
            f = down[0] if down else min(inner) if inner else None
            # gated: three projections, one named gate, or an up projection of 2 f (a fused GLU:
            # JetMoeMoE's input_linear, chunked in two by its forward)
            ups = [s for n, s in named_shapes if not DOWN.search(n)]
            gated = (
                len(named_shapes) >= 3
                or any("gate" in n for n, _ in named_shapes)
                or bool(f and any(d == 2 * f != h for s in ups for d in s))
            )
            moe_path = name.rsplit(".", 1)[0] if "." in name else ""
            router = None
            moe_module = layer.get_submodule(moe_path) if moe_path else layer
            for pn, p in moe_module.named_parameters():
                inside = pn.startswith(name[len(moe_path) + 1 :] if moe_path else name)
                if p.dim() == 2 and p.shape[0] == e and not inside and "shared" not in pn:
                    router = ".".join(x for x in (here, moe_path, pn.rsplit(".", 1)[0]) if x)
                    break
            shared = [f"{here}.{n}" for n, _ in layer.named_children() if "shared" in n]
            parent = named.get(f"{here}.{moe_path}") if moe_path else None
            if parent is not None:
                shared += [f"{here}.{moe_path}.{n}" for n, _ in parent.named_children() if "shared" in n]
            out[i] = {
                "E": e, "router": router, "shared": shared, "f": f, "gated": gated, "path": here,
                "runs": _passes(config, i),
            }  # fmt: skip
    return out


def _language(model: Any, path: str) -> bool:
    """Whether the block list at `path` is the model's own (the language model's, an encoder's or
    decoder's): the innermost module above it that holds a configuration holds one of the class of
    the model's or of its text configuration, not a vision or audio tower's sub-configuration."""
    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    parts = path.split(".")
    for n in range(len(parts), -1, -1):
        module = model.get_submodule(".".join(parts[:n]))
        held = getattr(module, "config", None)
        if held is not None and hasattr(held, "to_dict"):
            return type(held) in (type(config), type(text))
    return True


def _passes(config: Any, index: int) -> int:
    """How many times block `index` runs in one forward: Inkling 2 loop's looped layers,
    loop_layer_index_start <= index < loop_layer_index_end, run loop_num_passes times
    (modeling_inkling2_loop.py, Inkling2LoopTextModel.forward: the first pass, then the
    remaining passes over self.layers[loop_start:loop_end]); every other block once."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    passes = getattr(text, "loop_num_passes", None)
    start, end = getattr(text, "loop_layer_index_start", None), getattr(text, "loop_layer_index_end", None)
    if isinstance(passes, int) and isinstance(start, int) and isinstance(end, int) and start <= index < end:
        return passes
    return 1


def _sub_int(config: Any, key: str) -> int:
    for value in vars(config).values():
        found = getattr(value, key, None) if not isinstance(value, dict) else value.get(key)
        if isinstance(found, int):
            return found
    return 0


def _hidden(config: Any) -> int | None:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    for key in ("hidden_size", "d_model", "n_embd"):
        value = getattr(text, key, None)
        if isinstance(value, int):
            return value
    return None


def top_k_of(config: Any) -> dict[str, int]:
    """The configuration's integer keys that name a top-k (for the report: what the config says)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    found = {}
    for key, value in text.to_dict().items():
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and re.search(r"top_?k|per_tok|topk|_k$", key)
        ):
            found[key] = value
    return found


def check(config: Any, sequence: int) -> str:
    model = library.build(config)
    read = built.read(model, 1, sequence)
    want = truth(model, list(read.recorded.blocks), model.config)
    return compare(read.ir, want, model.config)


def compare(ir: ModelIR, want: dict[int, dict[str, Any]], config: Any) -> str:
    """What differs between the IR's marks and `want` (truth); empty: nothing."""
    misses: list[str] = []
    later: list[str] = []  # the activation model's reading of correct marks (activations.py)
    if not want:
        return "no routed experts built"
    ks = set(top_k_of(config).values())
    routed = {
        x.block.index
        for x in ir.layers
        if x.block and x.block.part is Part.EXPERT and x.block.index is not None
    }
    if routed != set(want):
        misses.append(f"expert blocks {sorted(routed ^ set(want))[:6]} differ")
    d = activations.dims(ir, 1)
    for i, w in want.items():
        here = [x for x in ir.layers if x.block and x.block.index == i]
        marked = {(x.moe.experts, x.moe.top_k) for x in here if x.moe is not None}
        if {e for e, _ in marked} != {w["E"]}:
            misses.append(f"E {sorted(marked)} != {w['E']}")
        if ks and not {k for _, k in marked} <= ks:
            misses.append(f"top_k {sorted(marked)} not in config {sorted(ks)}")
        routers = [x for x in here if x.block is not None and x.block.part is Part.ROUTER]
        if w["router"] and not any(x.node == w["router"] for x in routers):
            misses.append(f"router {w['router']} not marked ({[x.name for x in routers]})")
        for x in here:
            under = any(x.node == s or x.node.startswith(s + ".") for s in w["shared"])
            if under and (
                x.moe is not None or (x.block is not None and x.block.part not in (Part.MLP, Part.NORM))
            ):
                misses.append(f"shared {x.name} marked {x.block.part if x.block else None}")
                break
        f = w["f"]
        downs = {  # the IR's expert down projections' K: the expert's inner width
            x.gemm.k
            for x in here
            if x.block
            and x.block.part is Part.EXPERT
            and x.gemm
            and any(DOWN.search(p.name) for p in x.params)
        }
        if f and not downs:
            misses.append("no expert down projection marked")
        if f and downs and downs != {f}:
            misses.append(f"expert width {sorted(downs)} != {f}")
        mlp = d.mlps.get(i) if d is not None else None
        k = next((kk for _, kk in marked), None)
        if mlp is None or not k or not f:
            later.append(f"no activation MLP for block {i}")
        else:
            expected = k * (3 if w["gated"] else 2) * f * w.get("runs", 1)
            stored = mlp.experts * d.passes.get(i, 1) if d is not None else mlp.experts
            if abs(stored - expected) > 1e-6:
                later.append(f"activations: experts {stored:g} != {expected} (k {k} f {f})")
            if mlp.inner and mlp.inner < 2 * f and not w["shared"]:
                later.append(f"activations: dense inner {mlp.inner:g}")
        rows = _rows(here, w, k)
        if rows:
            misses.append(rows)
        if misses:
            return f"block {i}: " + "; ".join(dict.fromkeys(misses))
    return "ok" + ("  [" + "; ".join(dict.fromkeys(later))[:160] + "]" if later else "")


def _rows(here: list[Any], w: dict[str, Any], k: int | None) -> str:
    """What differs from a routed run in one block's experts: their GEMMs' rows (FLOPs over
    2 h f a projection, 3 of them gated, 2 plain; h the down projection's output, MuseSpark's
    moe_hidden_size) against the tokens x k the block's router scores (its first layer's rows,
    every run of the block): a training framework runs each token on its k experts only
    (Megatron-Core's GroupedMLP, torchtitan's grouped_mm), where transformers may run every expert
    on every token (Llama4TextExperts' bmm, read as the routed run: mixture.routed). Empty: the
    same."""
    f = w["f"]
    routers = [x for x in here if x.block.part is Part.ROUTER and x.gemm]
    linears = [x for x in here if x.block.part is Part.EXPERT and x.kind is Kind.LINEAR and x.gemm]
    downs = [x.gemm.n for x in linears if any(DOWN.search(p.name) for p in x.params)]
    if not f or not k or not routers or not downs:
        return ""
    per_row = 2 * downs[0] * f * (3 if w["gated"] else 2)
    rows = sum(x.flops.forward for x in linears) / per_row
    tokens = routers[0].gemm.m * w.get("runs", 1)
    if abs(rows - tokens * k) <= 0.02 * tokens * k:
        return ""
    return f"expert rows {rows:g} != tokens x k {tokens * k}"


SWITCHED_ON: dict[str, dict[str, Any]] = {
    "gemma4": {"enable_moe_block": True, "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 256},
}
"""A family whose defaults build no mixture, with it turned on (the keys its configuration class
documents; small sizes of our choosing: the marks, not the sizes, are compared)."""
TESTED_AS = {"qwen4_exp": "qwen4_exp_text"}  # the tester's model type (fixtures/hf/testers)
MODEL_TYPE = {"nllb_moe": "nllb-moe", "inkling": "inkling_mm_model"}  # its configuration's model_type


def config_for(model_type: str) -> Any:
    tester = TESTERS / f"{TESTED_AS.get(model_type, model_type)}.json"
    if tester.exists():
        return classes.config_of(json.loads(tester.read_text()))
    config = classes.default_config(MODEL_TYPE.get(model_type, model_type))
    on = SWITCHED_ON.get(model_type)
    if on:
        text = config.get_text_config()
        for key, value in on.items():
            setattr(text, key, value)
    return config


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sequence", type=int, default=8)
    parser.add_argument("--only", default="")
    parser.add_argument("--seconds", type=int, default=90, help="per family")
    args = parser.parse_args()
    only = [t for t in args.only.split(",") if t] or moe_types()
    ok = 0
    for model_type in only:
        signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("time")))
        signal.alarm(args.seconds)
        try:
            line = check(config_for(model_type), args.sequence)
            ok += line.startswith("ok")
        except Exception as error:  # a family that does not build or run on meta: said
            line = "no-build " + (str(error).strip().splitlines() or [type(error).__name__])[0][:100]
        finally:
            signal.alarm(0)
        print(f"{model_type:24} {line}", flush=True)
    print(f"{ok} of {len(only)} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
