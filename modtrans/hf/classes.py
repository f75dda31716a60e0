"""transformers (imported here, and in inputs.py for its processors, alone): which configuration
and which model class a config.json builds. Importing this module reuses the models' import
structure transformers has just built (_reuse_models_structure, run before any model class
loads); library.py builds the class on the meta device and records its forward.

The class comes from the configuration's `architectures` (configs.choose), the Auto classes' tables
of its tasks (TASKS), or, with --trust-remote-code, the code its auto_map names (transformers'
dynamic modules, no download).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch  # buildable: the dtype names transformers' PretrainedConfig takes (getattr(torch, name))
import transformers

from modtrans.hf import configs

VERSION = transformers.__version__


REUSED: list[str] = []
"""The package whose import structure _reuse_models_structure gave (empty: none)."""


def _reuse_models_structure() -> None:
    """transformers reads the source of every model folder twice a process: `import transformers`
    builds the models' import structure (import_utils.define_import_structure on models/: ~570
    folders, ~1,700 files), and the first import of a model builds it again for the
    transformers.models package (models/__init__.py), create_import_structure_from_path's
    lru_cache holding 128 folders, all evicted by the first read. The package's structure is the
    top-level module's `models.` entries (their objects and missing backends): given back from
    them, the second read (0.4-0.5 s CPU, about a tenth of an uncached read) is not made. Left
    alone where the package is imported already or transformers keeps these otherwise."""
    import sys

    from transformers.utils import import_utils

    top = sys.modules.get("transformers")
    owners = getattr(top, "_class_to_module", None)
    missing = getattr(top, "_object_missing_backend", None)
    original = getattr(import_utils, "define_import_structure", None)
    if "transformers.models" in sys.modules or not isinstance(owners, dict) or not isinstance(missing, dict):
        return
    known_backends = getattr(import_utils, "BACKENDS_MAPPING", {})
    structure: dict[frozenset[str], dict[str, set[str]]] = {}
    for name, module in owners.items():
        if not isinstance(module, str) or not module.startswith("models."):
            continue
        backends = frozenset(missing.get(name, ()))
        if not all(isinstance(b, str) and b in known_backends for b in backends):
            return
        structure.setdefault(backends, {}).setdefault(module.removeprefix("models."), set()).add(name)
    package = os.path.join(os.path.dirname(transformers.__file__), "models", "__init__.py")
    if original is None or not structure or not os.path.isfile(package):
        return

    def define(module_path: Any, prefix: str | None = None) -> Any:
        if prefix is None and os.path.abspath(str(module_path)) == package:
            import_utils.define_import_structure = original
            REUSED.append(package)
            return structure
        return original(module_path, prefix)

    import_utils.define_import_structure = define


_reuse_models_structure()


def known(model_type: str) -> bool:
    """Whether transformers defines a configuration class for `model_type`."""
    return model_type in transformers.CONFIG_MAPPING


def config_of(data: Mapping[str, Any], remote: Path | None = None) -> Any:
    """The transformers configuration object of a config.json's dict: its model_type's class, or
    with `remote` (the folder of the code its auto_map names) the class that code defines, as
    AutoConfig.from_pretrained(trust_remote_code=True) takes it."""
    values = {k: v for k, v in buildable(data).items() if k != "model_type"}
    mapped = data.get("auto_map")
    named = mapped.get("AutoConfig") if remote is not None and isinstance(mapped, Mapping) else None
    if isinstance(named, str):
        return _remote(named, remote).from_dict(values)
    kind = data.get("model_type")
    if not isinstance(kind, str) or kind not in transformers.CONFIG_MAPPING:
        raise LookupError(kind)
    with quiet():  # its notes to the file's author (`torch_dtype` is deprecated): not the user's
        return transformers.CONFIG_MAPPING[kind].from_dict(values)


def buildable(data: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration dict the meta build reads: without its quantization_config (the model is
    built unquantized, configs.DEQUANTIZED; transformers' own reading of one calls .to_dict() on
    what is not a dict), its checkpoint dtype (`torch_dtype`, `dtype`) kept where it names a torch
    dtype ("torch.bfloat16" as "bfloat16") and dropped where it names none ("auto", a number:
    transformers' PretrainedConfig takes getattr(torch, value) and stops), its sub-configurations'
    alike. configs.warnings says what was dropped (M805)."""
    found: dict[str, Any] = {}
    for key, value in data.items():
        if key == "quantization_config":
            continue
        if key in ("torch_dtype", "dtype") and value is not None:
            name = str(value).removeprefix("torch.") if isinstance(value, str) else ""
            if not isinstance(getattr(torch, name, None), torch.dtype):
                continue
            value = name
        found[key] = buildable(value) if isinstance(value, Mapping) else value
    return found


