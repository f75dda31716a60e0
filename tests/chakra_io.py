"""Reading a trace back with Chakra's own reader (mlc-chakra, which the README's test command
installs): the independent check of what modtrans writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_trace(path: Path) -> tuple[Any, list[Any]]:
    """The GlobalMetadata and the nodes of one trace, decoded by Chakra's protolib."""
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node
    from chakra.src.third_party.utils.protolib import decodeMessage, openFileRd

    handle = openFileRd(str(path))
    metadata = GlobalMetadata()
    assert decodeMessage(handle, metadata)
    nodes = []
    while True:
        node = Node()
        if not decodeMessage(handle, node):
            break
        nodes.append(node)
    handle.close()
    return metadata, nodes
