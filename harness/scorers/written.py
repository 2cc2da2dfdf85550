"""Scorers of verdicts written in free text: yes/no and Likert (UPHELD App. H), and a score on any
scale written anywhere in the reply (MEEP, G-Eval, CPDScore, translation adequacy). Parsers:
:mod:`harness.parsing.written`, :mod:`harness.parsing.scale`; a reply without a valid verdict is
``None`` (``parse_error``), never clipped, never 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.jsontypes import JSONObject
from harness.parsing.scale import parse_scale_score
from harness.parsing.written import parse_likert, parse_yes_no
from harness.scorers.base import Scorer, ScorerOutput, range_problems, response_extra
from harness.scorers.logprob import _labels_problems
from harness.types import Response


@dataclass(frozen=True, kw_only=True)
class ParseYesNo(Scorer):
    """A written yes/no verdict: 1.0 for ``labels[0]``, 0.0 for ``labels[1]``."""

    labels: tuple[str, str] = ("Yes", "No")

    name = "parse_yes_no"
    summary = "written yes/no verdict -> 1 / 0 (UPHELD App. H)"
    scale = "probability"

    def check(self) -> list[str]:
        return _labels_problems(self.labels)

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        return ScorerOutput(parse_yes_no(resp.text, *self.labels), response_extra(resp))

    def score_range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def describe(self) -> JSONObject:
        return {"labels": list(self.labels)}


@dataclass(frozen=True, kw_only=True)
class ParseLikert(Scorer):
    """A written integer verdict on ``range`` (default 1-5, UPHELD App. H)."""

    range: tuple[int, int] = (1, 5)

    name = "parse_likert"
    summary = "written integer Likert verdict, 1-5 by default (UPHELD App. H)"
    scale = "likert"

    def check(self) -> list[str]:
        return range_problems(self.range)

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        lo, hi = self.range
        return ScorerOutput(parse_likert(resp.text, lo, hi), response_extra(resp))

    def score_range(self) -> tuple[float, float]:
        return (float(self.range[0]), float(self.range[1]))


@dataclass(frozen=True, kw_only=True)
class ParseScore(Scorer):
    """A number on ``range`` written anywhere in the reply (numerals and number words of the item's
    language); out of range is a parse failure, not clipped; ``integer``: only whole points count."""

    range: tuple[float, float] = (0.0, 100.0)
    integer: bool = False

    name = "parse_score"
    summary = "a score on the task's scale written anywhere in free text (MEEP, G-Eval, CPDScore)"

    def check(self) -> list[str]:
        problems = range_problems(self.range, "score_range")
        if not isinstance(self.integer, bool):
            problems.append(f"integer must be true or false, got {self.integer!r}")
        return problems

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        lo, hi = self.range
        language = item.get("language")
        s = parse_scale_score(
            resp.text, lo, hi, integer=self.integer, language=language if isinstance(language, str) else None
        )
        return ScorerOutput(s, response_extra(resp))

    def score_range(self) -> tuple[float, float]:
        return (float(self.range[0]), float(self.range[1]))

    def describe(self) -> JSONObject:
        return {"score_range": list(self.range)}
