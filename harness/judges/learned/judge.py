"""Learned-ensemble judge (UPHELD App. I): a scikit-learn model fitted on metric scores, saved
with :meth:`harness.judges.learned.model.FittedEnsemble.save`, applied unchanged to new items.

Spec: ``ensemble:<directory>[,llm=<judge spec>,model=<encoder>,num_layers=N,batch_size=64,device=cpu]``.

The ensemble's ``ensemble.json`` lists its features and how they were computed
(``feature_info``): reference metrics are recomputed with the recorded settings (ROUGE stemming,
BERTScore / embedding encoder — overridable with ``model=``/``num_layers=``, which the results
then record), App. H LLM-judge features with the recorded judge spec or the ``llm=`` one. An item
whose features cannot all be computed (no reference, an unparseable LLM verdict) gets ``None``
(status ``invalid_item`` / ``parse_error``), counted and never imputed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.backends.base import BackendStatsRecord
from harness.cache import RequestCache
from harness.jsontypes import JSON, JSONObject
from harness.judges.base import Item, Judge, Verdict
from harness.judges.loader import load_judge
from harness.judges.metric import ReferenceFeatures, _pair_hash, reference_inputs
from harness.options import check_option
from harness.spec import JudgeSpec
from harness.tasks import TaskSpec, get_task

OPTIONS = {"llm", "model", "num_layers", "batch_size", "device", "show_progress"}
LLM_FEATURE_PREFIX = "llm_judge_"


def _section(value: JSON) -> JSONObject:
    """A section of the ensemble's recorded ``feature_info`` (``{}`` when it is absent)."""
    return value if isinstance(value, dict) else {}


