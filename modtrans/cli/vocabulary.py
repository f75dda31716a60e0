"""The command line's option vocabulary: the help group each option is listed under, and the
spellings other tools use for our options, so that an unknown option is answered by meaning
(`--tensor-model-parallel-size` is `--tp`) and an option another command takes names that command.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from modtrans.table import GROUPS, OPTIONS, OUTPUT, SWEEP_OWN

PANELS: Mapping[str, tuple[str, ...]] = {
    group: tuple(row.name for row in OPTIONS if row.group == group) for group in GROUPS
}
"""Help groups of the commands with many options (translate, diff), by parameter name, as the
option table (modtrans/table.py) groups its rows; an option in none is listed under Options, last."""

PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}

OWN_PANELS: Mapping[str, Mapping[str, tuple[str, ...]]] = {
    "translate": {
        OUTPUT: tuple(row.name for row in OPTIONS if row.group == OUTPUT),
    },
    "sweep": {
        group: tuple(row.name for row in SWEEP_OWN if row.group == group)
        for group in dict.fromkeys(row.group for row in SWEEP_OWN)
    },
    "diff": {
        "Comparison": ("fields", "rtol", "atol", "ignore_order", "ignore_names", "ignore_header", "like"),
        "Report": ("fmt", "max_rows", "no_color"),
    },
}
"""A command's own help groups, by command and parameter name: listed before the shared ones
(PANELS), which say how a model side is translated. Its own, as their names (--like, --format)
mean other things to other commands."""

SYNONYMS: Mapping[str, str] = {
    # Megatron-LM's own (megatron/training/arguments.py)
    "--tensor-model-parallel-size": "--tp",
    "--pipeline-model-parallel-size": "--pp",
    "--context-parallel-size": "--cp",
    "--expert-model-parallel-size": "--ep",
    "--expert-tensor-parallel-size": "--etp",
    "--sequence-parallel": "--sp",
    "--micro-batch-size": "--micro-batch",
    "--global-batch-size": "--global-batch",
    "--seq-length": "--seq-len",
    "--virtual-pipeline-model-parallel-size": "--vpp",
    "--num-layers-per-virtual-pipeline-stage": "--vpp",
    "--recompute-granularity": "--recompute",
    "--recompute-activations": "--recompute",
    "--use-distributed-optimizer": "--zero 1",
    # DeepSpeed's configuration keys and Megatron-DeepSpeed / GPT-NeoX arguments
    "--zero-stage": "--zero",
    "--train-micro-batch-size-per-gpu": "--micro-batch",
    "--train-batch-size": "--global-batch",
    "--pipe-parallel-size": "--pp",
    "--ds-sequence-parallel-size": "--cp",
    "--deepspeed": "--framework deepspeed",
    "--fsdp": "--framework fsdp",
    # plain words
    "--tensor-parallel": "--tp",
    "--tensor-parallelism": "--tp",
    "--tensor-parallel-size": "--tp",
    "--pipeline-parallel": "--pp",
    "--pipeline-parallelism": "--pp",
    "--pipeline-parallel-size": "--pp",
    "--data-parallel": "--dp",
    "--data-parallelism": "--dp",
    "--data-parallel-size": "--dp",
    "--expert-parallel": "--ep",
    "--expert-parallel-size": "--ep",
    "--context-parallel": "--cp",
    "--sequence-parallelism": "--sp",
    "--virtual-pipeline": "--vpp",
    "--interleave": "--vpp",
    "--pipeline-schedule": "--schedule",
    "--mbs": "--micro-batch",
    "--gbs": "--global-batch",
    "--sequence-length": "--seq-len",
    "--seqlen": "--seq-len",
    "--batch-size": "--batch",
    "--gpus": "--npus",
    "--num-gpus": "--npus",
    "--world-size": "--npus",
    "--nproc-per-node": "--npus",
    "--ranks": "--npus",
    "--output-dir": "--output",
    "--out": "--output",
    "--to": "--format",
}
"""Other tools' spellings of our options (with a value where theirs is a flag), underscores read
as hyphens and case ignored."""


def suggestion(
    given: str, command: str, here: Iterable[str], elsewhere: Mapping[str, Iterable[str]]
) -> tuple[str, bool]:
    """What to say of `command`'s unknown option `given`, and whether its --help helps: `here` is
    the command's own option names, `elsewhere` the other commands' (by name). The option this one
    means, by its spelling or by another tool's name for it; the commands that take it where this
    one has none (its --help would not list it); else the closest spellings; "" when none is near."""
    own = set(here)
    spelled = "--" + given.lstrip("-").replace("_", "-").lower() if given.startswith("--") else given
    meant = spelled if spelled in own else SYNONYMS.get(spelled, spelled)
    option = meant.split()[0]
    if option in own:
        return (f"No such option: {given}: did you mean {meant}?" if meant != given else "", True)
    takers = [f"`{name}`" for name, names in elsewhere.items() if option in set(names)]
    if takers:
        also = "" if option == given else f" ({given} is {option})"
        named = takers[0] if len(takers) == 1 else f"{', '.join(takers[:-1])} and {takers[-1]}"
        return f"`{command}` takes no {option}{also}: {named} take{'s' * (len(takers) == 1)} it", False
    close = difflib.get_close_matches(spelled, sorted(own - {"--help"}), n=3, cutoff=0.7)
    return (f"No such option: {given}" + (f": did you mean {' or '.join(close)}?" if close else ""), True)
