"""Issue-detection meta-evaluation: an LLM judge's binary issue labels against double human annotation.

Follows MEDAL §5.3 / App. D–E (after Finch et al., 2023b). Each dialogue carries binary issue labels
(uninterpretable, unsafe, ..., nonfactual). Classification metrics treat both the positive (issue) and
the negative (no issue) occurrences as classes: F1+ / F1- plus precision, recall (of label 1), accuracy
and prediction counts. With several human annotation sets, the judge is scored against *each* set as
reference in turn and the numbers are averaged; the human ceiling scores each set against the other(s).
McNemar's test (alpha 0.05) compares the judge with a human annotator; :func:`stability` gives the
repeated-run standard deviations of MEDAL Table 3.

Conventions: labels are arrays of 0/1 with NaN (or ``None``) for a missing label or a judge parse
failure; an item missing on either side of a comparison is excluded from it. All metric arithmetic is
delegated to scikit-learn (``precision_recall_fscore_support``, ``accuracy_score``, ``confusion_matrix``)
and statsmodels (``mcnemar``). ``zero_division`` is forwarded to scikit-learn; the default ``0.0`` is
what scikit-learn's own default (``"warn"``) yields numerically (an undefined precision/recall/F1 is 0),
minus the warning. Pass ``np.nan`` to mark undefined values instead (they are then left out of means).
"""

from __future__ import annotations

import itertools
import json
import math
import string
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support
from statsmodels.stats.contingency_tables import mcnemar

from harness.meta.jsonable import to_json

if TYPE_CHECKING:
    from harness.jsontypes import JSON

RateName = Literal["f1_pos", "f1_neg", "precision", "recall", "accuracy"]
MetricName = Literal[
    "f1_pos", "f1_neg", "precision", "recall", "accuracy", "predicted_positive", "reference_positive"
]
CEILING_NAMES: tuple[RateName, ...] = ("f1_pos", "f1_neg", "precision", "recall", "accuracy")
METRIC_NAMES: tuple[MetricName, ...] = (*CEILING_NAMES, "predicted_positive", "reference_positive")
EXACT_BELOW = 25  # McNemar: exact binomial test when fewer discordant pairs than this, else chi-square
ZeroDivision = float | str
Labels = Sequence[float | int | None] | np.ndarray


class BinaryMetrics(TypedDict):
    """:func:`binary_metrics` of one prediction against one reference."""

    f1_pos: float
    f1_neg: float
    precision: float
    recall: float
    accuracy: float
    predicted_positive: int
    reference_positive: int
    n: int
    note: NotRequired[str]


class MetricMeans(TypedDict):
    """Every metric of :data:`METRIC_NAMES` averaged over several references (NaN: none defined)."""

    f1_pos: float
    f1_neg: float
    precision: float
    recall: float
    accuracy: float
    predicted_positive: float
    reference_positive: float


class AnnotatorAveraged(MetricMeans):
    """:func:`annotator_averaged`: the means, the item counts and each reference's metrics."""

    n: int
    parse_failures: int
    per_annotator: dict[str, BinaryMetrics]


class HumanCeilingMetrics(MetricMeans):
    """:func:`human_ceiling`: the means over ordered annotator pairs and each pair's metrics."""

    n: int
    per_pair: dict[str, BinaryMetrics]


class McNemarTest(TypedDict):
    """One McNemar test of :func:`mcnemar_vs_human`; ``table`` is its 2x2 table."""

    statistic: float
    p_value: float
    significant: bool
    exact: bool
    n: int
    table: list[list[int]]


class McNemarComparison(McNemarTest):
    """A test with what it compares: ``reference``/``human`` sets and their accuracies
    (``kind="correctness"``), or the human set and both sides' positives (``kind="labels"``)."""

    reference: NotRequired[str]
    human: str
    judge_accuracy: NotRequired[float]
    human_accuracy: NotRequired[float]
    judge_positive: NotRequired[int]
    human_positive: NotRequired[int]


