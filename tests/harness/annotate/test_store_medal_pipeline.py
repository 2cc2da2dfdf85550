"""The MEDAL pipeline's annotation step through an annotation project: a run creates the project
over the curated dialogues, the next run imports its labels into the `benchmark` config (the same
records and agreement the CSV sheets give), an exported project's version can be imported too, and
an unfinished project is refused unless partial annotation is allowed."""

from __future__ import annotations

import json
import random

import pytest

from dataset_builders.medal_pipeline.config import PipelineConfig
from dataset_builders.medal_pipeline.pipeline import run_pipeline
from harness.annotate.store import Project, Submission, project_path
from tests.fixtures.medal_pipeline import write_replay_config


def _label_all(
    project: Project, seed: int = 0, limit: int | None = None
) -> dict[tuple[str, str], dict[str, float]]:
    rng = random.Random(seed)
    given: dict[tuple[str, str], dict[str, float]] = {}
    record_of = dict(zip(project.items()["item_id"], project.items()["record_id"], strict=True))
    for annotator in project.annotators():
        n = 0
        while (view := project.next_item(annotator)) is not None and (limit is None or n < limit):
            labels = {f.dimension: float(rng.randint(int(f.min), int(f.max))) for f in project.form.fields}
            project.submit(annotator, Submission(view.item_id, f"{seed}-{annotator}-{n}", labels))
            given[(record_of[view.item_id], annotator)] = labels
            n += 1
    return given


def _benchmark(res) -> list[dict]:
    path = res.publish_dir / "benchmark.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()] if path.is_file() else []


def test_a_run_creates_the_project_and_the_next_imports_its_labels(tmp_path, monkeypatch):
    projects = tmp_path / "projects"
    cfg_path = write_replay_config(
        tmp_path / "medal",
        annotation={
            "project": "medal-ann",
            "project_dir": str(projects),
            "annotators": ["ann1", "ann2"],
            "per_item": 2,
        },
    )
    cfg = PipelineConfig.load(cfg_path)
    first = run_pipeline(cfg, progress=False)
    assert not first.benchmark and first.summary["annotation_project"]["created"]
    project = Project.open(project_path("medal-ann", projects))
    curated = [json.loads(line) for line in (first.publish_dir / "curated.jsonl").read_text().splitlines()]
    assert sorted(project.items()["record_id"]) == sorted(r["id"] for r in curated)
    assert project.form.task == "medal" and project.form.level == "dialogue" and len(project.form.fields) == 9
    assert "bot-" not in json.dumps(project.next_item("ann1").to_json())  # blind

    # unfinished: refused without allow_partial, naming the project and the way forward
    _label_all(project, limit=1)
    with pytest.raises(ValueError, match="annotation project 'medal-ann'.*is not finished.*allow_partial"):
        run_pipeline(cfg, progress=False)

    given = _label_all(project, seed=1)
    second = run_pipeline(cfg, progress=False)
    assert second.benchmark
    records = _benchmark(second)
    assert len(records) == len(curated)
    labels = project.labels()
    for rec in records:
        mine = labels[labels["record_id"] == rec["id"]]
        assert sorted((lab["annotator"], lab["dimension"], lab["value"]) for lab in rec["labels"]) == sorted(
            zip(mine["annotator"], mine["dimension"], mine["value"], strict=True)
        )
    assert any(key[0] == records[0]["id"] for key in given)
    agreement = second.summary["annotation"]["agreement"]
    assert set(agreement["languages"]) == {r["language"] for r in curated}

    # the exported project as a registered version: the same benchmark
    from harness.annotate.export import export
    from harness.data.registry import DatasetRegistry

    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "registry"))
    export(project, "medal-humans@1.0.0", registry=DatasetRegistry(), n_bootstrap=0)
    cfg_v = PipelineConfig.load(
        write_replay_config(tmp_path / "medal", annotation={"labels_from": "medal-humans@1.0.0"})
    )
    third = run_pipeline(cfg_v, progress=False)
    key = lambda r: (r["id"], sorted((x["annotator"], x["dimension"], x["value"]) for x in r["labels"]))  # noqa: E731
    assert sorted(map(key, _benchmark(third))) == sorted(map(key, records))


def test_project_settings_are_checked():
    from dataset_builders.medal_pipeline.config import AnnotationSettings

    with pytest.raises(ValueError, match="at least annotation.per_item"):
        AnnotationSettings(project="p", annotators=["a"], per_item=2)
    with pytest.raises(ValueError, match="give one"):
        AnnotationSettings(project="p", annotators=["a", "b"], labels_from="x@1.0.0")
