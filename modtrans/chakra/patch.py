"""A program's trace encoded once, and each rank's made from it by patching what differs.

The ranks running one program write the same nodes but for a few values: a transfer's comm_src
and comm_dst (the rank and its peer) and a collective's pg_name where the group differs between
the ranks (a data-parallel group, say). A template holds the encoded nodes with those fields left
out (`Ends`, `Group`); for a rank, the values become varints and decimal strings whose lengths
move the lengths before them (the field's, the node's framing: protobuf writes no fixed-width
integers here). Ranks whose values have the same lengths share one layout: the trace's bytes
whole, each value's places known; a rank's values are written into their places where they
differ from the last rank's, so a rank costs one copy of its bytes (the kernel's, through
os.writev), not a pass over its nodes.

    template = Template([b"...", Ends(head, tail, Purpose.PIPELINE, 1, True), ...])
    template.keys      # [RANK, (PEER, Purpose.PIPELINE, 1), ...]: the values a rank fills in
    b"".join(template.fill([varint(rank), varint(peer), ...]))
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from modtrans.chakra import wire
from modtrans.plan.model import Purpose

RANK, PEER, GROUP = "rank", "peer", "group"
"""What a key names: the rank itself (a varint), its peer (PEER, axis, offset: a varint), its
group over some axes (GROUP, axes: the id in decimal, or b"" for group 0, whose pg_name is absent)."""


@dataclass(frozen=True, slots=True)
class Ends:
    """A transfer's node less comm_src and comm_dst (between `head` and `tail`): the rank and its
    peer `offset` steps along `along`, the sender first."""

    head: bytes
    tail: bytes
    along: Purpose
    offset: int
    send: bool


@dataclass(frozen=True, slots=True)
class Group:
    """A collective's node less its pg_name (between `before` and `after`): the id of the rank's
    group over `over`."""

    before: bytes
    after: bytes
    over: frozenset[Purpose]


Piece = bytes | Ends | Group


class _Layout:
    """A program's trace for values of one set of lengths: its bytes whole (`buffer`), where each
    key's values go in it (`spots`), and the values there now (`current`)."""

    __slots__ = ("buffer", "current", "spots")

    def __init__(self, buffer: bytearray, spots: list[list[int]]) -> None:
        self.buffer = buffer
        self.spots = spots
        self.current: list[bytes | None] = [None] * len(spots)


class Template:
    """A program's nodes as its ranks share them (`pieces`: runs of whole nodes, and nodes with a
    value missing), with one layout per set of value lengths, made when a rank first needs it."""

    def __init__(self, pieces: Sequence[Piece]) -> None:
        self.pieces = list(pieces)
        index: dict[Hashable, int] = {}
        for piece in self.pieces:
            if isinstance(piece, Ends):
                index.setdefault(RANK, len(index))
                index.setdefault((PEER, piece.along, piece.offset), len(index))
            elif isinstance(piece, Group):
                index.setdefault((GROUP, piece.over), len(index))
        self.index = index
        self.keys = list(index)
        self.layouts: dict[tuple[int, ...], _Layout] = {}

    def fill(self, values: Sequence[bytes], head: Sequence[bytes] = ()) -> list[bytes | bytearray]:
        """The program's nodes for a rank, after the pieces `head`, as the pieces to join or write
        in order (os.writev): `values` in the order of `keys`. The nodes are one buffer of the
        template's, valid until its next fill: write or copy it first. Only the values that differ
        from the last rank of the same lengths are written into it (a rank's own id at each
        transfer, its data-parallel group), so a rank costs a few hundred slice assignments and
        one write of whole bytes, not a write of some 1,800 pieces (Llama-3-70B's stages: the
        kernel's copy of many small pieces cost as much again as the bytes')."""
        widths = tuple(map(len, values))
        layout = self.layouts.get(widths)
        if layout is None:
            layout = self.layouts[widths] = self._layout(widths)
        buffer, current, spots = layout.buffer, layout.current, layout.spots
        for key, value in enumerate(values):
            if current[key] != value:
                current[key] = value
                width = len(value)
                for at in spots[key]:
                    buffer[at : at + width] = value
        return [*head, buffer]

    def _layout(self, widths: tuple[int, ...]) -> _Layout:
        """The trace's bytes for values of these lengths, each value's place left as zeros and
        listed by its key."""
        buffer = bytearray()
        spots: list[list[int]] = [[] for _ in widths]

        def hole(key: int) -> None:
            spots[key].append(len(buffer))
            buffer.extend(bytes(widths[key]))

        index = self.index
        for piece in self.pieces:
            if isinstance(piece, bytes):
                buffer += piece
            elif isinstance(piece, Ends):
                rank, peer = index[RANK], index[(PEER, piece.along, piece.offset)]
                src, dst = (rank, peer) if piece.send else (peer, rank)
                src_key = wire.integer_prefix("comm_src", widths[src], 7)
                dst_key = wire.integer_prefix("comm_dst", widths[dst], 7)
                ends = len(src_key) + widths[src] + len(dst_key) + widths[dst]
                size = len(piece.head) + ends + len(piece.tail)
                buffer += wire.varint(size) + piece.head + src_key
                hole(src)
                buffer += dst_key
                hole(dst)
                buffer += piece.tail
            else:
                group = index[(GROUP, piece.over)]
                width = widths[group]
                key = wire.text_prefix("pg_name", width) if width else b""  # group 0: no pg_name
                buffer += wire.varint(len(piece.before) + len(key) + width + len(piece.after))
                buffer += piece.before + key
                hole(group)
                buffer += piece.after
        return _Layout(buffer, spots)