class EnsembleJudge(Judge):
    def __init__(self, spec: JudgeSpec, cache: RequestCache, seed: int | None = None) -> None:
        super().__init__(spec, cache, seed)
        from harness.judges.learned.model import load_ensemble

        unknown = set(spec.decoding) | (set(spec.options) - OPTIONS)
        if unknown:
            raise ValueError(
                f"ensemble judge {spec.raw!r}: unsupported option(s) {sorted(unknown)}; supported: {sorted(OPTIONS)}"
            )
        self.ensemble = load_ensemble(spec.target)
        self.path = spec.target
        info = self.ensemble.feature_info or {}
        ref = _section(info.get("reference_metrics"))
        o = spec.options
        bert = _section(ref.get("bertscore"))
        emb = _section(ref.get("embedding"))
        self.overrides: JSONObject = {k: o[k] for k in ("model", "num_layers") if k in o}
        bert_model, bert_layers, emb_model = (
            bert.get("model_arg"),
            bert.get("num_layers"),
            emb.get("model_arg"),
        )
        self.features = ReferenceFeatures(
            cache,
            model=o.get("model", bert_model if isinstance(bert_model, str) else None),
            num_layers=o.get("num_layers", bert_layers if isinstance(bert_layers, int) else None),
            embed_model=o.get("model", emb_model if isinstance(emb_model, str) else None),
            batch_size=check_option(
                f"ensemble judge {spec.raw!r}", "batch_size", o.get("batch_size", 64), int, lo=1, hi=100_000
            ),
            device=o.get("device"),
            use_stemmer=bool(_section(ref.get("rouge")).get("use_stemmer", False)),
            show_progress=check_option(
                "ensemble judge", "show_progress", o.get("show_progress", False), bool
            ),
        )
        self.llm_features = [f for f in self.ensemble.features if f.startswith(LLM_FEATURE_PREFIX)]
        self.ref_features = [f for f in self.ensemble.features if not f.startswith(LLM_FEATURE_PREFIX)]
        llm_judge = _section(info.get("llm_judge"))
        recorded = llm_judge.get("spec")
        self.llm_spec: str | None = o.get("llm") or (recorded if isinstance(recorded, str) else None)
        if self.llm_features and not self.llm_spec:
            raise ValueError(
                f"ensemble {self.path} uses LLM-judge features {self.llm_features} but records no judge spec; "
                "pass one with ',llm=<judge spec>'"
            )
        # the registered task each LLM feature was judged with when the ensemble was fitted
        tasks = _section(llm_judge.get("tasks"))
        self.feature_tasks = {f: t for f, t in tasks.items() if isinstance(t, str)}
        missing = [f for f in self.llm_features if f not in self.feature_tasks]
        if missing:
            raise ValueError(
                f"ensemble {self.path} uses LLM-judge features {missing} but does not record the task each "
                "was judged with (feature_info.llm_judge.tasks); refit it with this version "
                "(harness reproduce upheld --judge ...)"
            )
        self._llm: Judge | None = None

    @property
    def llm(self) -> Judge:
        if self._llm is None:
            if not self.llm_spec:  # set whenever the ensemble has LLM-judge features
                raise ValueError(f"ensemble {self.path} names no LLM judge (',llm=<judge spec>')")
            self._llm = load_judge(self.llm_spec, self.cache, self.seed)
            if self._llm.spec.kind in ("ensemble", "metric", "embed"):
                raise ValueError(f"llm={self.llm_spec!r} must name an LLM judge (hf/vllm/openai/replay)")
        return self._llm

    def identity(self) -> JSONObject:
        d = self.ensemble.describe()
        return {
            "backend": "ensemble",
            "path": str(self.path),
            "kind": d.get("kind"),
            "features": list(self.ensemble.features),
            "sha256": self._model_sha256(),
            "training": d.get("training"),
            "target": d.get("target"),
            "overrides": self.overrides,
            "llm_judge": self._llm.identity() if self._llm is not None else self.llm_spec,
        }

    def _model_sha256(self) -> str | None:
        """The fitted model's checksum as recorded next to it (verified by ``load_ensemble``)."""
        import json
        from pathlib import Path

        from harness.judges.learned.model import META_FILE

        meta = json.loads((Path(self.path) / META_FILE).read_text())
        return (meta.get("model") or {}).get("sha256")

    def method(self, task: TaskSpec) -> str:
        return f"{self.ensemble.kind} ensemble over {', '.join(self.ensemble.features)}"

    def feature_frame(self, items: Sequence[Item]) -> tuple[pd.DataFrame, list[str]]:
        """Feature columns for ``items`` (NaN where unavailable) and, per item, why it is incomplete."""
        inputs = [reference_inputs(it) for it in items]
        why = [", ".join(f"empty {m}" for m in miss) for _, _, miss in inputs]
        frame = pd.DataFrame(index=range(len(items)), columns=list(self.ensemble.features), dtype=float)
        ok = [i for i, (_, _, miss) in enumerate(inputs) if not miss]
        if self.ref_features and ok:
            ref = self.features.compute(
                [inputs[i][0] for i in ok], [inputs[i][1] for i in ok], self.ref_features
            )
            for j, i in enumerate(ok):
                frame.loc[i, self.ref_features] = ref.loc[j, self.ref_features].to_numpy(dtype=float)
        if self.llm_features and ok:
            for feature in self.llm_features:
                task = get_task(self.feature_tasks[feature])
                verdicts = self.llm.score(task, [items[i] for i in ok])
                for i, v in zip(ok, verdicts, strict=True):
                    frame.at[i, feature] = v.score if v.ok else np.nan
                    if not v.ok and not why[i]:
                        why[i] = f"{feature}: {v.status} ({v.detail})"
        return frame, why

    def score(self, task: TaskSpec, items: Sequence[Item]) -> list[Verdict]:
        if task.level != "turn":
            raise ValueError(f"task {task.name!r}: the ensemble judge scores turn-level items only")
        frame, why = self.feature_frame(items)
        preds = self.ensemble.predict_scores(frame)
        out = []
        for i, it in enumerate(items):
            ref, pred, _ = reference_inputs(it)
            h = _pair_hash(ref, pred)
            p = float(preds[i])
            if np.isnan(p):
                status = "parse_error" if why[i].startswith(LLM_FEATURE_PREFIX) else "invalid_item"
                out.append(Verdict(None, status, "", h, detail=why[i] or "missing feature"))
            else:
                feats = ", ".join(f"{c}={frame.at[i, c]:.4f}" for c in frame.columns)
                out.append(Verdict(p, "ok", f"{self.ensemble.kind}({feats})={p:.6f}", h))
        return out

    def backend_stats(self) -> BackendStatsRecord:
        stats = self.features.stats.to_dict()
        if self._llm is not None:
            stats["llm"] = self._llm.backend_stats()
        return stats

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
