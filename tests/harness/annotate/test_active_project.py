"""An active project calibrates its estimate on what it knows of every planned item before
labelling: the judge's and the surrogate's scores and each item's group (its system, or its
config). `status` reports that calibrated estimate — the same numbers as
`harness.annotate.active.estimate` called with the pool arrays — and which estimator it used."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.annotate.active import MIN_CALIBRATION_LABELS, estimate
from harness.annotate.status import active_status
from harness.annotate.store import Project, ProjectError, Submission
from harness.data.builders import build_dataset
from harness.data.layout import card_configs, data_file
from tests.fixtures.annotation import build_demo
from tests.fixtures.medal_source import write_medal_source

BOTS = ("bot-a", "bot-b", "bot-c")
#: the human overall rating of each system's dialogues sits at its own level (what groups predict)
LEVEL = {"bot-a": 1.0, "bot-b": 3.0, "bot-c": 5.0}


def _unit(*parts: str) -> float:
    """A deterministic number in [0, 1) from text."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@pytest.fixture(scope="module")
def medal(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """A MEDAL benchmark of 3 systems × 10 dialogues × 2 languages, and its rows (config, id,
    language, system)."""
    root = tmp_path_factory.mktemp("medal")
    src = write_medal_source(root / "src", languages=("en", "zh"), chatbots=BOTS, n_per_pair=10)
    folder = root / "built"
    build_dataset("medal", src, folder, show_progress=False)
    frames = [
        pd.read_parquet(folder / data_file(c), columns=["id", "language", "system"]).assign(dataset=c)
        for c in card_configs(folder)
    ]
    return folder, pd.concat(frames, ignore_index=True)


def _run(folder: Path, rows: pd.DataFrame, name: str) -> Path:
    """A judge run's samples.parquet of task medal: a score per row, partly following the system."""
    score = [
        0.15 * list(LEVEL).index(s) + 0.5 * _unit(name, d, i)
        for d, i, s in zip(rows["dataset"], rows["id"], rows["system"], strict=True)
    ]
    folder.mkdir(parents=True)
    samples = rows[["dataset", "id", "language"]].assign(task="medal", score=score)
    samples.to_parquet(folder / "samples.parquet", index=False)
    return folder


def _create(path: Path, dataset: Path, judge: Path, surrogate: Path | None, **kw) -> Project:
    return Project.create(
        path,
        name=path.stem,
        dataset_ref="medal@1.0.0",
        dataset_dir=dataset,
        config=None,
        task="medal",
        annotators=["a", "b"],
        per_item=1,
        languages=None,
        select=kw.pop("select", "active"),
        judge_run=judge,
        surrogate_run=surrogate,
        seed=3,
        **kw,
    )


def _label_prefix(
    project: Project, n: int, system_of: dict[str, str], given: dict[str, float]
) -> dict[str, float]:
    """Label the items of the plan's order up to the ``n``-th through each annotator's queue (those
    in ``given`` are labelled already); the overall rating is the system's level plus noise.
    Returns item -> rating of every labelled item."""
    plan = project.active_plan()
    assert plan is not None
    owner = dict(zip(project.items()["item_id"], project.items()["annotators"], strict=True))
    given = dict(given)
    for k, item in enumerate(plan.order[:n]):
        if item in given:
            continue
        (annotator,) = owner[item]
        view = project.next_item(annotator)
        assert view is not None and view.item_id == item  # the queues follow the plan's order
        level = LEVEL[system_of[item]]
        overall = float(np.clip(round(level + 2 * _unit("h", item) - 1), 1, 5))
        labels = {d: (overall if d == "overall" else 0.0) for d in project.form.dimensions}
        project.submit(annotator, Submission(item, f"s{k}", labels))
        given[item] = overall
    return given


def test_status_reports_the_estimate_calibrated_on_the_pool(medal, tmp_path):
    folder, rows = medal
    judge_dir = _run(tmp_path / "judge", rows, "judge")
    sur_dir = _run(tmp_path / "surrogate", rows, "surrogate")
    project = _create(tmp_path / "act.sqlite", folder, judge_dir, sur_dir)
    assert project.meta["group_by"] == "system"  # the default: MEDAL records the chatbot
    plan, pool = project.active_plan(), project.active_pool()
    assert plan is not None and pool is not None and plan.calibrated
    assert pool.item_ids == plan.item_ids and plan.n_items == len(rows) == 60

    # the pool as this test knows it, independently of the project
    items = project.items().set_index("item_id")
    by_key = {(d, i): k for k, (d, i) in enumerate(zip(rows["dataset"], rows["id"], strict=True))}
    row_of = {it: by_key[(items.at[it, "config"], items.at[it, "record_id"])] for it in plan.item_ids}
    score = {
        name: pd.read_parquet(d / "samples.parquet")["score"].to_numpy()
        for name, d in (("judge", judge_dir), ("surrogate", sur_dir))
    }
    system_of = {it: str(rows["system"][row_of[it]]) for it in plan.item_ids}
    pool_judge = np.array([score["judge"][row_of[it]] for it in plan.item_ids])
    pool_sur = np.array([score["surrogate"][row_of[it]] for it in plan.item_ids])
    pool_groups = [f"system:{system_of[it]}" for it in plan.item_ids]
    assert np.allclose(pool.judge, pool_judge) and pool.surrogate is not None
    assert np.allclose(pool.surrogate, pool_sur) and list(pool.groups or ()) == pool_groups

    def direct(given: dict[str, float], calibrated: bool):
        labelled = list(given)
        return estimate(
            plan,
            labelled,
            np.array([score["judge"][row_of[it]] for it in labelled]),
            np.array([given[it] for it in labelled]),
            pool_judge=pool_judge if calibrated else None,
            pool_surrogate=pool_sur if calibrated else None,
            pool_groups=pool_groups if calibrated else None,
        )

    given = _label_prefix(project, MIN_CALIBRATION_LABELS - 5, system_of, {})
    early = active_status(project)
    assert early is not None and early.estimator == "plain" and not early.groups_used
    want = direct(given, calibrated=False)
    assert early.estimate.value == pytest.approx(want.value)
    assert early.estimate.ci == pytest.approx(want.ci)

    given = _label_prefix(project, 36, system_of, given)
    status = active_status(project, target_half_width=0.05)
    assert status is not None and status.estimator == "calibrated" and status.groups_used
    assert status.group_by == "system" and status.estimate.n_labels == 36
    want = direct(given, calibrated=True)
    assert status.estimate.value == pytest.approx(want.value, rel=1e-9, abs=1e-12)
    assert status.estimate.ci == pytest.approx(want.ci, rel=1e-9, abs=1e-12)
    plain = direct(given, calibrated=False)
    assert status.estimate.value != pytest.approx(plain.value, rel=1e-6)  # the calibration acted
    assert status.more_labels == want.labels_for_half_width(0.05)
    out = status.to_json()
    assert out["estimator"] == "calibrated" and out["group_by"] == "system" and out["groups_used"] is True


def test_group_by_dataset_and_none(medal, tmp_path):
    folder, rows = medal
    judge_dir = _run(tmp_path / "judge", rows, "judge")
    by_config = _create(tmp_path / "cfg.sqlite", folder, judge_dir, None, group_by="dataset")
    pool = by_config.active_pool()
    assert pool is not None and pool.surrogate is None
    assert set(pool.groups or ()) == {f"dataset:{c}" for c in rows["dataset"]}
    plain = _create(tmp_path / "none.sqlite", folder, judge_dir, None, group_by="none")
    pool = plain.active_pool()
    assert pool is not None and pool.groups is None and plain.meta["group_by"] == "none"


def test_group_by_errors(medal, tmp_path):
    folder, rows = medal
    judge_dir = _run(tmp_path / "judge", rows, "judge")
    with pytest.raises(ProjectError, match="unknown --group-by 'model'"):
        _create(tmp_path / "x.sqlite", folder, judge_dir, None, group_by="model")
    with pytest.raises(ProjectError, match="--group-by only applies to --select active"):
        _create(tmp_path / "y.sqlite", folder, None, None, select="random", group_by="system")
    demo = build_demo(tmp_path / "demo")
    with pytest.raises(ProjectError, match="records no system"):
        Project.create(
            tmp_path / "z.sqlite",
            name="z",
            dataset_ref="demo@1.0.0",
            dataset_dir=demo,
            config=None,
            task="demo-turn",
            annotators=["a"],
            per_item=1,
            languages=None,
            select="active",
            judge_run=judge_dir,
            group_by="system",
        )
    assert not any(tmp_path.glob("*.sqlite"))  # nothing left behind
