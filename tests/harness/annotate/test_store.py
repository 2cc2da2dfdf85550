"""An annotation project: balanced blind queues, committed idempotent submissions, undo, tokens,
and bad input refused with a status and nothing written."""

from __future__ import annotations

import sqlite3
from collections import Counter
from itertools import combinations

import pytest

from harness.annotate.store import (
    AnnotationError,
    Project,
    ProjectError,
    Submission,
    assign,
    check_annotators,
)
from tests.fixtures.annotation import build_demo, build_medal


@pytest.fixture(scope="module")
def medal(tmp_path_factory):
    return build_medal(tmp_path_factory.mktemp("ds") / "medal")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("ds") / "demo")


def _medal_project(path, medal, annotators=("ann-a", "ann-b", "ann-c"), per_item=2, **kw):
    return Project.create(
        path,
        name="medal-test",
        dataset_ref="medal@1.0.0",
        dataset_dir=medal,
        config=None,
        task="medal",
        annotators=list(annotators),
        per_item=per_item,
        languages=kw.pop("languages", None),
        select="random",
        judge_run=None,
        seed=kw.pop("seed", 0),
    )


def _labels(project, overall=4.0, issue=0.0):
    return {d: (overall if d == "overall" else issue) for d in project.form.dimensions}


def _rows(path, sql):
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_assignment_is_balanced_and_every_pair_meets():
    import random

    for n_items, n_ann, per_item in [(100, 3, 2), (101, 4, 2), (50, 5, 3), (7, 2, 2), (10, 3, 1)]:
        sets = list(assign(n_items, n_ann, per_item, random.Random(1)))
        assert len(sets) == n_items and all(len(set(s)) == per_item for s in sets)
        load = Counter(a for s in sets for a in s)
        assert max(load.values()) - min(load.values()) <= 1, (n_items, n_ann, per_item, load)
        if per_item >= 2 and n_items >= 50:
            pairs = Counter(p for s in sets for p in combinations(sorted(s), 2))
            assert set(pairs) == set(combinations(range(n_ann), 2))


def test_project_is_wal_with_full_sync_and_hashed_tokens(tmp_path, medal):
    path = tmp_path / "p.sqlite"
    project = _medal_project(path, medal)
    assert _rows(path, "PRAGMA journal_mode")[0][0] == "wal"
    assert project._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    tokens = project.tokens()
    assert set(tokens) == {"ann-a", "ann-b", "ann-c"} and len(set(tokens.values())) == 3
    stored = [h for (h,) in _rows(path, "SELECT token_hash FROM annotators")]
    assert not set(tokens.values()) & set(stored) and all(len(h) == 64 for h in stored)
    for name, token in tokens.items():
        assert project.annotator_for(token) == name
    with pytest.raises(AnnotationError) as e:
        project.annotator_for(tokens["ann-a"][:-1] + ("x" if tokens["ann-a"][-1] != "x" else "y"))
    assert e.value.status == 403
    assert Project.open(path).tokens() == {}  # only hashes are kept: tokens cannot be read back


def test_queues_are_balanced_blind_and_per_item(tmp_path, medal):
    project = _medal_project(tmp_path / "p.sqlite", medal)
    items = project.items()
    assert len(items) == 18 and all(len(a) == 2 for a in items["annotators"])
    totals = [project.progress(a).total for a in ("ann-a", "ann-b", "ann-c")]
    assert sum(totals) == 36 and max(totals) - min(totals) <= 1
    view = project.next_item("ann-a")
    assert view is not None and view.level == "dialogue" and view.turns and view.turns[0]["turn"] == 1
    shown = str(view.to_json())
    assert "bot-a" not in shown and "bot-b" not in shown and "medal-" not in shown  # no system names
    assert view.persona and view.scene


def test_submit_commits_at_once_is_idempotent_and_undo_reopens(tmp_path, medal):
    path = tmp_path / "p.sqlite"
    project = _medal_project(path, medal)
    first = project.next_item("ann-a")
    assert first is not None
    sub = Submission(first.item_id, "sub-1", _labels(project, overall=5, issue=0))
    assert project.submit("ann-a", sub).done == 1
    # committed: another connection (another process) sees it at once
    assert _rows(path, "SELECT count(*) FROM submissions")[0][0] == 1
    assert project.submit("ann-a", sub).done == 1  # the same submission again: recorded once
    assert _rows(path, "SELECT count(*) FROM submissions")[0][0] == 1
    second = project.next_item("ann-a")
    assert second is not None and second.item_id != first.item_id and second.position == 2
    project.submit("ann-a", Submission(second.item_id, "sub-2", {}, skip=True))
    project.submit("ann-a", Submission(project.next_item("ann-a").item_id, "sub-3", {}, flag="broken text"))
    assert project.progress("ann-a").to_json() == {"done": 3, "skipped": 1, "flagged": 1, "total": 12}
    # undo reopens the last item; a restart (a new Project on the file) resumes the queue
    reopened = project.undo("ann-a")
    assert reopened is not None and reopened.previous == {}
    assert project.undo("ann-a").item_id == second.item_id
    restarted = Project.open(path)
    assert restarted.next_item("ann-a").item_id == second.item_id
    assert restarted.progress("ann-a").done == 1
    labels = restarted.labels()
    assert set(labels["item_id"]) == {first.item_id} and len(labels) == 9
    overall = labels[labels["dimension"] == "overall"]["value"]
    assert overall.tolist() == pytest.approx([5.0])
    assert Project.open(path).undo("ann-a").previous == pytest.approx(_labels(project, 5, 0))


