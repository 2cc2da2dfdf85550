"""Inter-annotator agreement for multi-annotator dialogue-evaluation labels.

Input is long-format ratings for ONE dimension: ``(item, annotator, value)`` triples, given either as
:class:`Rating` objects / 3-tuples or as a DataFrame with columns ``item``, ``annotator``, ``value``.
A value of ``None``/NaN is a missing rating: it is counted (``n_missing``) but never used.

The coefficients come from established libraries rather than being re-implemented:
Krippendorff's alpha from ``krippendorff.alpha``, Cohen's kappa from
``sklearn.metrics.cohen_kappa_score`` and Fleiss' kappa from ``statsmodels`` (``aggregate_raters`` +
``fleiss_kappa``). Every result carries the counts it was computed from so callers can report *n*.
An undefined statistic (too few items, no variation in the labels) is NaN rather than an exception.

Agreement buckets follow UPHELD (App. J / §3.5): *full* when all labels agree, *majority* when a
unique mode holds more than half the labels (3–4 of 5), *plurality* when the mode is unique but holds
at most half (2 of 5 with a unique winner), *none* when the top count is tied, *single* with < 2 labels.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal, TypeAlias

import krippendorff
import numpy as np
import pandas as pd
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import fleiss_kappa as _sm_fleiss_kappa

AlphaLevel = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[AlphaLevel, ...] = ("nominal", "ordinal", "interval", "ratio")
KAPPA_WEIGHTS: tuple[str | None, ...] = (None, "linear", "quadratic")
BUCKETS: tuple[str, ...] = ("full", "majority", "plurality", "none", "single")
COLUMNS: tuple[str, str, str] = ("item", "annotator", "value")
_EPS = 1e-9  # float slack for |a - b| <= tolerance


#: Krippendorff's alpha level of measurement for each label scale of the common schema.
ALPHA_LEVEL = {"binary": "nominal", "likert": "ordinal", "continuous": "interval"}


@dataclass(frozen=True)
class Rating:
    """One annotator's label for one item on one dimension (``value=None`` means missing)."""

    item: Hashable
    annotator: Hashable
    value: float | None


Ratings: TypeAlias = pd.DataFrame | Iterable[Rating | tuple[Hashable, Hashable, float | None]]


def ratings_frame(records: Ratings) -> pd.DataFrame:
    """Normalise ratings to a DataFrame with columns ``item``, ``annotator``, ``value`` (float, NaN = missing).

    Accepts a DataFrame (extra columns are dropped; a ``dimension`` column must hold one value) or an
    iterable of :class:`Rating` / ``(item, annotator, value)`` tuples. Raises ``ValueError`` on empty
    input, non-numeric values, or an ``(item, annotator)`` pair that occurs more than once.
    """
    if isinstance(records, pd.DataFrame):
        missing_cols = [c for c in COLUMNS if c not in records.columns]
        if missing_cols:
            raise ValueError(f"ratings frame lacks column(s) {missing_cols}; expected {list(COLUMNS)}")
        if "dimension" in records.columns and records["dimension"].nunique(dropna=False) > 1:
            dims = sorted(map(str, records["dimension"].unique()))
            raise ValueError(f"ratings span several dimensions {dims}; select one or use agreement_table()")
        frame = records.loc[:, list(COLUMNS)].copy()
    else:
        rows = [(r.item, r.annotator, r.value) if isinstance(r, Rating) else tuple(r) for r in records]
        bad = next((r for r in rows if len(r) != 3), None)
        if bad is not None:
            raise ValueError(f"expected (item, annotator, value) triples, got {bad!r}")
        frame = pd.DataFrame(rows, columns=list(COLUMNS))
    if frame.empty:
        raise ValueError("no ratings given (empty input)")
    try:
        frame["value"] = pd.to_numeric(frame["value"], errors="raise").astype(float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"rating values must be numeric (None/NaN for missing): {exc}") from exc
    dup = frame.duplicated(subset=["item", "annotator"], keep=False)
    if dup.any():
        first = frame.loc[dup].iloc[0]
        raise ValueError(
            f"item {first['item']!r} was rated more than once by annotator {first['annotator']!r}; "
            "each (item, annotator) pair may appear only once per dimension"
        )
    return frame.reset_index(drop=True)


