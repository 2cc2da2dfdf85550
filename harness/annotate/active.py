"""Active selection of the items humans label, and the unbiased estimate of a judge's agreement
with humans from those labels.

The quantity estimated is the judge–human correlation over the *whole pool* of ``N`` items (the
Pearson or Spearman correlation between the judge's score and the human label that every item
would get): the number ``harness run`` reports once every item is labelled. The judge's score is
known for every item; the human label only for the items labelled so far.

**Selection.** :func:`plan_random` draws items uniformly without replacement (the baseline);
:func:`plan_active` draws them without replacement with probabilities proportional to ``q``
(successive sampling: the next item is drawn from the items not yet drawn, with probabilities
``q`` renormalised over them; Kossen et al. 2021, "Active Testing"). ``q`` is the
variance-optimal proposal for the correlation, ``q_i ∝ sqrt(E[ψ_i² | judge, surrogate])``, where
``ψ_i`` is the item's influence on the correlation and the expectation is over the human label
predicted from the judge and a surrogate (a second judge) under a Gaussian model; it is mixed with
the uniform distribution, ``q = (1 - floor) q_acq + floor / N``, so every item keeps a probability
of at least ``floor / N``. Items with extreme judge scores (and, once :func:`replan` has
calibrated the surrogate on the labels so far, items whose human label it predicts to be extreme)
move a correlation most; they are drawn more often and weighted down.

**Estimate.** Each labelled item gets the LURE weight of Kossen et al. 2021 (eq. 4):
``v_m = 1 + (N - M) / (N - m) * (1 / ((N - m + 1) q_m) - 1)`` for the ``m``-th of ``M`` draws,
``q_m`` the probability it had when drawn; the weighted mean of any per-item quantity is then
unbiased for its pool mean. The correlation is the weighted Pearson correlation (of the weighted
mid-ranks for Spearman) of the labelled items: a smooth function of weighted means, consistent for
the pool value with an ``O(1/M)`` bias like the ordinary sample correlation; with uniform draws
every weight is 1 and it *is* the ordinary sample correlation. Its CI is the delta-method
(sandwich) interval on Fisher's z scale, each item's term with the finite-population factor
``1 - π_i``, ``π_i ≈ min(1, M q_i)`` its inclusion probability (``1 - M / N`` for random
selection).

**Calibrated estimate.** Scores known for *every* item — the judge's, the surrogate's, and a group
of each item known before annotation (the system that wrote the response, the source data set) —
can also enter the estimate: ``estimate(..., pool_judge=, pool_surrogate=, pool_groups=)``
calibrates the weights so that the weighted means of these auxiliaries equal their pool means (the
generalised regression estimator; Deville & Särndal 1992). It stays consistent whatever the
auxiliaries, and its variance is that of the part of each item's influence they do not predict:
where the groups differ in their human labels, far fewer labels reach the same CI. A plan made with
``calibrated=True`` (and recalibrated by :func:`replan` with ``groups=``) draws in proportion to
that unpredicted part, from a regression of the human label on the group, the judge and the
surrogate refitted on the labels so far.

**Assumptions.** The labels of the pool are fixed (noisy draws independent of the selection given
the item); the plan (judge and surrogate scores, groups) is fixed before the first label, or recalibrated
by :func:`replan`, whose proposal for each later draw depends only on the labels before it, and the
surrogate has not been trained on the labels it is scored against; the labelled items are a prefix of the plan's order
(labels past the first unlabelled item of the order wait until that gap is filled); the number of
labels is not chosen by peeking at the estimate.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Literal

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import stats

Metric = Literal["pearson", "spearman"]
METRICS: tuple[str, ...] = ("pearson", "spearman")

#: Gauss–Hermite nodes/weights (probabilists') for E[f(u)], u ~ N(mu, tau^2)
_GH_NODES, _GH_WEIGHTS = hermegauss(9)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()


def _scores(name: str, values: np.ndarray | Sequence[float], n: int) -> np.ndarray:
    """``values`` as a float vector of length ``n``; ValueError naming the argument otherwise."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name}: expected {n} scores, one per item, got shape {arr.shape}")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(
            f"{name}: {bad.size} score(s) are NaN or infinite (first at position {int(bad[0])}); "
            "score every item of the pool or leave the unscored items out of the plan"
        )
    return arr


