"""Agreement so far: known answers on constructed labels (perfect agreement, a known share of
agreeing pairs, α equal to the krippendorff package's on the same matrix), every statistic
undefined before any label, and CIs that hold the point value."""

from __future__ import annotations

import krippendorff
import numpy as np
import pandas as pd
import pytest

from harness.annotate.status import dimension_agreement


def _labels(rows: list[tuple[str, str, float]], dimension: str = "overall") -> pd.DataFrame:
    return pd.DataFrame(
        [{"item_id": i, "annotator": a, "dimension": dimension, "value": v} for i, a, v in rows]
    )


def test_perfect_agreement_is_one_everywhere():
    values = [1, 2, 3, 4, 5, 3, 2, 4]
    rows = [(f"i{k}", ann, float(v)) for k, v in enumerate(values) for ann in ("a", "b")]
    got = dimension_agreement(_labels(rows), "overall", "likert", n_bootstrap=50)
    assert got.n_items == 8
    assert got.alpha.value == pytest.approx(1.0) and got.percent.value == pytest.approx(1.0)
    assert got.adjacent is not None and got.adjacent.value == pytest.approx(1.0)
    assert got.kappa[("a", "b")].value == pytest.approx(1.0) and got.kappa_weights == "quadratic"


def test_known_share_of_agreeing_pairs_and_alpha_of_the_package():
    # binary issue, 3 annotators on 4 items: pairs agreeing per item 3/3, 1/3, 3/3, 1/3 -> 2/3
    table = {"i1": (1, 1, 1), "i2": (1, 0, 0), "i3": (0, 0, 0), "i4": (0, 1, 0)}
    rows = [(i, ann, float(v)) for i, vs in table.items() for ann, v in zip("abc", vs, strict=True)]
    got = dimension_agreement(_labels(rows, "repetitive"), "repetitive", "binary", n_bootstrap=50)
    assert got.percent.value == pytest.approx(2 / 3) and got.adjacent is None
    matrix = np.array([vs for vs in table.values()], dtype=float).T  # annotators x items
    expected = krippendorff.alpha(matrix, level_of_measurement="nominal")
    assert got.alpha.value == pytest.approx(expected) and got.alpha_level == "nominal"
    assert set(got.kappa) == {("a", "b"), ("a", "c"), ("b", "c")} and got.kappa_weights is None
    for stat in (got.alpha, got.percent):
        assert stat.ci is not None and stat.ci[0] - 1e-9 <= stat.value <= stat.ci[1] + 1e-9


def test_nothing_labelled_or_nothing_paired_is_undefined_not_an_error():
    empty = dimension_agreement(
        _labels([]).reindex(columns=["item_id", "annotator", "dimension", "value"]), "overall", "likert"
    )
    assert empty.n_items == 0 and empty.alpha.value is None and empty.percent.value is None
    single = dimension_agreement(_labels([("i1", "a", 3.0), ("i2", "b", 4.0)]), "overall", "likert")
    assert single.n_items == 0 and single.alpha.value is None and single.kappa == {}
