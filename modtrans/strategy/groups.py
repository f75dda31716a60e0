"""Which IR layers become workload layers, and what each costs (strategy, step 1).

`group` decides which IR layers become workload layers under a parameter convention and folds the
compute of the others into them; parallel.py then fills each phase's collective.

Parameter conventions (`--params`):

  weights    a workload layer per conv / linear / embedding / recurrent layer; its size is the
             weight tensor alone (no bias, no normalisation). The convention of ASTRA-sim's
             reference ResNet-50 (54 layers, fp32 weight bytes) and of the ModTrans paper's tables.
  trainable  a workload layer per IR layer with trainable parameters (conv, linear, normalisation,
             embedding ...); its size is every trainable tensor it owns (weights, biases, norm
             scales and shifts; not BatchNorm's running statistics), so a data-parallel all-reduce
             moves what a framework's gradient all-reduce moves. The default.

Compute of parameter-free layers (activations, pooling, residual adds, softmax, attention score
products) is added to the workload layer before them (the first one's to the layer after), so the
total compute of the model is kept. A tensor shared by two layers (tied embeddings) is counted once,
by the first.

First layer's input gradient: a layer whose inputs are all model inputs (the image) or integer
tensors (token ids) needs no input gradient in training, so its own input-gradient time is 0 (the
layers folded into it keep theirs: the gradient still flows back through them to its weights).
The astra-sim-reference cost model keeps it, as ASTRA-sim's reference files do (conv1's 12864).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from modtrans.cost import CostModel, PhaseTimes
from modtrans.ir.document import Kind, ModelIR, Role, needs_input_grad
from modtrans.ir.document import Layer as IRLayer
from modtrans.strategy.frameworks import gradient_bytes


class Params(enum.StrEnum):
    WEIGHTS = "weights"
    TRAINABLE = "trainable"


@dataclass(frozen=True)
class Group:
    """One workload layer: the IR layer that owns it and those whose compute folds into it."""

    owner: IRLayer
    folded: tuple[IRLayer, ...]
    comm_bytes: int  # its gradients as the data-parallel reduction moves them (layer_bytes)
    param_bytes: int = 0  # its parameters in their own dtype (what a parameter all-gather moves)
    # the owner's biases' part of comm_bytes and of param_bytes: whole on every rank of a
    # row-parallel unit (share.whole), so the unit's share of the rest alone is divided (Unit.share)
    bias_comm_bytes: int = 0
    bias_param_bytes: int = 0

    @property
    def members(self) -> tuple[IRLayer, ...]:
        return (self.owner, *self.folded)


def layer_bytes(
    layer: IRLayer,
    params: Params,
    dtype_bytes: int | None,
    *,
    gradients: bool = True,
    embedding: int | None = None,
    role: Role | None = None,
) -> int:
    """Bytes of the layer's parameters under a convention (counted, i.e. not tied, tensors): as
    gradients in the data-parallel reduction (`dtype_bytes` per element, or the framework's dtype:
    frameworks.py, fp32 for bf16 parameters; an embedding's `embedding` where given: the
    framework's embedding_grad_width), or (`gradients` False) as the parameters are held; those
    of one `role` alone where given."""
    if embedding is not None and layer.kind is Kind.EMBEDDING:
        dtype_bytes = embedding
    total = 0
    for p in layer.params:
        if not p.counted or not p.trainable or (role is not None and p.role is not role):
            continue
        if params is Params.WEIGHTS and p.role is not Role.WEIGHT:
            continue
        if not gradients:
            total += p.bytes
        elif dtype_bytes:
            total += p.elements * dtype_bytes
        else:
            total += gradient_bytes(p.elements, p.dtype, p.bytes)
    return total


def _owns(layer: IRLayer, params: Params) -> bool:
    if params is Params.WEIGHTS:
        return layer.kind.has_weights and any(p.role is Role.WEIGHT for p in layer.params)
    return any(p.trainable for p in layer.params)


def folds(groups: Sequence[Group]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The groups that fold layers in: (owner, the folded layers' names), as Plan.folds holds them."""
    return tuple((g.owner.name, tuple(x.name for x in g.folded)) for g in groups if g.folded)


def group(
    ir: ModelIR, params: Params, dtype_bytes: int | None = None, embedding_bytes: int | None = None
) -> list[Group]:
    owners: list[IRLayer] = []
    folded: list[list[IRLayer]] = []
    leading: list[IRLayer] = []
    for layer in ir.layers:
        if _owns(layer, params):
            owners.append(layer)
            folded.append([])
        elif folded:
            folded[-1].append(layer)
        else:
            leading.append(layer)
    if owners:
        folded[0] = leading + folded[0]
    return [
        Group(
            owner,
            tuple(extra),
            layer_bytes(owner, params, dtype_bytes, embedding=embedding_bytes),
            layer_bytes(owner, params, None, gradients=False),
            layer_bytes(owner, params, dtype_bytes, embedding=embedding_bytes, role=Role.BIAS),
            layer_bytes(owner, params, None, gradients=False, role=Role.BIAS),
        )
        for owner, extra in zip(owners, folded, strict=True)
    ]


def _sum(times: Sequence[PhaseTimes]) -> PhaseTimes:
    return PhaseTimes(
        sum(t.forward for t in times),
        sum(t.input_grad for t in times),
        sum(t.weight_grad for t in times),
        sum(t.update for t in times),
    )


def group_times(g: Group, cost: CostModel, model_inputs: frozenset[str]) -> PhaseTimes:
    """The unit's times: its layers' summed, none of a layer's input gradient where autograd
    computes none (needs_input_grad: the first convolution's on the image, a Cast of the mask),
    but the owner's under a cost model that writes the first layer's (first_input_grad: ASTRA-sim's
    reference convention), as `costed` counts the FLOPs."""
    times = []
    for x in g.members:
        t = cost.times(x)
        if not needs_input_grad(x, model_inputs) and not (x is g.owner and cost.first_input_grad):
            t = PhaseTimes(t.forward, 0, t.weight_grad, t.update)
        times.append(t)
    return _sum(times)
