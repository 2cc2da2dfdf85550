"""Scorer objects: each owns its request fields, decoding needs, range and parsing, checks its
parameters, and is listed in the registry that ``harness ls scorers`` prints."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.parsing import ParsedScore, issues_schema, parse_issues, parse_scale_score
from harness.registry import DuplicateError
from harness.scorers import (
    BUILTIN_SCORERS,
    SCORERS,
    ExpectedScore,
    GPTScore,
    IssuesJSON,
    ParseLikert,
    ParseScore,
    ParseYesNo,
    PYes,
    Scorer,
    ScorerOutput,
    make_scorer,
    register_scorer,
)
from harness.types import GenerationConfig, Response, TokenLogprob


def test_the_builtin_scorers_are_registered_by_name():
    assert SCORERS.names()[: len(BUILTIN_SCORERS)] == [
        "p_yes",
        "expected_score",
        "parse_yes_no",
        "parse_likert",
        "parse_score",
        "gptscore",
        "issues_json",
    ]
    assert all(SCORERS.origin(cls.name) == "core" and cls.summary for cls in BUILTIN_SCORERS)


def test_label_scorers_request_choices_and_read_log_probs():
    s = PYes(labels=("Ja", "Nein"))
    assert s.request_fields() == {"choices": ("Ja", "Nein")} and s.score_range() == (0.0, 1.0)
    got = s.score(Response("Ja", choice_logprobs={"Ja": -0.1, "Nein": -2.4}), {})
    assert (
        got.score.ok
        and 0.5 < got.score.value < 1
        and got.extra == {"choice_logprobs": {"Ja": -0.1, "Nein": -2.4}}
    )
    assert s.describe() == {"labels": ["Ja", "Nein"]} and str(s) == "p_yes(labels=['Ja', 'Nein'])"
    yn = ParseYesNo()
    assert yn.request_fields() == {} and yn.score(Response("No."), {}).score.value == 0.0


def test_expected_score_asks_for_token_log_probs():
    s = ExpectedScore()
    cfg = s.generation(GenerationConfig(max_tokens=4))
    assert cfg.logprobs and cfg.top_logprobs == 20
    assert (
        s.generation(GenerationConfig(logprobs=True, top_logprobs=5)).top_logprobs == 5
    )  # already set: kept
    tok = Response("4", token_logprobs=[TokenLogprob("4", -0.1, {"4": -0.1, "5": -2.3})])
    assert 4.0 < s.score(tok, {}).score.value < 5.0 and s.score_range() == (1.0, 5.0)


def test_written_scores_use_the_item_language_and_the_range():
    s = ParseScore(range=(0, 100))
    fr = s.score(Response("Note : quatre-vingt-cinq."), {"language": "fr"}).score
    assert fr == parse_scale_score("Note : quatre-vingt-cinq.", 0, 100, language="fr") and fr.value == 85
    assert (
        ParseScore(range=(1, 3), integer=True).score(Response("2.5"), {}).score.value is None
    )  # not a point
    assert s.describe() == {"score_range": [0, 100]} and s.params() == {"range": [0, 100], "integer": False}
    lik = ParseLikert(range=(1, 7))
    assert lik.score(Response("6"), {}).score.value == 6.0 and lik.score_range() == (1.0, 7.0)


def test_gptscore_requests_a_continuation():
    s = GPTScore(continuation="Answer: Yes.", target="Yes")
    assert (
        s.request_fields() == {"continuation": "Answer: Yes."} and s.score_range() is None and s.scale == ""
    )
    resp = Response(
        "",
        token_logprobs=[TokenLogprob("Answer:", -1.0), TokenLogprob(" Yes.", -0.3)],
        continuation_logprob=-1.3,
    )
    got = s.score(resp, {})
    assert got.score.value == pytest.approx(-0.3) and got.extra["continuation_logprob"] == -1.3


def test_issues_json_owns_its_labels_schema_and_parser():
    s = IssuesJSON(
        issue_labels=("unsafe", "rude"),
        extra_labels=("other",),
        overall_key="overall",
        range=(1, 5),
        label_names={"unsafe": "!S"},
    )
    assert s.judged_labels == ("unsafe", "rude", "other") and s.label_names == {"unsafe": "!S"}
    assert s.request_fields() == {
        "json_schema": issues_schema(("unsafe", "rude", "other"), "overall", (1, 5))
    }
    assert IssuesJSON(issue_labels=("a",), guided=False).request_fields() == {}
    text = json.dumps(
        {
            "unsafe": {"label": 1, "comment": "x"},
            "rude": {"label": 0},
            "other": {"label": 0},
            "overall": {"label": 2},
        }
    )
    got = s.score(Response(text, finish_reason="stop"), {})
    want = parse_issues(text, s.judged_labels, "overall", (1, 5))
    assert got.score.value == want.overall == 2 and got.extra["labels"] == want.labels
    assert got.extra["finish_reason"] == "stop"
    assert s.describe()["issue_labels"] == ["unsafe", "rude"] and s.describe()["label_names"] == {
        "unsafe": "!S"
    }


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: ParseScore(range=(1, 1)), "score_range must be (lo, hi) with lo < hi"),
        (lambda: ParseScore(range="1-5"), "score_range must be (lo, hi)"),
        (lambda: ParseScore(range=(1, 5), integer="yes"), "integer must be true or false"),
        (lambda: ParseLikert(range=(5, 1)), "range must be (lo, hi)"),
        (lambda: PYes(labels=("Yes",)), "labels must be two different non-empty words"),
        (lambda: ParseYesNo(labels=("Yes", " ")), "labels must be two different non-empty words"),
        (
            lambda: GPTScore(continuation="Answer: No.", target="Yes"),
            "needs a continuation containing its target",
        ),
        (lambda: IssuesJSON(issue_labels=("a", "a")), "labels and overall_key must differ"),
        (
            lambda: IssuesJSON(issue_labels=("a",), label_names={"b": "B"}),
            "label_names for labels the judge does not write",
        ),
        (lambda: make_scorer("parse_score", bogus=1), "unknown parameter(s) ['bogus']"),
    ],
)
def test_bad_parameters_are_refused_when_made(make, fragment):
    with pytest.raises(ValueError) as ei:
        make()
    assert fragment in str(ei.value)


def test_make_scorer_by_name_and_unknown_names():
    assert make_scorer("issues_json", issue_labels=["x"], range=[0, 3]) == IssuesJSON(
        issue_labels=("x",), range=(0, 3)
    )
    with pytest.raises(KeyError, match="unknown scoring method 'nope'; known: p_yes, expected_score"):
        make_scorer("nope")


def test_a_new_scorer_registers_and_duplicates_are_refused():
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Shouting(Scorer):
        """Scores the share of upper-case letters in the reply."""

        name = "shouting"
        summary = "share of upper-case letters"

        def score(self, resp, item):
            letters = [c for c in resp.text if c.isalpha()]
            value = sum(c.isupper() for c in letters) / len(letters) if letters else None
            return ScorerOutput(ParsedScore(value, "ok" if letters else "parse_error"))

        def score_range(self):
            return (0.0, 1.0)

    with SCORERS.isolated():
        assert register_scorer(Shouting) is Shouting and register_scorer(Shouting) is Shouting
        assert make_scorer("shouting").score(Response("HEY you"), {}).score.value == pytest.approx(0.5)

        @dataclasses.dataclass(frozen=True)
        class Other(Shouting):
            pass

        with pytest.raises(DuplicateError, match="scoring method 'shouting' is already registered"):
            register_scorer(Other)
        with pytest.raises(TypeError, match="Scorer subclass"):
            register_scorer(int)  # type: ignore[arg-type]
    assert "shouting" not in SCORERS


def test_harness_ls_lists_scorers_and_backends():
    r = CliRunner().invoke(app, ["ls", "scorers"])
    assert r.exit_code == 0, r.output
    assert "parse_score" in r.output and "issues_json" in r.output and "core" in r.output
    r = CliRunner().invoke(app, ["ls", "backends"])
    assert r.exit_code == 0 and "harness.backends.vllm_backend:VLLMBackend" in r.output.replace("\n", "")
