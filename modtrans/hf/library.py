"""torch's side of a build: a configuration's model built on the meta device and one forward pass
recorded op by op, each op with the module that ran it.

The model is built from the class classes.py chooses (from_config: no file is downloaded, no
weight allocated: torch.device("meta")). The forward runs on meta tensors under a
TorchDispatchMode that records every aten op: the innermost module running (global forward
hooks), its FLOPs as torch.utils.flop_counter's flop_registry counts them (FlopCounterMode's own
formulas: mm, addmm, bmm, baddbmm, convolution, scaled_dot_product_attention), the parameters
among its operands (followed through views and gathers: F.linear's weight.t(), a MoE's
gate_up_proj[expert_ids]), its input and output shapes, and the ops whose outputs it reads.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import flop_registry

from modtrans.hf import classes, configs, scans
from modtrans.hf.blocks import Mask
from modtrans.hf.configs import nested
from modtrans.hf.inputs import inputs
from modtrans.hf.kernels import Kernels, signature
from modtrans.hf.towers import towers as tower_shapes
from modtrans.hf.values import META, Values, flat, forward_args

__all__ = ["inputs"]  # the inputs of a model, inputs.py's: library.inputs to its callers

aten = torch.ops.aten

NORMS = frozenset({aten.native_layer_norm, aten.layer_norm, aten.rms_norm, aten._fused_rms_norm})
SOFTMAX = frozenset({aten._softmax, aten.softmax, aten._log_softmax, aten.log_softmax, aten._safe_softmax})
EMBEDDING = frozenset({aten.embedding})


@dataclass
class Op:
    """One aten op of the forward: its module, what it is (gemm, norm, softmax, pointwise, reduce,
    embedding, data), its FLOPs (flop_registry's for a gemm; else 0: layers.py counts them),
    the elements it reads and writes, the parameters it reads, and the ops it reads from."""

    index: int
    module: str
    name: str
    category: str
    flops: int
    in_elements: int
    out_shapes: tuple[tuple[int, ...], ...]
    out_dtype: str
    inputs: tuple[tuple[tuple[int, ...], str, str], ...]  # activations read: shape, dtype, source
    params: tuple[str, ...]
    reads: tuple[int, ...]


@dataclass
class Module:
    """A module of the model: its class, its own parameters (name, shape, dtype), whether it is a
    leaf, and the attention flags its attributes say (is_causal)."""

    path: str
    cls: str
    params: tuple[tuple[str, tuple[int, ...]], ...]
    leaf: bool
    causal: bool | None


@dataclass
class Recorded:
    """A model's forward as ops, its modules in definition order, its parameters (name -> the
    module path that owns it first: a tied weight's other owners share it) and its class."""

    cls: str
    ops: list[Op]
    modules: list[Module]
    owners: dict[str, str]  # parameter key (module path.name) -> its first owner's key
    total_params: int
    inputs: dict[str, tuple[int, ...]]
    blocks: list[str] = field(default_factory=list)  # the paths of the block lists (ModuleList)
    towers: dict[str, Any] = field(default_factory=dict)  # towers.towers: path -> its blocks.Shape
    masks: tuple[Mask, ...] = ()  # the attention masks the forward built: _masks


class _Recorder(Values):
    """Each op's record. Its tables are keyed by id() with every tensor they name kept alive
    (`kept`: meta tensors hold no storage), so no id is reused: a plain dict lookup per operand
    where a weak-keyed one cost a reference object each (a third of the recording's own time)."""

    def __init__(self, stack: list[str], params: dict[int, str], given: Mapping[str, Any]) -> None:
        super().__init__(given)
        self.named = {id(t): name for name, t in leaves(given).items()}
        self.stack = stack
        self.params = params
        self.origin: dict[int, tuple[str, ...]] = {}  # tensor -> parameter keys it views
        self.source: dict[int, tuple[int, ...]] = {}  # tensor -> the ops that made it
        self.kept: list[Any] = []
        self.categories: dict[Any, str] = {}  # op overload -> _category's answer
        self.ops: list[Op] = []
        # the recording is the only mode: an op not run reaches no mode beneath (FlopCounterMode's
        # check, count_forward, runs each kernel)
        self.kernels = Kernels()
        self.counted: dict[Any, int] = {}  # kernels.signature -> flop_registry's count

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        packet = func._overloadpacket
        out = self.run(func, args, kwargs)
        if packet is aten._local_scalar_dense:
            return out
        outs = _tensors((out,), [])
        self.kept += outs
        tensors = _tensors(kwargs.values(), _tensors(args, []))
        params: list[str] = []
        reads: list[int] = []
        read: list[tuple[tuple[int, ...], str, str]] = []
        for t in tensors:
            key = self.params.get(id(t))
            found = (key,) if key is not None else self.origin.get(id(t), ())
            params += [p for p in found if p not in params]
            sources = self.source.get(id(t), ())
            reads += [r for r in sources if r not in reads]
            if not found:
                name = self.named.get(id(t)) or (f"op{sources[-1]}" if sources else "")
                read.append((tuple(t.shape), _dtype(t.dtype), name))
        category = self.categories.get(func)
        if category is None:
            category = self.categories[func] = _category(func, packet)
        if category == "data":  # a view, copy or gather: its outputs carry what its inputs did
            for t in outs:
                if params:
                    self.origin[id(t)] = tuple(params)
                self.source[id(t)] = tuple(reads)
                if len(tensors) == 1 and id(tensors[0]) in self.named:
                    self.named[id(t)] = self.named[id(tensors[0])]
            return out
        flops = 0
        if packet in flop_registry:  # a function of the operands' shapes: counted once per signature
            key = signature(func, args, kwargs)
            counted = self.counted.get(key) if key is not None else None
            if counted is None:
                counted = int(flop_registry[packet](*args, **kwargs, out_val=out))
                if key is not None:
                    self.counted[key] = counted
            flops = counted
        index = len(self.ops)
        self.ops.append(
            Op(
                index,
                self.stack[-1],
                packet.__name__,
                category,
                flops,
                sum(t.numel() for t in tensors),
                tuple(tuple(t.shape) for t in outs),
                _dtype(outs[0].dtype) if outs else "",
                tuple(read),
                tuple(params),
                tuple(reads),
            )
        )
        for t in outs:
            self.source[id(t)] = (index,)
        return out


def _tensors(items: Any, into: list[Any]) -> list[Any]:
    """The tensors among `items`, nested lists, tuples and dicts followed, appended to `into`."""
    for x in items:
        if isinstance(x, torch.Tensor):
            into.append(x)
        elif isinstance(x, list | tuple):
            _tensors(x, into)
        elif isinstance(x, dict):
            _tensors(x.values(), into)
    return into


@functools.cache
def _dtype(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _category(func: Any, packet: Any) -> str:
    if packet in flop_registry:
        return "gemm"
    if packet in NORMS:
        return "norm"
    if packet in SOFTMAX:
        return "softmax"
    if packet in EMBEDDING:
        return "embedding"
    tags = func.tags
    if torch.Tag.pointwise in tags and not _is_copy(packet):
        return "pointwise"
    if torch.Tag.reduction in tags:
        return "reduce"
    return "data"


def _is_copy(packet: Any) -> bool:
    return packet in (aten._to_copy, aten.copy_, aten.clone, aten.copy, aten.detach, aten.lift_fresh)


@contextlib.contextmanager
def _hooks(model: torch.nn.Module, stack: list[str]) -> Iterator[None]:
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}

    def enter(module: torch.nn.Module, *_: Any) -> None:
        stack.append(names.get(id(module), stack[-1]))

    def leave(module: torch.nn.Module, *_: Any) -> None:
        if len(stack) > 1:
            stack.pop()

    handles = [
        torch.nn.modules.module.register_module_forward_pre_hook(enter),
        torch.nn.modules.module.register_module_forward_hook(leave, always_call=True),
    ]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def build(config: Any, cls: Any = None, remote: Path | None = None) -> Any:
    """The model on the meta device: no weight allocated. Eager attention (its two matmuls and
    softmax, each counted) and batched_mm experts (one bmm per projection over the tokens x top_k
    routed rows: the balanced count, and one FlopCounterMode counts; the grouped_mm kernel has no
    flop formula)."""
    cls = cls or classes.model_class(config, remote)
    declared = configs.dtype(config)  # _from_config's float32 overwrites it
    config = _own(config, cls)
    config._attn_implementation = "eager"
    for each in nested(config):  # a composite's too: Nemotron 3.5 Transcribe's NemotronH decoder
        each._experts_implementation = "batched_mm"
    with META, _parameters_on_meta(), classes.quiet():
        model = cls._from_config(config, torch_dtype=torch.float32)
    model.train(False)
    if declared is not None:
        model.config.dtype = declared  # the checkpoint's: the IR's dtype (blocks.shape_of)
    for each in (model.config, *(getattr(model.config, k, None) for k in ("text_config", "decoder"))):
        if each is not None and hasattr(each, "use_cache"):
            each.use_cache = False  # a training step keeps no key/value cache
    return model


@contextlib.contextmanager
def _parameters_on_meta() -> Iterator[None]:
    """Every parameter a module registers moved to meta as it is registered. torch.device("meta")
    does not reach the legacy constructors (torch.Tensor(n), torch.FloatTensor(...)): ImageGPT's
    norm weights, XLNet's q/k/v/o, SEW-D's masked_spec_embed were CPU tensors beside meta ones
    (the forward stopped at the first op mixing them; XLNet allocated 400 MB). The same rule as
    accelerate's init_empty_weights (accelerate/big_modeling.py), one parameter alive at a time."""
    original = torch.nn.Module.register_parameter

    def register(module: Any, name: str, param: Any) -> None:
        if type(param) is torch.nn.Parameter and not param.is_meta:
            param = torch.nn.Parameter(param.to(META), requires_grad=param.requires_grad)
        original(module, name, param)

    torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original


def _own(config: Any, cls: Any) -> Any:
    """The configuration `cls` is built from: `config`, or where `cls` takes another class (a
    composite's causal LM: Llama 4's Llama4ForCausalLM takes Llama4TextConfig, Musicgen's its
    decoder's) the sub-configuration of that class it holds, as from_pretrained hands it over."""
    wanted = getattr(cls, "config_class", None)
    if not isinstance(wanted, type) or isinstance(config, wanted):
        return config
    held = (v for v in vars(config).values() if isinstance(v, wanted))  # Musicgen's decoder too
    return next(held, config)


def record(model: Any, given: Mapping[str, Any]) -> Recorded:
    """One forward of `model` on `given` (meta tensors), op by op; a recurrent scan's token loop
    as one pass over the sequence (scans.py)."""
    named = dict(model.named_parameters(remove_duplicate=False))
    first: dict[int, str] = {}
    owners: dict[str, str] = {}
    for key, p in named.items():
        owners[key] = first.setdefault(id(p), key)
    params = {id(p): first[id(p)] for p in named.values()}
    modules = []
    for path, module in model.named_modules():
        own = tuple(
            (f"{path}.{n}" if path else n, tuple(p.shape)) for n, p in module.named_parameters(recurse=False)
        )
        causal = getattr(module, "is_causal", None)
        modules.append(
            Module(
                path,
                type(module).__name__,
                own,
                not any(True for _ in module.children()),
                causal if isinstance(causal, bool) else None,
            )
        )
    blocks = _blocks(model)
    stack = [""]
    recorder = _Recorder(stack, params, given)
    masks: list[Mask] = []
    with _hooks(model, stack), torch.no_grad(), scans.one_pass(model, stack), _masks(model, masks), recorder:
        _forward(model, given)
    total = sum(p.numel() for p in model.parameters())
    shapes = {k: tuple(v.shape) for k, v in leaves(given).items()}
    towers = tower_shapes(model)
    built = tuple(dict.fromkeys(masks))
    return Recorded(type(model).__name__, recorder.ops, modules, owners, total, shapes, blocks, towers, built)


MASK_BUILDERS = {"create_causal_mask": False, "create_sliding_window_causal_mask": True}
"""transformers' mask builders (masking_utils.py) and whether each slides: a modeling file imports
them by name and picks one per layer kind (its layer_types' mapping: Gemma 2's) or one for every
layer by its configuration's sliding_window alone (MistralModel.forward: `create_causal_mask if
self.config.sliding_window is None else create_sliding_window_causal_mask`; Mixtral, Phi-3, PhiMoE,
MiniMax's softmax layers, Doge so too)."""


@contextlib.contextmanager
def _masks(model: Any, into: list[Mask]) -> Iterator[None]:
    """Each mask `model`'s forward builds, recorded into `into`: the builders wrapped where its
    modules' modeling files hold them by name (the names their forward looks up), restored after."""
    files = {sys.modules.get(type(m).__module__) for m in model.modules()}
    wrapped: list[tuple[Any, str, Any]] = []
    for file in files:
        for name, sliding in MASK_BUILDERS.items():
            original = getattr(file, name, None)
            if original is None:
                continue
            wrapped.append((file, name, original))
            setattr(file, name, _recording(original, sliding, into))
    try:
        yield
    finally:
        for file, name, original in wrapped:
            setattr(file, name, original)


def _recording(builder: Any, sliding: bool, into: list[Mask]) -> Any:
    """`builder`, recording the mask it is asked for (its `config` keyword or first argument)."""

    @functools.wraps(builder)
    def build(*args: Any, **kwargs: Any) -> Any:
        config = kwargs.get("config", args[0] if args else None)
        window = getattr(config, "sliding_window", None)
        window = window if isinstance(window, int) and not isinstance(window, bool) else None
        into.append(Mask(sliding, window, str(getattr(config, "model_type", "") or "")))
        return builder(*args, **kwargs)

    return build


def leaves(given: Mapping[str, Any]) -> dict[str, Any]:
    """The input tensors by name, those within a dict or tuple named by their keys and positions
    (a drafter's shared_kv_states.full_attention.0: feeds.drafted)."""
    found: dict[str, Any] = {}
    for name, value in given.items():
        if isinstance(value, torch.Tensor):
            found[name] = value
        elif isinstance(value, Mapping):
            found.update(leaves({f"{name}.{k}": v for k, v in value.items()}))
        elif isinstance(value, list | tuple):
            found.update(leaves({f"{name}.{i}": v for i, v in enumerate(value)}))
    return found


def _blocks(model: Any) -> list[str]:
    """The paths of the model's block lists: the ModuleLists its pipeline plan names
    (base_model_pp_plan: gpt-oss's `layers`, the stage boundaries transformers cuts at), else
    every ModuleList of ...Layer or ...Block modules (an encoder's, a decoder's; a speech
    encoder's convolutional feature extractor only where it has no other)."""
    plan = getattr(model.config, "base_model_pp_plan", None) or {}
    lists = [(path, m) for path, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
    planned = [p for p, _ in lists if any(p == key or p.endswith("." + key) for key in plan)]
    if planned:
        return planned
    ends = ("Layer", "Block", "DecoderLayer", "EncoderLayer")
    found = [(p, type(m[0]).__name__) for p, m in lists if type(m[0]).__name__.endswith(ends)]
    # a speech encoder's feature extractor (Wav2Vec2's, HuBERT's, WavLM's ...ConvLayer) runs before
    # its transformer blocks, as an embedding does: the blocks are those, where it has them
    beside = [p for p, name in found if not name.endswith("ConvLayer")]
    return beside or [p for p, _ in found]


def _forward(model: Any, given: Mapping[str, Any]) -> Any:
    """One training-time forward: no key/value cache (use_cache=False where the model takes it)."""
    extra = {"use_cache": False} if "use_cache" in forward_args(model) else {}
    return model(**given, **extra)


def tp_plan(config: Any) -> dict[str, str]:
    """The configuration's tensor-parallel plan (base_model_tp_plan; its text configuration's for a
    multimodal one), {} where it has none."""
    text = configs.text_of(config)
    plan = getattr(config, "base_model_tp_plan", None) or getattr(text, "base_model_tp_plan", None)
    return {str(k): str(v) for k, v in (plan or {}).items()}


def anchored(plan: Mapping[str, str], model: Any) -> dict[str, str]:
    """`plan`'s keys anchored at the module path the model's own tp_plan gives each (PaliGemma's
    `model.language_model.layers.*.self_attn.q_proj`), so that a tower's modules of the same names
    (SigLIP's q_proj) are not taken for the text model's; a key it does not prefix stays."""
    try:
        full = dict(getattr(model, "tp_plan", None) or {})
    except Exception:  # a model whose plan property does not build
        full = {}
    out = {}
    for key, name in plan.items():
        prefixed = [str(k) for k in full if k == key or str(k).endswith(f".{key}")]
        out[prefixed[0] if len(prefixed) == 1 else key] = name
    return out


def count_forward(model: Any, given: Mapping[str, Any]) -> int:
    """FlopCounterMode's own count of one forward on `given`: the independent check. Its module
    tracker hooks the backward of every module input that requires grad, which fails inside a
    custom autograd Function's forward (Reformer's reversible layers: "Expected gradient function
    to be set"); there the count is made with grad off, where the tracker hooks nothing and the
    total, which is all this returns, is the same ops' sum."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with FlopCounterMode(display=False) as counter, Values(given):  # grad on: its module tracker hooks it
            _forward(model, given)
    except AssertionError as error:
        if "gradient function" not in str(error):
            raise
        with FlopCounterMode(display=False) as counter, Values(given), torch.no_grad():
            _forward(model, given)
    return int(counter.get_total_flops())


def count_modules(model: Any, given: Mapping[str, Any]) -> dict[str, int]:
    """FlopCounterMode's count of one forward per module (its module tracker's names: the class,
    then the module path, e.g. LlavaForConditionalGeneration.model.vision_tower), every op of the
    module and the modules within it."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, Values(given):
        _forward(model, given)
    return {name: int(sum(ops.values())) for name, ops in counter.get_flop_counts().items()}


def count_step(model: Any, given: Mapping[str, Any]) -> tuple[int, int]:
    """FlopCounterMode's counts of one training step's forward and backward (the backward from the
    sum of the model's first output): the totals, which it gets right where its attribution of the
    backward to modules is off."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter, Values(given):
        out = _forward(model, given)
        forward = int(counter.get_total_flops())
        first = next(
            t
            for t in flat(out.to_tuple() if hasattr(out, "to_tuple") else out)
            if isinstance(t, torch.Tensor)
        )
        first.float().sum().backward()
    return forward, int(counter.get_total_flops()) - forward
