"""Parsing: a judge model's raw output → a parsed score, or ``None`` with the reason (never coerced to 0).

A judge's per-item result is a :class:`~harness.judges.base.Verdict`; the parsers here read the
model's output it is built from, and a :class:`~harness.scorers.Scorer` calls them.

* :mod:`~harness.parsing.logprobs` — from label log-probs: P(Yes) (xDial-Eval §4), G-Eval expected
  score, GPTScore continuation log-prob;
* :mod:`~harness.parsing.written` — written yes/no and Likert answers (UPHELD App. H);
* :mod:`~harness.parsing.scale` — a score on any scale written anywhere in free text (MEEP, G-Eval);
* :mod:`~harness.parsing.issues_json` — JSON multi-label answers with a schema for guided decoding
  (MEDAL Table 11);
* :class:`~harness.parsing.score.ParsedScore` — what every parser returns.
"""

from harness.parsing.issues_json import ParsedIssues, issues_schema, parse_issues
from harness.parsing.logprobs import continuation_word_logprob, expected_score, p_yes
from harness.parsing.scale import parse_scale_score
from harness.parsing.score import ParsedScore
from harness.parsing.written import parse_likert, parse_yes_no

__all__ = [
    "ParsedIssues",
    "ParsedScore",
    "continuation_word_logprob",
    "expected_score",
    "issues_schema",
    "p_yes",
    "parse_issues",
    "parse_likert",
    "parse_scale_score",
    "parse_yes_no",
]
