"""Count the parameters transformers builds for each configuration in fixtures/configs, once, to
record them as the expected values in fixtures/configs/EXPECTED.json (tests/test_families.py and
tests/test_t5.py compare ModTrans's counts with them; the tests need neither torch nor
transformers).

Each model is built on the meta device (no weights, no memory) by the class its family maps to
(AutoModelForCausalLM.from_config; an encoder-decoder, T5's family, AutoModelForSeq2SeqLM: its
T5ForConditionalGeneration); its parameters() are counted, a tied output layer once.
`RefinedWebModel`, the model_type Falcon's first configurations had, is read as `falcon` (what
transformers' FalconConfig reads them as). Each entry records the class and the versions that
made it (`model_class`, `made_with`).

Run in an environment of its own:
    pip install torch transformers && python tools/count_transformers_params.py [NAME ...]
NAMEs (file stems) update only those entries, keeping the others. The decoder families' counts were
made with torch 2.13.0+cpu and transformers 5.24.0. T5's with transformers 4.57.6 (`pip install
'transformers<5'`): transformers 5 ties T5's head whatever the configuration says
(configuration_t5.py: "in fact we tie weights always"), where a T5 v1.1 checkpoint has an lm_head of
its own; `--check NAME ...` prints this environment's counts beside the recorded ones, writing
nothing, and `--record-as KEY` stores them in each entry under KEY (the transformers 5 cross-check,
fixtures/configs/MANIFEST.md).
"""

from __future__ import annotations

import argparse
import json
from importlib.metadata import version
from pathlib import Path

import torch
from transformers import CONFIG_MAPPING, AutoModelForCausalLM, AutoModelForSeq2SeqLM

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
RENAMED = {"RefinedWebModel": "falcon"}
KEYS = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers"}
SEQ2SEQ = frozenset({"t5", "mt5", "umt5"})


def count(config: dict[str, object]) -> tuple[int, int, str]:
    """(all parameters, the embedding table's, the class built) of the model the configuration
    describes."""
    family = str(config["model_type"])
    family = RENAMED.get(family, family)
    values = {KEYS.get(k, k): v for k, v in config.items() if k not in ("model_type", "architectures")}
    built = CONFIG_MAPPING[family](**values)
    auto = AutoModelForSeq2SeqLM if family in SEQ2SEQ else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(built)
    total = sum(p.numel() for p in model.parameters())
    return total, model.get_input_embeddings().weight.numel(), type(model).__name__


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
        total, embedding, model_class = count(json.loads(path.read_text()))
        recorded = expected["counts"].get(path.stem, {}).get("parameters")
        print(f"{path.stem:<28} {total:>16,}  ({model_class}, {made_with}; recorded {recorded or 0:,})")
        if args.check:
            continue
        if args.record_as:
            expected["counts"][path.stem][args.record_as] = {"parameters": total, "made_with": made_with}
            continue
        expected["counts"][path.stem] = {
            "parameters": total,
            "embedding": embedding,
            "model_class": model_class,
            "made_with": made_with,
        }
    if not args.check:
        expected["made_with"] = "per entry (made_with)"
        target.write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