class McNemarResult(TypedDict):
    """:func:`mcnemar_vs_human`: every test, the smallest p-value and whether any is significant."""

    tests: dict[str, McNemarComparison]
    alpha: float
    kind: str | None
    p_value: float | None
    significant: bool


class StabilityStats(TypedDict):
    """Repeated-run consistency of one dimension (:func:`stability`); undefined values are None."""

    mean_item_std: float | None
    rate_std: float | None
    n_items: int
    n_runs: int
    flip_rate: float | None
    run_means: list[float | None]


def _binary_array(values: Labels, what: str) -> np.ndarray:
    """1-D float array of 0/1/NaN (``None`` becomes NaN); anything else raises ``ValueError``."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    present = arr[~np.isnan(arr)]
    bad = present[~np.isin(present, (0.0, 1.0))]
    if bad.size:
        raise ValueError(f"{what} must hold 0/1 (NaN = missing), got {bad[0]!r}")
    return arr


def _prepare(judge: Labels, annotations: Mapping[str, Labels]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    pred = _binary_array(judge, "judge labels")
    refs = {str(name): _binary_array(ref, f"annotation set {name!r}") for name, ref in annotations.items()}
    for name, ref in refs.items():
        if ref.shape != pred.shape:
            raise ValueError(f"annotation set {name!r} has {ref.size} items, judge has {pred.size}")
    return pred, refs


def _label_counts(refs: Mapping[str, np.ndarray], size: int) -> np.ndarray:
    """Per item, how many of the annotation sets label it."""
    counts = np.zeros(size, dtype=int)
    for ref in refs.values():
        counts += ~np.isnan(ref)
    return counts


def _nanmean(values: Sequence[float] | np.ndarray) -> float:
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def binary_metrics(reference: Labels, predicted: Labels, zero_division: ZeroDivision = 0.0) -> BinaryMetrics:
    """Binary classification metrics of ``predicted`` against ``reference`` (0/1; NaN = missing).

    Items missing on either side are dropped. Returns ``f1_pos`` / ``f1_neg`` (F1 of label 1 / label 0),
    ``precision`` and ``recall`` of label 1, ``accuracy``, ``predicted_positive`` / ``reference_positive``
    (counts of 1s on the kept items) and ``n`` (kept items). With ``n == 0`` the rates are NaN.
    """
    ref = _binary_array(reference, "reference")
    pred = _binary_array(predicted, "predicted")
    if ref.shape != pred.shape:
        raise ValueError(f"reference has {ref.size} items, predicted has {pred.size}")
    keep = ~np.isnan(ref) & ~np.isnan(pred)
    y_true, y_pred = ref[keep].astype(int), pred[keep].astype(int)
    if not keep.any():
        nan = math.nan
        return {
            "f1_pos": nan,
            "f1_neg": nan,
            "precision": nan,
            "recall": nan,
            "accuracy": nan,
            "predicted_positive": 0,
            "reference_positive": 0,
            "n": 0,
            "note": "undefined: no item is labelled on both sides",
        }
    prec, rec, f1, _ = precision_recall_fscore_support(
        y_true, y_pred, labels=[0, 1], average=None, zero_division=zero_division
    )
    return {
        "f1_pos": float(f1[1]),
        "f1_neg": float(f1[0]),
        "precision": float(prec[1]),
        "recall": float(rec[1]),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "predicted_positive": int(y_pred.sum()),
        "reference_positive": int(y_true.sum()),
        "n": int(keep.sum()),
    }


def _means(rows: Sequence[BinaryMetrics]) -> MetricMeans:
    """Each metric's mean over ``rows``, NaN values left out."""

    def mean(key: MetricName) -> float:
        return _nanmean([m[key] for m in rows])

    return {
        "f1_pos": mean("f1_pos"),
        "f1_neg": mean("f1_neg"),
        "precision": mean("precision"),
        "recall": mean("recall"),
        "accuracy": mean("accuracy"),
        "predicted_positive": mean("predicted_positive"),
        "reference_positive": mean("reference_positive"),
    }


