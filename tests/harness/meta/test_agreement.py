import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from harness.meta.agreement import (
    Rating,
    adjacent_agreement,
    agreement_bucket,
    agreement_report,
    agreement_table,
    bucket_counts,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    percent_agreement,
    ratings_frame,
    winning_label,
)

N = None
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", 4 observers x 12 units, with gaps.
KRIPP_CLASSIC = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    "C": [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
}
# Fleiss (1971) worked example as on Wikipedia: 10 subjects, 14 raters, counts per category 1..5.
FLEISS_TABLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def kripp_ratings() -> list[Rating]:
    return [Rating(f"u{j:02d}", coder, v) for coder, row in KRIPP_CLASSIC.items() for j, v in enumerate(row)]


def fleiss_ratings() -> list[tuple[str, str, float]]:
    out = []
    for i, counts in enumerate(FLEISS_TABLE):
        labels = [cat for cat, c in enumerate(counts, start=1) for _ in range(c)]
        out += [(f"s{i}", f"r{k}", float(label)) for k, label in enumerate(labels)]
    return out


def random_pair(seed: int, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, size=n).astype(float)
    b = np.clip(a + rng.integers(-1, 2, size=n), 1, 5).astype(float)
    return a, b


def pair_ratings(a: np.ndarray, b: np.ndarray) -> list[Rating]:
    return [Rating(i, "x", v) for i, v in enumerate(a)] + [Rating(i, "y", v) for i, v in enumerate(b)]


# ---------------------------------------------------------------- percent / adjacent


HAND = [
    ("a", "r1", 1),
    ("a", "r2", 1),
    ("a", "r3", 2),  # pairs: agree, 1-2, 1-2 -> 1/3 exact, 3/3 adjacent
    ("b", "r1", 3),
    ("b", "r2", 5),  # 0 exact, 0 adjacent(1), 1 adjacent(2)
    ("c", "r1", 4),
    ("c", "r2", 4),
    ("c", "r3", 4),
    ("c", "r4", 4),  # 6/6 pairs
    ("d", "r1", 2),
    ("d", "r2", None),  # one observed rating: ignored
]


def test_percent_agreement_hand_computed():
    res = percent_agreement(HAND)
    assert res.value == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert res.n_items == 3


def test_adjacent_agreement_hand_computed():
    assert adjacent_agreement(HAND).value == pytest.approx((1 + 0 + 1) / 3)
    assert adjacent_agreement(HAND, tolerance=2).value == pytest.approx(1.0)
    assert adjacent_agreement(HAND, tolerance=0).value == pytest.approx(percent_agreement(HAND).value)
    assert adjacent_agreement(HAND).n_items == 3
    with pytest.raises(ValueError, match="tolerance"):
        adjacent_agreement(HAND, tolerance=-1)


# ---------------------------------------------------------------- Krippendorff


