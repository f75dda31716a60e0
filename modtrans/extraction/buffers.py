"""The constant tensors an exporter says are not trained: a module's buffers and constants.

PyTorch's torch.export-based ONNX exporter (torch.onnx.export(dynamo=True)) writes each lifted
input's torch.export InputKind on the value_info of its initializer, in metadata_props under
KIND: PARAMETER, BUFFER or CONSTANT_TENSOR (torch/onnx/_internal/exporter/_core.py,
_exported_program_to_onnx_program, step 2; torch/export/graph_signature.py, InputKind). A BUFFER
(RoPE's inv_freq, BatchNorm's running statistics) or CONSTANT_TENSOR is model state that gets no
gradient and no optimizer state: graph.py keeps it as a parameter of its layer, its bytes in the
IR's totals, with trainable=False, so that the trainable count is torch's
`sum(p.numel() for p in model.parameters())`.

Where a file carries no kind, nothing here applies and every float initializer stays a trainable
parameter: the TorchScript exporter (dynamo=False), which inlines a buffer as an initializer or a
Constant, tf2onnx, paddle2onnx and the rest write none; nor does a tensor the dynamo exporter's
optimizer makes by folding (a transposed weight, `val_N`), which is a parameter's new form.
"""

from __future__ import annotations

import onnx

from modtrans.extraction.graph import graphs

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"
UNTRAINED = frozenset({"BUFFER", "CONSTANT_TENSOR"})


def untrained(model: onnx.ModelProto) -> frozenset[str]:
    """The names of the tensors whose export kind, as the file records it, is a buffer or a
    constant; empty for a file that records none."""
    return frozenset(
        info.name
        for graph in graphs(model.graph)
        for info in graph.value_info
        for prop in info.metadata_props
        if prop.key == KIND and prop.value in UNTRAINED
    )
