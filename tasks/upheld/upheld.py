"""UPHELD App. H LLM-as-a-judge metrics as an `evaluate` module, with App. B correlations.

A thin adapter over the dialeval-harness library (judge backends, request cache, verdict parsers,
harness.meta.scale_correlation):
    >>> import evaluate
    >>> m = evaluate.load("tasks/upheld", "likert")
    >>> m.compute(conversations=["user: Hi, a train to Cambridge?"], references=["From which station?"],
    ...           continuations=["Which station are you leaving from?"], judge="hf:Qwen/Qwen2.5-0.5B-Instruct")
"""

import datasets
import evaluate
import numpy as np

from dataset_builders.upheld.builder import UPHELD_CITATION
from harness.judges import judge_items
from harness.meta.scale_correlation import app_b_correlation, system_level
from tasks.upheld import UPHELD_APP_H_TASKS

_DESCRIPTION = """The four LLM-as-a-judge metrics of UPHELD App. H: the judge compares the model continuation
(Option B) with the human continuation (Option A, the reference) given the conversation and writes a
verdict — yes/no, yes/no with an explanation, a Likert 1-5 score, or a Likert score with a reason. Verdicts
are parsed from the text; a parse failure is None (counted, raw text kept), never 0. With human labels,
the App. B correlation (Pearson / Cramér's V / point-biserial by label scale) and, with system ids, the
system-level Pearson/Spearman/Kendall (ComperDial fn. 9) are returned too."""

_KWARGS_DESCRIPTION = """
Configs: "yes_no", "yes_no_explain", "likert", "likert_explain" (App. H prompts, verbatim).
Inputs:
    conversations (list of str): the chat history, one "role: text" line per turn
    references (list of str): Option A, the human continuation
    continuations (list of str): Option B, the model continuation to judge
Keyword arguments:
    judge: judge spec string (hf:/vllm:/openai:/replay:...), required
    batch_size: items per judge call (default 32); cache_path: request-cache SQLite file (default: none)
    human: optional list of human labels (one per item) to correlate with
    scale: "likert" | "binary" | "continuous" (default "continuous", i.e. Pearson on e.g. mean labels)
    levels: label levels for Cramér's V (default: the distinct labels)
    systems: optional system id per item for system-level correlations
    n_bootstrap: bootstrap resamples for the 95% CI (default 1000); seed (default 0)
Returns:
    scores (list of float|None), mean, parse_failures, raw (judge outputs), failures (index, detail),
    prompt (template name/source/hash), correlation (with human), system_level (with systems)
"""

_FEATURE_BY_CONFIG = {
    "yes_no": "llm_judge_yes_no",
    "yes_no_explain": "llm_judge_yes_no_explain",
    "likert": "llm_judge_likert_1_5",
    "likert_explain": "llm_judge_likert_1_5_explain",
}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Upheld(evaluate.Metric):
    def _info(self):
        if self.config_name not in _FEATURE_BY_CONFIG:
            raise KeyError(f"unknown config {self.config_name!r}: use one of {sorted(_FEATURE_BY_CONFIG)}")
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=UPHELD_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "conversations": datasets.Value("string"),
                    "references": datasets.Value("string"),
                    "continuations": datasets.Value("string"),
                }
            ),
        )

    def _compute(
        self,
        conversations,
        references,
        continuations,
        judge=None,
        batch_size=32,
        cache_path=None,
        human=None,
        scale="continuous",
        levels=None,
        systems=None,
        n_bootstrap=1000,
        seed=0,
    ):
        if not judge:
            raise ValueError("pass judge=<spec>, e.g. judge='hf:Qwen/Qwen2.5-0.5B-Instruct'")
        task = UPHELD_APP_H_TASKS[("content", _FEATURE_BY_CONFIG[self.config_name])]
        items = [
            {
                "id": str(i),
                "language": "en",
                "context": [_turn(line) for line in str(conv).splitlines() if line.strip()],
                "reference": ref,
                "response": cont,
            }
            for i, (conv, ref, cont) in enumerate(zip(conversations, references, continuations, strict=True))
        ]
        verdicts = judge_items(judge, task, items, batch_size=batch_size, cache_path=cache_path, seed=seed)
        scores = [v.score if v.ok else None for v in verdicts]
        valid = [s for s in scores if s is not None]
        out = {
            "scores": scores,
            "mean": float(np.mean(valid)) if valid else None,
            "parse_failures": sum(s is None for s in scores),
            "failures": [
                {"index": i, "status": v.status, "detail": v.detail}
                for i, v in enumerate(verdicts)
                if not v.ok
            ],
            "raw": [v.raw for v in verdicts],
            "prompt": task.template_for("en").describe(),
        }
        if human is not None:
            x = np.array([np.nan if s is None else s for s in scores], dtype=float)
            out["correlation"] = app_b_correlation(
                x,
                np.asarray(human, dtype=float),
                scale,
                levels=levels,
                lo=_lo(task),
                hi=_hi(task),
                n_bootstrap=n_bootstrap,
                seed=seed,
            ).to_dict()
            if systems is not None:
                import pandas as pd

                frame = pd.DataFrame({"score": x, "human": np.asarray(human, dtype=float), "system": systems})
                out["system_level"] = system_level(frame, "score", n_bootstrap=n_bootstrap, seed=seed)
        return out


def _turn(line):
    role, sep, text = line.partition(":")
    if sep and role.strip() in ("user", "assistant", "system"):
        return {"role": role.strip(), "text": text.strip()}
    return {"role": "user", "text": line.strip()}


def _lo(task):
    return task.scorer.score_range()[0]  # yes/no 0-1, Likert 1-5


def _hi(task):
    return task.scorer.score_range()[1]
