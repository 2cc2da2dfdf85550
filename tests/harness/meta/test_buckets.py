import math

import numpy as np
import pandas as pd
import pytest

from harness.meta.buckets import bucket_accuracy, bucket_table


@pytest.fixture
def items():
    # labels -> bucket (winning label):
    rows = [
        ([3, 3, 3, 3, 3], 3, "full"),  # hit
        ([4, 4, 4, 4, 4], 2, "full"),  # miss
        ([5, 5, 5, 5, 5], 5, "full"),  # hit
        ([2, 2, 2, 1, 5], 2, "majority"),  # hit
        ([1, 1, 1, 1, 3], 3, "majority"),  # miss
        ([4, 4, 3, 2, 1], 4, "plurality"),  # hit
        ([5, 5, 3, 2, 1], 1, "plurality"),  # miss
        ([2, 2, 3, 4, 1], 1, "plurality"),  # miss
        ([2, 2, 3, 3, 1], 2, "none"),  # tied: excluded
        ([4, None, None], 4, "single"),  # one label: excluded
        ([3, 3, 3, None, 2], None, "majority"),  # missing prediction: excluded
    ]
    return pd.DataFrame(
        {"labels": [r[0] for r in rows], "pred": [r[1] for r in rows], "bucket": [r[2] for r in rows]}
    )


def test_bucket_accuracy_exclusive(items):
    out = bucket_accuracy(items, "pred")
    assert list(out.columns) == ["bucket", "n", "accuracy", "delta_pct"]
    assert out["bucket"].tolist() == ["all", "plurality", "majority", "full"]
    assert out["n"].tolist() == [8, 3, 2, 3]
    acc = dict(zip(out.bucket, out.accuracy, strict=True))
    assert acc == pytest.approx({"all": 4 / 8, "plurality": 1 / 3, "majority": 1 / 2, "full": 2 / 3})
    delta = out["delta_pct"].tolist()
    assert math.isnan(delta[0])
    assert delta[1] == pytest.approx((1 / 3 - 0.5) / 0.5 * 100)
    assert delta[2] == pytest.approx((0.5 - 1 / 3) / (1 / 3) * 100)
    assert delta[3] == pytest.approx((2 / 3 - 0.5) / 0.5 * 100)
    assert out.attrs["n_none"] == 1 and out.attrs["n_single"] == 1
    assert out.attrs["n_missing_prediction"] == 1 and out.attrs["n_items"] == 11


def test_bucket_accuracy_nested(items):
    out = bucket_accuracy(items, "pred", nested=True)
    assert out["n"].tolist() == [8, 8, 5, 3]
    assert out["accuracy"].tolist() == pytest.approx([0.5, 0.5, 3 / 5, 2 / 3])
    assert out["delta_pct"].tolist()[1:] == pytest.approx([0.0, 20.0, (2 / 3 - 0.6) / 0.6 * 100])


def test_bucket_accuracy_empty_level_and_zero_previous():
    df = pd.DataFrame({"labels": [[1, 1, 1], [2, 2, 3]], "pred": [1, 3]})
    out = bucket_accuracy(df, "pred").set_index("bucket")
    assert out.at["plurality", "n"] == 0 and math.isnan(out.at["plurality", "accuracy"])
    assert out.at["majority", "accuracy"] == pytest.approx(0.0)
    assert math.isnan(out.at["full", "delta_pct"])  # previous accuracy is 0


def test_bucket_accuracy_float_predictions_match_labels():
    df = pd.DataFrame({"labels": [[1.0, 1.0], [2.0, 2.0]], "pred": np.array([1, 2.0])})
    assert bucket_accuracy(df, "pred").set_index("bucket").at["full", "accuracy"] == pytest.approx(1.0)


def test_bucket_table_layout(items):
    items = items.assign(perfect=items["labels"].map(lambda v: v[0]))
    table = bucket_table(items, {"m1": "pred", "oracle": "perfect"})
    assert table["metric"].tolist() == ["m1", "oracle"]
    assert list(table.columns)[:8] == [
        "metric",
        "all",
        "plurality",
        "plurality_delta_pct",
        "majority",
        "majority_delta_pct",
        "full",
        "full_delta_pct",
    ]
    m1 = table.iloc[0]
    assert m1["all"] == pytest.approx(0.5) and m1["full"] == pytest.approx(2 / 3)
    assert m1["n_plurality"] == 3
    assert table.iloc[1]["full"] == pytest.approx(1.0)


def test_bucket_errors(items):
    with pytest.raises(ValueError, match="lacks column"):
        bucket_accuracy(items, "nope")
    with pytest.raises(ValueError, match="empty"):
        bucket_accuracy(items.iloc[:0], "pred")
    with pytest.raises(ValueError, match="list of label values"):
        bucket_accuracy(pd.DataFrame({"labels": ["3,3,3"], "pred": [3]}), "pred")
    with pytest.raises(ValueError, match="no prediction"):
        bucket_table(items, {})
