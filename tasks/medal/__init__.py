"""MEDAL dialogue-level issue detection (Mendonça, Lavie and Trancoso): the judge reads a whole
dialogue and returns, as JSON (Table 11), eight binary issue labels (Table 1) + ``other`` + an
overall 1–5 score.

Meta-evaluation (§5.3, App. E.2) — computed by ``harness run`` for the ``medal`` task:

* overall quality: Pearson and Spearman (p-values, bootstrap CIs) against the mean human overall
  score, per language, averaged over languages and pooled ("Combined");
* issue detection, per dimension and language and pooled: F1 of the positive label (F1+), F1 of
  the negative label (F1−), precision, recall, accuracy and predicted-positive counts, averaged over
  the double human annotations (each annotator in turn as the reference); the human ceiling
  (annotator vs annotator); McNemar's test of judge vs human at α = 0.05.

Decoding (§5.3.1): temperature 0, top_p 1, 8,192 new tokens; a reasoning judge (spec option
``reasoning=true``) gets 32,768. Backends with guided decoding get the verdict's JSON schema; the
others are validated by :func:`harness.parsing.issues_json.parse_issues` (a failure is ``None``,
counted, raw text kept).
"""

from dataset_builders.medal_labels import (
    ISSUE_ABBREVIATIONS,
    MEDAL_CITATION,
    MEDAL_ISSUES,
    MEDAL_LANGUAGES,
    MEDAL_OTHER,
    MEDAL_OVERALL,
    MEDAL_OVERALL_KEY,
    MEDAL_OVERALL_RANGE,
)
from harness.languages import LANGUAGES
from harness.scorers import IssuesJSON
from harness.tasks import TaskSpec, register_task
from harness.types import GenerationConfig
from tasks.medal.templates import MEDAL_DIALOGUE_EVALUATION

# MEDAL's six languages first; the prompt is English for every language (as in the paper), so the
# task accepts any language the harness knows.
LANGUAGES_ALL = MEDAL_LANGUAGES + tuple(c for c in LANGUAGES if c not in MEDAL_LANGUAGES)
JUDGED_LABELS = (*MEDAL_ISSUES, MEDAL_OTHER)

MEDAL_TASK = register_task(
    TaskSpec(
        name="medal",
        description=(
            "MEDAL issue detection: 8 binary issue labels + overall 1-5 per dialogue (Table 11 JSON); "
            "F1+/F1-, precision, recall, accuracy vs both annotators, human ceiling, McNemar; "
            "overall Pearson/Spearman."
        ),
        builder="medal",
        configs=("benchmark",),
        level="dialogue",
        dimension=MEDAL_OVERALL,
        languages=LANGUAGES_ALL,
        templates={lang: MEDAL_DIALOGUE_EVALUATION for lang in LANGUAGES_ALL},
        scorer=IssuesJSON(
            issue_labels=MEDAL_ISSUES,
            extra_labels=(MEDAL_OTHER,),
            overall_key=MEDAL_OVERALL_KEY,
            range=MEDAL_OVERALL_RANGE,
            label_names=ISSUE_ABBREVIATIONS,
        ),  # its JSON schema (guided decoding) is issues_schema(JUDGED_LABELS, key, range)
        metrics=("pearson", "spearman"),
        generation=GenerationConfig(temperature=0.0, top_p=1.0, max_tokens=8192),
        reasoning_max_tokens=32768,
        evaluate_dir="tasks/medal",
        citation=MEDAL_CITATION,
    )
)
