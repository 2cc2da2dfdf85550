"""Every statistic of harness.meta survives degenerate data — constant values, perfectly
anti-correlated halves, fewer than 3 points, all missing, NaN — with a value of None (or NaN in
the dataclasses, None in their JSON form) and a note saying why, never an exception."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.meta.agreement import agreement_report
from harness.meta.alt_test import alt_test
from harness.meta.classification import binary_metrics, human_ceiling, mcnemar_vs_human
from harness.meta.correlation import METHODS, correlation, meta_evaluate
from harness.meta.levels import level_correlations
from harness.meta.panel import effective_judges, error_correlations, judge_alpha
from harness.meta.scale_correlation import app_b_correlation
from harness.meta.soft_labels import loao_ceiling, spearman_brown, split_half_ceiling

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def degenerate_pairs(draw) -> tuple[list[float], list[float]]:
    """Two equally long series with the degenerate shapes statistics meet in real runs."""
    n = draw(st.integers(0, 6))
    kind = draw(st.sampled_from(["constant", "anti", "nan", "all_nan", "small", "mixed"]))
    base = draw(st.lists(st.integers(0, 4).map(float), min_size=n, max_size=n))
    if kind == "constant":
        return base, [2.0] * n
    if kind == "anti":
        return base, [-v for v in base]
    if kind == "all_nan":
        return [math.nan] * n, base
    if kind == "nan":
        return [math.nan if i % 2 else v for i, v in enumerate(base)], base
    if kind == "small":
        return base[:2], base[:2]
    other = draw(st.lists(st.sampled_from([0.0, 1.0, math.nan]), min_size=n, max_size=n))
    return base, other


def _json_clean(entry: object) -> None:
    """JSON-serialisable without NaN/inf anywhere (None stands for undefined)."""
    json.dumps(entry, allow_nan=False, default=str)


def _value_or_note(entry: dict) -> None:
    assert entry["value"] is None or math.isfinite(entry["value"])
    if entry["value"] is None:
        assert entry.get("note"), entry


@SETTINGS
@given(degenerate_pairs(), st.sampled_from(METHODS))
def test_correlation(pair, method):
    x, y = pair
    d = correlation(x, y, method).to_dict()
    _json_clean(d)
    _value_or_note(d)
    if d["value"] is not None:
        assert -1 - 1e-9 <= d["value"] <= 1 + 1e-9


@SETTINGS
@given(degenerate_pairs(), st.sampled_from(["binary", "likert", "continuous"]))
def test_app_b_correlation(pair, scale):
    x, y = pair
    if scale == "binary":
        y = [v if math.isnan(v) else float(v > 1) for v in y]
    try:
        d = app_b_correlation(x, y, scale, lo=0, hi=4).to_dict()
    except ValueError as e:  # usage errors keep their message: empty input, both sides non-binary
        assert "empty" in str(e) or "point_biserial" in str(e)
        return
    _json_clean(d)
    _value_or_note(d)


@SETTINGS
@given(st.one_of(st.floats(-1, 1), st.just(math.nan), st.none()), st.sampled_from([2.0, 3.0]))
def test_spearman_brown(r, factor):
    v = spearman_brown(r, factor)
    assert v is None or math.isfinite(v)
    if r is not None and not math.isnan(r) and 1 + (factor - 1) * r <= 0:
        assert v is None


@st.composite
def label_frames(draw) -> pd.DataFrame:
    units = draw(st.integers(0, 5))
    per = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["constant", "anti", "random", "nan"]))
    rows = []
    for u in range(units):
        for a in range(per):
            v = {"constant": 3.0, "anti": float((u + a) % 2 + 1), "nan": math.nan}.get(
                kind, float(draw(st.integers(1, 3)))
            )
            rows.append({"unit": f"d\x1f{u}", "annotator": f"a{a}", "value": v})
    return pd.DataFrame(rows, columns=["unit", "annotator", "value"])


@SETTINGS
@given(label_frames(), st.sampled_from(["pearson", "spearman"]), st.integers(0, 30))
def test_ceilings(labels, method, n_bootstrap):
    labels = labels.dropna(subset=["value"])
    for fn, args in (
        (split_half_ceiling, (method, 3, n_bootstrap, 0.95, 0)),
        (loao_ceiling, (method, n_bootstrap, 0.95, 0)),
    ):
        e = fn(labels, *args)
        if e is not None:  # None: not enough units with two labels to compute it
            _json_clean(e)
            _value_or_note(e)


def test_split_half_with_perfectly_anti_correlated_halves():
    e = split_half_ceiling(
        pd.DataFrame({"unit": [0, 0, 1, 1, 2, 2], "value": [1, 2, 1, 2, 2, 1]}), "pearson", 1, 0, 0.95, 0
    )
    assert e is not None and e["value"] is None and e["spearman_brown"] is None
    assert e["r_half"] == pytest.approx(-1.0) and "Spearman-Brown" in e["note"]


@SETTINGS
@given(label_frames(), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_agreement_report(labels, level):
    frame = labels.rename(columns={"unit": "item"})
    if frame.empty:
        return  # empty input is a usage error (ValueError "empty"), tested in test_agreement.py
    d = agreement_report(frame, level, min_shared=1).to_dict()
    _json_clean(d)
    for key in ("alpha", "fleiss_kappa", "cohen_mean", "percent_agreement"):
        if d[key] is None:
            assert d[f"{key}_note"]


@SETTINGS
@given(degenerate_pairs())
def test_classification(pair):
    ref, pred = ([v if math.isnan(v) else float(v > 1) for v in s] for s in pair)
    m = binary_metrics(ref, pred)  # rates stay NaN for the averaging callers; the note says why
    if m["n"] == 0:
        assert m["note"]
    else:
        _json_clean(m)
    human_ceiling({"a": ref, "b": pred})
    if ref:
        mcnemar_vs_human(pred, {"a": ref, "b": ref})


@SETTINGS
@given(degenerate_pairs())
def test_panel(pair):
    x, y = pair
    matrix = pd.DataFrame({"j1": x, "j2": y})
    a = judge_alpha(matrix)
    _json_clean(a)
    _value_or_note(a)
    e = error_correlations(matrix, pd.Series(y))
    _json_clean(e)
    if e["mean"] is None:
        assert e["note"]
    assert effective_judges(2, math.nan) is None and effective_judges(3, -0.5) is None


@SETTINGS
@given(degenerate_pairs())
def test_meta_evaluate_and_levels(pair):
    x, y = pair
    n = len(x)
    samples = pd.DataFrame(
        {
            "dataset": "d",
            "language": "en",
            "item_id": [str(i) for i in range(n)],
            "score": x,
            "human": [0.0 if math.isnan(v) else v for v in y],
            "system": [f"s{i % 2}" for i in range(n)],
            "dialogue_id": [str(i) for i in range(n)],
        }
    )
    if n == 0:
        return
    out = meta_evaluate(samples, ("pearson", "spearman"), n_bootstrap=20).to_dict()
    _json_clean(out)
    for m in ("pearson", "spearman"):
        _value_or_note(out["all"][m])
    lev = level_correlations(samples, ["system", "dialogue"], ["pearson"], n_bootstrap=10)
    _json_clean(lev)


@SETTINGS
@given(degenerate_pairs())
def test_alt_test(pair):
    x, y = pair
    judge = {i: (None if math.isnan(v) else v) for i, v in enumerate(x)}
    humans = {f"h{k}": {i: (None if math.isnan(v) else v + k) for i, v in enumerate(y)} for k in range(3)}
    d = alt_test(judge, humans, min_instances=1, min_annotators=2).to_dict()
    _json_clean(d)