def _ids(item_ids: Sequence[str]) -> tuple[str, ...]:
    ids = tuple(str(i) for i in item_ids)
    if len(ids) < 3:
        raise ValueError(f"item_ids: a pool needs at least 3 items to estimate a correlation, got {len(ids)}")
    dups = [i for i, k in Counter(ids).items() if k > 1]
    if dups:
        raise ValueError(f"item_ids: item {dups[0]!r} appears more than once; every item must be listed once")
    return ids


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = float(np.std(x))
    return (x - float(np.mean(x))) / sd if sd > 0 else np.zeros_like(x)


def _normal_scores(x: np.ndarray) -> np.ndarray:
    """Pool mid-ranks mapped to standard normal quantiles (the Spearman analogue of a z-score)."""
    return _standardise(stats.norm.ppf((stats.rankdata(x) - 0.5) / x.shape[0]))


@dataclass(frozen=True)
class ActivePlan:
    """A sampling plan over a pool: the items, their sampling distribution ``q`` and the sampled
    order (drawn without replacement, each next item with probability ``q`` renormalised over the
    items not yet drawn). Label items in ``order``; :meth:`weights` gives the importance (LURE)
    weights of a labelled prefix."""

    item_ids: tuple[str, ...]
    q: np.ndarray
    order: tuple[str, ...]
    policy: str = "active"
    floor: float = 0.0
    #: the proposal targets the calibrated estimator (``estimate(..., calibrate=True)``): it follows
    #: the part of each item's influence that the judge and the surrogate do not predict
    calibrated: bool = False
    #: probability each item of ``order`` had when it was drawn
    step_q: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    def prefix(self, labelled: Sequence[str]) -> int:
        """How many items of ``order`` are labelled before the first unlabelled one (the labels an
        estimate can use); ValueError for an id that is not in the pool."""
        have = set(labelled)
        unknown = have.difference(self.item_ids)
        if unknown:
            first = sorted(unknown)[0]
            raise ValueError(f"labelled: item {first!r} is not in the plan's pool of {self.n_items} items")
        m = 0
        for item in self.order:
            if item not in have:
                break
            m += 1
        return m

    def weights(self, labelled: Sequence[str]) -> np.ndarray:
        """Importance weights of the labelled items, in the order of ``labelled``: the LURE weight of
        each item of the labelled prefix of ``order`` (mean close to 1; all 1 for a random plan),
        0 for a labelled item after the first gap in the order (not usable yet)."""
        m_used = self.prefix(labelled)
        n = self.n_items
        m = np.arange(1, m_used + 1, dtype=float)
        qm = self.step_q[:m_used]
        with np.errstate(divide="ignore", invalid="ignore"):
            v = 1.0 + (n - m_used) / (n - m) * (1.0 / ((n - m + 1) * qm) - 1.0)
        v = np.where(n - m > 0, v, 1.0)  # the last item of a full pool: (N - M) = 0
        by_item = dict(zip(self.order[:m_used], v, strict=True))
        return np.array([by_item.get(i, 0.0) for i in labelled], dtype=float)