def _item_values(frame: pd.DataFrame) -> list[np.ndarray]:
    """Per-item arrays of non-missing values (items with no observed value are dropped)."""
    obs = frame.loc[frame["value"].notna()]
    return [g.to_numpy(dtype=float) for _, g in obs.groupby("item", sort=True, dropna=False)["value"]]


def _check_level(level: str) -> AlphaLevel:
    if level not in LEVELS:
        raise ValueError(f"unknown level of measurement {level!r}; expected one of {list(LEVELS)}")
    return level


# --------------------------------------------------------------------------- pairwise agreement
@dataclass(frozen=True)
class PairwiseAgreement:
    """Mean over items of the share of agreeing rater pairs; ``n_items`` = items with >= 2 ratings."""

    value: float
    n_items: int
    tolerance: float = 0.0


def _pairwise(ratings: Ratings, tolerance: float) -> PairwiseAgreement:
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    shares: list[float] = []
    for values in _item_values(ratings_frame(ratings)):
        if values.size < 2:
            continue
        i, j = np.triu_indices(values.size, k=1)
        shares.append(float(np.mean(np.abs(values[i] - values[j]) <= tolerance + _EPS)))
    value = float(np.mean(shares)) if shares else math.nan
    return PairwiseAgreement(value=value, n_items=len(shares), tolerance=float(tolerance))


def percent_agreement(ratings: Ratings) -> PairwiseAgreement:
    """Exact (pairwise) percent agreement, in [0, 1].

    For every item with at least two non-missing ratings, the share of its unordered rater pairs that
    gave the same value (e.g. labels 5,5,1 -> 1 of 3 pairs); these per-item shares are then averaged
    with equal weight per item. Items with fewer than two ratings are ignored.
    """
    return _pairwise(ratings, 0.0)


def adjacent_agreement(ratings: Ratings, tolerance: float = 1) -> PairwiseAgreement:
    """Like :func:`percent_agreement`, but a pair agrees when ``|a - b| <= tolerance``."""
    return _pairwise(ratings, float(tolerance))


# --------------------------------------------------------------------------- Krippendorff's alpha
@dataclass(frozen=True)
class AlphaResult:
    """Krippendorff's alpha; counts refer to pairable items (>= 2 ratings) and the values in them."""

    value: float
    level: str
    n_items: int
    n_annotators: int
    n_values: int


def reliability_matrix(ratings: Ratings) -> pd.DataFrame:
    """Annotators x items matrix of values, NaN where an annotator did not (validly) rate an item."""
    frame = ratings_frame(ratings)
    return frame.pivot(index="annotator", columns="item", values="value")


def krippendorff_alpha(ratings: Ratings, level: str = "ordinal") -> AlphaResult:
    """Krippendorff's alpha via ``krippendorff.alpha`` on the annotators x items reliability matrix.

    ``level`` is ``"nominal"``, ``"ordinal"``, ``"interval"`` or ``"ratio"``. The value domain is the
    sorted set of observed values (this matters for the ordinal metric). Returns NaN when fewer than
    two values are pairable or only one distinct value occurs (alpha is then undefined).
    """
    checked = _check_level(level)
    matrix = reliability_matrix(ratings)
    pairable = matrix.loc[:, matrix.notna().sum(axis=0) >= 2]
    data = pairable.to_numpy(dtype=float)
    domain = np.unique(data[~np.isnan(data)])
    n_annotators = int(pairable.notna().any(axis=1).sum())
    n_values = int(np.count_nonzero(~np.isnan(data)))
    value = math.nan
    if pairable.shape[1] > 0 and domain.size > 1:
        value = float(krippendorff.alpha(data, value_domain=domain, level_of_measurement=checked))
    return AlphaResult(value, level, int(pairable.shape[1]), n_annotators, n_values)