def annotator_averaged(
    judge: Labels, annotations: Mapping[str, Labels], zero_division: ZeroDivision = 0.0
) -> AnnotatorAveraged:
    """Judge vs each annotation set as reference in turn, every metric averaged over the sets.

    Only sets sharing >= 1 item with the judge enter the mean (and ``per_annotator``); NaN metric values
    (``zero_division=np.nan``) are left out of it. ``predicted_positive`` / ``reference_positive`` are
    thus the mean over references of the counts on each reference's overlapping items (MEDAL Fig. 13
    "average the amount of identified dialogues"). ``n`` counts items with a judge label and >= 1 human
    label; ``parse_failures`` counts items with >= 1 human label but no judge label.
    """
    pred, refs = _prepare(judge, annotations)
    per = {name: binary_metrics(ref, pred, zero_division) for name, ref in refs.items()}
    per = {name: m for name, m in per.items() if m["n"] > 0}
    has_human = _label_counts(refs, pred.size) > 0
    judged = ~np.isnan(pred)
    return {
        **_means(list(per.values())),
        "n": int((judged & has_human).sum()),
        "parse_failures": int((~judged & has_human).sum()),
        "per_annotator": per,
    }


def human_ceiling(
    annotations: Mapping[str, Labels], zero_division: ZeroDivision = 0.0
) -> HumanCeilingMetrics | None:
    """Human performance: every ordered pair (A as prediction, B as reference) of distinct sets, averaged.

    Over both orders F1+ and accuracy are symmetric while precision and recall swap, so their means
    coincide. ``per_pair`` is keyed ``"A|B"`` (prediction|reference); ``n`` = items labelled by >= 2
    sets. ``None`` with fewer than two sets or when no two sets share an item.
    """
    refs = {str(name): _binary_array(v, f"annotation set {name!r}") for name, v in annotations.items()}
    if len({ref.size for ref in refs.values()}) > 1:
        raise ValueError("annotation sets differ in length")
    pairs = {
        f"{a}|{b}": binary_metrics(refs[b], refs[a], zero_division)
        for a, b in itertools.permutations(refs, 2)
    }
    pairs = {key: m for key, m in pairs.items() if m["n"] > 0}
    if not pairs:
        return None
    return {
        **_means(list(pairs.values())),
        "n": int((_label_counts(refs, next(iter(refs.values())).size) >= 2).sum()),
        "per_pair": pairs,
    }


def _mcnemar_entry(table: np.ndarray, alpha: float) -> McNemarTest:
    exact = bool(table[0, 1] + table[1, 0] < EXACT_BELOW)
    res = mcnemar(table, exact=exact, correction=True)
    p_value = float(res.pvalue)
    return {
        "statistic": float(res.statistic),
        "p_value": p_value,
        "significant": bool(p_value < alpha),
        "exact": exact,
        "n": int(table.sum()),
        "table": table.tolist(),
    }


