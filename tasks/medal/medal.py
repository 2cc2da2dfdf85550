"""MEDAL dialogue issue detection as an `evaluate` module (Mendonça, Lavie and Trancoso, Table 11).

A thin adapter over the dialeval-harness library (judge backends, request cache, JSON verdict
validation, harness.meta.classification meta-metrics):
    >>> import evaluate
    >>> m = evaluate.load("tasks/medal")
    >>> m.compute(dialogues=["user: I failed my exam.\\nassistant: Exams are held in May."],
    ...           judge="openai:gpt-4.1")
"""

import datasets
import evaluate
import numpy as np
import pandas as pd

from dataset_builders.medal_labels import MEDAL_CITATION
from harness.judges import judge_items
from harness.meta.classification import issue_detection
from harness.meta.correlation import correlation
from tasks.medal import MEDAL_TASK

_DESCRIPTION = """MEDAL dialogue evaluation: an LLM judge reads a whole dialogue between "user" and "assistant"
and returns a JSON verdict with eight binary issue labels (uninterpretable, unsafe, lacks empathy, lacks
commonsense, repetitive, incoherent, irrelevant, nonfactual), "other" and an overall 1-5 score (Table 11
prompt, temperature 0, top_p 1). Backends with guided decoding get the JSON schema; other outputs are
validated, and a failure is None (counted, raw text kept), never 0. With human labels, the issue-detection
meta-metrics of MEDAL §5.3 (F1+/F1-, precision, recall, accuracy, predicted positives averaged over the
annotation sets, human ceiling, McNemar) and the overall Pearson/Spearman are returned."""

_KWARGS_DESCRIPTION = """
Inputs:
    dialogues (list of str): one dialogue per item, one "user: ..." / "assistant: ..." line per turn
        (a line without a role prefix continues the previous turn)
Keyword arguments:
    judge: judge spec string (hf:/vllm:/openai:/replay:...), required; add reasoning=true for a
        reasoning judge (32,768-token budget)
    languages: language code per item (default "en")
    batch_size: items per judge call (default 16); cache_path: request-cache SQLite file (default: none)
    human_labels: optional, per item {dimension: {annotator: value}} (issue labels 0 or 1, "overall" 1-5)
    n_bootstrap: bootstrap resamples for 95% CIs (default 1000); seed (default 0)
Returns:
    overall (list of float|None), labels (list of {dimension: 0|1|None}), parse_failures,
    label_parse_failures ({dimension: n}), raw, failures, prompt (template name/source/hash),
    and with human_labels: issue_detection ({metric: entry} pooled over the items) and
    correlation ({pearson, spearman} of overall with the mean human overall)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Medal(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=MEDAL_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"dialogues": datasets.Value("string")}),
        )

    def _compute(
        self,
        dialogues,
        judge=None,
        languages=None,
        batch_size=16,
        cache_path=None,
        human_labels=None,
        n_bootstrap=1000,
        seed=0,
    ):
        if not judge:
            raise ValueError(
                "pass judge=<spec>, e.g. judge='openai:gpt-4.1' or judge='hf:Qwen/Qwen3-8B,reasoning=true'"
            )
        task = MEDAL_TASK
        langs = list(languages) if languages is not None else ["en"] * len(dialogues)
        if len(langs) != len(dialogues):
            raise ValueError(f"languages has {len(langs)} entries for {len(dialogues)} dialogues")
        items = []
        for i, (text, lang) in enumerate(zip(dialogues, langs, strict=True)):
            turns = _turns(text)
            if not turns:
                raise ValueError(f"dialogue {i} is empty")
            items.append({"id": str(i), "item_id": str(i), "language": lang, "turns": turns})
        verdicts = judge_items(judge, task, items, batch_size=batch_size, cache_path=cache_path, seed=seed)
        labels = [v.extra.get("labels") or dict.fromkeys(task.judged_labels) for v in verdicts]
        out = {
            "overall": [v.score if v.ok else None for v in verdicts],
            "labels": labels,
            "parse_failures": sum(not v.ok for v in verdicts),
            "label_parse_failures": {
                d: sum(lab.get(d) is None for lab in labels) for d in task.judged_labels
            },
            "failures": [
                {"index": i, "status": v.status, "detail": v.detail}
                for i, v in enumerate(verdicts)
                if v.detail
            ],
            "raw": [v.raw for v in verdicts],
            "prompt": task.template_for("en").describe(),
        }
        if human_labels is not None:
            if len(human_labels) != len(items):
                raise ValueError(f"human_labels has {len(human_labels)} entries for {len(items)} dialogues")
            frame = pd.DataFrame(
                {
                    "language": langs,
                    "item_id": [it["item_id"] for it in items],
                    "judge_labels": [v.extra.get("labels") for v in verdicts],
                    "human_labels": list(human_labels),
                }
            )
            out["issue_detection"] = issue_detection(
                frame, task.issue_labels, n_bootstrap=n_bootstrap, seed=seed
            )["all"]
            human_overall = [_mean((h or {}).get("overall", {})) for h in human_labels]
            pairs = [
                (s, h)
                for s, h in zip(out["overall"], human_overall, strict=True)
                if s is not None and h is not None
            ]
            x = np.array([p[0] for p in pairs], dtype=float)
            y = np.array([p[1] for p in pairs], dtype=float)
            out["correlation"] = {m: correlation(x, y, m).to_dict() for m in ("pearson", "spearman")}
        return out


def _mean(by_annotator):
    vals = [float(v) for v in by_annotator.values() if v is not None]
    return sum(vals) / len(vals) if vals else None


def _turns(text):
    turns = []
    for line in str(text).splitlines():
        if not line.strip():
            continue
        role, sep, rest = line.partition(":")
        if sep and role.strip().lower() in ("user", "assistant"):
            turns.append({"role": role.strip().lower(), "text": rest.strip()})
        elif turns:
            turns[-1]["text"] += "\n" + line.strip()
        else:
            turns.append({"role": "user", "text": line.strip()})
    return turns
