import json
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score
from statsmodels.stats.contingency_tables import mcnemar

from harness.meta.classification import (
    METRIC_NAMES,
    annotator_averaged,
    binary_metrics,
    bootstrap_metric_ci,
    human_ceiling,
    issue_detection,
    mcnemar_vs_human,
    stability,
)


def _random_labels(
    rng: np.random.Generator, n: int, p_missing: float = 0.15, p_pos: float = 0.3
) -> np.ndarray:
    labels = (rng.random(n) < p_pos).astype(float)
    labels[rng.random(n) < p_missing] = np.nan
    return labels


def _sklearn_numbers(ref: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    keep = ~np.isnan(ref) & ~np.isnan(pred)
    y, p = ref[keep].astype(int), pred[keep].astype(int)
    return {
        "f1_pos": f1_score(y, p, pos_label=1, zero_division=0.0),
        "f1_neg": f1_score(y, p, pos_label=0, zero_division=0.0),
        "precision": precision_score(y, p, pos_label=1, zero_division=0.0),
        "recall": recall_score(y, p, pos_label=1, zero_division=0.0),
        "accuracy": accuracy_score(y, p),
        "predicted_positive": int(p.sum()),
        "reference_positive": int(y.sum()),
    }


@pytest.mark.parametrize("seed", range(6))
def test_binary_metrics_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref, pred = _random_labels(rng, 60), _random_labels(rng, 60)
    got = binary_metrics(ref, pred)
    expected = _sklearn_numbers(ref, pred)
    for key, value in expected.items():
        assert abs(got[key] - value) < 1e-12, key
    assert got["n"] == int((~np.isnan(ref) & ~np.isnan(pred)).sum())


def test_binary_metrics_zero_division_and_validation() -> None:
    ref, pred = [0, 0, 0, None], [0, 0, 0, 1]
    assert binary_metrics(ref, pred)["f1_pos"] == pytest.approx(0.0)  # sklearn's numerical default
    assert binary_metrics(ref, pred, zero_division=1.0)["f1_pos"] == pytest.approx(1.0)
    assert math.isnan(binary_metrics(ref, pred, zero_division=np.nan)["precision"])
    assert binary_metrics(ref, pred)["f1_neg"] == pytest.approx(1.0)
    assert binary_metrics(ref, pred)["n"] == 3
    empty = binary_metrics([None, 1], [0, None])
    assert empty["n"] == 0 and math.isnan(empty["f1_pos"]) and empty["predicted_positive"] == 0
    with pytest.raises(ValueError, match="0/1"):
        binary_metrics([0, 2], [0, 1])
    with pytest.raises(ValueError, match="items"):
        binary_metrics([0, 1], [0, 1, 1])


@pytest.mark.parametrize("seed", range(4))
def test_annotator_averaged_is_mean_of_sklearn_per_annotator(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    judge, a, b = _random_labels(rng, 80), _random_labels(rng, 80), _random_labels(rng, 80)
    got = annotator_averaged(judge, {"A": a, "B": b})
    per_a, per_b = _sklearn_numbers(a, judge), _sklearn_numbers(b, judge)
    for key in METRIC_NAMES:
        assert abs(got[key] - (per_a[key] + per_b[key]) / 2) < 1e-12, key
        assert got["per_annotator"]["A"][key] == pytest.approx(per_a[key], abs=1e-12)
    has_human = ~np.isnan(a) | ~np.isnan(b)
    assert got["n"] == int((~np.isnan(judge) & has_human).sum())
    assert got["parse_failures"] == int((np.isnan(judge) & has_human).sum())


def test_annotator_averaged_nan_handling() -> None:
    judge = [1, None, 0, 1, None]
    a = [1, 1, 0, 0, None]
    b = [None, None, None, None, None]  # no overlap: not part of the mean
    got = annotator_averaged(judge, {"A": a, "B": b})
    assert list(got["per_annotator"]) == ["A"]
    assert got["n"] == 3 and got["parse_failures"] == 1
    assert got["accuracy"] == pytest.approx(2 / 3)
    assert got["predicted_positive"] == 2 and got["reference_positive"] == 1


def test_human_ceiling_symmetry() -> None:
    rng = np.random.default_rng(7)
    a, b = _random_labels(rng, 70), _random_labels(rng, 70)
    ceiling = human_ceiling({"A": a, "B": b})
    ab, ba = _sklearn_numbers(b, a), _sklearn_numbers(a, b)  # (reference, prediction)
    assert ab["f1_pos"] == pytest.approx(ba["f1_pos"], abs=1e-12)
    assert ab["precision"] == pytest.approx(ba["recall"], abs=1e-12)
    assert ceiling["f1_pos"] == pytest.approx(ab["f1_pos"], abs=1e-12)
    assert ceiling["precision"] == pytest.approx(ceiling["recall"], abs=1e-12)
    assert ceiling["precision"] == pytest.approx((ab["precision"] + ab["recall"]) / 2, abs=1e-12)
    assert set(ceiling["per_pair"]) == {"A|B", "B|A"}
    assert ceiling["n"] == int((~np.isnan(a) & ~np.isnan(b)).sum())
    assert human_ceiling({"A": a}) is None
    assert human_ceiling({"A": [1, None], "B": [None, 0]}) is None


def _correctness_data(judge_ok: list[int], human_ok: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference all 1 except every third item; judge/human equal to it where *_ok else flipped."""
    ref = np.array([0.0 if i % 3 == 0 else 1.0 for i in range(len(judge_ok))])
    judge = np.where(np.array(judge_ok) == 1, ref, 1 - ref)
    human = np.where(np.array(human_ok) == 1, ref, 1 - ref)
    return judge, human, ref


def test_mcnemar_matches_statsmodels_exact() -> None:
    # table [[both correct=5, judge only=2], [human only=8, neither=1]]
    judge_ok = [1] * 5 + [1] * 2 + [0] * 8 + [0] * 1
    human_ok = [1] * 5 + [0] * 2 + [1] * 8 + [0] * 1
    judge, human, ref = _correctness_data(judge_ok, human_ok)
    # Only two sets: with R=ref, H=human. Use R=ref as set "R", H as set "H".
    got = mcnemar_vs_human(judge, {"R": ref, "H": human})
    assert got["kind"] == "correctness"
    test = got["tests"]["R"]
    assert test["table"] == [[5, 2], [8, 1]]
    expected = mcnemar(np.array([[5, 2], [8, 1]]), exact=True, correction=True)
    assert test["p_value"] == pytest.approx(expected.pvalue, abs=1e-15)
    assert test["statistic"] == pytest.approx(expected.statistic, abs=1e-12) and test["exact"] is True
    assert test["judge_accuracy"] == pytest.approx(7 / 16) and test["human_accuracy"] == pytest.approx(
        13 / 16
    )
    assert got["p_value"] == min(t["p_value"] for t in got["tests"].values())


def test_mcnemar_judge_much_worse_is_significant_equal_is_not() -> None:
    # 40 discordant pairs → chi-square with continuity correction
    worse_j = [1] * 50 + [0] * 35 + [1] * 5 + [0] * 10
    worse_h = [1] * 50 + [1] * 35 + [0] * 5 + [0] * 10
    judge, human, ref = _correctness_data(worse_j, worse_h)
    got = mcnemar_vs_human(judge, {"R": ref, "H": human})
    test = got["tests"]["R"]
    assert test["table"] == [[50, 5], [35, 10]] and test["exact"] is False
    expected = mcnemar(np.array([[50, 5], [35, 10]]), exact=False, correction=True)
    assert test["p_value"] == pytest.approx(expected.pvalue, rel=1e-12)
    assert test["statistic"] == pytest.approx((abs(5 - 35) - 1) ** 2 / 40)
    assert test["significant"] and got["significant"]

    equal_j = [1] * 50 + [0] * 10 + [1] * 10 + [0] * 10
    equal_h = [1] * 50 + [1] * 10 + [0] * 10 + [0] * 10
    judge, human, ref = _correctness_data(equal_j, equal_h)
    got = mcnemar_vs_human(judge, {"R": ref, "H": human})
    assert got["tests"]["R"]["p_value"] == pytest.approx(1.0)
    assert not got["significant"]


def test_mcnemar_single_annotation_set_is_label_level() -> None:
    judge = [1, 1, 1, 1, 1, 1, 0, 0, None]
    human = [1, 0, 0, 0, 0, 0, 0, 0, 1]
    got = mcnemar_vs_human(judge, {"A": human})
    assert got["kind"] == "labels"
    test = got["tests"]["A"]
    assert test["table"] == [[1, 5], [0, 2]] and test["n"] == 8
    assert test["p_value"] == pytest.approx(mcnemar([[1, 5], [0, 2]], exact=True).pvalue)
    assert test["judge_positive"] == 6 and test["human_positive"] == 1
    assert mcnemar_vs_human(judge, {})["p_value"] is None


def test_bootstrap_equals_annotator_averaged_on_same_draws() -> None:
    rng = np.random.default_rng(3)
    judge, a, b = _random_labels(rng, 40), _random_labels(rng, 40, p_missing=0.4), _random_labels(rng, 40)
    n_boot = 200
    ci = bootstrap_metric_ci(judge, {"A": a, "B": b}, n_bootstrap=n_boot, confidence=0.9, seed=11)
    considered = np.flatnonzero(~np.isnan(judge) & (~np.isnan(a) | ~np.isnan(b)))
    draws = np.random.default_rng(11).integers(0, considered.size, size=(n_boot, considered.size))
    reps = {key: [] for key in METRIC_NAMES}
    for row in draws:
        sel = considered[row]
        avg = annotator_averaged(judge[sel], {"A": a[sel], "B": b[sel]})
        for key in METRIC_NAMES:
            reps[key].append(avg[key])
    for key in METRIC_NAMES:
        values = np.array(reps[key])
        values = values[~np.isnan(values)]
        expected = [np.quantile(values, 0.05), np.quantile(values, 0.95)]
        assert ci[key] == pytest.approx(expected, abs=1e-12), key
    assert ci == bootstrap_metric_ci(judge, {"A": a, "B": b}, n_bootstrap=n_boot, confidence=0.9, seed=11)
    assert bootstrap_metric_ci(judge, {"A": a}, n_bootstrap=5)["f1_pos"] is None


def _row(lang: str, item: str, judge: dict | None, humans: dict) -> dict:
    return {"language": lang, "item_id": item, "judge_labels": judge, "human_labels": humans}


def _samples() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for lang, annotators in (("en", ("e1", "e2")), ("es", ("s1",)), ("pt", ("p7", "p3"))):
        for i in range(12):
            judge = {d: int(rng.random() < 0.4) for d in ("unsafe", "repetitive")}
            if i == 3:
                judge["repetitive"] = None
            humans = {
                d: {ann: int(rng.random() < 0.35) for ann in annotators} for d in ("unsafe", "repetitive")
            }
            if i == 5 and len(annotators) == 2:
                humans["unsafe"][annotators[0]] = None
            rows.append(_row(lang, f"{lang}-{i}", None if i == 7 else judge, humans))
    return pd.DataFrame(rows)


DIMS = ("unsafe", "repetitive")


def test_issue_detection_values_and_shape() -> None:
    df = _samples()
    report = issue_detection(df, DIMS, n_bootstrap=50, language_order=["pt"])
    assert list(report) == ["pt", "en", "es", "all"]
    json.dumps(report, allow_nan=False)
    en = df[df.language == "en"]
    judge = np.array([np.nan if j is None else j["unsafe"] for j in en.judge_labels], dtype=float)
    slots = {
        slot: np.array([h["unsafe"][ann] for h in en.human_labels], dtype=float)
        for slot, ann in (("A", "e1"), ("B", "e2"))
    }
    expected = annotator_averaged(judge, slots)
    entry = report["en"]["unsafe/f1_pos"]
    assert entry["value"] == pytest.approx(expected["f1_pos"], abs=1e-12)
    assert entry["per_annotator"]["B"] == pytest.approx(expected["per_annotator"]["B"]["f1_pos"], abs=1e-12)
    assert entry["n"] == 11 and entry["parse_failures"] == 1
    assert report["en"]["repetitive/f1_pos"]["parse_failures"] == 2  # item 3 + unparsable item 7
    ceiling = human_ceiling(slots)
    assert report["en"]["unsafe/human_ceiling"]["value"] == pytest.approx(ceiling["f1_pos"])
    assert report["en"]["unsafe/mcnemar"]["kind"] == "correctness"
    assert report["es"]["unsafe/human_ceiling"]["value"] is None
    assert report["es"]["unsafe/mcnemar"]["kind"] == "labels"
    assert report["es"]["unsafe/f1_pos"]["per_annotator"].keys() == {"A"}
    macro = report["en"]["macro/f1_pos"]
    dims_f1 = [report["en"][f"{d}/f1_pos"]["value"] for d in DIMS]
    assert macro["value"] == pytest.approx(np.mean(dims_f1)) and macro["ci"] is None
    ci = report["all"]["unsafe/f1_pos"]["ci"]
    assert ci is not None and ci[0] <= report["all"]["unsafe/f1_pos"]["value"] <= ci[1]


def test_issue_detection_pooled_equals_concatenation_and_json_input() -> None:
    df = _samples()
    report = issue_detection(df, DIMS, n_bootstrap=40, seed=2)
    pooled = issue_detection(df.assign(language="xx"), DIMS, n_bootstrap=40, seed=2)
    assert report["all"] == pooled["xx"] == pooled["all"]
    as_json = df.assign(
        judge_labels=[None if j is None else json.dumps(j) for j in df.judge_labels],
        human_labels=[json.dumps(h) for h in df.human_labels],
    )
    assert issue_detection(as_json, DIMS, n_bootstrap=40, seed=2) == report


def test_issue_detection_rejects_bad_human_value() -> None:
    df = pd.DataFrame([_row("en", "bad-item", {"unsafe": 1}, {"unsafe": {"a": 1, "b": 3}})])
    with pytest.raises(ValueError, match=r"bad-item.*unsafe.*3"):
        issue_detection(df, ["unsafe"], n_bootstrap=10)
    dup = pd.DataFrame([_row("en", "x", {"unsafe": 1}, {})] * 2)
    with pytest.raises(ValueError, match="duplicate"):
        issue_detection(dup, ["unsafe"], n_bootstrap=10)


def test_stability_known_values() -> None:
    runs = [
        pd.DataFrame(
            {
                "item_id": ["i1", "i2", "i3"],
                "judge_labels": [{"unsafe": 1}, {"unsafe": 0}, json.dumps({"unsafe": 0})],
                "score": [5, 3, 4],
            }
        ),
        pd.DataFrame(
            {
                "item_id": ["i1", "i2", "i3"],
                "judge_labels": [{"unsafe": 0}, {"unsafe": 0}, None],
                "score": [4, 3, None],
            }
        ),
        pd.DataFrame(
            {"item_id": ["i2", "i1"], "judge_labels": [{"unsafe": 0}, {"unsafe": 1}], "score": [3, 5]}
        ),
    ]
    got = stability(runs, ["unsafe"])
    overall = got["overall"]
    assert overall["n_items"] == 2 and overall["n_runs"] == 3  # i3 scored in one run only
    assert overall["mean_item_std"] == pytest.approx((np.std([5, 4, 5]) + 0.0) / 2, abs=1e-12)
    assert overall["rate_std"] == pytest.approx(np.std([4.0, 3.5, 4.0]), abs=1e-12)
    assert overall["flip_rate"] == pytest.approx(0.5)
    unsafe = got["unsafe"]
    assert unsafe["mean_item_std"] == pytest.approx(np.std([1, 0, 1]) / 2, abs=1e-12)
    assert unsafe["run_means"] == pytest.approx([1 / 3, 0.0, 0.5])
    assert unsafe["rate_std"] == pytest.approx(np.std([1 / 3, 0.0, 0.5]), abs=1e-12)
    single = stability(runs[:1], ["unsafe"])["overall"]
    assert single["mean_item_std"] is None and single["n_items"] == 0 and single["rate_std"] is None


def test_three_annotation_sets_key_pairs() -> None:
    rng = np.random.default_rng(9)
    judge, a, b, c = (_random_labels(rng, 50, p_missing=0.0) for _ in range(4))
    sets = {"A": a, "B": b, "C": c}
    got = mcnemar_vs_human(judge, sets)
    assert set(got["tests"]) == {"A|B", "A|C", "B|A", "B|C", "C|A", "C|B"}
    ok_j, ok_h = (judge == b).astype(int), (c == b).astype(int)
    bad_j, bad_h = 1 - ok_j, 1 - ok_h
    table = [[np.sum(ok_j * ok_h), np.sum(ok_j * bad_h)], [np.sum(bad_j * ok_h), np.sum(bad_j * bad_h)]]
    assert got["tests"]["B|C"]["table"] == table
    ceiling = human_ceiling(sets)
    assert len(ceiling["per_pair"]) == 6
    pair_f1 = [f1_score(y, x) for x, y in ((a, b), (a, c), (b, c))]
    assert ceiling["f1_pos"] == pytest.approx(np.mean(pair_f1), abs=1e-12)