def mcnemar_vs_human(judge: Labels, annotations: Mapping[str, Labels], alpha: float = 0.05) -> McNemarResult:
    """McNemar's test of the judge against a human annotator (MEDAL Fig. 5), via statsmodels.

    ``kind="correctness"`` (>= 2 sets): for each reference set R and each other set H, over items labelled
    by judge, R and H, the 2x2 table ``[[both correct, judge only], [H only, neither]]`` of (judge == R) x
    (H == R); the test asks whether judge and H are correct equally often. Tests are keyed by R (with
    exactly two sets) or ``"R|H"`` (more sets); each also reports ``judge_accuracy`` / ``human_accuracy``.
    ``kind="labels"`` (one set): the table ``[[both 1, judge only 1], [human only 1, both 0]]`` of judge vs
    human labels, i.e. marginal homogeneity -- does the judge flag the issue at a different rate.
    statsmodels ``mcnemar(table, exact=d < 25, correction=True)`` with ``d`` discordant pairs: the exact
    binomial test (``statistic = min(b, c)``) or the continuity-corrected chi-square. ``p_value`` is the
    smallest p over the tests and ``significant`` whether any ``p < alpha`` (no multiplicity correction);
    both are ``None``/``False`` when no test could be run.
    """
    pred, refs = _prepare(judge, annotations)
    names = list(refs)
    tests: dict[str, McNemarComparison] = {}
    kind = "correctness" if len(names) >= 2 else ("labels" if names else None)
    if kind == "correctness":
        for ref_name, human_name in itertools.permutations(names, 2):
            ref, human = refs[ref_name], refs[human_name]
            keep = ~np.isnan(pred) & ~np.isnan(ref) & ~np.isnan(human)
            if not keep.any():
                continue
            judge_ok = (pred[keep] == ref[keep]).astype(int)
            human_ok = (human[keep] == ref[keep]).astype(int)
            table = confusion_matrix(judge_ok, human_ok, labels=[1, 0])
            key = ref_name if len(names) == 2 else f"{ref_name}|{human_name}"
            tests[key] = {
                "reference": ref_name,
                "human": human_name,
                **_mcnemar_entry(table, alpha),
                "judge_accuracy": float(judge_ok.mean()),
                "human_accuracy": float(human_ok.mean()),
            }
    elif kind == "labels":
        name, human = next(iter(refs.items()))
        keep = ~np.isnan(pred) & ~np.isnan(human)
        if keep.any():
            table = confusion_matrix(pred[keep].astype(int), human[keep].astype(int), labels=[1, 0])
            tests[name] = {
                "human": name,
                **_mcnemar_entry(table, alpha),
                "judge_positive": int(table[0].sum()),
                "human_positive": int(table[:, 0].sum()),
            }
    p_values = [t["p_value"] for t in tests.values()]
    return {
        "tests": tests,
        "alpha": alpha,
        "kind": kind,
        "p_value": min(p_values) if p_values else None,
        "significant": any(t["significant"] for t in tests.values()),
    }


def bootstrap_metric_ci(
    judge: Labels,
    annotations: Mapping[str, Labels],
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    zero_division: ZeroDivision = 0.0,
) -> dict[str, list[float] | None]:
    """Percentile-bootstrap CI ``[lo, hi]`` of every :func:`annotator_averaged` metric in ``METRIC_NAMES``.

    Resamples (with replacement) the items that have a judge label and >= 1 human label. Replicate ``b``
    uses ``considered[rng.integers(0, n, size=(n_bootstrap, n))[b]]`` and equals
    ``annotator_averaged`` on those items; all replicates are scored in one vectorised scikit-learn
    call per set (each replicate is one column of a multilabel indicator matrix; an item missing for a
    set is entered as a 0/0 cell, which never touches the scored label). NaN replicates are ignored; a
    metric gets ``None`` when fewer than ``max(10, n_bootstrap / 2)`` replicates are valid.
    """
    pred, refs = _prepare(judge, annotations)
    considered = np.flatnonzero(~np.isnan(pred) & (_label_counts(refs, pred.size) > 0))
    out: dict[str, list[float] | None] = dict.fromkeys(METRIC_NAMES)
    if n_bootstrap < 10 or considered.size == 0:
        return out
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    draws = considered[rng.integers(0, considered.size, size=(n_bootstrap, considered.size))].T  # (n, B)
    stacked: dict[str, list[np.ndarray]] = {key: [] for key in METRIC_NAMES}
    p_all = pred[draws]
    for ref in refs.values():
        y_all = ref[draws]
        valid = ~np.isnan(y_all)  # judge is present on every considered item
        count = valid.sum(axis=0)
        y_pos, p_pos = np.where(valid, y_all, 0).astype(int), np.where(valid, p_all, 0).astype(int)
        y_neg, p_neg = np.where(valid, 1 - y_all, 0).astype(int), np.where(valid, 1 - p_all, 0).astype(int)
        kw = {"average": None, "zero_division": zero_division}
        prec, rec, f1_pos, _ = precision_recall_fscore_support(y_pos, p_pos, **kw)
        f1_neg = precision_recall_fscore_support(y_neg, p_neg, **kw)[2]
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = (valid & (y_all == p_all)).sum(axis=0) / count
        values = (f1_pos, f1_neg, prec, rec, accuracy, p_pos.sum(axis=0), y_pos.sum(axis=0))
        for key, arr in zip(METRIC_NAMES, values, strict=True):
            stacked[key].append(np.where(count > 0, np.asarray(arr, dtype=float), np.nan))
    tail = (1.0 - confidence) / 2.0
    for name, rows in stacked.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN replicate columns
            reps = np.nanmean(np.vstack(rows), axis=0)
        reps = reps[~np.isnan(reps)]
        if reps.size >= max(10, n_bootstrap / 2):
            out[name] = [float(np.quantile(reps, tail)), float(np.quantile(reps, 1.0 - tail))]
    return out


