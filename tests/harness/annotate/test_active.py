"""Active selection: the sampling plan (q sums to 1, respects the floor, every item drawn once), the
LURE-weighted estimate of the pool's judge–human correlation (unbiased on a pool with a known
answer, CI coverage near nominal, the ordinary estimate for a random plan) and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from harness.annotate.active import Estimate, estimate, plan_active, plan_random, replan


def _pool(n: int = 600, seed: int = 7) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """A synthetic pool: a latent quality, a 1–5 human label, a heavy-tailed judge and a surrogate."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal(n)
    judge = 0.5 * latent + 0.8 * rng.standard_normal(n) + 0.3 * rng.standard_t(3, n)
    surrogate = 0.6 * latent + 0.7 * rng.standard_normal(n)
    human = np.clip(np.round(3 + latent), 1, 5)
    return [f"item-{k}" for k in range(n)], judge, surrogate, human


def _simulate(
    policy: str, m: int, runs: int, metric: str = "pearson"
) -> tuple[np.ndarray, np.ndarray, float]:
    """Estimates and CIs of ``runs`` simulated annotations of ``m`` items; the pool's true value."""
    ids, judge, surrogate, human = _pool()
    pos = {i: k for k, i in enumerate(ids)}
    truth = (stats.pearsonr if metric == "pearson" else stats.spearmanr)(judge, human)[0]
    values, cis = [], []
    for seed in range(runs):
        plan = (
            plan_random(ids, seed=seed)
            if policy == "random"
            else plan_active(ids, judge, surrogate, seed=seed, metric=metric)
        )
        labelled = list(plan.order[:m])
        rows = [pos[i] for i in labelled]
        est = estimate(plan, labelled, judge[rows], human[rows], metric=metric)
        assert est.value is not None and est.ci is not None
        values.append(est.value)
        cis.append(est.ci)
    return np.array(values), np.array(cis), float(truth)


def test_q_is_a_distribution_that_respects_the_floor_and_the_order_is_a_permutation():
    ids, judge, surrogate, _ = _pool(200)
    for floor in (0.05, 0.1, 0.5):
        plan = plan_active(ids, judge, surrogate, seed=3, floor=floor)
        assert plan.q.sum() == pytest.approx(1.0, abs=1e-12)
        assert plan.q.min() >= floor / len(ids) * (1 - 1e-9)
        assert sorted(plan.order) == sorted(ids)
    # extreme judge scores are drawn with a higher probability than central ones
    z = np.abs(judge - judge.mean())
    assert (
        plan_active(ids, judge, None, seed=0).q[np.argmax(z)]
        > 2 * plan_active(ids, judge, None, seed=0).q[np.argmin(z)]
    )
    rand = plan_random(ids, seed=3)
    assert np.allclose(rand.q, 1 / len(ids))
    assert sorted(rand.order) == sorted(ids)


def test_plans_are_reproducible_from_the_seed():
    ids, judge, surrogate, _ = _pool(100)
    assert (
        plan_active(ids, judge, surrogate, seed=5).order == plan_active(ids, judge, surrogate, seed=5).order
    )
    assert (
        plan_active(ids, judge, surrogate, seed=5).order != plan_active(ids, judge, surrogate, seed=6).order
    )


def test_random_plan_gives_the_ordinary_estimate():
    ids, judge, _, human = _pool(300)
    plan = plan_random(ids, seed=1)
    labelled = list(plan.order[:80])
    rows = [ids.index(i) for i in labelled]
    assert np.allclose(plan.weights(labelled), 1.0)
    for metric, fn in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr)):
        est = estimate(plan, labelled, judge[rows], human[rows], metric=metric)
        assert est.value == pytest.approx(fn(judge[rows], human[rows])[0], abs=1e-9)
        assert est.n_labels == 80 and est.n_items == 300


def test_the_judge_may_be_given_for_the_whole_pool():
    ids, judge, surrogate, human = _pool(300)
    plan = plan_active(ids, judge, surrogate, seed=2)
    labelled = list(plan.order[:50])
    rows = [ids.index(i) for i in labelled]
    a = estimate(plan, labelled, judge[rows], human[rows])
    b = estimate(plan, labelled, judge, human[rows])
    assert a.value == pytest.approx(b.value)