def unread(data: Mapping[str, Any]) -> list[str]:
    """configs.unread of a config.json's dict against its model_type's class, generation settings
    (GenerationConfig's) and PretrainedConfig's own fields aside."""
    ignored = {*transformers.GenerationConfig().to_dict(), *transformers.PretrainedConfig().to_dict()}
    ignored |= {"torch_dtype", "auto_map", "quantization_config", "_commit_hash", "_name_or_path"}
    return configs.unread(data, config_of(data), ignored)


def _remote(reference: str, folder: Any) -> Any:
    """The class `reference` (module.Class) names in `folder`'s code (transformers' dynamic
    modules: copied to its modules cache and imported; no download)."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    with quiet():
        return get_class_from_dynamic_module(reference, str(folder), local_files_only=True)


TASKS = (
    ("causal-lm", "AutoModelForCausalLM"),
    ("masked-lm", "AutoModelForMaskedLM"),
    ("seq2seq", "AutoModelForSeq2SeqLM"),
    ("speech-seq2seq", "AutoModelForSpeechSeq2Seq"),
    ("ctc", "AutoModelForCTC"),
    ("image-classification", "AutoModelForImageClassification"),
)
"""The tasks a configuration's model is built for when its `architectures` names no class
transformers has, in this order (the first Auto class that knows its model_type)."""

AUTO_MAPS = {
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "seq2seq": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "speech-seq2seq": "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "ctc": "MODEL_FOR_CTC_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
}


def classes(task: str) -> dict[str, str]:
    """model_type -> the class transformers builds for `task` (its Auto class's table)."""
    from transformers.models.auto import modeling_auto

    return dict(getattr(modeling_auto, AUTO_MAPS[task]))


def named_class(name: str) -> Any:
    """The class transformers exports under `name` (None: none)."""
    cls = getattr(transformers, name, None)
    return cls if isinstance(cls, type) else None


def default_config(model_type: str) -> Any:
    """The configuration class's defaults for `model_type` (AutoConfig.for_model)."""
    return transformers.AutoConfig.for_model(model_type)


def model_class(config: Any, remote: Path | None = None) -> Any:
    """The class to build: with `remote`, the code's class its auto_map names for the first task
    it names (TASKS' Auto classes, then AutoModel); else the one configs.choose takes of its
    `architectures`, its tasks' classes (TASKS) and its base class (AutoModel's)."""
    mapped = getattr(config, "auto_map", None) or {}
    if remote is not None and mapped:
        for auto in (*(name for _, name in TASKS), "AutoModel"):
            if isinstance(mapped.get(auto), str):
                return _remote(mapped[auto], remote)
    tasks: list[str] = []
    for task, _ in TASKS:  # some tables list several classes
        found = classes(task).get(config.model_type) or ()
        tasks += [found] if isinstance(found, str) else list(found)
    listed = getattr(config, "architectures", None) or ()
    name = configs.choose(listed, tasks, _base(config.model_type), lambda n: named_class(n) is not None)
    if name is None:
        raise LookupError(f"transformers {VERSION} has no class for it")
    return named_class(name)


def _base(model_type: str) -> str | None:
    """The model type's base class (AutoModel's: LayoutLMv3Model, whose task classes need boxes)."""
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_MAPPING_NAMES.get(model_type)
    return name if isinstance(name, str) else None


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """transformers' log at errors only inside the block: its notes to a file's author (`torch_dtype`
    is deprecated) are not the user's."""
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(level)