# --------------------------------------------------------------------------- Cohen's kappa
@dataclass(frozen=True)
class CohenResult:
    """Cohen's kappa summarised over annotator pairs.

    ``n_pairs`` pairs entered the mean; ``n_pairs_undefined`` shared enough items but used a single
    category between them (kappa undefined); ``n_pairs_too_few`` shared fewer than ``min_shared`` items.
    """

    mean: float
    min: float
    max: float
    n_pairs: int
    n_pairs_undefined: int
    n_pairs_too_few: int
    weights: str | None
    min_shared: int
    pair_kappas: dict[tuple[Hashable, Hashable], float] = field(default_factory=dict, repr=False)


def cohen_kappa(ratings: Ratings, weights: str | None = None, min_shared: int = 10) -> CohenResult:
    """Cohen's kappa (``sklearn.metrics.cohen_kappa_score``) for every pair of annotators.

    Pairs are annotators sharing at least ``min_shared`` items they both rated (missing values do not
    count). The label set passed to sklearn is every value observed in the dimension, so weighted
    kappas (``"linear"``/``"quadratic"``) use the rank distance on that common, sorted scale.
    """
    if weights not in KAPPA_WEIGHTS:
        raise ValueError(f"unknown kappa weights {weights!r}; expected one of {list(KAPPA_WEIGHTS)}")
    matrix = reliability_matrix(ratings)
    labels = np.unique(matrix.to_numpy(dtype=float)[matrix.notna().to_numpy()])
    kappas: dict[tuple[Hashable, Hashable], float] = {}
    undefined = too_few = 0
    for a, b in itertools.combinations(matrix.index, 2):
        both = matrix.loc[a].notna() & matrix.loc[b].notna()
        if int(both.sum()) < min_shared or int(both.sum()) == 0:
            too_few += 1
            continue
        y1 = matrix.loc[a, both].to_numpy(dtype=float)
        y2 = matrix.loc[b, both].to_numpy(dtype=float)
        if np.unique(np.concatenate([y1, y2])).size < 2:
            undefined += 1
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kappa = float(cohen_kappa_score(y1, y2, labels=labels, weights=weights))
        if math.isnan(kappa):
            undefined += 1
            continue
        kappas[(a, b)] = kappa
    vals = list(kappas.values())
    if vals:
        mean, lo, hi = float(np.mean(vals)), float(min(vals)), float(max(vals))
    else:
        mean = lo = hi = math.nan
    return CohenResult(mean, lo, hi, len(vals), undefined, too_few, weights, min_shared, kappas)


# --------------------------------------------------------------------------- Fleiss' kappa
@dataclass(frozen=True)
class FleissResult:
    """Fleiss' kappa over the items having the modal number of (non-missing) ratings.

    ``n_items_excluded`` counts items with at least one rating but a different number of raters.
    """

    value: float
    n_raters: int
    n_items_used: int
    n_items_excluded: int
    n_categories: int


def fleiss_kappa(ratings: Ratings) -> FleissResult:
    """Fleiss' kappa (nominal) via ``statsmodels`` ``aggregate_raters`` + ``fleiss_kappa``.

    Fleiss' kappa needs the same number of raters per item, so only the items with the modal number of
    non-missing ratings are used (ties go to the larger number of raters; items with < 2 ratings are
    never used). NaN when no item qualifies or only one category occurs among the used items.
    """
    per_item = _item_values(ratings_frame(ratings))
    sizes = Counter(v.size for v in per_item if v.size >= 2)
    if not sizes:
        return FleissResult(math.nan, 0, 0, len(per_item), 0)
    n_raters = max(sizes, key=lambda k: (sizes[k], k))
    used = np.vstack([v for v in per_item if v.size == n_raters])
    table, categories = aggregate_raters(used)
    value = math.nan
    if len(categories) > 1:
        value = float(_sm_fleiss_kappa(table, method="fleiss"))
    return FleissResult(
        value, int(n_raters), int(used.shape[0]), len(per_item) - used.shape[0], len(categories)
    )