def test_every_item_labelled_gives_the_pool_value_exactly():
    ids, judge, surrogate, human = _pool(200)
    plan = plan_active(ids, judge, surrogate, seed=4)
    rows = [ids.index(i) for i in plan.order]
    est = estimate(plan, list(plan.order), judge[rows], human[rows])
    assert est.value == pytest.approx(stats.pearsonr(judge, human)[0], abs=1e-9)
    assert est.ci == pytest.approx((est.value, est.value))
    assert est.labels_for_half_width(0.01) == 0


def test_lure_weighted_mean_is_unbiased_for_the_pool_mean():
    """The weighted mean of the labels is exactly unbiased: its mean over many plans is within Monte
    Carlo error of the pool mean, while the unweighted mean of the same active draws is not."""
    ids, judge, surrogate, human = _pool()
    pos = {i: k for k, i in enumerate(ids)}
    weighted, plain = [], []
    for seed in range(400):
        plan = plan_active(ids, judge, surrogate, seed=seed)
        labelled = list(plan.order[:60])
        h = human[[pos[i] for i in labelled]]
        weighted.append(np.mean(plan.weights(labelled) * h))
        plain.append(h.mean())
    se = np.std(weighted, ddof=1) / math.sqrt(len(weighted))
    assert abs(np.mean(weighted) - human.mean()) < 4 * se
    assert abs(np.mean(plain) - human.mean()) > 4 * np.std(plain, ddof=1) / math.sqrt(len(plain))


@pytest.mark.parametrize("metric", ["pearson", "spearman"])
def test_active_estimate_is_unbiased_and_its_ci_covers(metric):
    values, cis, truth = _simulate("active", 150, 300, metric)
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert abs(values.mean() - truth) < 4 * se + 0.002  # 0.002: the O(1/M) bias of any sample correlation
    coverage = np.mean((cis[:, 0] <= truth) & (truth <= cis[:, 1]))
    assert 0.90 <= coverage <= 0.99


def test_active_selection_beats_random_on_a_pool_with_an_informative_surrogate():
    active, _, truth = _simulate("active", 150, 200)
    random, _, _ = _simulate("random", 150, 200)
    assert np.mean((active - truth) ** 2) < 0.8 * np.mean((random - truth) ** 2)


def test_only_the_labelled_prefix_of_the_order_is_used():
    ids, judge, surrogate, human = _pool(100)
    plan = plan_active(ids, judge, surrogate, seed=0)
    labelled = [*plan.order[:20], *plan.order[21:30]]  # the 21st item of the order is still unlabelled
    rows = [ids.index(i) for i in labelled]
    w = plan.weights(labelled)
    assert np.all(w[:20] > 0) and np.all(w[20:] == 0)
    est = estimate(plan, labelled, judge[rows], human[rows])
    assert est.n_labels == 20 and est.n_waiting == 9
    assert estimate(plan, list(plan.order[:2]), judge[:2], human[:2]).value is None


def test_labels_for_half_width_predicts_the_labels_a_target_needs():
    ids, judge, surrogate, human = _pool()
    pos = {i: k for k, i in enumerate(ids)}
    plan = plan_active(ids, judge, surrogate, seed=11)

    def at(m: int) -> Estimate:
        labelled = list(plan.order[:m])
        rows = [pos[i] for i in labelled]
        return estimate(plan, labelled, judge[rows], human[rows])

    first = at(60)
    assert first.half_width is not None
    target = first.half_width / 2
    more = first.labels_for_half_width(target)
    assert more is not None and more > 60
    later = at(60 + more)
    assert later.half_width == pytest.approx(target, rel=0.3)
    assert first.labels_for_half_width(first.half_width * 2) == 0
    assert Estimate("pearson", None, None, 2, 600).labels_for_half_width(0.1) is None
    with pytest.raises(ValueError, match="positive"):
        first.labels_for_half_width(0)