def _mapping(cell: object, item: object, column: str) -> Mapping[str, object] | None:
    """Decode a dict / JSON-string cell; ``None``/NaN/empty string → ``None`` (e.g. unparsable judge output)."""
    if isinstance(cell, str):
        cell = json.loads(cell) if cell.strip() else None
    if cell is None or cell is pd.NA or (isinstance(cell, float) and math.isnan(cell)):
        return None
    if not isinstance(cell, Mapping):
        raise ValueError(f"{column} of item {item!r} must be a mapping or JSON object, got {cell!r}")
    return cell


def _binary_value(value: object, item: object, dimension: str, who: str) -> float:
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)):
        return math.nan
    if isinstance(value, bool | np.bool_ | int | np.integer | float | np.floating) and value in (0, 1):
        return float(value)
    raise ValueError(
        f"{who} label of item {item!r}, dimension {dimension!r} must be 0/1 or None, got {value!r}"
    )


def _slot(position: int) -> str:
    letters = string.ascii_uppercase
    return letters[position] if position < len(letters) else f"S{position + 1}"


def _parse_samples(
    frame: pd.DataFrame, dimensions: Sequence[str]
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """Judge arrays per dimension and human arrays per dimension and slot (A, B, ... by dict order)."""
    n = len(frame)
    judge = {d: np.full(n, np.nan) for d in dimensions}
    humans: dict[str, dict[str, np.ndarray]] = {d: {} for d in dimensions}
    rows = zip(frame["item_id"], frame["judge_labels"], frame["human_labels"], strict=True)
    for row, (item, judge_cell, human_cell) in enumerate(rows):
        judge_labels = _mapping(judge_cell, item, "judge_labels")
        human_labels = _mapping(human_cell, item, "human_labels") or {}
        for d in dimensions:
            if judge_labels is not None:
                judge[d][row] = _binary_value(judge_labels.get(d), item, d, "judge")
            per_annotator = human_labels.get(d)
            if per_annotator is None:
                continue
            if not isinstance(per_annotator, Mapping):
                raise ValueError(f"human_labels[{d!r}] of item {item!r} must map annotator id -> value")
            for position, value in enumerate(per_annotator.values()):
                slot = humans[d].setdefault(_slot(position), np.full(n, np.nan))
                slot[row] = _binary_value(value, item, d, "human")
    return judge, humans


def _group_report(
    judge: dict[str, np.ndarray],
    humans: dict[str, dict[str, np.ndarray]],
    mask: np.ndarray,
    boot: _Bootstrap,
    alpha: float,
    zero_division: ZeroDivision,
) -> dict[str, dict[str, JSON]]:
    out: dict[str, Mapping[str, object]] = {}
    macro: dict[Literal["f1_pos", "f1_neg"], list[float]] = {"f1_pos": [], "f1_neg": []}
    for d, labels in judge.items():
        pred = labels[mask]
        slots = {s: arr[mask] for s, arr in humans[d].items() if (~np.isnan(arr[mask])).any()}
        avg = annotator_averaged(pred, slots, zero_division)
        ci = bootstrap_metric_ci(
            pred, slots, boot.n_bootstrap, boot.confidence, boot.seed, zero_division=zero_division
        )
        for name in METRIC_NAMES:
            out[f"{d}/{name}"] = {
                "value": avg[name],
                "ci": ci[name],
                "n": avg["n"],
                "parse_failures": avg["parse_failures"],
                "per_annotator": {slot: m[name] for slot, m in avg["per_annotator"].items()},
            }
        ceiling = human_ceiling(slots, zero_division)
        out[f"{d}/human_ceiling"] = {
            "value": ceiling["f1_pos"] if ceiling else None,
            **{name: ceiling[name] if ceiling else None for name in CEILING_NAMES},
            "n": ceiling["n"] if ceiling else 0,
        }
        test = mcnemar_vs_human(pred, slots, alpha)
        out[f"{d}/mcnemar"] = {"value": test["p_value"], **test}
        for key, values in macro.items():
            if not math.isnan(avg[key]):
                values.append(avg[key])
    for key, values in macro.items():
        out[f"macro/{key}"] = {"value": _nanmean(values), "ci": None, "n_dimensions": len(values)}
    return {key: {k: to_json(v, nan_is_null=True) for k, v in e.items()} for key, e in out.items()}


@dataclass(frozen=True)
class _Bootstrap:
    n_bootstrap: int
    confidence: float
    seed: int


def issue_detection(
    samples: pd.DataFrame,
    dimensions: Sequence[str],
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    language_order: Sequence[str] | None = None,
    alpha: float = 0.05,
    zero_division: ZeroDivision = 0.0,
) -> dict[str, dict[str, dict[str, JSON]]]:
    """Per-language (and pooled ``"all"``) issue-detection report of one judge, MEDAL §5.3 style.

    ``samples``: one row per judged item with ``language``, ``item_id``, ``judge_labels`` (dict or JSON
    string ``{dimension: 0/1/None}``; a ``None``/NaN cell is an unparsable judge output, i.e. a parse
    failure on every dimension) and ``human_labels`` (dict or JSON string ``{dimension: {annotator_id:
    0/1/None}}``). Annotator ids differ between languages, so the double annotation is aligned by *slot*:
    per item and dimension the annotators in the dict's order become slots ``"A"``, ``"B"``, ... (a
    ``None`` value keeps its slot). Other values raise ``ValueError`` naming item, dimension and value.

    Returns ``{group: {key: entry}}`` for the languages (``language_order`` first, the rest sorted) and
    ``"all"`` (pooled, MEDAL's "Combined"). Keys ``f"{dim}/{name}"`` for ``name`` in ``METRIC_NAMES``:
    ``{"value", "ci", "n", "parse_failures", "per_annotator": {slot: value}}``; ``f"{dim}/human_ceiling"``:
    ``{"value" (= f1_pos), "f1_pos", "f1_neg", "precision", "recall", "accuracy", "n"}`` (``None``s with
    < 2 slots); ``f"{dim}/mcnemar"``: ``{"value" (= p_value), **mcnemar_vs_human(...)}``; ``"macro/f1_pos"``
    / ``"macro/f1_neg"``: ``{"value", "ci": None, "n_dimensions"}`` over dimensions with a value. Every
    bootstrap uses ``seed``, so a group's numbers do not depend on the other groups. JSON-safe output.
    """
    missing = {"language", "item_id", "judge_labels", "human_labels"} - set(samples.columns)
    if missing:
        raise ValueError(f"samples lacks columns {sorted(missing)}")
    frame = samples.reset_index(drop=True)
    languages = frame["language"].astype(str).to_numpy()
    duplicated = frame.assign(language=languages).duplicated(["language", "item_id"])
    if duplicated.any():
        raise ValueError(
            f"duplicate (language, item_id) rows, e.g. item {frame['item_id'][duplicated.idxmax()]!r}"
        )
    if "all" in set(languages):
        raise ValueError("'all' is reserved for the pooled group and cannot be a language")
    judge, humans = _parse_samples(frame, list(dimensions))
    present = set(languages)
    order = [lang for lang in dict.fromkeys(language_order or ()) if lang in present]
    order += sorted(present - set(order))
    groups = {lang: languages == lang for lang in order}
    groups["all"] = np.ones(len(frame), dtype=bool)
    boot = _Bootstrap(n_bootstrap, confidence, seed)
    return {
        name: _group_report(judge, humans, mask, boot, alpha, zero_division) for name, mask in groups.items()
    }


def _defined(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _stability_stats(matrix: pd.DataFrame) -> StabilityStats:
    values = matrix.to_numpy(dtype=float)
    eligible = values[(~np.isnan(values)).sum(axis=1) >= 2]
    run_means = [float(np.nanmean(col)) for col in values.T if (~np.isnan(col)).any()]
    flips = np.nanmax(eligible, axis=1) != np.nanmin(eligible, axis=1) if eligible.size else np.array([])
    return {
        "mean_item_std": _defined(_nanmean(np.nanstd(eligible, axis=1))) if eligible.size else None,
        "rate_std": _defined(float(np.std(run_means))) if len(run_means) >= 2 else None,
        "n_items": int(eligible.shape[0]),
        "n_runs": int(values.shape[1]),
        "flip_rate": _defined(_nanmean(flips)),
        "run_means": [_defined(m) for m in run_means],
    }


def stability(
    runs: Sequence[pd.DataFrame], dimensions: Sequence[str], score_column: str | None = "score"
) -> dict[str, StabilityStats]:
    """Repeated-run consistency of a judge (MEDAL Table 3), per issue dimension and ``"overall"``.

    Each run has ``item_id``, ``judge_labels`` (as in :func:`issue_detection`) and ``score_column`` (the
    overall 1-5 score; ``None`` disables ``"overall"``). Per key: ``mean_item_std`` = mean over items with
    a value in >= 2 runs of the item's standard deviation across runs (``np.std``, ddof=0, i.e. the
    population SD of the k repeated judgments; on the 1-5 scale MEDAL reports 0.27 for Overall);
    ``rate_std`` = ``np.std`` (ddof=0) over runs of each run's mean (issue rate / mean score) over its
    items with a value; ``run_means``; ``n_items`` (items in >= 2 runs); ``n_runs``; ``flip_rate`` =
    share of those items whose value differs between some two runs. Undefined values are ``None``.
    """
    if not runs:
        raise ValueError("stability needs at least one run")
    keys = [*dimensions, *(["overall"] if score_column is not None else [])]
    series: dict[str, list[pd.Series]] = {key: [] for key in keys}
    needed = {"item_id", "judge_labels"} if dimensions else {"item_id"}
    needed |= {score_column} if score_column is not None else set()
    for r, run in enumerate(runs):
        if needed - set(run.columns):
            raise ValueError(f"run {r} lacks columns {sorted(needed - set(run.columns))}")
        if run["item_id"].duplicated().any():
            raise ValueError(f"run {r} has duplicate item_id values")
        ids = list(run["item_id"])
        cells = run["judge_labels"] if dimensions else [None] * len(ids)
        parsed = [_mapping(cell, item, "judge_labels") for item, cell in zip(ids, cells, strict=True)]
        for d in dimensions:
            labels = [
                math.nan if p is None else _binary_value(p.get(d), i, d, "judge")
                for i, p in zip(ids, parsed, strict=True)
            ]
            series[d].append(pd.Series(labels, index=ids, dtype=float))
        if score_column is not None:
            scores = pd.to_numeric(run[score_column]).to_numpy(dtype=float)
            series["overall"].append(pd.Series(scores, index=ids))
    return {key: _stability_stats(pd.concat(cols, axis=1)) for key, cols in series.items()}
