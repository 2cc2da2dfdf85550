"""Response baselines: the mean embedding of ordinary dialogue utterances, for one encoder.

Multilingual E5 puts every text near one common direction (the mean ``passage:`` embedding of 2,000
Topical-Chat utterances has norm 0.90; unrelated pairs have cosines around 0.8). A turn-level cosine
``cos(context, response)`` then carries a per-context bias: a context close to that direction is
close to *every* response. The ``embed:`` judge's ``baseline=`` option removes it by scoring

    c · r  −  c · m        (c, r: unit embeddings of context and response; m: the baseline vector)

that is, how much closer the response is to the context than an average utterance is. ``m`` is fixed
— computed once from a corpus, shipped as a file, never from the items being scored — so an item's
score does not depend on the batch it is scored in. Pearson is unchanged by the constant shift the
term would add to every item; what changes it is that ``c · m`` differs between contexts.

A baseline file (JSON) holds the vector, the identity of the encoder that produced it (model and
weights fingerprint: a baseline is refused by any other encoder), the role its texts were embedded
in, and where the texts came from (source, file SHA-256, count, seed). Packaged baselines live in
``harness/encoders/baselines/<encoder>.<name>.json`` and are named in specs by ``<name>``; any other
value is a path. ``harness finetune baseline`` computes one (``docs/finetuning.md``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.encoders.base import Encoder
from harness.jsontypes import JSONObject

PACKAGED_DIR = Path(__file__).with_name("baselines")
FORMAT = "dialeval-response-baseline/1"
#: identity fields of the encoder that must match between the baseline and the judge's encoder
MATCH_FIELDS = ("engine", "model", "revision", "quantisation", "weights_sha256", "fingerprint", "prefixes")


@dataclass(frozen=True)
class ResponseBaseline:
    name: str
    vector: np.ndarray
    role: str
    encoder: JSONObject
    provenance: JSONObject = field(default_factory=dict)
    path: str | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(np.ascontiguousarray(self.vector, dtype="<f4").tobytes()).hexdigest()

    def identity(self) -> JSONObject:
        """What results and the judge identity record about the baseline."""
        src: JSONObject = {
            k: self.provenance.get(k)
            for k in ("source", "source_sha256", "n_texts", "seed")
            if k in self.provenance
        }
        return {
            "name": self.name,
            "vector_sha256": self.sha256,
            "role": self.role,
            "norm": round(self.norm, 6),
            **src,
        }

    @property
    def norm(self) -> float:
        return float(np.linalg.norm(self.vector))

    def to_json(self) -> JSONObject:
        return {
            "format": FORMAT,
            "name": self.name,
            "role": self.role,
            "encoder": self.encoder,
            "provenance": self.provenance,
            "dim": int(self.vector.shape[0]),
            "vector_sha256": self.sha256,
            "vector": [float(x) for x in self.vector],
        }


def packaged_baselines() -> dict[str, list[str]]:
    """Packaged baseline names per encoder alias: ``{"multilingual-e5-small": ["topical-chat"]}``."""
    out: dict[str, list[str]] = {}
    for f in sorted(PACKAGED_DIR.glob("*.json")):
        enc, _, name = f.stem.rpartition(".")
        out.setdefault(enc, []).append(name)
    return out


def _resolve(ref: str, encoder_names: list[str]) -> Path:
    p = Path(ref).expanduser()
    if p.suffix == ".json" or p.exists() or "/" in ref:
        if not p.is_file():
            raise FileNotFoundError(f"response baseline {ref!r}: no such file")
        return p
    for enc in encoder_names:
        f = PACKAGED_DIR / f"{enc}.{ref}.json"
        if f.is_file():
            return f
    raise ValueError(
        f"no packaged response baseline {ref!r} for encoder {encoder_names[0]!r} "
        f"(packaged: {packaged_baselines() or 'none'}); "
        "give a baseline file path, or compute one with `harness finetune baseline`"
    )


def read_baseline(path: str | Path) -> ResponseBaseline:
    """A baseline file, checked: format, dimension and the vector's recorded SHA-256."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"response baseline {path}: not a readable JSON file ({e})") from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(
            f"response baseline {path}: field 'format' must be {FORMAT!r}, got {doc.get('format')!r}"
        )
    for key in ("name", "role", "encoder", "vector", "vector_sha256"):
        if key not in doc:
            raise ValueError(f"response baseline {path}: missing field {key!r}")
    vec = np.asarray(doc["vector"], dtype=np.float32)
    if (
        vec.ndim != 1
        or not np.all(np.isfinite(vec))
        or vec.shape[0] != int(doc["dim"] if "dim" in doc else vec.shape[0])
    ):
        raise ValueError(
            f"response baseline {path}: field 'vector' must be a finite 1-d list of {doc.get('dim')} floats"
        )
    bl = ResponseBaseline(
        name=str(doc["name"]),
        vector=vec,
        role=str(doc["role"]),
        encoder=dict(doc["encoder"]),
        provenance=dict(doc.get("provenance") or {}),
        path=str(path),
    )
    if bl.sha256 != doc["vector_sha256"]:
        raise ValueError(
            f"response baseline {path}: the vector does not match its recorded vector_sha256 (the file was edited); "
            "recompute it with `harness finetune baseline`"
        )
    return bl


def load_baseline(ref: str, encoder: Encoder, encoder_names: list[str]) -> ResponseBaseline:
    """The baseline ``ref`` (a packaged name for one of ``encoder_names``, or a file path), refused
    unless it was computed with this very encoder (same model and weights fingerprint)."""
    bl = read_baseline(_resolve(ref, encoder_names))
    ident = encoder.identity()
    diff = [k for k in MATCH_FIELDS if (k in bl.encoder or k in ident) and bl.encoder.get(k) != ident.get(k)]
    if diff:
        detail = "; ".join(f"{k}: baseline {bl.encoder.get(k)!r} vs judge {ident.get(k)!r}" for k in diff)
        raise ValueError(
            f"response baseline {bl.path} was computed with another encoder ({detail}); "
            "compute one for this encoder with `harness finetune baseline --encoder ...`"
        )
    if bl.vector.shape[0] != encoder.dim:
        raise ValueError(
            f"response baseline {bl.path}: dimension {bl.vector.shape[0]} != encoder dimension {encoder.dim}"
        )
    return bl


def compute_baseline(
    encoder: Encoder,
    texts: list[str],
    *,
    name: str,
    role: str = "passage",
    provenance: JSONObject | None = None,
    chunk: int = 256,
    progress: Callable[[int], None] | None = None,
) -> ResponseBaseline:
    """The mean unit embedding of ``texts`` in ``role`` (not renormalised: its norm says how strongly
    the encoder's embeddings share one direction). ``progress(n)`` is called after each chunk."""
    if not texts:
        raise ValueError("a response baseline needs at least one text")
    total = np.zeros(encoder.dim, dtype=np.float64)
    for i in range(0, len(texts), chunk):
        part = texts[i : i + chunk]
        total += encoder.encode(part, role=role).astype(np.float64).sum(axis=0)
        if progress is not None:
            progress(len(part))
    vec = (total / len(texts)).astype(np.float32)
    return ResponseBaseline(
        name=name, vector=vec, role=role, encoder=encoder.identity(), provenance=dict(provenance or {})
    )


def write_baseline(bl: ResponseBaseline, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(bl.to_json(), indent=1, ensure_ascii=False) + "\n", "utf-8")
    return path
