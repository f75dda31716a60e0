"""Count the parameters transformers builds for each configuration in fixtures/configs, once, to
record them as the expected values in fixtures/configs/EXPECTED.json (tests/test_families.py
compares ModTrans's counts with them; the tests need neither torch nor transformers).

Each model is built on the meta device (no weights, no memory) by the class its family maps to
(AutoModelForCausalLM.from_config); its parameters() are counted, a tied output layer once.
`RefinedWebModel`, the model_type Falcon's first configurations had, is read as `falcon` (what
transformers' FalconConfig reads them as).

Run in an environment of its own (torch 2.13.0+cpu and transformers 5.24.0 were used):
    pip install torch transformers && python tools/count_transformers_params.py
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import torch
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
RENAMED = {"RefinedWebModel": "falcon"}
KEYS = {"n_head": "num_attention_heads", "n_layer": "num_hidden_layers"}


def count(config: dict[str, object]) -> tuple[int, int]:
    """(all parameters, the embedding table's) of the model the configuration describes."""
    family = str(config["model_type"])
    family = RENAMED.get(family, family)
    values = {KEYS.get(k, k): v for k, v in config.items() if k not in ("model_type", "architectures")}
    built = CONFIG_MAPPING[family](**values)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(built)
    total = sum(p.numel() for p in model.parameters())
    return total, model.get_input_embeddings().weight.numel()


def main() -> None:
    expected = {
        "made_with": f"torch {version('torch')}, transformers {version('transformers')}",
        "counts": {},
    }
    for path in sorted(HERE.glob("*.json")):
        if path.name == "EXPECTED.json":
            continue
        total, embedding = count(json.loads(path.read_text()))
        expected["counts"][path.stem] = {"parameters": total, "embedding": embedding}
        print(f"{path.stem:<28} {total:>16,}")
    (HERE / "EXPECTED.json").write_text(json.dumps(expected, indent=1) + "\n")


if __name__ == "__main__":
    main()
