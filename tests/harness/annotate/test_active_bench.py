"""The labels-saved bench's arithmetic, without its data: labels needed for a target half-width
(interpolated between grid points), the ratio per data set, and the rendered table's verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from bench.annotate import active as bench


def _curve(values: dict[int, float]) -> dict[int, dict[str, float]]:
    return {m: {"half_width": v, "rmse": v / 2} for m, v in values.items()}


def test_labels_needed_interpolates_between_grid_points():
    curve = _curve({20: 0.30, 40: 0.20, 60: 0.10})
    assert bench.labels_needed(curve, "half_width", 0.15) == pytest.approx(50.0)
    assert bench.labels_needed(curve, "half_width", 0.35) == pytest.approx(20.0)
    assert bench.labels_needed(curve, "half_width", 0.05) is None
    assert bench.labels_needed(curve, "rmse", 0.10) == pytest.approx(40.0)


def _row(ref: int, ratio: float | None) -> dict:
    entry = {
        "labels_for_half_width": None if ratio is None else ratio * ref,
        "ratio": ratio,
        "labels_for_rmse": None,
        "ratio_rmse": None,
        "bias_at_ref": 0.001,
        "bias_mc_se_at_ref": 0.002,
        "coverage_at_ref": 0.95,
    }
    return {
        "random_labels": ref,
        "random_half_width": 0.1,
        "random_bias": 0.0,
        "random_bias_mc_se": 0.002,
        "random_coverage": 0.94,
        **{p: dict(entry) for p in bench.POLICIES[1:]},
    }


def test_the_table_names_where_active_selection_does_not_help():
    results = {
        "machine": {"date": "2026-01-01", "cpus": 2, "cpu": "x", "load_avg_start": 1.0},
        "args": "default",
        "repeats": 200,
        "judge": "J",
        "surrogate": "S",
        "pools": [
            {
                "pool": "A",
                "dataset": "xdial",
                "items": 900,
                "pool_pearson": 0.2,
                "surrogate_pearson": 0.1,
                "rows": [_row(100, 0.5), _row(200, 0.55)],
            },
            {
                "pool": "B",
                "dataset": "upheld",
                "items": 600,
                "pool_pearson": 0.3,
                "surrogate_pearson": 0.2,
                "rows": [_row(100, 1.2), _row(200, None)],
            },
            {
                "pool": "C",
                "dataset": "medal",
                "items": 600,
                "pool_pearson": 0.5,
                "surrogate_pearson": 0.4,
                "rows": [_row(100, 0.7)],
            },
        ],
    }
    verdicts = bench.dataset_verdicts(results)
    assert verdicts["xdial"] == pytest.approx(0.525)
    assert verdicts["upheld"] == pytest.approx(np.median([1.2, 2.0]))
    text = bench.markdown(results)
    assert "more* labels than random on: B at 100, B at 200" in text
    assert "less than the goal on: C at 100" in text
    assert "goal ≤ 0.6× met on 1 of 3" in text
    assert "By RMSE: xDial-Eval 2.00×" in text  # the fixture has no RMSE ratios: beyond the grid
    assert "**0.50×**" in text and "> grid" in text
