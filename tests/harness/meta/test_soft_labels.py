"""Soft labels and human ceilings: hand-computed expected errors and cross-entropy, Spearman–Brown,
the leave-one-annotator-out ceiling against an independent computation, high-agreement items, and the
results.json entries; on the real UPHELD labels when ../shared/data is present."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from harness.meta.soft_labels import (
    add_human_metrics,
    annotator_frame,
    high_agreement_units,
    item_dimension,
    item_distribution,
    label_info,
    loao_ceiling,
    soft_label_metrics,
    spearman_brown,
    split_half_ceiling,
)


def _samples(rows):
    """rows: (dataset, id, score, {annotator: label}, extra) → a samples frame as harness run writes."""
    return pd.DataFrame(
        {
            "dataset": [r[0] for r in rows],
            "language": "en",
            "id": [r[1] for r in rows],
            "item_id": [r[1] for r in rows],
            "score": [r[2] for r in rows],
            "human": [float(np.mean(list(r[3].values()))) for r in rows],
            "human_labels": [json.dumps({"q": r[3]}) for r in rows],
            "human_dimension": "q",
            "extra": [json.dumps(r[4]) if r[4] else None for r in rows],
        }
    )


def test_item_dimension_and_distribution():
    item = {
        "dimension": "content",
        "labels": [
            {"annotator": "a", "dimension": "content", "value": 2.0},
            {"annotator": "b", "dimension": "content", "value": 2.0},
            {"annotator": "c", "dimension": "content", "value": 5.0},
            {"annotator": "c", "dimension": "style", "value": 1.0},
        ],
    }
    assert item_dimension("overall", item) == "content"  # CPDScore's 'overall' on UPHELD → the headline
    assert item_dimension("style", item) == "style"
    assert json.loads(item_distribution(item, "content")) == {
        "2": pytest.approx(2 / 3),
        "5": pytest.approx(1 / 3),
    }
    assert item_distribution(item, "missing") is None


def test_expected_errors_and_cross_entropy_by_hand():
    s = _samples(
        [
            ("d", "x", 2.0, {"a": 1, "b": 2, "c": 2}, None),
            ("d", "y", 4.0, {"a": 5, "b": 5, "c": 4}, None),
            ("d", "z", None, {"a": 3, "b": 3, "c": 3}, None),
        ]
    )
    info = label_info({"min": 1, "max": 5, "scale": "likert"}, [1, 5])
    assert info["levels"] == [1.0, 2.0, 3.0, 4.0, 5.0]
    out = soft_label_metrics(s, annotator_frame(s), info, (1.0, 5.0), n_bootstrap=0)
    assert out["soft/expected_abs_error"]["value"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert out["soft/expected_sq_error"]["value"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert out["soft/expected_abs_error"]["parse_failures"] == 1  # the None score: counted, not 0
    assert "soft/cross_entropy" not in out  # no label probabilities from this judge
    # a judge on [0, 1] is mapped linearly onto the 1-5 label range first: 0.25 -> 2
    out = soft_label_metrics(
        s.assign(score=[0.25, 0.75, None]), annotator_frame(s), info, (0.0, 1.0), n_bootstrap=0
    )
    assert out["soft/expected_abs_error"]["value"] == pytest.approx(0.5)
    # binary labels with P(Yes)/P(No): CE = -(1/3 log 0.2 + 2/3 log 0.8)
    lp = {"choice_logprobs": {"Yes": math.log(0.8), "No": math.log(0.2)}}
    b = _samples([("d", "x", 0.8, {"a": 1, "b": 1, "c": 0}, lp)])
    out = soft_label_metrics(
        b,
        annotator_frame(b),
        label_info({"min": 0, "max": 1, "scale": "binary"}, [0, 1]),
        (0.0, 1.0),
        n_bootstrap=0,
    )
    assert out["soft/cross_entropy"]["value"] == pytest.approx(
        -(1 / 3 * math.log(0.2) + 2 / 3 * math.log(0.8))
    )
    assert out["soft/expected_abs_error"]["value"] == pytest.approx(abs(0.8 - 2 / 3))


def test_spearman_brown_by_hand():
    assert spearman_brown(0.6) == pytest.approx(0.75)
    assert spearman_brown(0.5, 3) == pytest.approx(0.75)
    assert spearman_brown(0.0) == pytest.approx(0.0)


def _labels(n=40, k=3, noise=0.7, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n):
        t = rng.uniform(1, 5)
        for a in range(k):
            rows.append(
                (f"u{u:02d}", "d", "en", f"a{a}", float(np.clip(np.round(t + rng.normal(0, noise)), 1, 5)))
            )
    return pd.DataFrame(rows, columns=["unit", "dataset", "language", "annotator", "value"])


def test_loao_ceiling_against_an_independent_computation():
    lab = _labels()
    wide = lab.pivot(index="unit", columns="annotator", values="value")
    want = np.mean([np.corrcoef(wide[a], wide.drop(columns=a).mean(axis=1))[0, 1] for a in wide.columns])
    got = loao_ceiling(lab, "pearson", n_bootstrap=200, confidence=0.95, seed=0)
    assert got["value"] == pytest.approx(want)
    assert got["ci"][0] < got["value"] < got["ci"][1] and got["n"] == 3 * 40


def test_split_half_ceiling():
    lab = _labels(k=4)
    got = split_half_ceiling(lab, "pearson", n_splits=10, n_bootstrap=100, confidence=0.95, seed=0)
    r = got["r_half"]
    assert got["spearman_brown"] == pytest.approx(2 * r / (1 + r))
    assert got["value"] == pytest.approx(math.sqrt(2 * r / (1 + r))) and got["n_splits"] == 10
    same = lab.assign(value=lab.groupby("unit")["value"].transform("first"))  # annotators who always agree
    assert split_half_ceiling(same, "pearson", 5, 0, 0.95, 0)["value"] == pytest.approx(1.0)
    assert split_half_ceiling(lab[lab["annotator"] == "a0"], "pearson", 5, 0, 0.95, 0) is None


def test_high_agreement_buckets():
    lab = pd.DataFrame({"unit": ["x"] * 3 + ["y"] * 3 + ["z"] * 3, "value": [1, 1, 1, 1, 1, 2, 1, 2, 3]})
    assert high_agreement_units(lab) == {"x", "y"}  # full, majority (2 of 3); z has no agreement


def test_results_entries_per_language():
    rng = np.random.default_rng(1)
    rows = []
    for ds in ("d1", "d2"):
        for u in range(30):
            t = rng.uniform(1, 5)
            labs = {f"a{a}": float(np.clip(round(t + rng.normal(0, 0.8)), 1, 5)) for a in range(3)}
            rows.append((ds, f"{ds}-{u}", float(np.clip(t + rng.normal(0, 1), 1, 5)), labs, None))
    s = _samples(rows)
    res: dict = {}
    notes = add_human_metrics(
        res,
        s,
        ("pearson", "spearman"),
        {"q": {"min": 1, "max": 5, "scale": "likert"}},
        (1.0, 5.0),
        n_bootstrap=50,
        n_splits=5,
    )
    for key in (
        "ceiling_loao/spearman",
        "ceiling_split_half/pearson",
        "high_agreement/spearman",
        "soft/expected_sq_error",
    ):
        assert res["en"][key]["value"] is not None and res["all"][key]["value"] is not None, key
    assert set(res["en"]["ceiling_loao/pearson"]["per_dataset"]) == {"d1", "d2"}
    assert notes["label_scale"]["levels"] == [1.0, 2.0, 3.0, 4.0, 5.0] and notes["high_agreement"]["of"] == 60
    none = add_human_metrics({}, s.assign(human_labels=None), ("pearson",), {}, (1.0, 5.0))
    assert "no individual annotator labels" in none["skipped"]


@pytest.mark.shared_data
def test_real_upheld_ceilings(shared_data, tmp_path):
    """UPHELD main content labels (5 annotators per item): the split-half ceiling is above the
    leave-one-annotator-out correlation (a mean of 5 is more reliable than one annotator)."""
    from harness.data.builders import build_dataset
    from harness.data.resolve import DatasetHandle, load_items
    from harness.run.runner import _sample_row
    from harness.tasks import get_task

    src = shared_data / "upheld"
    if not src.is_dir():
        pytest.skip("UPHELD not in ../shared/data")
    out = tmp_path / "upheld"
    build_dataset("upheld", str(src), out, show_progress=False)
    handle = DatasetHandle("upheld", str(out), None, None, None, ["main"])
    spec = get_task("upheld-content")
    items = load_items(handle, "main")
    s = pd.DataFrame([_sample_row("r", spec, "j", it, _Ok(it)) for it in items]).rename(
        columns={"human_rating": "human"}
    )
    lab = annotator_frame(s)
    assert lab.groupby("unit").size().median() == 5 and lab["annotator"].nunique() == 10
    loao = loao_ceiling(lab, "pearson", 0, 0.95, 0)
    half = split_half_ceiling(lab, "pearson", 5, 0, 0.95, 0)
    assert 0.3 < loao["value"] < half["value"] < 1.0
    # annotator_4 and annotator_5 are byte-identical copies in the release: their LOAO values agree
    assert loao["per_annotator"]["annotator_4"] == pytest.approx(
        loao["per_annotator"]["annotator_5"], abs=0.05
    )


class _Ok:
    def __init__(self, item):
        self.ok, self.score, self.status, self.raw, self.detail, self.prompt_hash = (
            True,
            1.0,
            "ok",
            "",
            "",
            "",
        )
        self.cached, self.extra = False, {}
        from harness.types import Usage

        self.usage = Usage()