def _draw(
    ids: tuple[str, ...],
    q: np.ndarray,
    seed: int,
    policy: str,
    floor: float,
    done: Sequence[int] = (),
    done_q: np.ndarray | None = None,
    calibrated: bool = False,
) -> ActivePlan:
    """Successive sampling without replacement proportional to ``q`` (Efraimidis–Spirakis keys:
    sorting ``log(U) / q`` gives that order), with each draw's probability at the time; the items
    ``done`` (positions, already drawn with probabilities ``done_q``) stay first."""
    rng = np.random.default_rng(seed)
    rest = np.setdiff1d(np.arange(q.shape[0]), np.asarray(done, dtype=int), assume_unique=False)
    qr = q[rest] / q[rest].sum()
    keys = np.log(rng.random(rest.shape[0])) / qr
    idx = rest[np.argsort(-keys, kind="stable")]
    drawn = q[idx] / q[rest].sum()
    before = np.concatenate(([0.0], np.cumsum(drawn)[:-1]))
    remaining = np.clip(1.0 - before, drawn, None)  # rounding: never below the item's own mass
    head = np.zeros(0) if done_q is None else np.asarray(done_q, dtype=float)
    return ActivePlan(
        item_ids=ids,
        q=q,
        order=tuple(ids[i] for i in (*done, *idx)),
        policy=policy,
        floor=floor,
        calibrated=calibrated,
        step_q=np.concatenate((head, drawn / remaining)),
    )


def plan_random(item_ids: Sequence[str], *, seed: int) -> ActivePlan:
    """The baseline: items in a uniformly random order (every weight is 1)."""
    ids = _ids(item_ids)
    q = np.full(len(ids), 1.0 / len(ids))
    return _draw(ids, q, seed, "random", 1.0)


def acquisition(
    judge: np.ndarray,
    surrogate: np.ndarray | None,
    *,
    metric: str = "pearson",
    surrogate_corr: float | None = None,
    judge_corr: float | None = None,
    calibrated: bool = False,
) -> np.ndarray:
    """The variance-optimal proposal (before the floor): ``sqrt(E[ψ_i²])`` normalised to sum 1.

    ``ψ_i = z_i u_i - r/2 (z_i² + u_i²)`` is item ``i``'s influence on the correlation ``r`` (``z``:
    the judge's standardised score, or normal score for Spearman; ``u``: the human label's). ``u`` is
    predicted as Gaussian given the judge and the surrogate, with assumed correlations
    ``judge_corr`` (judge–human) and ``surrogate_corr`` (surrogate–human). Before any label they are
    unknown and taken as 0 (the default: the surrogate is not used, and the proposal favours the
    items with extreme judge scores); :func:`replan` estimates them from the labels so far. Guessing
    them from the two judges' agreement with each other overstates them and costs labels (the
    labels-saved benchmark measures it).
    Without a surrogate, ``u`` depends on the judge alone."""
    _check_metric(metric)
    to_z = _normal_scores if metric == "spearman" else _standardise
    z = to_z(judge)
    if surrogate is None:
        g, rho = np.zeros_like(z), 0.0
    else:
        g = to_z(surrogate)
        rho = float(np.clip(np.mean(z * g), -0.99, 0.99))
    # before any label the judges' links to the humans are unknown: assume none (the proposal then
    # depends on the judge's scores alone); replan() estimates them from the labels so far
    r_jh = 0.0 if judge_corr is None else float(judge_corr)
    r_gh = 0.0 if surrogate is None or surrogate_corr is None else float(surrogate_corr)
    # u | z, g ~ N(mean, tau^2) under a trivariate standard normal with the assumed correlations
    cov = np.array([[1.0, rho], [rho, 1.0]])
    c = np.array([r_jh, r_gh])
    beta = np.linalg.solve(cov, c)
    tau2 = float(np.clip(1.0 - c @ beta, 0.05, 1.0))
    mean = beta[0] * z + beta[1] * g
    return _influence_proposal(z, mean, np.full(z.shape[0], tau2), r_jh, calibrated)


