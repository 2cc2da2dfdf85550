"""harness.view.compare: two real judges on the same demo items — the per-language values are those of
each run's results.json, the difference has a paired-bootstrap CI and p-value, and the judges'
largest disagreements come first."""

from __future__ import annotations

import json

import pytest

from harness.view.compare import compare, paired_frame
from harness.view.data import read_run


@pytest.fixture(scope="module")
def cmp(view_runs):
    return compare(read_run(view_runs["demo_b"]), read_run(view_runs["demo_a"]), n_bootstrap=200)


def test_values_match_each_runs_results_json(cmp, view_runs):
    res_a = json.loads((view_runs["demo_b"] / "results.json").read_text())["results"]  # baseline
    res_b = json.loads((view_runs["demo_a"] / "results.json").read_text())["results"]
    assert cmp["common_tasks"] == ["demo-turn", "demo-dialogue"]
    assert cmp["counts"] == {"a": 240, "b": 240, "paired": 240}
    turn = next(t for t in cmp["tasks"] if t["task"] == "demo-turn")
    assert turn["failures"] == {"a": 0, "b": 3, "either": 3} and turn["human_mismatch"] == 0
    by_lang = {e["language"]: e for e in turn["deltas"]["languages"]}
    assert set(by_lang) == {"en", "zh", "es", "de", "fr", "ja", "ko", "hi", "ar", "ru"}
    for lang in ("es", "de", "fr", "ja", "ko", "hi", "ru"):  # no parse failure: the runs' own numbers
        for m in ("pearson", "spearman"):
            e = by_lang[lang]["metrics"][m]
            assert e["a"] == pytest.approx(res_a["demo-turn"][lang][m]["value"], abs=1e-9)
            assert e["b"] == pytest.approx(res_b["demo-turn"][lang][m]["value"], abs=1e-9)
            assert e["delta"] == pytest.approx(e["b"] - e["a"], abs=1e-12)
            lo, hi = e["ci"]
            assert lo <= hi and 0.0 <= e["p_value"] <= 1.0
    assert by_lang["en"]["n"] == 15  # the failed item is left out of both judges
    everything = turn["deltas"]["all"]["metrics"]["pearson"]
    assert everything["a"] == pytest.approx(
        sum(by_lang[lg]["metrics"]["pearson"]["a"] for lg in by_lang) / 10, abs=1e-12
    )
    assert -1 <= by_lang["es"]["judges"]["spearman"]["value"] <= 1
    assert turn["alpha_rank"] is None or -1 <= turn["alpha_rank"] <= 1


def test_disagreements_are_the_largest_rank_gaps(cmp, view_runs):
    turn = next(t for t in cmp["tasks"] if t["task"] == "demo-turn")
    gaps = [d["gap"] for d in turn["disagreements"]]
    assert len(gaps) == 100 and gaps == sorted(gaps, reverse=True) and 0 < gaps[0] <= 1
    top = turn["disagreements"][0]
    assert top["gap"] == pytest.approx(abs(top["pct_a"] - top["pct_b"]))
    df, _ = paired_frame(read_run(view_runs["demo_b"]), read_run(view_runs["demo_a"]), "demo-turn")
    row = df[(df["id"] == top["id"]) & (df["dataset"] == top["dataset"])].iloc[0]
    assert (row["score_a"], row["score_b"]) == (top["score_a"], top["score_b"])


def test_a_task_not_in_both_runs_is_an_error(view_runs):
    with pytest.raises(ValueError, match="not in both runs"):
        compare(read_run(view_runs["demo_a"]), read_run(view_runs["upheld"]), task="demo-turn")
    none = compare(read_run(view_runs["demo_a"]), read_run(view_runs["upheld"]))
    assert none["common_tasks"] == [] and none["tasks"] == []