def test_bad_input_gets_one_clear_error():
    ids, judge, surrogate, human = _pool(50)
    with pytest.raises(ValueError, match=r"judge: expected 50 scores"):
        plan_active(ids, judge[:-1], surrogate, seed=0)
    nan = judge.copy()
    nan[7] = np.nan
    with pytest.raises(ValueError, match=r"surrogate: 1 score\(s\) are NaN.*position 7"):
        plan_active(ids, judge, nan, seed=0)
    with pytest.raises(ValueError, match="appears more than once"):
        plan_random([*ids[:-1], ids[0]], seed=0)
    with pytest.raises(ValueError, match="floor"):
        plan_active(ids, judge, None, seed=0, floor=0)
    plan = plan_random(ids, seed=0)
    labelled = list(plan.order[:10])
    with pytest.raises(ValueError, match=r"human: expected 10 scores"):
        estimate(plan, labelled, judge[:10], human[:9])
    with pytest.raises(ValueError, match=r"human: 1 score\(s\) are NaN"):
        estimate(plan, labelled, judge[:10], np.r_[human[:9], np.nan])
    with pytest.raises(ValueError, match="not in the plan's pool"):
        estimate(plan, [*labelled[:9], "stranger"], judge[:10], human[:10])
    with pytest.raises(ValueError, match="metric"):
        estimate(plan, labelled, judge[:10], human[:10], metric="kendall")


def test_replan_keeps_the_labelled_prefix_and_redraws_the_rest():
    ids, judge, surrogate, human = _pool(200)
    pos = {i: k for k, i in enumerate(ids)}
    plan = plan_active(ids, judge, surrogate, seed=1)
    labelled = list(plan.order[:40])
    again = replan(plan, labelled, human[[pos[i] for i in labelled]], judge, surrogate, seed=2)
    assert again.order[:40] == plan.order[:40]
    assert np.allclose(again.step_q[:40], plan.step_q[:40])
    assert sorted(again.order) == sorted(ids)
    assert again.order[40:] != plan.order[40:]
    assert again.q.sum() == pytest.approx(1.0) and again.q.min() >= plan.floor / len(ids) * (1 - 1e-9)
    rand = plan_random(ids, seed=0)
    assert replan(rand, labelled, human[:40], judge, surrogate, seed=2) is rand


def test_estimates_stay_unbiased_when_the_plan_is_recalibrated_on_the_labels_so_far():
    ids, judge, surrogate, human = _pool()
    pos = {i: k for k, i in enumerate(ids)}
    truth = stats.pearsonr(judge, human)[0]
    means, values = [], []
    for seed in range(300):
        plan = plan_active(ids, judge, surrogate, seed=seed)
        for m in (30, 60):
            done = list(plan.order[:m])
            plan = replan(plan, done, human[[pos[i] for i in done]], judge, surrogate, seed=10_000 + seed)
        labelled = list(plan.order[:150])
        rows = [pos[i] for i in labelled]
        means.append(np.mean(plan.weights(labelled) * human[rows]))
        values.append(estimate(plan, labelled, judge[rows], human[rows]).value)
    se = np.std(means, ddof=1) / math.sqrt(len(means))
    assert abs(np.mean(means) - human.mean()) < 4 * se
    se_r = np.std(values, ddof=1) / math.sqrt(len(values))
    assert abs(np.mean(values) - truth) < 4 * se_r + 0.002