def _influence_proposal(
    z: np.ndarray, mean: np.ndarray, tau2: np.ndarray, r: float, calibrated: bool
) -> np.ndarray:
    """``sqrt(E[ψ_i²])`` (``sqrt(Var[ψ_i])`` when ``calibrated``) normalised to sum 1, for the
    human label's standardised score predicted as ``u_i ~ N(mean_i, tau2_i)``."""
    u = mean[:, None] + np.sqrt(tau2)[:, None] * _GH_NODES[None, :]
    psi = z[:, None] * u - 0.5 * r * (z[:, None] ** 2 + u**2)
    second = (psi**2) @ _GH_WEIGHTS
    if calibrated:
        # the calibrated estimate removes the part of ψ the known scores predict (its conditional
        # mean, a quadratic in them under the model): what is left is the conditional variance
        second = np.clip(second - (psi @ _GH_WEIGHTS) ** 2, 0.0, None)
    a = np.sqrt(second)
    total = float(a.sum())
    return a / total if total > 0 else np.full(z.shape[0], 1.0 / z.shape[0])


def plan_active(
    item_ids: Sequence[str],
    judge: np.ndarray,
    surrogate: np.ndarray | None,
    *,
    seed: int,
    floor: float = 0.1,
    metric: str = "pearson",
    surrogate_corr: float | None = None,
    judge_corr: float | None = None,
    calibrated: bool = False,
) -> ActivePlan:
    """A plan that draws the items that move the judge–human ``metric`` most, more often:
    ``q = (1 - floor) * acquisition + floor / N`` (see :func:`acquisition`), every item at least
    ``floor / N``. ``judge``: the evaluated judge run's scores, one per item of ``item_ids``;
    ``surrogate``: a second judge's scores (or None)."""
    ids = _ids(item_ids)
    n = len(ids)
    if not 0.0 < floor <= 1.0:
        raise ValueError(
            f"floor: must be in (0, 1] (the share of the uniform distribution in q), got {floor}"
        )
    j = _scores("judge", judge, n)
    s = None if surrogate is None else _scores("surrogate", surrogate, n)
    acq = acquisition(
        j, s, metric=metric, surrogate_corr=surrogate_corr, judge_corr=judge_corr, calibrated=calibrated
    )
    q = (1.0 - floor) * acq + floor / n
    q = q / q.sum()
    return _draw(ids, q, seed, "active", floor, calibrated=calibrated)


def replan(
    plan: ActivePlan,
    labelled: Sequence[str],
    human: np.ndarray,
    judge: np.ndarray,
    surrogate: np.ndarray | None,
    *,
    seed: int,
    metric: str = "pearson",
    min_labels: int = 20,
    groups: Sequence[str] | None = None,
) -> ActivePlan:
    """The plan recalibrated on the labels so far: the labelled prefix of ``plan.order`` stays as
    drawn; the remaining items are drawn again from a proposal whose judge–human and
    surrogate–human correlations are the weighted estimates from those labels (the defaults of
    :func:`acquisition` until there are ``min_labels``). The LURE weights stay unbiased: each draw's
    probability depends only on the labels before it.

    ``groups``: a label per item of the pool known before annotation (the source data set, the
    system that wrote the response), aligned with ``plan.item_ids``. With it, the human label is
    predicted by a weighted least-squares regression on the group (one mean each), the judge and the
    surrogate, refitted on the labels so far, with a residual variance per group (shrunk towards
    the pooled one with the weight of :data:`GROUP_PRIOR_LABELS` labels): a surrogate of the human
    label that can be far stronger than the second judge when groups differ in their labels.

    ``judge`` and ``surrogate``: the pool's scores, aligned with ``plan.item_ids``; ``human``: the
    labels of ``labelled``, aligned with it. A random plan is returned unchanged."""
    if plan.policy == "random":
        return plan
    _check_metric(metric)
    n = plan.n_items
    j = _scores("judge", judge, n)
    g = None if surrogate is None else _scores("surrogate", surrogate, n)
    ids = list(labelled)
    h = _scores("human", human, len(ids))
    m = plan.prefix(ids)
    pos = {item: k for k, item in enumerate(plan.item_ids)}
    head = [pos[i] for i in plan.order[:m]]
    levels = None if groups is None else _group_index(groups, n)
    r_jh = r_gh = None
    model: tuple[np.ndarray, np.ndarray] | None = None
    if m >= min_labels:
        w = plan.weights(ids)
        keep = w > 0
        label_of = dict(zip(ids, h, strict=True))
        hh = np.array([label_of[i] for i in plan.order[:m]])
        by_item = dict(zip(np.asarray(ids)[keep], w[keep], strict=True))
        ww = np.array([by_item[i] for i in plan.order[:m]])
        rank = metric == "spearman"
        fit_j = _weighted_corr(*_pair(j[head], hh, ww, rank), ww)
        r_jh = None if fit_j is None else float(np.clip(fit_j[0], -0.9, 0.9))
        if g is not None:
            fit_g = _weighted_corr(*_pair(g[head], hh, ww, rank), ww)
            r_gh = None if fit_g is None else float(np.clip(fit_g[0], -0.9, 0.9))
        if levels is not None:
            model = _group_model(j, g, levels, head, hh, ww, rank)
    to_z = _normal_scores if metric == "spearman" else _standardise
    if model is not None:
        acq = _influence_proposal(to_z(j), model[0], model[1], r_jh or 0.0, plan.calibrated)
    else:
        acq = acquisition(
            j, g, metric=metric, surrogate_corr=r_gh, judge_corr=r_jh, calibrated=plan.calibrated
        )
    q = (1.0 - plan.floor) * acq + plan.floor / n
    q = q / q.sum()
    return _draw(
        plan.item_ids, q, seed, plan.policy, plan.floor, head, plan.step_q[:m], calibrated=plan.calibrated
    )


