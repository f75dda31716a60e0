"""The few Chakra execution-trace messages ModTrans writes, built in code on `protobuf` (which onnx
already brings), so writing traces needs no Chakra package: `mlc-chakra` pulls about a hundred
packages (HolisticTraceAnalysis, jupyterlab, pandas, plotly) for one schema file.

Field numbers, types and enum values are those of Chakra's `schema/protobuf/et_def.proto`
(mlcommons/chakra, package ChakraProtoMsg; schema 1.0.2-chakra.1.0.0); only the messages and fields
we write are declared, so a trace reads the same with Chakra's own generated classes (the tests read
ours back with them, and compare node for node with Chakra's text converter). The classes live in a
private descriptor pool: importing Chakra beside this never clashes.

    pb = schema()
    node = pb.Node(id=1, name="COMP_NODE_conv1_FWD", type=pb.COMP_NODE, duration_micros=3)
    encode(out, node)          # Chakra's length-prefixed framing (protolib.encodeMessage)
"""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import IO, Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
)

from modtrans.chakra.wire import NODE_TYPES

_F = descriptor_pb2.FieldDescriptorProto
PACKAGE = "ChakraProtoMsg"

# (number, name, type, repeated, message type) as et_def.proto declares them. Every value type of
# AttributeProto's oneof is declared, so traces from other generators read back whole.
_SCALARS = [  # (field number of the scalar; the list is the next number), name, protobuf type
    (3, "double", _F.TYPE_DOUBLE),
    (5, "float", _F.TYPE_FLOAT),
    (7, "int32", _F.TYPE_INT32),
    (9, "int64", _F.TYPE_INT64),
    (11, "uint32", _F.TYPE_UINT32),
    (13, "uint64", _F.TYPE_UINT64),
    (15, "sint32", _F.TYPE_SINT32),
    (17, "sint64", _F.TYPE_SINT64),
    (19, "fixed32", _F.TYPE_FIXED32),
    (21, "fixed64", _F.TYPE_FIXED64),
    (23, "sfixed32", _F.TYPE_SFIXED32),
    (25, "sfixed64", _F.TYPE_SFIXED64),
    (27, "bool", _F.TYPE_BOOL),
    (29, "string", _F.TYPE_STRING),
    (31, "bytes", _F.TYPE_BYTES),
]
_LISTS = {f"{name.capitalize()}List": kind for _, name, kind in _SCALARS}
_ATTRIBUTE = [  # AttributeProto: name, doc_string, then the `value` oneof
    (1, "name", _F.TYPE_STRING, False, None),
    (2, "doc_string", _F.TYPE_STRING, False, None),
    *(
        field
        for number, name, kind in _SCALARS
        for field in (
            (number, f"{name}_val", kind, False, None),
            (number + 1, f"{name}_list", _F.TYPE_MESSAGE, False, f"{name.capitalize()}List"),
        )
    ),
]
_NODE = [
    (1, "id", _F.TYPE_UINT64, False, None),
    (2, "name", _F.TYPE_STRING, False, None),
    (3, "type", _F.TYPE_ENUM, False, "NodeType"),
    (4, "ctrl_deps", _F.TYPE_UINT64, True, None),
    (5, "data_deps", _F.TYPE_UINT64, True, None),
    (6, "start_time_micros", _F.TYPE_UINT64, False, None),
    (7, "duration_micros", _F.TYPE_UINT64, False, None),
    (10, "attr", _F.TYPE_MESSAGE, True, "AttributeProto"),
]
_GLOBAL_METADATA = [
    (1, "version", _F.TYPE_STRING, False, None),
    (2, "attr", _F.TYPE_MESSAGE, True, "AttributeProto"),
]
COLLECTIVES = {
    "ALL_REDUCE": 0,
    "REDUCE": 1,
    "ALL_GATHER": 2,
    "GATHER": 3,
    "SCATTER": 4,
    "BROADCAST": 5,
    "ALL_TO_ALL": 6,
    "REDUCE_SCATTER": 7,
    "REDUCE_SCATTER_BLOCK": 8,
    "BARRIER": 9,
}


def _message(
    file: descriptor_pb2.FileDescriptorProto, name: str, fields: list[Any], oneof: str | None
) -> None:
    message = file.message_type.add(name=name)
    if oneof:
        message.oneof_decl.add(name=oneof)
    for number, field_name, kind, repeated, type_name in fields:
        field = message.field.add(name=field_name, number=number, type=kind)
        field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
        if type_name:
            field.type_name = f".{PACKAGE}.{type_name}"
        if oneof and number > 2:  # everything after name and doc_string is `value`
            field.oneof_index = 0


@functools.cache
def schema() -> SimpleNamespace:
    """The message classes and enum values, as attributes (`pb.Node`, `pb.COMP_NODE`, ...)."""
    file = descriptor_pb2.FileDescriptorProto(name="modtrans_et_def.proto", package=PACKAGE, syntax="proto3")
    for name, values in (("NodeType", NODE_TYPES), ("CollectiveCommType", COLLECTIVES)):
        enum = file.enum_type.add(name=name)
        for value_name, number in values.items():
            enum.value.add(name=value_name, number=number)
    for name, kind in _LISTS.items():
        _message(file, name, [(1, "values", kind, True, None)], None)
    _message(file, "AttributeProto", _ATTRIBUTE, "value")
    _message(file, "Node", _NODE, None)
    _message(file, "GlobalMetadata", _GLOBAL_METADATA, None)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    names = [*_LISTS, "AttributeProto", "Node", "GlobalMetadata"]
    classes = {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in names
    }
    return SimpleNamespace(**classes, **NODE_TYPES, **COLLECTIVES)


def encode(out: IO[bytes], message: Any) -> None:
    """Chakra's framing: the message's length as a varint, then the message."""
    body = message.SerializeToString()
    length, prefix = len(body), bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        prefix.append(byte | (0x80 if length else 0))
        if not length:
            break
    out.write(bytes(prefix))
    out.write(body)
