"""Count the parameters transformers builds for each configuration in fixtures/configs, once, to
record them as the expected values in fixtures/configs/EXPECTED.json (tests/test_families.py,
tests/test_t5.py and tests/test_vision.py compare ModTrans's counts with them; the tests need
neither torch nor transformers).

Each model is built on the meta device (no weights, no memory) by the class that reads it: an
encoder-decoder (T5's family) by AutoModelForSeq2SeqLM (T5ForConditionalGeneration); a
vision-language model by the image-text-to-text class its `architectures` names
(LlavaForConditionalGeneration, LlavaNextForConditionalGeneration, Gemma3ForConditionalGeneration,
Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration: what
AutoModelForImageTextToText builds for those model types),
with its parameters per part; any other by AutoModelForCausalLM.from_config. Its parameters() are
counted, a tied output layer once. `RefinedWebModel`, the model_type Falcon's first configurations
had, is read as `falcon` (what transformers' FalconConfig reads them as). Each entry records the
class built and the versions that made it (`model_class`, `made_with`).

Run in an environment of its own:
    pip install torch transformers && python tools/count_transformers_params.py [NAME ...]
NAMEs (file stems) update only those entries, keeping the others. The decoder and vision-language
families' counts were made with torch 2.13.0+cpu and transformers 5.24.0. T5's with transformers
4.57.6 (`pip install 'transformers<5'`): transformers 5 ties T5's head whatever the configuration
says (configuration_t5.py: "in fact we tie weights always"), where a T5 v1.1 checkpoint has an
lm_head of its own; `--check NAME ...` prints this environment's counts beside the recorded ones,
writing nothing, and `--record-as KEY` stores them in each entry under KEY (the transformers 5
cross-check, fixtures/configs/MANIFEST.md).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import torch
import transformers
from transformers import CONFIG_MAPPING, AutoModelForCausalLM, AutoModelForSeq2SeqLM

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
RENAMED = {"RefinedWebModel": "falcon"}
KEYS = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers"}
SEQ2SEQ = frozenset({"t5", "mt5", "umt5"})
PARTS = (
    ("projector", ("model.multi_modal_projector.", "model.visual.merger.", "model.image_newline")),
    ("vision", ("model.vision_tower.", "model.visual.")),
    ("language", ("model.language_model.", "lm_head.")),
)
"""A vision-language model's parts by module path (transformers 5's names), the first that matches:
the projector or merger (with LLaVA-NeXT's image_newline, the learned row end its projected
features get), the rest of the vision tower, the language model and its head."""


def builder(family: str, architectures: object) -> Callable[[object], torch.nn.Module]:
    """What builds a model of `family` from its configuration: AutoModelForSeq2SeqLM for an
    encoder-decoder; the image-text-to-text class its architectures name, when transformers maps
    the family to one (AutoModelForImageTextToText when they name none); else AutoModelForCausalLM."""
    if family in SEQ2SEQ:
        return AutoModelForSeq2SeqLM.from_config
    try:  # transformers 5 (the vision-language families' counts)
        from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    except ImportError:
        return AutoModelForCausalLM.from_config
    image_text = MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.get(family)
    if image_text is None:
        return AutoModelForCausalLM.from_config
    if isinstance(architectures, list) and image_text in architectures:
        return getattr(transformers, image_text)  # type: ignore[no-any-return]
    return transformers.AutoModelForImageTextToText.from_config  # type: ignore[no-any-return]


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
    """(all parameters, the embedding table's, the class built, the parameters of each part of a
    vision-language model) of the model the configuration describes."""
    family = str(config["model_type"])
    family = RENAMED.get(family, family)
    values = {KEYS.get(k, k): v for k, v in config.items() if k not in ("model_type", "architectures")}
    built = CONFIG_MAPPING[family](**values)
    with torch.device("meta"):
        model = builder(family, config.get("architectures"))(built)
    total = sum(p.numel() for p in model.parameters())
    return total, model.get_input_embeddings().weight.numel(), type(model).__name__, parts(model)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="file stems to (re)count (default: every file)")
    parser.add_argument("--check", action="store_true", help="print the counts beside the recorded ones")
    parser.add_argument("--record-as", help="store the counts under this key of each entry instead")
    args = parser.parse_args()
    made_with = f"torch {version('torch')}, transformers {version('transformers')}"
    target = HERE / "EXPECTED.json"
    expected = json.loads(target.read_text()) if target.exists() else {"made_with": made_with, "counts": {}}
    for entry in expected["counts"].values():  # the counts made before entries said who made them
        entry.setdefault("made_with", expected["made_with"])
    paths = [p for p in sorted(HERE.glob("*.json")) if p.name != "EXPECTED.json"]
    for path in (p for p in paths if not args.names or p.stem in args.names):
        total, embedding, model_class, found = count(json.loads(path.read_text()))
        recorded = expected["counts"].get(path.stem, {}).get("parameters")
        print(f"{path.stem:<28} {total:>16,}  ({model_class}, {made_with}; recorded {recorded or 0:,})")
        if args.check:
            continue
        if args.record_as:
            expected["counts"][path.stem][args.record_as] = {"parameters": total, "made_with": made_with}
            continue
        entry = {
            "parameters": total,
            "embedding": embedding,
            "model_class": model_class,
            "made_with": made_with,
        }
        expected["counts"][path.stem] = {**entry, **({"parts": found} if found else {})}
    if not args.check:
        expected["made_with"] = "per entry (made_with)"
        expected["counts"] = dict(sorted(expected["counts"].items()))
        target.write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
