"""Trained discriminative evaluator judge (xDial-Eval App. C.1 style: PoE / FineD-Eval-like).

A directory written by :func:`finetune.discriminative.train_discriminative` (LoRA adapter + head on
an encoder, by default the packaged MiniLM) or :func:`finetune.discriminative.merge_and_save` scores

* turn-level items: ``context`` (messages) joined with the tokenizer's separator, ``response`` as
  the second segment;
* dialogue-level items: ``turns`` joined with the separator;

as sigmoid(logit) in [0, 1]. Spec: ``evaluator:<dir or packaged name>[,batch_size=64,device=cpu,any_level=false]``
(packaged: ``evaluator:minilm-topicalchat``, trained on Topical-Chat by finetune/configs/).
An evaluator trained on one level only refuses tasks of the other level unless ``any_level=true``
(a ``pair_mode: cosine`` bi-encoder scores both levels with the same adjacent-segment cosine, so
it accepts either).

Identity: base model id, revision, the SHA-256 of the adapter (or merged encoder) and head files,
and the input settings, so retraining changes cache keys and results. Every item score goes through
the request cache (one entry per item text and evaluator), so a rerun scores nothing it has seen.
An item with an empty response / context / dialogue gets ``None`` with status ``invalid_item``,
counted, never scored.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.backends.base import BackendStats
from harness.cache import RequestCache
from harness.judges.base import Judge, Verdict
from harness.options import check_option
from harness.spec import JudgeKind, JudgeSpec
from harness.tasks import TaskSpec

NAMESPACE = "evaluator"
#: Evaluators shipped inside the package (``evaluator:<name>``), e.g. the embedded default judge.
PACKAGED_DIR = Path(__file__).resolve().parent / "evaluators"


def packaged_evaluators() -> list[str]:
    return sorted(p.name for p in PACKAGED_DIR.glob("*") if (p / "dialeval_evaluator.json").is_file())


def resolve_evaluator(target: str) -> Path:
    """A directory, or the name of a packaged evaluator (``finetune/evaluators/<name>``)."""
    path = Path(target).expanduser()
    if not path.exists() and "/" not in target and (PACKAGED_DIR / target).is_dir():
        return PACKAGED_DIR / target
    return path


OPTIONS = {"batch_size", "device", "any_level", "fold"}

#: The ``evaluator:`` judge kind, registered with the core through the entry point
#: ``dialeval_harness.judges: evaluator = finetune.evaluator_judge:KIND``.
KIND = JudgeKind(
    "evaluator",
    "finetune.evaluator_judge:EvaluatorJudge",
    "evaluator:minilm-topicalchat  ·  evaluator:runs/my-evaluator",
    "trained discriminative evaluator (harness finetune evaluator); packaged: "
    + (", ".join(packaged_evaluators()) or "none"),
)


class EvaluatorJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        from finetune.encoder.model import read_meta

        unknown = set(spec.decoding) | (set(spec.options) - OPTIONS)
        if unknown:
            raise ValueError(
                f"evaluator judge {spec.raw!r}: unsupported option(s) {sorted(unknown)}; supported: {sorted(OPTIONS)}"
            )
        if spec.revision:
            raise ValueError(
                f"evaluator judge {spec.raw!r}: a trained evaluator records its base model revision; "
                "'@revision' does not apply (an '@' in the directory name is read as one: rename it)"
            )
        self.path = resolve_evaluator(spec.target)
        try:
            self.meta = read_meta(self.path)
        except ValueError as e:
            raise ValueError(f"evaluator judge {spec.raw!r}: {e}") from None
        owner = f"evaluator judge {spec.raw!r}"
        self.batch_size = check_option(
            owner, "batch_size", spec.options.get("batch_size", 64), int, lo=1, hi=100_000
        )
        self.device = spec.options.get("device")
        self.any_level = check_option(owner, "any_level", spec.options.get("any_level", False), bool)
        self.crosslingual = self.meta.get("kind") == "crosslingual-evaluator"
        self.fold = str(spec.options.get("fold", "auto"))
        if "fold" in spec.options and not self.crosslingual:
            raise ValueError(f"evaluator judge {spec.raw!r}: 'fold' applies to cross-lingual evaluators only")
        if self.crosslingual and self.fold not in ("auto", *self.meta.get("folds", {})):
            raise ValueError(
                f"evaluator judge {spec.raw!r}: fold {self.fold!r} is not one of auto, "
                f"{', '.join(self.meta.get('folds', {}))}"
            )
        self.stats = BackendStats()
        self._evaluator = None
        self._identity: dict[str, Any] | None = None

    # -- model ------------------------------------------------------------------------------
    @property
    def evaluator(self):
        if self._evaluator is None and self.crosslingual:
            t_load = time.perf_counter()
            from finetune.crosslingual import CrossLingualScorer

            self._evaluator = CrossLingualScorer(self.path, self.meta, self.cache, batch_size=self.batch_size)
            self.stats.load_seconds += time.perf_counter() - t_load
        if self._evaluator is None:
            t_load = time.perf_counter()
            from finetune.discriminative import DiscriminativeEvaluator

            self._evaluator = DiscriminativeEvaluator.load(
                self.path, device=self.device, batch_size=self.batch_size
            )
            self.stats.load_seconds += time.perf_counter() - t_load
        return self._evaluator

    def identity(self) -> dict[str, Any]:
        if self._identity is None and self.crosslingual:
            self._identity = {
                "backend": "evaluator",
                "kind": "crosslingual-map",
                "maps_sha256": self.evaluator.sha256,
                "student": self.evaluator.student.identity(),
                "teacher": self.meta.get("teacher"),
                "student_role": self.evaluator.role,
                "fold": self.fold,
                "folds": self.evaluator.folds,
                "data_version": self.meta.get("data_version"),
            }
        if self._identity is None:
            from finetune.encoder.model import artifact_sha256

            sha = artifact_sha256(self.path)
            recorded = self.meta.get("sha256")
            if recorded and recorded != sha:
                raise ValueError(
                    f"evaluator {self.path}: its weight files changed after it was saved (sha256 {sha[:12]}… "
                    f"≠ recorded {recorded[:12]}…); retrain or restore them"
                )
            inp = self.meta.get("input", {})
            self._identity = {
                "backend": "evaluator",
                "kind": "discriminative",
                "base_model": self.meta.get("base_model"),
                "revision": self.meta.get("revision"),
                "base_model_package_version": self.meta.get("base_model_package_version"),
                "adapter_sha256": sha,
                "merged": bool(self.meta.get("merged")),
                "max_length": inp.get("max_length"),
                "pooling": inp.get("pooling"),
                "truncation_side": inp.get("truncation_side"),
                "pair_mode": inp.get("pair_mode", "cross"),
                "context_turns": inp.get("context_turns"),
                "data_version": self.meta.get("data_version"),
            }
        return self._identity

    def method(self, task: TaskSpec) -> str:
        base = self.meta.get("base_model")
        if self.crosslingual:
            what = (
                "last context utterance, response" if task.level == "turn" else "adjacent utterances (mean)"
            )
            return (
                f"cross-lingual evaluator: sigmoid(a · cos(W·e5({what})) + b), W maps {base}; "
                f"fold {self.fold} (leave-one-set-out)"
            )
        inp = self.meta.get("input", {})
        if inp.get("pair_mode") == "cosine":
            k = inp.get("context_turns")
            what = (
                f"cosine(context (last {k or 'all'} turns), response)"
                if task.level == "turn"
                else "mean adjacent-turn cosine"
            )
            return f"discriminative evaluator: sigmoid(w · {what} + b), {base} + LoRA bi-encoder"
        what = "context <sep> response pair" if task.level == "turn" else "dialogue turns joined with <sep>"
        return f"discriminative evaluator: sigmoid(head(mean-pooled {base} + LoRA encoding of the {what}))"

    def score_range(self, task: TaskSpec) -> tuple[float, float]:
        return (0.0, 1.0)  # sigmoid(logit)

    # -- scoring --------------------------------------------------------------------------------
    def _check_level(self, task: TaskSpec) -> None:
        if task.level not in ("turn", "dialogue"):
            raise ValueError(f"task {task.name!r}: level {task.level!r} not supported by the evaluator judge")
        levels = self.meta.get("levels") or {}
        # a cosine bi-encoder scores both levels the same way (adjacent-segment cosines)
        cosine = (self.meta.get("input") or {}).get("pair_mode") == "cosine"
        if not self.any_level and not cosine and levels and not levels.get(task.level):
            trained = sorted(k for k, v in levels.items() if v)
            raise ValueError(
                f"evaluator {self.path} was trained on {'/'.join(trained)}-level examples only and cannot "
                f"judge the {task.level}-level task {task.name!r}; pick a {'/'.join(trained)}-level task, "
                f"train with {task.level}-level examples, or pass ',any_level=true'"
            )

    @staticmethod
    def _payload(task: TaskSpec, item: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """(model input, hash) of an item, or (None, why) when it cannot be scored."""
        if task.level == "turn":
            ctx = [
                str(t["text"]).strip() for t in item.get("context") or [] if str(t.get("text") or "").strip()
            ]
            resp = str(item.get("response") or "").strip()
            if not resp:
                return None, "empty response"
            if not ctx:
                return None, "empty context"
            return {"level": "turn", "context": ctx, "response": resp, "turns": None}, ""
        turns = [str(t["text"]).strip() for t in item.get("turns") or [] if str(t.get("text") or "").strip()]
        if not turns:
            return None, "empty dialogue"
        return {"level": "dialogue", "context": [], "response": None, "turns": turns}, ""

    def _score_crosslingual(self, task: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        """Scores from embeddings cached per text (shared with ``embed:`` judges); a rerun embeds nothing."""
        payloads = [self._payload(task, it) for it in items]
        payloads = [
            (None, "dialogue has fewer than 2 turns")
            if p and p["level"] == "dialogue" and len(p["turns"]) < 2
            else (p, why)
            for p, why in payloads
        ]
        ok = [i for i, (p, _) in enumerate(payloads) if p is not None]
        folds = [self.evaluator.fold_for(items[i].get("dataset"), self.fold) for i in ok]
        fold_of = dict(zip(ok, folds, strict=True))
        before = self.evaluator.computed
        vals = dict(zip(ok, self.evaluator.score([payloads[i][0] for i in ok], folds), strict=True))
        new = self.evaluator.computed - before
        self.stats.requests += new
        self.stats.batches += -(-new // self.batch_size)
        out = []
        for i, (p, why) in enumerate(payloads):
            if p is None:
                out.append(Verdict(None, "invalid_item", "", _hash([why]), detail=why))
                continue
            texts = p["turns"] if p["level"] == "dialogue" else [*p["context"], p["response"]]
            val, cos = vals[i]
            fold = fold_of[i]
            out.append(
                Verdict(
                    val,
                    "ok",
                    f"cos={cos:.6f}",
                    _hash(texts),
                    detail=f"fold={fold} p={val:.6f}",
                    cached=new == 0,
                    extra={"fold": fold},
                )
            )
        return out

    def score(self, task: TaskSpec, items: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        self._check_level(task)
        if self.crosslingual:
            return self._score_crosslingual(task, items)
        ident = self.identity()
        payloads = [self._payload(task, it) for it in items]
        keys = [RequestCache.make_key(ident, p) if p is not None else None for p, _ in payloads]
        found = self.cache.get_many([k for k in keys if k is not None])
        todo = list(dict.fromkeys(k for k in keys if k is not None and k not in found))
        scored: dict[str, float] = {k: struct.unpack("<d", found[k])[0] for k in keys if k in found}
        if todo:
            first = {k: p for k, (p, _) in zip(keys, payloads, strict=True) if k in todo}
            vals = self.evaluator.score([first[k] for k in todo])
            self.stats.requests += len(todo)
            self.stats.batches += -(-len(todo) // self.batch_size)
            self.cache.put_many((k, NAMESPACE, struct.pack("<d", v)) for k, v in zip(todo, vals, strict=True))
            scored.update(zip(todo, vals, strict=True))
        new = set(todo)
        out = []
        for (p, why), k in zip(payloads, keys, strict=True):
            if p is None or k is None:
                out.append(Verdict(None, "invalid_item", "", _hash([why]), detail=why))
                continue
            texts = p["turns"] if p["level"] == "dialogue" else [*p["context"], p["response"]]
            val = scored[k]
            out.append(Verdict(val, "ok", "", _hash(texts), detail=f"p={val:.6f}", cached=k not in new))
        return out

    def backend_stats(self) -> dict[str, float]:
        return self.stats.to_dict()

    def close(self) -> None:
        self._evaluator = None


def _hash(texts: Sequence[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()[:16]