# --------------------------------------------------------------------------- agreement buckets
def _clean_values(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def agreement_bucket(values: Iterable[float | None]) -> str:
    """UPHELD agreement bucket of one item's labels (missing removed).

    ``"single"`` (< 2 labels), ``"full"`` (all equal), ``"majority"`` (unique mode with count > n/2),
    ``"plurality"`` (unique mode with count <= n/2) or ``"none"`` (top count tied, e.g. 2-2-1).
    """
    labels = _clean_values(values)
    if len(labels) < 2:
        return "single"
    counts = Counter(labels).most_common()
    if len(counts) == 1:
        return "full"
    top = counts[0][1]
    if counts[1][1] == top:
        return "none"
    return "majority" if top > len(labels) / 2 else "plurality"


def winning_label(values: Iterable[float | None]) -> float | None:
    """The unique most frequent label (missing removed), or ``None`` when absent or tied."""
    counts = Counter(_clean_values(values)).most_common()
    if not counts or (len(counts) > 1 and counts[1][1] == counts[0][1]):
        return None
    return counts[0][0]


def bucket_counts(ratings: Ratings) -> dict[str, int]:
    """Number of items per agreement bucket (all buckets present; all-missing items are ``single``)."""
    frame = ratings_frame(ratings)
    out = dict.fromkeys(BUCKETS, 0)
    for _, group in frame.groupby("item", sort=False, dropna=False)["value"]:
        out[agreement_bucket(group.tolist())] += 1
    return out


# --------------------------------------------------------------------------- report
@dataclass(frozen=True)
class AgreementReport:
    """All agreement statistics for one dimension (and optionally one group).

    ``n_items``/``n_annotators`` count distinct ids in the input, ``n_ratings`` the non-missing ratings
    and ``n_missing`` the missing ones.
    """

    level: str
    n_items: int
    n_annotators: int
    n_ratings: int
    n_missing: int
    percent: PairwiseAgreement
    adjacent: PairwiseAgreement
    alpha: AlphaResult
    cohen: CohenResult
    fleiss: FleissResult
    buckets: dict[str, int]

    def to_dict(self) -> dict[str, object]:
        """Flat, JSON-friendly dict of numbers, the level and the notes (NaN becomes ``None``)."""
        cohen = asdict(self.cohen)
        cohen.pop("pair_kappas")
        out: dict[str, object] = {
            "level": self.level,
            "n_items": self.n_items,
            "n_annotators": self.n_annotators,
            "n_ratings": self.n_ratings,
            "n_missing": self.n_missing,
            "percent_agreement": self.percent.value,
            "percent_n_items": self.percent.n_items,
            "adjacent_agreement": self.adjacent.value,
            "adjacent_tolerance": self.adjacent.tolerance,
            "adjacent_n_items": self.adjacent.n_items,
            "alpha": self.alpha.value,
            "alpha_n_items": self.alpha.n_items,
            "alpha_n_values": self.alpha.n_values,
            **{f"cohen_{k}": v for k, v in cohen.items()},
            **{
                ("fleiss_kappa" if k == "value" else f"fleiss_{k}"): v for k, v in asdict(self.fleiss).items()
            },
            **{f"bucket_{k}": v for k, v in self.buckets.items()},
        }
        out = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}
        why = {
            "percent_agreement": "undefined: no item has two ratings",
            "adjacent_agreement": "undefined: no item has two ratings",
            "alpha": "undefined: fewer than two pairable ratings or a single distinct value",
            "cohen_mean": f"undefined: no annotator pair shares {self.cohen.min_shared} items with two categories",
            "fleiss_kappa": "undefined: no item with two or more ratings, or a single category",
        }
        out.update({f"{k}_note": text for k, text in why.items() if out.get(k) is None})
        return out


