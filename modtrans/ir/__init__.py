"""The intermediate document (IR): a model's layers, parameters, shapes and FLOPs, whichever
reader made it (ONNX extraction or a transformer configuration) and whatever strategy reads it.

core.py      each attention's core marked: the layers between its two products (a fused kernel's)
document.py  the IR dataclasses <-> JSON (validated by schemas/model-ir.schema.json)
flops.py     the FLOP formulas every IR builder uses, per training phase
precision.py the training precision (--precision): every floating tensor in one dtype
render.py    IR -> the table `modtrans inspect` prints (rich), or CSV / JSON rows
"""
