"""Scorers read from log-probs: P(Yes) (xDial-Eval §4), the G-Eval expected score, and GPTScore's
log-prob of a word in an echoed continuation (MEEP §5.3). Parsers: :mod:`harness.parsing.logprobs`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.jsontypes import JSONObject
from harness.parsing.logprobs import (
    continuation_word_logprob,
    expected_score,
    expected_score_from_tokens,
    p_yes,
)
from harness.scorers.base import RequestFields, Scorer, ScorerOutput, response_extra
from harness.types import GenerationConfig, Response

DIGITS = tuple(str(d) for d in range(1, 6))


def _labels_problems(labels: object) -> list[str]:
    if (
        not isinstance(labels, tuple)
        or len(labels) != 2
        or not all(isinstance(x, str) and x.strip() for x in labels)
        or labels[0] == labels[1]
    ):
        return [f"labels must be two different non-empty words (yes, no), got {labels!r}"]
    return []


@dataclass(frozen=True, kw_only=True)
class PYes(Scorer):
    """P(yes) / (P(yes) + P(no)) from the log-probs of the two label words at the start of the reply."""

    labels: tuple[str, str] = ("Yes", "No")

    name = "p_yes"
    summary = "P(Yes) from the label words' log-probs (xDial-Eval §4); needs log-probs (hf, vllm, openai)"
    scale = "probability"

    def check(self) -> list[str]:
        return _labels_problems(self.labels)

    def request_fields(self) -> RequestFields:
        return {"choices": tuple(self.labels)}

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        return ScorerOutput(p_yes(resp, *self.labels), response_extra(resp))

    def score_range(self) -> tuple[float, float]:
        return (0.0, 1.0)

    def describe(self) -> JSONObject:
        return {"labels": list(self.labels)}


@dataclass(frozen=True, kw_only=True)
class ExpectedScore(Scorer):
    """The probability-weighted digit score sum_d d·p(d) over 1-5 (G-Eval), from the digit labels'
    log-probs or the top alternatives of the first generated digit (token log-probs are requested)."""

    name = "expected_score"
    summary = "probability-weighted 1-5 digit score (G-Eval) from token log-probs"
    scale = "likert"

    def generation(self, config: GenerationConfig) -> GenerationConfig:
        if config.logprobs:
            return config
        return config.replace(logprobs=True, top_logprobs=max(config.top_logprobs, 20))

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        if resp.choice_logprobs:
            s = expected_score(resp)
        else:
            s = expected_score_from_tokens(resp.token_logprobs, list(DIGITS))
        return ScorerOutput(s, response_extra(resp))

    def score_range(self) -> tuple[float, float]:
        return (1.0, 5.0)  # digit labels 1-5 (choices are never sent)


@dataclass(frozen=True, kw_only=True)
class GPTScore(Scorer):
    """GPTScore: nothing is generated; the backend scores ``continuation`` echoed after the prompt and
    the score is the log-prob of ``target`` inside it (MEEP §5.3: "Yes" in "Answer: Yes.")."""

    continuation: str = ""
    target: str = ""

    name = "gptscore"
    summary = "log-prob of a word in a continuation echoed after the prompt (GPTScore); needs hf or vllm"
    scale = ""

    def check(self) -> list[str]:
        if not self.continuation or not self.target or self.target not in self.continuation:
            return [
                f"needs a continuation containing its target (got {self.continuation!r} / {self.target!r})"
            ]
        return []

    def request_fields(self) -> RequestFields:
        return {"continuation": self.continuation}

    def score(self, resp: Response, item: Mapping[str, object]) -> ScorerOutput:
        extra = response_extra(resp)
        extra["continuation_logprob"] = resp.continuation_logprob
        if "system_role" in extra:  # keep the key order of earlier samples
            extra["system_role"] = extra.pop("system_role")
        return ScorerOutput(continuation_word_logprob(resp, self.continuation, self.target), extra)

    def describe(self) -> JSONObject:
        return {"continuation": self.continuation, "continuation_target": self.target}