def agreement_report(
    ratings: Ratings,
    level: str = "ordinal",
    *,
    tolerance: float = 1,
    weights: str | None = None,
    min_shared: int = 10,
) -> AgreementReport:
    """Compute every statistic of this module for one dimension's ratings."""
    _check_level(level)
    frame = ratings_frame(ratings)
    n_ratings = int(frame["value"].notna().sum())
    return AgreementReport(
        level=level,
        n_items=int(frame["item"].nunique(dropna=False)),
        n_annotators=int(frame["annotator"].nunique(dropna=False)),
        n_ratings=n_ratings,
        n_missing=len(frame) - n_ratings,
        percent=percent_agreement(frame),
        adjacent=adjacent_agreement(frame, tolerance),
        alpha=krippendorff_alpha(frame, level),
        cohen=cohen_kappa(frame, weights=weights, min_shared=min_shared),
        fleiss=fleiss_kappa(frame),
        buckets=bucket_counts(frame),
    )


# --------------------------------------------------------------------------- grouped table

ALL = "all"


def agreement_table(
    df: pd.DataFrame,
    by: Sequence[str] = (),
    dimension_levels: dict[str, str] | None = None,
    *,
    default_level: str = "ordinal",
    tolerance: float = 1,
    weights: str | None = None,
    min_shared: int = 10,
) -> pd.DataFrame:
    """One :func:`agreement_report` row per group of ``["dimension", *by]``, plus an ``"all"`` row per dimension.

    ``df`` is long format with columns ``item``, ``annotator``, ``value``, ``dimension`` and the ``by``
    columns. ``dimension_levels`` maps a dimension to its Krippendorff level (``default_level``
    otherwise). A rated unit is ``(*by, item)``: the same item id under two groups (e.g. two systems'
    responses to one context) is two units, also in the pooled ``"all"`` row, whose grouping columns
    hold ``"all"`` (added only when ``by`` is non-empty). Columns: ``dimension``, ``by`` columns, then
    the keys of :meth:`AgreementReport.to_dict`.
    """
    by = list(by)
    needed = [*COLUMNS, "dimension", *by]
    missing_cols = [c for c in needed if c not in df.columns]
    if missing_cols:
        raise ValueError(f"agreement_table input lacks column(s) {missing_cols}")
    if "dimension" in by or any(c in COLUMNS for c in by):
        raise ValueError(f"'by' may not contain 'dimension', 'item', 'annotator' or 'value': {by}")
    if df.empty:
        raise ValueError("no ratings given (empty input)")
    levels = dict(dimension_levels or {})
    for level in [default_level, *levels.values()]:
        _check_level(level)

    def report_of(ratings: pd.DataFrame, level: str) -> AgreementReport:
        return agreement_report(ratings, level, tolerance=tolerance, weights=weights, min_shared=min_shared)

    rows: list[dict[str, object]] = []
    for dimension, dim_df in df.groupby("dimension", sort=True):
        level = levels.get(dimension, default_level)
        if by:
            for keys, group in dim_df.groupby(by, sort=True, dropna=False):
                group_keys = dict(zip(by, keys if isinstance(keys, tuple) else (keys,), strict=True))
                try:
                    report = report_of(group, level)
                except ValueError as exc:
                    raise ValueError(f"dimension {dimension!r}, group {group_keys}: {exc}") from exc
                rows.append({"dimension": dimension, **group_keys, **report.to_dict()})
            pooled = dim_df.assign(item=dim_df.groupby([*by, "item"], dropna=False).ngroup())
        else:
            pooled = dim_df
        try:
            report = report_of(pooled, level)
        except ValueError as exc:
            raise ValueError(f"dimension {dimension!r}: {exc}") from exc
        rows.append({"dimension": dimension, **dict.fromkeys(by, ALL), **report.to_dict()})
    return pd.DataFrame(rows)
