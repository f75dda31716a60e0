"""Mixtures of experts in an ONNX export: routers and experts found by their module paths, top-k
from the graph's TopK, expert work sized by balanced routing.

Exporters keep the module path in node names (transformers: `/model/layers.3/block_sparse_moe/
experts.5/w1/MatMul`, `.../mlp/experts.5/gate_proj/...`), which graph.readable turns into layer names.
A MoE block is a module holding `experts.<e>.` layers; its router is its linear layer named `gate`
or `router` (`...block_sparse_moe.gate`, `...mlp.gate`, `...router.classifier`); top-k is the K
operand of a TopK under the block (constant in every export seen). An expert's GEMM becomes the one
of the tokens balanced routing sends it, T·k/E rows of the router's T, when the export computes it
on every token (dense masking) or on a dynamic subset whose size shape inference cannot know: the
`dimension still unknown` warnings of those tensors are then answered and dropped.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence

from modtrans import dtypes
from modtrans.diagnostics import Diagnostic, diagnostic
from modtrans.ir import flops
from modtrans.ir.document import Activation, Gemm, Kind, Layer, Moe

_EXPERT = re.compile(r"^(?P<block>.+)\.experts\.(?P<index>\d+)\.")


def mark(
    layers: Sequence[Layer], top_k: Mapping[str, int], found: list[Diagnostic], path: str | None
) -> tuple[list[Layer], list[Diagnostic]]:
    blocks: dict[str, set[int]] = {}
    for x in layers:
        m = _EXPERT.match(x.name)
        if m:
            blocks.setdefault(m["block"], set()).add(int(m["index"]))
    if not blocks:
        return list(layers), found
    out = list(layers)
    resolved: set[str] = set()
    for block, experts in blocks.items():
        count = len(experts)
        router = next((i for i, x in enumerate(out) if _is_router(x, block)), None)
        k = next((v for name, v in top_k.items() if name.startswith(block)), None)
        if k is None or not 1 <= k <= count:
            found.append(
                diagnostic(
                    "X505",
                    f"mixture of experts {block}: no TopK with a constant K in [1, {count}] "
                    "under it; top-1 assumed",
                    path=path,
                )
            )
            k = 1
        tokens = None
        if router is not None:
            r = out[router]
            out[router] = dataclasses.replace(r, moe=Moe(count, k))
            tokens = r.gemm.m if r.gemm is not None else None
        rows = math.ceil(tokens * k / count) if tokens else None
        for i, x in enumerate(out):
            m = _EXPERT.match(x.name)
            if not m or m["block"] != block:
                continue
            resized = _routed(x, rows, tokens)
            out[i] = dataclasses.replace(resized, moe=Moe(count, k, int(m["index"])))
            if resized is not x:
                resolved.update(a.name for a in (*x.inputs, *x.outputs))
    kept = [
        d for d in found if not (d.code == "X504" and any(f"tensor {n!r}" in d.message for n in resolved))
    ]
    return out, kept


def _is_router(x: Layer, block: str) -> bool:
    if x.kind is not Kind.LINEAR or not x.name.startswith(block + "."):
        return False
    rest = x.name[len(block) + 1 :]
    return rest.split(".")[0] in ("gate", "router") and ".experts." not in x.name


def _routed(x: Layer, rows: int | None, tokens: int | None) -> Layer:
    """The expert layer on `rows` tokens, when its export computes it on all `tokens` or on an
    unknown number of them."""
    if rows is None:
        return x
    if x.gemm is not None and x.gemm.m not in (tokens,) and x.outputs and x.outputs[0].bytes is not None:
        return x  # the export already gives it a token count of its own
    width = [_last(a) for a in x.inputs] + [_last(a) for a in x.outputs]
    if x.kind is Kind.LINEAR:
        k_dim, n_dim = _gemm_dims(x)
        if k_dim is None or n_dim is None:
            return x
        bias = any(p.role.value == "bias" for p in x.params)
        extra = rows * n_dim if bias else 0
        fl = flops.gemm(rows * k_dim * n_dim, extra, extra)
        gemm = Gemm(rows, k_dim, n_dim)
    else:
        features = width[-1]
        if features is None:
            return x
        fl = flops.elementwise(rows * features, with_params=bool(x.params))
        gemm = None
    inputs = tuple(_rows(a, rows) for a in x.inputs)
    outputs = tuple(_rows(a, rows) for a in x.outputs)
    return dataclasses.replace(x, flops=fl, gemm=gemm, inputs=inputs, outputs=outputs)


def _gemm_dims(x: Layer) -> tuple[int | None, int | None]:
    if x.gemm is not None:
        return x.gemm.k, x.gemm.n
    weight = next((p for p in x.params if p.role.value == "weight" and len(p.shape) == 2), None)
    if weight is None:
        return None, None
    return weight.shape[0], weight.shape[1]  # MatMul's [K, N]


def _last(a: Activation) -> int | None:
    if not a.shape or not isinstance(a.shape[-1], int):
        return None
    return a.shape[-1]


def _rows(a: Activation, rows: int) -> Activation:
    last = _last(a)
    if last is None:
        return a
    return Activation(a.name, (rows, last), a.dtype, rows * last * dtypes.width(a.dtype))
