"""A JSON verdict of binary issue labels and an overall score (MEDAL Table 11); parser and schema:
:mod:`harness.parsing.issues_json`. The labels are meta-evaluated as classification
(:mod:`harness.meta.issue_metrics`), the overall score as a correlation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.jsontypes import JSONObject
from harness.parsing.issues_json import issues_schema, parse_issues
from harness.parsing.score import ParsedScore
from harness.scorers.base import RequestFields, Scorer, ScorerOutput, range_problems
from harness.types import Response


@dataclass(frozen=True, kw_only=True)
class IssuesJSON(Scorer):
    """``{"<label>": {"label": 0|1, "comment": ""}, ..., "<overall_key>": {"label": lo..hi}}``.

    ``issue_labels`` are labelled by humans too (meta-evaluated); ``extra_labels`` only by the judge
    (MEDAL "other"); ``label_names`` are their short names in reports; ``guided``: send the verdict's
    JSON schema for guided decoding (backends without it validate the reply instead)."""

    issue_labels: tuple[str, ...] = ()  # type: ignore[misc]  # a field here, a class attribute on Scorer
    extra_labels: tuple[str, ...] = ()
    overall_key: str = "overall"
    range: tuple[int, int] = (1, 5)
    label_names: Mapping[str, str] = field(default_factory=dict)  # type: ignore[misc]  # as issue_labels
    guided: bool = True

    name = "issues_json"
    summary = "JSON verdict: binary issue labels + overall score (MEDAL Table 11), schema for guided decoding"

    def check(self) -> list[str]:
        problems = [] if self.issue_labels else ["needs issue_labels"]
        names = [*self.issue_labels, *self.extra_labels, self.overall_key]
        if len(set(names)) != len(names):
            problems.append(f"labels and overall_key must differ, got {names}")
        unknown = sorted(set(self.label_names) - set(self.judged_labels))
        if unknown:
            problems.append(f"label_names for labels the judge does not write: {unknown}")
        return problems + range_problems(self.range)

    @property
    def judged_labels(self) -> tuple[str, ...]:
        return tuple(self.issue_labels) + tuple(self.extra_labels)

    @property
    def json_schema(self) -> JSONObject:
        return issues_schema(self.judged_labels, self.overall_key, self.range)

    def request_fields(self) -> RequestFields:
        return {"json_schema": self.json_schema} if self.guided else {}

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        v = parse_issues(resp.text, self.judged_labels, self.overall_key, self.range)
        extra: JSONObject = {
            "labels": {**v.labels},
            "comments": {**v.comments},
            "label_errors": {**v.errors} if v.errors else None,
            "finish_reason": resp.finish_reason,
        }
        return ScorerOutput(ParsedScore(v.overall, v.status, v.detail), extra)

    def score_range(self) -> tuple[float, float]:
        return (float(self.range[0]), float(self.range[1]))

    def describe(self) -> JSONObject:
        out: JSONObject = {
            "score_range": list(self.range),
            "issue_labels": list(self.issue_labels),
            "extra_labels": list(self.extra_labels),
        }
        if self.label_names:
            out["label_names"] = dict(self.label_names)
        return out
