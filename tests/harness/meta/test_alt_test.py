"""The alternative annotator test (Calderon, Reichart & Dror 2025): checked against an independent
re-implementation of the paper's reference procedure (github.com/nitaytech/AltTest notebook, written
out below with plain loops, its own BY step-up and the t statistic by formula), hand-computed small
cases, the scale choices, clear skips, and ω per annotator on the real UPHELD release."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from harness.meta.alt_test import (
    AltTestResult,
    alt_test,
    by_reject,
    choose,
    finish,
    one_sided_p,
    rescale,
)


# -- an independent implementation of the reference procedure ---------------------------------------
def _by_procedure(p_values, q):
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    h_m = sum(1.0 / k for k in range(1, m + 1))
    last = -1
    for rank, i in enumerate(order, 1):
        if p_values[i] <= rank / m * q / h_m:
            last = rank
    return set(order[:last]) if last > 0 else set()


def _t_p_less(d, eps):
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
    t = (mean - eps) / (sd / math.sqrt(n))
    return t, stats.t.cdf(t, n - 1)


def _reference(llm, humans, scoring, eps, q=0.05):
    score = {
        "accuracy": lambda p, anns: sum(p == a for a in anns) / len(anns),
        "neg_rmse": lambda p, anns: -math.sqrt(sum((p - a) ** 2 for a in anns) / len(anns)),
    }[scoring]
    h_set = {}
    for h, anns in humans.items():
        for i in anns:
            h_set.setdefault(i, []).append(h)
    keep = {i for i in h_set if len(h_set[i]) >= 2 and i in llm}
    ps, rhos, names = [], [], []
    for h in humans:
        inst = [i for i in humans[h] if i in keep]
        if len(inst) < 30:
            continue
        wf, wh = [], []
        for i in inst:
            rest = [humans[o][i] for o in h_set[i] if o != h]
            s_l, s_h = score(llm[i], rest), score(humans[h][i], rest)
            wf.append(1 if s_l >= s_h else 0)
            wh.append(1 if s_h >= s_l else 0)
        d = [a - b for a, b in zip(wh, wf, strict=True)]
        ps.append(_t_p_less(d, eps)[1])
        rhos.append(sum(wf) / len(wf))
        names.append(h)
    rej = _by_procedure(ps, q)
    return (
        len(rej) / len(names),
        sum(rhos) / len(rhos),
        dict(zip(names, ps, strict=True)),
        {names[i] for i in rej},
    )


def _synthetic(n=80, n_ann=5, per_item=3, noise=0.8, judge_noise=0.5, seed=0, discrete=True):
    rng = random.Random(seed)
    truth = {f"i{k}": rng.uniform(1, 5) for k in range(n)}
    anns = [f"a{j}" for j in range(n_ann)]
    humans = {a: {} for a in anns}
    for i, t in truth.items():
        for a in rng.sample(anns, per_item):
            v = t + rng.gauss(0, noise)
            humans[a][i] = float(min(5, max(1, round(v)))) if discrete else v
    judge = {
        i: (
            float(min(5, max(1, round(t + rng.gauss(0, judge_noise)))))
            if discrete
            else t + rng.gauss(0, judge_noise)
        )
        for i, t in truth.items()
    }
    return judge, humans


@pytest.mark.parametrize(
    ("scoring", "eps", "seed"), [("neg_rmse", 0.15, 0), ("accuracy", 0.1, 1), ("neg_rmse", 0.0, 2)]
)
def test_matches_the_reference_procedure(scoring, eps, seed):
    judge, humans = _synthetic(n=90, n_ann=4, per_item=3, seed=seed)
    omega, rho, ps, winners = _reference(judge, humans, scoring, eps)
    res = alt_test(judge, humans, scoring=scoring, epsilon=eps)
    assert res.omega == pytest.approx(omega)
    assert res.rho == pytest.approx(rho)
    for a in res.tested:
        assert a.p_value == pytest.approx(ps[a.annotator], rel=1e-9, abs=1e-12)
    assert {a.annotator for a in res.tested if a.rejected} == winners
    assert res.passed == (omega >= 0.5)


def test_hand_computed_small_case():
    """30 instances, 3 annotators labelling all; annotator a0 is always right, the judge too, except on
    6 instances where the judge is off by 2 → W^f = 1 on 24, W^h = 1 on 30 for a0."""
    items = [f"i{k}" for k in range(30)]
    humans = {
        "a0": dict.fromkeys(items, 3.0),
        "a1": dict.fromkeys(items, 3.0),
        "a2": dict.fromkeys(items, 3.0),
    }
    judge = {i: (5.0 if k < 6 else 3.0) for k, i in enumerate(items)}
    res = alt_test(judge, humans, scoring="neg_rmse", epsilon=0.1)
    a0 = res.annotators[0]
    # d = W^h - W^f: 6 ones (judge worse), 24 zeros; mean 0.2, sd = sqrt(0.2*0.8*30/29)
    t = (0.2 - 0.1) / (math.sqrt(0.2 * 0.8 * 30 / 29) / math.sqrt(30))
    assert a0.mean_diff == pytest.approx(0.2) and a0.rho == pytest.approx(0.8) and a0.human_rate == 1.0
    assert a0.t == pytest.approx(t) and a0.p_value == pytest.approx(stats.t.cdf(t, 29))
    assert (
        res.omega == pytest.approx(0.0) and res.passed is False
    )  # mean(d) = 0.2 > ε: no annotator is beaten


def test_constant_differences_and_the_margin():
    # all ties: d = 0 everywhere, 0 < ε → t = -inf, p = 0 (the judge is as good as every annotator)
    assert one_sided_p([0.0] * 40, 0.1)[1] == pytest.approx(0.0)
    assert one_sided_p([0.2] * 40, 0.1)[1] == pytest.approx(1.0)
    assert one_sided_p([0.1] * 40, 0.1)[1] == pytest.approx(1.0)  # exactly at ε: no evidence, never rejected


def test_by_reject_matches_the_step_up_by_hand():
    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216]
    assert {i for i, r in enumerate(by_reject(p, 0.05)) if r} == _by_procedure(p, 0.05)
    assert by_reject([], 0.05) == []


def test_skips_and_messages():
    judge, humans = _synthetic(n=20, n_ann=3, per_item=3)
    res = alt_test(judge, humans)
    assert res.skipped and "30" in res.skipped and all(a.skipped for a in res.annotators)
    one = {"a0": {"i1": 3.0, "i2": 4.0}, "a1": {"i3": 2.0}}
    res = alt_test({"i1": 3.0, "i2": 3.0, "i3": 3.0}, one)
    assert (
        res.skipped
        and "at most 1 annotator(s) per instance" in res.skipped
        and "recommends >= 3" in res.skipped
    )
    judge, humans = _synthetic(n=80, n_ann=2, per_item=2)
    res = alt_test(judge, humans)
    assert res.skipped is None and any("recommends >= 3" in w for w in res.warnings)
    judge["i0"] = None  # a judge failure: the instance is left out and counted, never scored 0
    assert alt_test(judge, humans).instances_without_judge == 1
    with pytest.raises(ValueError, match="scoring"):
        alt_test(judge, humans, scoring="f1")


def test_several_environments_share_one_fdr_correction():
    judge, humans = _synthetic(n=60, n_ann=3, seed=3)
    a = alt_test(judge, humans, correct=False)
    b = alt_test(judge, humans, correct=False)
    finish([a, b])
    ps = [x.p_value for r in (a, b) for x in r.tested]
    assert [x.rejected for r in (a, b) for x in r.tested] == [
        i in _by_procedure(ps, 0.05) for i in range(len(ps))
    ]
    assert isinstance(a, AltTestResult) and a.omega is not None


def test_scales():
    judge = {"x": 0.2, "y": 0.9, "z": 0.5}
    humans = {"a": {"x": 1.0, "y": 5.0}, "b": {"x": 2.0, "z": 3.0, "y": 4.0}}
    j, h = rescale(judge, humans, "zscore")
    assert np.mean(list(j.values())) == pytest.approx(0) and np.std(list(h["b"].values())) == pytest.approx(1)
    j, h = rescale(judge, humans, "rank")
    assert j == {"x": pytest.approx(1 / 3), "y": 1.0, "z": pytest.approx(2 / 3)} and h["a"] == {
        "x": 0.5,
        "y": 1.0,
    }
    j, _ = rescale(judge, humans, "discretize", judge_range=(0.0, 1.0), levels=[0.0, 1.0])
    assert j == {"x": 0.0, "y": 1.0, "z": 1.0}
    assert choose("binary", (0.0, 1.0), (0.0, 1.0)) == ("discretize", "accuracy")
    assert choose("likert", (1.0, 5.0), (1.0, 5.0)) == ("raw", "neg_rmse")
    assert choose("likert", (0.0, 1.0), (1.0, 5.0)) == ("zscore", "neg_rmse")
    assert choose("likert", None, (1.0, 5.0)) == ("zscore", "neg_rmse")
