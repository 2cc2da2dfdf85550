"""Verdicts: a judge's raw output → a score, or ``None`` with the reason (never coerced to 0).

* :mod:`~harness.verdicts.logprobs` — from label log-probs: P(Yes) (xDial-Eval §4), G-Eval expected
  score, GPTScore continuation log-prob;
* :mod:`~harness.verdicts.written` — written yes/no and Likert verdicts (UPHELD App. H);
* :mod:`~harness.verdicts.scale` — a score on any scale written anywhere in free text (MEEP, G-Eval);
* :mod:`~harness.verdicts.issues_json` — JSON multi-label verdicts with a schema for guided decoding
  (MEDAL Table 11);
* :class:`~harness.verdicts.score.Score` — what every parser returns.
"""

from harness.verdicts.issues_json import IssueVerdict, parse_issue_verdict, verdict_schema
from harness.verdicts.logprobs import continuation_word_logprob, expected_score, p_yes
from harness.verdicts.scale import parse_scale_score
from harness.verdicts.score import Score
from harness.verdicts.written import parse_likert, parse_yes_no

__all__ = [
    "IssueVerdict",
    "Score",
    "continuation_word_logprob",
    "expected_score",
    "p_yes",
    "parse_issue_verdict",
    "parse_likert",
    "parse_scale_score",
    "parse_yes_no",
    "verdict_schema",
]