def test_bad_input_is_refused_with_a_status_and_nothing_written(tmp_path, medal):
    path = tmp_path / "p.sqlite"
    project = _medal_project(path, medal)
    mine = project.next_item("ann-a")
    theirs = next(
        k
        for k, ann in zip(project.items()["item_id"], project.items()["annotators"], strict=True)
        if "ann-a" not in ann
    )
    good = _labels(project)
    cases = [
        (Submission(mine.item_id, "x1", {**good, "overall": 6}), 400, "outside"),
        (Submission(mine.item_id, "x2", {**good, "overall": 2.5}), 400, "integer"),
        (Submission(mine.item_id, "x3", {**good, "fluency": 3}), 400, "unknown dimension 'fluency'"),
        (Submission(mine.item_id, "x4", {"overall": 3}), 400, "missing label"),
        (Submission(mine.item_id, "x5", good, skip=True), 400, "skipped item carries no labels"),
        (Submission(theirs, "x6", good), 404, "not in your queue"),
        (Submission("nope", "x7", good), 404, "not in your queue"),
        (Submission(mine.item_id, "", good), 400, "submission_id"),
        (Submission(mine.item_id, "x8", good, flag="x" * 5000), 400, "flag"),
    ]
    for sub, status, message in cases:
        with pytest.raises(AnnotationError, match=message) as e:
            project.submit("ann-a", sub)
        assert e.value.status == status
    assert _rows(path, "SELECT count(*) FROM submissions")[0][0] == 0
    project.submit("ann-a", Submission(mine.item_id, "ok", good))
    with pytest.raises(AnnotationError) as e:  # a new submission of a submitted item needs an undo first
        project.submit("ann-a", Submission(mine.item_id, "again", good))
    assert e.value.status == 409
    other = project.next_item("ann-b")
    with pytest.raises(AnnotationError) as e:  # a submission id reused for another item
        project.submit("ann-b", Submission(other.item_id, "ok", good))
    assert e.value.status == 409
    assert _rows(path, "SELECT count(*) FROM submissions")[0][0] == 1


def test_revoked_token_is_refused_and_a_new_one_can_be_issued(tmp_path, medal):
    project = _medal_project(tmp_path / "p.sqlite", medal)
    old = project.tokens()["ann-b"]
    project.revoke("ann-b")
    for token in (old, "", "x" * 1000):
        with pytest.raises(AnnotationError) as e:
            project.annotator_for(token)
        assert e.value.status == 403
    new = project.issue_token("ann-b")
    assert project.annotator_for(new) == "ann-b" and new != old


def test_languages_filter_and_right_to_left(tmp_path, demo):
    project = Project.create(
        tmp_path / "d.sqlite",
        name="demo-ar",
        dataset_ref="demo@1.0.0",
        dataset_dir=demo,
        config="demo-turn",
        task=None,
        annotators=["a"],
        per_item=1,
        languages=["ar"],
        select="random",
        judge_run=None,
        seed=3,
    )
    view = project.next_item("a")
    assert view is not None and view.language == "ar" and view.direction == "rtl"
    assert view.level == "turn" and view.response and view.context[-1]["turn"] == len(view.context)
    assert set(project.items()["language"]) == {"ar"}
    # the texts are the dataset's, character for character
    import pyarrow.parquet as pq

    rows = {r["id"]: r for r in pq.read_table(demo / "demo-turn" / "test-00000-of-00001.parquet").to_pylist()}
    items = project.items().set_index("item_id")
    source = rows[items.loc[view.item_id, "record_id"]]
    assert view.response == source["response"]
    assert [(m["role"], m["text"]) for m in view.context] == [
        (m["role"], m["text"]) for m in source["context"]
    ]


def test_creation_refuses_bad_projects(tmp_path, medal):
    path = tmp_path / "p.sqlite"
    _medal_project(path, medal)
    with pytest.raises(ProjectError, match="already exists"):
        _medal_project(path, medal)
    with pytest.raises(ProjectError, match="duplicate annotator"):
        check_annotators(["a", "b", "a"])
    with pytest.raises(ProjectError, match="--per-item 3"):
        _medal_project(tmp_path / "q.sqlite", medal, annotators=("a", "b"), per_item=3)
    with pytest.raises(ProjectError, match="no item in language"):
        _medal_project(tmp_path / "r.sqlite", medal, languages=["ja"])
    left = {p.name for p in tmp_path.iterdir()}
    assert left <= {"p.sqlite", "p.sqlite-wal", "p.sqlite-shm"}  # nothing half-made left


def test_threads_submitting_at_once_lose_nothing(tmp_path, medal):
    from concurrent.futures import ThreadPoolExecutor

    project = _medal_project(tmp_path / "p.sqlite", medal, per_item=3)

    def work(annotator):
        n = 0
        while (view := project.next_item(annotator)) is not None:
            for _ in range(2):  # every submission sent twice
                project.submit(annotator, Submission(view.item_id, f"{annotator}-{n}", _labels(project)))
            n += 1
        return n

    with ThreadPoolExecutor(3) as pool:
        done = list(pool.map(work, ["ann-a", "ann-b", "ann-c"]))
    assert done == [18, 18, 18]
    assert len(project.labels()) == 54 * 9
