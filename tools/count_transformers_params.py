"""Count the parameters transformers builds for each configuration in fixtures/configs, once, to
record them as the expected values in fixtures/configs/EXPECTED.json (tests/test_families.py
compares ModTrans's counts with them; the tests need neither torch nor transformers).

Each model is built on the meta device (no weights, no memory) by the class that reads it: the
vision-language class its `architectures` names where that is an image-text-to-text class
(LlavaForConditionalGeneration, Qwen2VLForConditionalGeneration,
Qwen2_5_VLForConditionalGeneration: what AutoModelForImageTextToText builds for those model
types), AutoModelForCausalLM.from_config otherwise; its parameters() are counted, a tied output
layer once, and the class is recorded beside the count.
`RefinedWebModel`, the model_type Falcon's first configurations had, is read as `falcon` (what
transformers' FalconConfig reads them as).

Run in an environment of its own (torch 2.13.0+cpu and transformers 5.24.0 were used):
    pip install torch transformers && python tools/count_transformers_params.py
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import torch
import transformers
from transformers import CONFIG_MAPPING, AutoModelForCausalLM, AutoModelForImageTextToText
from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
RENAMED = {"RefinedWebModel": "falcon"}
KEYS = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers"}


def builder(family: str, architectures: object) -> tuple[str, Callable[[object], torch.nn.Module]]:
    """(its name, what builds it from a configuration) for a model of `family`: the
    image-text-to-text class its architectures name, when transformers maps the family to one
    (AutoModelForImageTextToText when they name none); AutoModelForCausalLM otherwise."""
    image_text = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(family)
    if image_text is None:
        return "AutoModelForCausalLM", AutoModelForCausalLM.from_config
    if isinstance(architectures, list) and image_text in architectures:
        return image_text, getattr(transformers, image_text)
    return "AutoModelForImageTextToText", AutoModelForImageTextToText.from_config


PARTS = (
    ("projector", ("model.multi_modal_projector.", "model.visual.merger.")),
    ("vision", ("model.vision_tower.", "model.visual.")),
    ("language", ("model.language_model.", "lm_head.")),
)
"""A vision-language model's parts by module path (transformers 5's names), the first that matches:
the projector or merger, the rest of the vision tower, the language model and its head."""


def parts(model: torch.nn.Module) -> dict[str, int]:
    """A vision-language model's parameters per part (PARTS); {} for a model without a tower."""
    found = dict.fromkeys((name for name, _ in PARTS), 0)
    for key, p in model.named_parameters():
        part = next((name for name, prefixes in PARTS if key.startswith(prefixes)), None)
        if part is None:
            return {}
        found[part] += p.numel()
    return found if found["vision"] else {}


def count(config: dict[str, object]) -> tuple[int, int, str, dict[str, int]]:
    """(all parameters, the embedding table's, the class that built them, the parameters of each
    part of a vision-language model) of the model the configuration describes."""
    family = str(config["model_type"])
    family = RENAMED.get(family, family)
    values = {KEYS.get(k, k): v for k, v in config.items() if k not in ("model_type", "architectures")}
    built = CONFIG_MAPPING[family](**values)
    name, make = builder(family, config.get("architectures"))
    with torch.device("meta"):
        model = make(built)
    total = sum(p.numel() for p in model.parameters())
    return total, model.get_input_embeddings().weight.numel(), name, parts(model)


def main() -> None:
    expected = {
        "made_with": f"torch {version('torch')}, transformers {version('transformers')}",
        "counts": {},
    }
    for path in sorted(HERE.glob("*.json")):
        if path.name == "EXPECTED.json":
            continue
        total, embedding, name, found = count(json.loads(path.read_text()))
        entry = {"parameters": total, "embedding": embedding, "class": name}
        expected["counts"][path.stem] = {**entry, **({"parts": found} if found else {})}
        print(f"{path.stem:<28} {total:>16,}  {name}")
    (HERE / "EXPECTED.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