@pytest.mark.parametrize(("level", "expected"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorff_published_example(level, expected):
    res = krippendorff_alpha(kripp_ratings(), level=level)
    assert res.value == pytest.approx(expected, abs=5e-4)
    assert (res.n_items, res.n_annotators, res.n_values) == (11, 4, 40)  # unit 12 has one value


def test_krippendorff_matches_library_on_same_matrix():
    rng = np.random.default_rng(3)
    matrix = rng.integers(1, 6, size=(5, 30)).astype(float)
    matrix[rng.random(matrix.shape) < 0.2] = np.nan
    ratings = [Rating(f"i{j}", f"a{i}", matrix[i, j]) for i in range(5) for j in range(30)]
    for level in ("nominal", "ordinal", "interval"):
        expected = krippendorff.alpha(matrix, level_of_measurement=level, value_domain=[1, 2, 3, 4, 5])
        assert krippendorff_alpha(ratings, level).value == pytest.approx(expected)


def test_krippendorff_undefined_without_variation():
    ratings = [(i, a, 3.0) for i in range(4) for a in "xyz"]
    assert math.isnan(krippendorff_alpha(ratings, "nominal").value)


# ---------------------------------------------------------------- Cohen


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_matches_sklearn_for_two_annotators(weights):
    a, b = random_pair(11)
    res = cohen_kappa(pair_ratings(a, b), weights=weights)
    expected = cohen_kappa_score(a, b, weights=weights)
    assert res.n_pairs == 1
    assert res.mean == pytest.approx(expected)
    assert res.min == res.max == pytest.approx(expected)
    assert res.weights == weights


def test_cohen_pairs_min_shared_and_undefined():
    a, b = random_pair(5, n=30)
    c = random_pair(6, n=30)[0]
    ratings = pair_ratings(a, b) + [Rating(i, "z", v) for i, v in enumerate(c)]
    ratings += [Rating(i, "few", 1.0) for i in range(5)]  # shares only 5 items with everyone
    res = cohen_kappa(ratings, min_shared=10)
    kappas = [cohen_kappa_score(a, b), cohen_kappa_score(a, c), cohen_kappa_score(b, c)]
    assert res.n_pairs == 3
    assert res.n_pairs_too_few == 3
    assert res.mean == pytest.approx(np.mean(kappas))
    assert res.min == pytest.approx(min(kappas))
    assert res.max == pytest.approx(max(kappas))
    assert cohen_kappa(ratings, min_shared=5).n_pairs == 6

    # weighted kappas use the dimension's whole observed scale (3 is used only by annotator z)
    a = np.array([1, 2, 4, 4, 2, 1, 4, 2, 1, 1, 2, 4], dtype=float)
    b = np.array([2, 2, 4, 2, 1, 1, 4, 4, 1, 2, 2, 4], dtype=float)
    ratings = pair_ratings(a, b) + [Rating(i, "z", 3.0 if i % 2 else 1.0) for i in range(12)]
    kxy = cohen_kappa(ratings, weights="linear").pair_kappas[("x", "y")]
    assert kxy == pytest.approx(cohen_kappa_score(a, b, labels=[1, 2, 3, 4], weights="linear"))
    assert kxy != pytest.approx(cohen_kappa_score(a, b, weights="linear"))

    constant = [Rating(i, r, 2.0) for i in range(12) for r in ("p", "q")]
    undefined = cohen_kappa(constant)
    assert undefined.n_pairs == 0 and undefined.n_pairs_undefined == 1
    assert math.isnan(undefined.mean)
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa(constant, weights="cubic")


# ---------------------------------------------------------------- Fleiss


def test_fleiss_wikipedia_example():
    res = fleiss_kappa(fleiss_ratings())
    assert res.value == pytest.approx(0.210, abs=5e-4)
    assert res.value == pytest.approx(sm_fleiss_kappa(np.array(FLEISS_TABLE)))
    assert (res.n_raters, res.n_items_used, res.n_items_excluded, res.n_categories) == (14, 10, 0, 5)


def test_fleiss_uses_modal_rater_count():
    extra = [("odd", "r0", 1.0), ("odd", "r1", 2.0), ("odd", "r2", 2.0)]
    missing = [("s0", "r99", None)]  # a missing rating does not change s0's rater count
    res = fleiss_kappa(fleiss_ratings() + extra + missing)
    assert res.value == pytest.approx(0.210, abs=5e-4)
    assert (res.n_items_used, res.n_items_excluded) == (10, 1)

    # the modal count (3 raters, 4 items) wins over the largest count (4 raters, 1 item)
    small = [(f"i{i}", f"r{k}", float((i + (k == 2)) % 2)) for i in range(4) for k in range(3)]
    small += [("big", f"r{k}", 1.0) for k in range(4)]
    res = fleiss_kappa(small)
    assert (res.n_raters, res.n_items_used, res.n_items_excluded) == (3, 4, 1)
    table = np.array([[1, 2], [2, 1], [1, 2], [2, 1]])
    assert res.value == pytest.approx(sm_fleiss_kappa(table))


# ---------------------------------------------------------------- perfect agreement / missing


def test_perfect_agreement_gives_one():
    ratings = [(f"i{i}", a, float(i % 3 + 1)) for i in range(15) for a in ("x", "y", "z")]
    rep = agreement_report(ratings, level="nominal")
    assert rep.percent.value == pytest.approx(1.0)
    assert rep.adjacent.value == pytest.approx(1.0)
    assert rep.alpha.value == pytest.approx(1.0)
    assert rep.cohen.mean == pytest.approx(1.0) and rep.cohen.n_pairs == 3
    assert rep.fleiss.value == pytest.approx(1.0)
    assert rep.buckets["full"] == 15


def test_missing_values_are_counted_not_used():
    base = kripp_ratings()
    observed = [r for r in base if r.value is not None]
    nan_variant = [Rating(r.item, r.annotator, float("nan")) if r.value is None else r for r in base]
    full = agreement_report(base, "interval", min_shared=5)
    clean = agreement_report(observed, "interval", min_shared=5)
    nans = agreement_report(nan_variant, "interval", min_shared=5)
    assert (full.n_ratings, full.n_missing) == (41, 7)
    assert (clean.n_ratings, clean.n_missing) == (41, 0)
    assert nans.n_missing == 7
    for rep in (full, nans):
        d, c = rep.to_dict(), clean.to_dict()
        d.pop("n_missing"), c.pop("n_missing")
        assert d == pytest.approx(c, nan_ok=True)


# ---------------------------------------------------------------- buckets


@pytest.mark.parametrize(
    ("values", "bucket", "winner"),
    [
        ([5, 5, 5, 5, 5], "full", 5.0),
        ([5, 5, 5, 1, 2], "majority", 5.0),
        ([5, 5, 5, 5, 2], "majority", 5.0),
        ([5, 5, 1, 2, 3], "plurality", 5.0),
        ([1, 1, 2, 3], "plurality", 1.0),  # exactly half is not a majority
        ([1, 1, 1, 2], "majority", 1.0),
        ([5, 5, 1, 1, 2], "none", None),
        ([1, 2, 3, 4, 5], "none", None),
        ([3], "single", 3.0),
        ([], "single", None),
        ([4, None, 4, float("nan")], "full", 4.0),
        ([2, 2, None, None, 1], "majority", 2.0),
    ],
)
def test_agreement_bucket_and_winner(values, bucket, winner):
    assert agreement_bucket(values) == bucket
    assert winning_label(values) == winner


def test_bucket_counts():
    counts = bucket_counts(kripp_ratings())
    assert counts == {"full": 8, "majority": 2, "plurality": 0, "none": 1, "single": 1}
    assert list(counts) == ["full", "majority", "plurality", "none", "single"]


# ---------------------------------------------------------------- input handling and errors


def test_ratings_frame_accepts_all_forms():
    tuples = [("i1", "a", 1), ("i1", "b", None), ("i2", "a", 3.5)]
    objs = [Rating(*t) for t in tuples]
    df = pd.DataFrame(tuples, columns=["item", "annotator", "value"]).assign(extra=1)
    frames = [ratings_frame(x) for x in (tuples, objs, df)]
    for frame in frames:
        assert list(frame.columns) == ["item", "annotator", "value"]
        assert frame["value"].isna().tolist() == [False, True, False]
        assert frame["value"].iloc[2] == 3.5


def test_duplicate_rating_names_item_and_annotator():
    ratings = [("dlg-7", "alice", 1), ("dlg-7", "bob", 2), ("dlg-7", "alice", 3)]
    with pytest.raises(ValueError, match=r"'dlg-7'.*'alice'"):
        percent_agreement(ratings)
    with pytest.raises(ValueError, match=r"'dlg-7'.*'alice'"):
        agreement_report(pd.DataFrame(ratings, columns=["item", "annotator", "value"]))


def test_errors_for_empty_input_unknown_level_and_bad_values():
    with pytest.raises(ValueError, match="empty"):
        agreement_report([])
    with pytest.raises(ValueError, match="empty"):
        ratings_frame(pd.DataFrame(columns=["item", "annotator", "value"]))
    with pytest.raises(ValueError, match="unknown level"):
        krippendorff_alpha(HAND, level="categorical")
    with pytest.raises(ValueError, match="unknown level"):
        agreement_report(HAND, level="bogus")
    with pytest.raises(ValueError, match="numeric"):
        ratings_frame([("i", "a", "high")])
    with pytest.raises(ValueError, match="lacks column"):
        ratings_frame(pd.DataFrame({"item": [1], "value": [1.0]}))
    two_dims = pd.DataFrame(HAND[:2], columns=["item", "annotator", "value"]).assign(dimension=["x", "y"])
    with pytest.raises(ValueError, match="several dimensions"):
        percent_agreement(two_dims)


def test_report_to_dict_is_flat_and_json_friendly():
    d = agreement_report([(i, a, 2.0) for i in range(3) for a in "xy"], level="nominal").to_dict()
    assert d["alpha"] is None  # NaN -> None
    assert d["percent_agreement"] == pytest.approx(1.0)
    assert d["bucket_full"] == 3 and d["n_items"] == 3 and d["n_annotators"] == 2
    assert all(not isinstance(v, dict) for v in d.values())


# ---------------------------------------------------------------- grouped table


@pytest.fixture
def long_df() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for dim in ("quality", "relevance"):
        for lang in ("en", "zh"):
            for i in range(12):  # same item ids and annotators in both languages
                truth = int(rng.integers(1, 4))
                for ann in ("a1", "a2", "a3"):
                    value = truth if rng.random() < 0.7 else int(rng.integers(1, 4))
                    rows.append(
                        {
                            "dimension": dim,
                            "language": lang,
                            "item": f"d{i}",
                            "annotator": ann,
                            "value": value,
                        }
                    )
    df = pd.DataFrame(rows).astype({"value": float})
    df.loc[5, "value"] = np.nan
    return df


def test_agreement_table_groups_and_all_rows(long_df):
    table = agreement_table(long_df, by=["language"], dimension_levels={"relevance": "nominal"})
    assert len(table) == 6
    assert table[["dimension", "language"]].values.tolist() == [
        ["quality", "en"],
        ["quality", "zh"],
        ["quality", "all"],
        ["relevance", "en"],
        ["relevance", "zh"],
        ["relevance", "all"],
    ]
    assert table.set_index("dimension")["level"].to_dict() == {"quality": "ordinal", "relevance": "nominal"}

    row = table[(table.dimension == "relevance") & (table.language == "zh")].iloc[0]
    subset = long_df[(long_df.dimension == "relevance") & (long_df.language == "zh")]
    assert row["alpha"] == pytest.approx(agreement_report(subset, "nominal").alpha.value)

    pooled = table[(table.dimension == "quality") & (table.language == "all")].iloc[0]
    groups = table[(table.dimension == "quality") & (table.language != "all")]
    assert pooled["n_items"] == groups["n_items"].sum() == 24  # (language, item) is the unit
    assert pooled["n_missing"] == 1 and pooled["n_ratings"] == 71
    quality = long_df[long_df.dimension == "quality"]
    relabelled = quality.assign(item=quality.language + "/" + quality.item)
    assert pooled["alpha"] == pytest.approx(agreement_report(relabelled, "ordinal").alpha.value)
    assert pooled["percent_agreement"] == pytest.approx(percent_agreement(relabelled).value)
    bucket_cols = [c for c in table.columns if c.startswith("bucket_")]
    assert (table[bucket_cols].sum(axis=1) == table["n_items"]).all()


def test_agreement_table_without_by_and_errors(long_df):
    table = agreement_table(long_df.drop(columns="language").iloc[:36], by=[])
    assert table["dimension"].tolist() == ["quality"]
    assert table.loc[0, "n_items"] == 12
    with pytest.raises(ValueError, match="unknown level"):
        agreement_table(long_df, by=["language"], dimension_levels={"quality": "fuzzy"})
    with pytest.raises(ValueError, match="lacks column"):
        agreement_table(long_df, by=["system"])
    dup = pd.concat([long_df, long_df.iloc[[0]]])
    with pytest.raises(ValueError, match=r"'d0'.*'a1'"):
        agreement_table(dup, by=["language"])
