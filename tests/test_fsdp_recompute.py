"""Full recomputation under FSDP runs on the parameters the backward gathered: no gather of its
own (strategy/program.py, Rerun.regathers; estimate/units.py, the fast tier's rerun links).

torchtitan wraps each block in checkpoint_wrapper before fully_shard (torchtitan/parallelisms/
parallelize_llama.py at 9dec370: apply_ac, then apply_fsdp), so FSDP2's hooks sit outside the
checkpointed forward; its pre-backward hook unshards the block, and FSDP2's _pre_forward skips its
unshard in TrainingState.PRE_BACKWARD ("When composing with module-hook-based activation
checkpointing, the pre-backward hook is responsible for the unshard": torch/distributed/fsdp/
_fully_shard/_fsdp_state.py, torch 2.13). FSDP1's apply_activation_checkpointing wraps the modules
inside its units the same way (llm-foundry, fms-fsdp). A block is gathered twice an iteration:
before its forward and before its backward. The activations' gathers (sequence parallelism's, over
the tensor ranks) run again with the forward they feed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from modtrans.comm import CommType
from modtrans.plan.model import Collective, Purpose
from modtrans.strategy.frameworks import Framework
from modtrans.strategy.llm import Layout, Recompute
from tests import plans
from tests.plans import TOY, config


def _gathers(model: str | Path, layout: Layout) -> Counter[tuple[str, bool]]:
    """Rank 0's all-gathers by step, and whether over the data ranks (parameters)."""
    made = plans.plan(model, layout, (1, 64))
    return Counter(
        (op.step.name, Purpose.DATA in op.over)
        for op in made.programs[0]
        if isinstance(op, Collective) and op.comm is CommType.ALLGATHER
    )


@pytest.mark.parametrize("framework", [Framework.TORCHTITAN, Framework.FSDP, Framework.LLM_FOUNDRY])
def test_fsdps_recomputation_gathers_no_parameters(tmp_path: Path, framework: Framework) -> None:
    """Every unit of the toy Llama (two blocks, the root; a block is 9 units) gathered before its
    forward and its backward, none in the recomputation; under torchtitan the last block and the
    root's group not before the backward (apply_fsdp at 9dec370: the last block's
    reshard_after_forward False; FSDP2's root never resharded after the forward), the root's
    group one gather (fsdp.rooted)."""
    layout = Layout(npus=8, zero=3, framework=framework, recompute=Recompute.FULL)
    found = _gathers(config(tmp_path, TOY), layout)
    assert found[("RECOMPUTE", True)] == 0
    if framework is Framework.TORCHTITAN:
        assert (found[("FWD", True)], found[("INPUT_GRAD", True)]) == (2 * 9 + 1, 9)
    else:
        assert found[("FWD", True)] == found[("INPUT_GRAD", True)] == 2 * 9 + 3


def test_deepspeeds_and_the_activations_gathers_run_again(tmp_path: Path) -> None:
    """DeepSpeed's ZeRO-3 (left as it was: its hooks fire in the recomputed forward; GPT-2, whose
    weights are past its persistence threshold) and Megatron's sequence-parallel gathers over the
    tensor ranks still run with the rerun forward."""
    ds = Layout(npus=8, zero=3, framework=Framework.DEEPSPEED, recompute=Recompute.FULL)
    assert _gathers("gpt2", ds)[("RECOMPUTE", True)] > 0
    sp = Layout(npus=8, tp=2, sp=True, recompute=Recompute.FULL)
    assert _gathers(config(tmp_path, TOY), sp)[("RECOMPUTE", False)] > 0