def _grouped_pool(
    n: int = 600, seed: int = 3
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """A pool whose items come from three groups (say, systems) with different label levels and
    spreads; the judge follows the humans weakly, the surrogate weaker still."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, 3, n)
    latent = np.array([-1.2, 0.2, 1.0])[group] + np.array([0.4, 0.9, 0.6])[group] * rng.standard_normal(n)
    judge = 0.3 * latent + rng.standard_normal(n)
    surrogate = 0.2 * latent + rng.standard_normal(n)
    human = np.clip(np.round(3 + latent), 1, 5)
    return [f"item-{k}" for k in range(n)], judge, surrogate, human, [f"sys-{g}" for g in group]


def _simulate_calibrated(policy: str, m: int, runs: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Estimates and CIs of ``runs`` simulated annotations of ``m`` items with the estimate
    calibrated on the groups, the judge and the surrogate (the active plan refitted after 50 labels)."""
    ids, judge, surrogate, human, groups = _grouped_pool()
    pos = {i: k for k, i in enumerate(ids)}
    values, cis = [], []
    for seed in range(runs):
        if policy == "random":
            plan = plan_random(ids, seed=seed)
        else:
            plan = plan_active(ids, judge, surrogate, seed=seed, calibrated=True)
            done = list(plan.order[:50])
            plan = replan(
                plan, done, human[[pos[i] for i in done]], judge, surrogate, seed=10_000 + seed, groups=groups
            )
        labelled = list(plan.order[:m])
        rows = [pos[i] for i in labelled]
        est = estimate(
            plan,
            labelled,
            judge[rows],
            human[rows],
            pool_judge=judge,
            pool_surrogate=surrogate,
            pool_groups=groups,
        )
        assert est.value is not None and est.ci is not None
        values.append(est.value)
        cis.append(est.ci)
    return np.array(values), np.array(cis), float(stats.pearsonr(judge, human)[0])


@pytest.mark.parametrize("policy", ["active", "random"])
def test_calibrated_estimate_is_unbiased_and_its_ci_covers(policy):
    values, cis, truth = _simulate_calibrated(policy, 150, 300)
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert abs(values.mean() - truth) < 4 * se + 0.003  # the O(1/M) bias of a calibrated correlation
    coverage = np.mean((cis[:, 0] <= truth) & (truth <= cis[:, 1]))
    assert 0.89 <= coverage <= 0.99


def test_calibrating_on_groups_that_predict_the_labels_needs_fewer_labels():
    """On a pool whose groups predict the human labels, the calibrated estimate with the active plan
    has a smaller error than random selection with the plain estimate."""
    ids, judge, surrogate, human, _ = _grouped_pool()
    pos = {i: k for k, i in enumerate(ids)}
    truth = stats.pearsonr(judge, human)[0]
    calibrated, _, _ = _simulate_calibrated("active", 150, 200)
    plain = []
    for seed in range(200):
        plan = plan_random(ids, seed=seed)
        labelled = list(plan.order[:150])
        rows = [pos[i] for i in labelled]
        plain.append(estimate(plan, labelled, judge[rows], human[rows]).value)
    assert np.mean((calibrated - truth) ** 2) < 0.7 * np.mean((np.array(plain) - truth) ** 2)


def test_the_calibrated_estimate_matches_the_known_pool_moments_and_falls_back_with_few_labels():
    ids, judge, surrogate, human, groups = _grouped_pool(300)
    plan = plan_random(ids, seed=0)
    rows = [ids.index(i) for i in plan.order]
    # every item labelled: calibration changes nothing, the pool value comes back
    full = estimate(plan, list(plan.order), judge[rows], human[rows], pool_judge=judge, pool_groups=groups)
    assert full.value == pytest.approx(stats.pearsonr(judge, human)[0], abs=1e-9)
    # too few labels to calibrate: the plain estimate
    few = list(plan.order[:10])
    a = estimate(plan, few, judge[rows[:10]], human[rows[:10]])
    b = estimate(plan, few, judge[rows[:10]], human[rows[:10]], pool_judge=judge, pool_groups=groups)
    assert a.value == pytest.approx(b.value)


def test_calibration_options_reject_bad_input():
    ids, judge, surrogate, human, groups = _grouped_pool(100)
    plan = plan_random(ids, seed=0)
    labelled = list(plan.order[:40])
    rows = [ids.index(i) for i in labelled]
    with pytest.raises(ValueError, match="give pool_judge too"):
        estimate(plan, labelled, judge[rows], human[rows], pool_groups=groups)
    with pytest.raises(ValueError, match="Pearson"):
        estimate(plan, labelled, judge[rows], human[rows], metric="spearman", pool_judge=judge)
    with pytest.raises(ValueError, match=r"groups: expected 100 group labels"):
        estimate(plan, labelled, judge[rows], human[rows], pool_judge=judge, pool_groups=groups[:-1])
    active = plan_active(ids, judge, surrogate, seed=0, calibrated=True)
    done = list(active.order[:30])
    with pytest.raises(ValueError, match=r"groups: expected 100 group labels"):
        replan(active, done, human[[ids.index(i) for i in done]], judge, surrogate, seed=1, groups=groups[:5])