#: weight, in labels, of the pooled residual variance in each group's (shrinkage towards it)
GROUP_PRIOR_LABELS = 5


def _group_index(groups: Sequence[str], n: int) -> np.ndarray:
    """Each item's group as an index 0..G-1; ValueError unless there is one label per item."""
    labels = [str(x) for x in groups]
    if len(labels) != n:
        raise ValueError(f"groups: expected {n} group labels, one per item, got {len(labels)}")
    _, idx = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    return idx.astype(int)


def _group_model(
    j: np.ndarray,
    g: np.ndarray | None,
    levels: np.ndarray,
    head: list[int],
    hh: np.ndarray,
    ww: np.ndarray,
    rank: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """The predicted standardised human score of every pool item, mean and variance: a weighted
    least-squares fit on the labelled items (``head``, labels ``hh``, weights ``ww``) of the
    human score on the group, the judge and the surrogate."""
    to_z = _normal_scores if rank else _standardise
    wpos = np.clip(ww, 0.0, None)
    if rank:
        u = stats.norm.ppf(np.clip(_weighted_midranks(hh, wpos), 1e-3, 1 - 1e-3))
    else:
        mu = float(wpos @ hh / wpos.sum())
        sd = math.sqrt(float(wpos @ (hh - mu) ** 2 / wpos.sum())) or 1.0
        u = (hh - mu) / sd
    n_groups = int(levels.max()) + 1
    cols = [np.eye(n_groups)[levels], to_z(j)[:, None]]
    if g is not None:
        cols.append(to_z(g)[:, None])
    design = np.hstack(cols)
    sq = np.sqrt(wpos)
    coef = np.linalg.lstsq(design[head] * sq[:, None], u * sq, rcond=None)[0]
    resid2 = (u - design[head] @ coef) ** 2
    pooled = float(wpos @ resid2 / wpos.sum())
    in_group = levels[head]
    n_g = np.bincount(in_group, minlength=n_groups).astype(float)
    w_g = np.bincount(in_group, weights=wpos, minlength=n_groups)
    ss_g = np.bincount(in_group, weights=wpos * resid2, minlength=n_groups)
    var_g = np.where(w_g > 0, ss_g / np.where(w_g > 0, w_g, 1.0), pooled)
    shrunk = (n_g * var_g + GROUP_PRIOR_LABELS * pooled) / (n_g + GROUP_PRIOR_LABELS)
    return design @ coef, np.clip(shrunk, 0.01, None)[levels]


def _pair(x: np.ndarray, y: np.ndarray, w: np.ndarray, rank: bool) -> tuple[np.ndarray, np.ndarray]:
    return (_weighted_midranks(x, w), _weighted_midranks(y, w)) if rank else (x, y)


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric: {metric!r} is not supported; choose one of {', '.join(METRICS)}")


@dataclass(frozen=True)
class Estimate:
    """The pool-level judge–human ``metric`` estimated from ``n_labels`` labels of ``n_items``;
    ``value``/``ci`` are None until there are enough labels (3, with variation in both)."""

    metric: str
    value: float | None
    ci: tuple[float, float] | None
    n_labels: int
    n_items: int
    confidence: float = 0.95
    #: labelled items that wait for an earlier item of the order (not used yet)
    n_waiting: int = 0

    @property
    def half_width(self) -> float | None:
        return None if self.ci is None else (self.ci[1] - self.ci[0]) / 2.0

    def labels_for_half_width(self, target: float) -> int | None:
        """How many *more* labels (beyond ``n_labels``) the CI half-width ``target`` needs, from the
        current variance estimate (half-width² ∝ (1 - n/N) / n); 0 when already reached, None
        without a CI yet. ValueError for a target that is not positive."""
        if not target > 0:
            raise ValueError(f"target: a CI half-width must be positive, got {target}")
        hw = self.half_width
        if hw is None or self.n_labels >= self.n_items:
            return None if hw is None else 0
        if hw <= target:
            return 0
        n, big_n = self.n_labels, self.n_items
        c = hw**2 * n / (1.0 - n / big_n)
        needed = 1.0 / (target**2 / c + 1.0 / big_n)
        return max(0, min(big_n, math.ceil(needed)) - n)


def _weighted_midranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Each value's weighted mid-rank ECDF: share of the weight below it plus half its tie's."""
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], w[order]
    uniq, start = np.unique(xs, return_index=True)
    tie_w = np.add.reduceat(ws, start)
    below = np.concatenate(([0.0], np.cumsum(tie_w)[:-1]))
    mid = (below + tie_w / 2.0) / ws.sum()
    return mid[np.searchsorted(uniq, x)]


def _weighted_corr(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, fpc: np.ndarray | None = None
) -> tuple[float, float] | None:
    """Weighted Pearson correlation and its delta-method (sandwich) variance, each item's term
    multiplied by its finite-population factor ``fpc`` (1 - its inclusion probability; default 1:
    sampling with replacement); None when undefined (no variation)."""
    c = np.cov(x, y, aweights=w, bias=True)
    if not (c[0, 0] > 0 and c[1, 1] > 0):
        return None
    r = float(np.clip(c[0, 1] / math.sqrt(c[0, 0] * c[1, 1]), -1.0, 1.0))
    sw = w.sum()
    zx = (x - (w @ x) / sw) / math.sqrt(c[0, 0])
    zy = (y - (w @ y) / sw) / math.sqrt(c[1, 1])
    psi = zx * zy - 0.5 * r * (zx**2 + zy**2)
    terms = w**2 * psi**2 if fpc is None else fpc * w**2 * psi**2
    return r, float(np.sum(terms) / sw**2)


#: labels below which the calibrated estimate falls back to the plain weighted one (the calibration
#: fits up to five auxiliary moments; with fewer labels it adds more noise than it removes)
MIN_CALIBRATION_LABELS = 20
#: labels every group needs before the calibrated estimate uses the groups
MIN_GROUP_LABELS = 3


def _calibrated_corr(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, fpc: np.ndarray, aux: np.ndarray, aux_pool: np.ndarray
) -> tuple[float, float] | None:
    """The weighted Pearson correlation with calibrated weights, and its delta-method variance.

    The weights are calibrated (linear calibration, Deville & Särndal 1992) so that the weighted
    means of the auxiliary variables ``aux`` (functions of scores known for every item: the judge,
    its square, the surrogate, ...) equal their pool means ``aux_pool``: the generalised regression
    (GREG) estimator, a difference estimator with the auxiliaries' known pool totals. It stays
    consistent for the pool value whatever the auxiliaries; its variance is that of each item's
    influence ``ψ`` *minus* its regression on the auxiliaries, so what the scores predict of ``ψ``
    costs no labels. None when undefined (no variation)."""
    sw = float(w.sum())
    abar = (w @ aux) / sw
    dev = aux - abar
    s = (dev * w[:, None]).T @ dev / sw
    lam = np.linalg.lstsq(s, aux_pool - abar, rcond=None)[0]
    wc = w * (1.0 + dev @ lam)
    mx, my = (wc @ x) / sw, (wc @ y) / sw
    dx, dy = x - mx, y - my
    vx, vy, cxy = (wc @ dx**2) / sw, (wc @ dy**2) / sw, (wc @ (dx * dy)) / sw
    if not (vx > 0 and vy > 0):
        return None
    r = float(np.clip(cxy / math.sqrt(vx * vy), -1.0, 1.0))
    zx, zy = dx / math.sqrt(vx), dy / math.sqrt(vy)
    psi = zx * zy - 0.5 * r * (zx**2 + zy**2)
    design = np.column_stack((np.ones_like(x), aux))
    sq = np.sqrt(w)
    beta = np.linalg.lstsq(design * sq[:, None], psi * sq, rcond=None)[0]
    resid = psi - design @ beta
    # the residuals of a fit with p coefficients on n items are too small by n / (n - p) on average
    n, p = x.shape[0], design.shape[1]
    return r, float(np.sum(fpc * wc**2 * resid**2) / sw**2) * n / max(1, n - p)


def _auxiliaries(
    judge: np.ndarray, surrogate: np.ndarray | None, levels: np.ndarray | None = None
) -> np.ndarray:
    """The auxiliary variables of the calibrated estimate, one row per item: the pool-standardised
    judge score and its square, with a surrogate its score, square and product with the judge, and
    with groups each group's indicator and judge score (but the first's: the intercept spans them).
    Under the Gaussian model of the human label the conditional mean of an item's influence is a
    quadratic in the scores with a level and a judge slope per group: the auxiliaries span it."""
    z = _standardise(judge)
    cols = [z, z**2]
    if surrogate is not None:
        g = _standardise(surrogate)
        cols += [g, g**2, z * g]
    if levels is not None:
        for k in range(1, int(levels.max()) + 1):
            d = (levels == k).astype(float)
            cols += [d, d * z]
    return np.column_stack(cols)


def estimate(
    plan: ActivePlan,
    labelled: Sequence[str],
    judge: np.ndarray,
    human: np.ndarray,
    *,
    metric: str = "pearson",
    confidence: float = 0.95,
    seed: int = 0,
    pool_judge: np.ndarray | None = None,
    pool_surrogate: np.ndarray | None = None,
    pool_groups: Sequence[str] | None = None,
) -> Estimate:
    """The judge–human ``metric`` over the plan's whole pool, from the labelled items.

    ``labelled``: the labelled item ids; ``human``: their human labels (e.g. the mean over
    annotators), aligned with ``labelled``; ``judge``: their judge scores, aligned with ``labelled``
    or (a vector of the pool's size) with ``plan.item_ids``. Only the labelled prefix of
    the plan's order is used (see :meth:`ActivePlan.weights`). ``seed`` is accepted for a stable
    interface (the delta-method CI draws no random numbers).

    ``pool_judge`` (and ``pool_surrogate``): the scores of every item of the pool, aligned with
    ``plan.item_ids``; with them the Pearson estimate is *calibrated* to their known pool moments
    (see :func:`_calibrated_corr`; from :data:`MIN_CALIBRATION_LABELS` labels on): a smaller CI
    for the same labels, with any plan. Not for Spearman (the pool's ranks of the human labels are
    unknown). ``pool_groups``: a group label per item of the pool (see :func:`replan`); the
    estimate is then calibrated to each group's size and judge mean too (post-stratification), once
    every group has :data:`MIN_GROUP_LABELS` labels."""
    _check_metric(metric)
    if pool_judge is None and (pool_surrogate is not None or pool_groups is not None):
        raise ValueError(
            "pool_surrogate, pool_groups: give pool_judge too (the calibration needs the judge's pool scores)"
        )
    if pool_judge is not None and metric != "pearson":
        raise ValueError(
            f"pool_judge: the calibrated estimate is for the Pearson correlation, not {metric!r}; "
            "leave pool_judge out"
        )
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: must be in (0, 1), got {confidence}")
    ids = list(labelled)
    if len(set(ids)) != len(ids):
        raise ValueError("labelled: an item appears more than once; give one (aggregated) label per item")
    h = _scores("human", human, len(ids))
    judge_arr = np.asarray(judge, dtype=float)
    if judge_arr.ndim == 1 and judge_arr.shape[0] == plan.n_items != len(ids):
        # the judge's scores of the whole pool, in the order of plan.item_ids
        pool = _scores("judge", judge_arr, plan.n_items)
        pos = {item: k for k, item in enumerate(plan.item_ids)}
        missing = [i for i in ids if i not in pos]
        if missing:
            raise ValueError(
                f"labelled: item {missing[0]!r} is not in the plan's pool of {plan.n_items} items"
            )
        j = pool[[pos[i] for i in ids]]
    else:
        j = _scores("judge", judge_arr, len(ids))
    w = plan.weights(ids)
    used = w > 0
    n_used = plan.prefix(ids)
    waiting = len(ids) - n_used

    def result(value: float | None, ci: tuple[float, float] | None) -> Estimate:
        return Estimate(metric, value, ci, n_used, plan.n_items, confidence, waiting)

    if n_used < 3:
        return result(None, None)
    x, y, wu = j[used], h[used], w[used]
    if metric == "spearman":
        x, y = _weighted_midranks(x, wu), _weighted_midranks(y, wu)
    # each item's inclusion probability in a sample of n_used, approximated as min(1, n_used q_i):
    # the finite-population factor 1 - n/N of simple random sampling, item by item
    pos = {item: k for k, item in enumerate(plan.item_ids)}
    q_used = plan.q[[pos[i] for i, u in zip(ids, used, strict=True) if u]]
    fpc = 1.0 - np.minimum(1.0, n_used * q_used)
    if pool_judge is not None and n_used >= MIN_CALIBRATION_LABELS:
        pj = _scores("pool_judge", pool_judge, plan.n_items)
        ps = None if pool_surrogate is None else _scores("pool_surrogate", pool_surrogate, plan.n_items)
        rows = [pos[i] for i, u in zip(ids, used, strict=True) if u]
        levels = None if pool_groups is None else _group_index(pool_groups, plan.n_items)
        if (
            levels is not None
            and np.bincount(levels[rows], minlength=int(levels.max()) + 1).min() < MIN_GROUP_LABELS
        ):
            levels = None  # a group without labels yet: calibrate on the scores only
        aux = _auxiliaries(pj, ps, levels)
        got = _calibrated_corr(x, y, wu, fpc, aux[rows], aux.mean(axis=0))
    else:
        got = _weighted_corr(x, y, wu, fpc)
    if got is None:
        return result(None, None)
    r, var = got
    zcrit = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    if n_used >= plan.n_items or var <= 0:
        ci = (r, r)
    else:
        fz = math.atanh(float(np.clip(r, -0.999999, 0.999999)))
        se = math.sqrt(var) / max(1e-12, 1.0 - r**2)
        ci = (math.tanh(fz - zcrit * se), math.tanh(fz + zcrit * se))
    return result(r, ci)
