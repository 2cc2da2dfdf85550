"""The alternative annotator test ("alt-test"; Calderon, Reichart & Dror, ACL 2025, arXiv 2501.10970):
can this judge replace a human annotator?

For every annotator ``j`` (leave one annotator out), on the instances ``i`` that ``j`` labelled and
that at least one other annotator labelled too:

* alignment with the *remaining* annotators ``H_i \\ {j}`` — ``S(judge_i)`` and ``S(h_ij)`` — with the
  paper's scoring functions: ``accuracy`` (share of remaining labels equal to the prediction, for
  categorical labels) or ``neg_rmse`` (minus the root mean squared difference, for numeric labels);
* indicators ``W^f_ij = 1[S(judge_i) >= S(h_ij)]`` (the judge is at least as good) and
  ``W^h_ij = 1[S(h_ij) >= S(judge_i)]``; ``rho_j = mean_i W^f_ij`` (advantage probability);
* the one-sided one-sample t-test (:func:`scipy.stats.ttest_1samp`, ``alternative="less"``) of
  ``d_ij = W^h_ij - W^f_ij`` against the cost–benefit margin ``epsilon``: H0 ``mean(d) >= epsilon``,
  H1 ``mean(d) < epsilon`` (the judge "wins" against annotator ``j``);
* Benjamini–Yekutieli FDR control at ``q`` over all annotators' p-values
  (:func:`statsmodels.stats.multitest.multipletests`, ``method="fdr_by"``);
* winning rate ``omega`` = share of annotators whose null is rejected; the judge passes (can replace
  the annotators) when ``omega >= 0.5``; ``rho`` = mean of ``rho_j`` (compares judges).

Defaults follow the paper and its reference implementation (github.com/nitaytech/AltTest): ``q = 0.05``,
at least 2 annotators per instance, annotators with fewer than 30 instances are skipped (the t-test's
normality assumption; listed, not silently dropped), instances without a judge score are left out
(counted). Recommended ``epsilon``: 0.2 for experts, 0.15 for skilled annotators, 0.1 for crowd-workers.
The paper recommends at least 3 annotators (with 2 the test only asks whether the judge matches one
annotator better than the other does); this module warns below 3 and refuses below 2.

Choices the paper leaves open, made here (see docs/meta-evaluation.md):

* a constant ``d`` (zero variance) gives ``t = ±inf``: p = 0 when ``mean(d) < epsilon``, else 1 (as
  scipy returns); ``mean(d) == epsilon`` exactly gives p = 1;
* when judge and humans use different scales, :func:`rescale` maps them first (the paper's FAQ:
  standardise per annotator, or ranks): ``zscore`` standardises each annotator over their instances
  and the judge over all instances; ``rank`` uses percentile ranks (mean rank of ties / n);
  ``discretize`` maps the judge onto the label scale with equal-width bins over its fixed range.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

from harness.meta.jsonable import to_json

if TYPE_CHECKING:
    from harness.jsontypes import JSON

SCORINGS = ("accuracy", "neg_rmse")
SCALES = ("raw", "zscore", "rank", "discretize")
EPSILON_GUIDE = {"experts": 0.2, "skilled": 0.15, "crowd": 0.1}
MIN_INSTANCES = 30
MIN_ANNOTATORS = 2
RECOMMENDED_ANNOTATORS = 3


def accuracy(pred: float, others: np.ndarray) -> float:
    return float(np.mean(others == pred))


def neg_rmse(pred: float, others: np.ndarray) -> float:
    return -float(np.sqrt(np.mean((others - pred) ** 2)))


_SCORING = {"accuracy": accuracy, "neg_rmse": neg_rmse}


@dataclass
class AnnotatorResult:
    annotator: str
    n: int
    rho: float | None = None  # the judge's advantage probability against this annotator
    human_rate: float | None = None  # mean W^h
    mean_diff: float | None = None  # mean(W^h - W^f)
    t: float | None = None
    p_value: float | None = None
    rejected: bool = False  # BY-adjusted: the judge wins against this annotator
    skipped: str | None = None


@dataclass
class AltTestResult:
    epsilon: float
    q: float
    scoring: str
    annotators: list[AnnotatorResult] = field(default_factory=list)
    n_instances: int = 0
    instances_without_judge: int = 0
    instances_too_few_annotators: int = 0
    omega: float | None = None
    rho: float | None = None
    passed: bool | None = None
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None

    @property
    def tested(self) -> list[AnnotatorResult]:
        return [a for a in self.annotators if a.skipped is None]

    def to_dict(self) -> dict[str, JSON]:
        d = asdict(self)
        d["annotators"] = {
            a["annotator"]: {k: v for k, v in a.items() if k != "annotator"} for a in d["annotators"]
        }
        return {k: _finite(v) for k, v in d.items()}


def _finite(o: object) -> JSON:
    """The JSON of a result, every non-finite float None."""
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, list):
        return [_finite(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return to_json(o)


def one_sided_p(diffs: Sequence[float], epsilon: float) -> tuple[float, float]:
    """(t, p) of H0 mean(diffs) >= epsilon vs H1 mean(diffs) < epsilon (scipy's one-sample t-test)."""
    d = np.asarray(diffs, dtype=float)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        r = stats.ttest_1samp(d, epsilon, alternative="less")
    t, p = float(r.statistic), float(r.pvalue)
    if math.isnan(p):  # constant differences exactly at epsilon: no evidence for H1
        p = 1.0
    return t, p


def by_reject(p_values: Sequence[float], q: float) -> list[bool]:
    """Benjamini–Yekutieli step-up at FDR level ``q`` (statsmodels ``fdr_by``)."""
    if not p_values:
        return []
    return [bool(x) for x in multipletests(list(p_values), alpha=q, method="fdr_by")[0]]


def alt_test(
    judge: Mapping[Hashable, float | None],
    humans: Mapping[str, Mapping[Hashable, float | None]],
    *,
    scoring: str = "neg_rmse",
    epsilon: float = 0.15,
    q: float = 0.05,
    min_instances: int = MIN_INSTANCES,
    min_annotators: int = MIN_ANNOTATORS,
    correct: bool = True,
) -> AltTestResult:
    """The alt-test of ``judge`` (instance -> score, None = no score) against ``humans`` (annotator ->
    instance -> label, None = missing). With ``correct=False`` p-values are left uncorrected (the
    caller applies BY over several environments, :func:`finish`)."""
    if scoring not in SCORINGS:
        raise ValueError(f"unknown alt-test scoring {scoring!r}; expected one of {SCORINGS}")
    if not 0 <= epsilon < 1:
        raise ValueError(f"epsilon must be in [0, 1), got {epsilon}")
    fn = _SCORING[scoring]
    res = AltTestResult(epsilon=epsilon, q=q, scoring=scoring)
    labels: dict[Hashable, dict[str, float]] = {}
    for ann, per in humans.items():
        for inst, v in per.items():
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                labels.setdefault(inst, {})[str(ann)] = float(v)
    scored = {i: float(v) for i, v in judge.items() if v is not None and math.isfinite(float(v))}
    res.instances_without_judge = sum(1 for i in labels if i not in scored)
    res.instances_too_few_annotators = sum(
        1 for i, h in labels.items() if i in scored and len(h) < min_annotators
    )
    keep = {i: h for i, h in labels.items() if i in scored and len(h) >= min_annotators}
    res.n_instances = len(keep)
    per_item = [len(h) for h in keep.values()]
    if not keep:
        most = max((len(h) for h in labels.values()), default=0)
        res.skipped = (
            f"no instance has a judge score and labels from at least {min_annotators} annotators "
            f"(at most {most} annotator(s) per instance here); the alt-test needs >= {min_annotators} "
            f"(the paper recommends >= {RECOMMENDED_ANNOTATORS})"
        )
        return res
    if float(np.median(per_item)) < RECOMMENDED_ANNOTATORS:
        res.warnings.append(
            f"median {np.median(per_item):g} annotators per instance: with 2 the test only compares the judge "
            f"with one other annotator; the paper recommends >= {RECOMMENDED_ANNOTATORS} annotators"
        )
    for ann in sorted({a for h in keep.values() for a in h}, key=_natural):
        insts = [i for i, h in keep.items() if ann in h]
        ar = AnnotatorResult(annotator=ann, n=len(insts))
        if len(insts) < min_instances:
            ar.skipped = f"{len(insts)} instances < {min_instances} (t-test normality; the paper's minimum)"
            res.annotators.append(ar)
            continue
        wf, wh = [], []
        for i in insts:
            others = np.array([v for a, v in keep[i].items() if a != ann], dtype=float)
            s_judge, s_human = fn(scored[i], others), fn(keep[i][ann], others)
            wf.append(1.0 if s_judge >= s_human else 0.0)
            wh.append(1.0 if s_human >= s_judge else 0.0)
        diffs = np.asarray(wh) - np.asarray(wf)
        ar.rho, ar.human_rate, ar.mean_diff = float(np.mean(wf)), float(np.mean(wh)), float(np.mean(diffs))
        ar.t, ar.p_value = one_sided_p(diffs, epsilon)
        res.annotators.append(ar)
    if not res.tested:
        res.skipped = f"no annotator has >= {min_instances} instances shared with other annotators"
        return res
    if correct:
        finish([res])
    return res


def _known(x: float | None) -> float:
    """A statistic that every tested annotator has (one without it is ``skipped``, not tested)."""
    if x is None:
        raise ValueError("a tested annotator lacks a statistic")
    return x


def finish(results: Sequence[AltTestResult]) -> None:
    """BY over every tested annotator of ``results`` together (several environments: the paper's
    FAQ), then omega / rho / passed per result."""
    tested = [a for r in results for a in r.tested]
    for a, rej in zip(
        tested, by_reject([_known(a.p_value) for a in tested], results[0].q if results else 0.05), strict=True
    ):
        a.rejected = rej
    for r in results:
        if r.tested:
            r.omega = sum(a.rejected for a in r.tested) / len(r.tested)
            r.rho = float(np.mean([_known(a.rho) for a in r.tested]))
            r.passed = r.omega >= 0.5


def _natural(s: str) -> tuple[int | str, ...]:
    import re

    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


# -- scales -------------------------------------------------------------------------------------
def _z(values: Mapping[Hashable, float]) -> dict[Hashable, float]:
    keys = list(values)
    arr = np.asarray([values[k] for k in keys], dtype=float)
    sd = float(np.std(arr))
    z = stats.zscore(arr) if sd > 0 else np.zeros_like(arr)
    return dict(zip(keys, map(float, z), strict=True))


def _ranks(values: Mapping[Hashable, float]) -> dict[Hashable, float]:
    keys = list(values)
    r = stats.rankdata([values[k] for k in keys]) / len(keys)
    return dict(zip(keys, map(float, r), strict=True))


def rescale(
    judge: Mapping[Hashable, float | None],
    humans: Mapping[str, Mapping[Hashable, float | None]],
    mode: str,
    *,
    judge_range: tuple[float, float] | None = None,
    levels: Sequence[float] | None = None,
) -> tuple[dict[Hashable, float | None], dict[str, dict[Hashable, float]]]:
    """Put judge and annotators on one scale (``raw`` leaves both as they are)."""
    if mode not in SCALES:
        raise ValueError(f"unknown alt-test scale {mode!r}; expected one of {SCALES}")
    j = {i: float(v) for i, v in judge.items() if v is not None and math.isfinite(float(v))}
    h = {
        a: {i: float(v) for i, v in per.items() if v is not None and not math.isnan(float(v))}
        for a, per in humans.items()
    }
    if mode == "raw":
        return dict(j), h
    if mode == "discretize":
        from harness.meta.scale_correlation import discretize

        if judge_range is None or not levels:
            raise ValueError(
                "alt-test scale 'discretize' needs the judge's fixed score range and the label levels"
            )
        keys = list(j)
        mapped = discretize(
            np.asarray([j[k] for k in keys]), list(levels), lo=judge_range[0], hi=judge_range[1]
        )
        return dict(zip(keys, map(float, mapped), strict=True)), h
    f = _z if mode == "zscore" else _ranks
    scaled: dict[Hashable, float | None] = dict(f(j)) if j else {}
    return scaled, {a: f(per) if per else {} for a, per in h.items()}


def choose(
    label_scale: str, judge_range: tuple[float, float] | None, label_range: tuple[float, float] | None
) -> tuple[str, str]:
    """(scale mode, scoring) for ``auto``: binary labels -> the judge discretized onto them + accuracy
    (needs the judge's range; else z-scores + neg_rmse); a judge already on the label range -> raw +
    neg_rmse; otherwise z-scores + neg_rmse."""
    if label_scale == "binary" and judge_range is not None:
        return "discretize", "accuracy"
    if (
        judge_range is not None
        and label_range is not None
        and tuple(map(float, judge_range)) == tuple(map(float, label_range))
    ):
        return "raw", "neg_rmse"
    return "zscore", "neg_rmse"


# -- harness run: per task, one environment per dataset × language ---------------------------------
def alt_test_from_samples(
    samples: pd.DataFrame,
    info: Mapping[str, object],
    judge_range: tuple[float, float] | None,
    *,
    epsilon: float = 0.15,
    q: float = 0.05,
    scale: str = "auto",
    scoring: str | None = None,
    score_column: str = "score",
) -> dict[str, JSON]:
    """The alt-test of one task's samples (``human_labels`` / ``human_dimension`` columns): one
    environment per dataset × language, BY over every annotator comparison of the task together (the
    paper's FAQ on several environments); ``omega`` per environment and how many pass."""
    from harness.meta.soft_labels import annotator_frame, label_scale_json, read_label_scale

    labels = annotator_frame(samples)
    label_scale = read_label_scale(info)
    if scale == "auto":
        mode, auto_scoring = choose(
            label_scale["scale"], judge_range, (label_scale["min"], label_scale["max"])
        )
    else:
        mode, auto_scoring = scale, ("accuracy" if scale == "discretize" else "neg_rmse")
    scoring = scoring or auto_scoring
    head: dict[str, JSON] = {
        "epsilon": epsilon,
        "q": q,
        "scale": mode,
        "scoring": scoring,
        "judge_range": [*judge_range] if judge_range is not None else None,
        "label_scale": label_scale_json(label_scale),
        "min_instances": MIN_INSTANCES,
    }
    if labels.empty:
        return {
            **head,
            "skipped": "the items carry no individual annotator labels: the alt-test needs >= 2 per item",
        }
    envs: dict[str, AltTestResult] = {}
    for (ds, lang), sub in samples.groupby(["dataset", "language"], sort=True):
        lab = labels[(labels["dataset"] == ds) & (labels["language"] == lang)]
        unit = ds + "\x1f" + sub["id"].astype(str)
        judge = dict(zip(unit, pd_num(sub[score_column]), strict=True))
        humans: dict[str, dict[Hashable, float | None]] = {}
        for a, u, v in zip(lab["annotator"], lab["unit"], lab["value"], strict=True):
            humans.setdefault(a, {})[u] = v
        try:
            j, h = rescale(judge, humans, mode, judge_range=judge_range, levels=label_scale["levels"])
        except ValueError as e:
            return {**head, "skipped": str(e)}
        res = alt_test(j, h, scoring=scoring, epsilon=epsilon, q=q, correct=False)
        envs[f"{ds}/{lang}"] = res
    finish([r for r in envs.values() if r.skipped is None])
    tested = [r for r in envs.values() if r.skipped is None]
    return {
        **head,
        "environments": {k: r.to_dict() for k, r in envs.items()},
        "passed_environments": sum(bool(r.passed) for r in tested),
        "n_environments": len(tested),
        **(
            {"skipped": "; ".join(sorted({r.skipped for r in envs.values() if r.skipped}))}
            if not tested
            else {}
        ),
    }


def pd_num(values: Iterable[object]) -> list[float | None]:
    """Scores as floats, None where a value is missing or not a number."""
    out = []
    for v in values:
        try:
            f = float(v) if isinstance(v, int | float | str | np.integer | np.floating) else math.nan
        except ValueError:
            f = math.nan
        out.append(None if math.isnan(f) else f)
    return out
